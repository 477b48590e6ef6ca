package main

import (
	"context"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/worker"
)

func init() {
	register("worker", "run a worker: reminder workflows and the notify activity", runWorker)
}

func runWorker(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "worker", "worker   (configured by the environment: see docs/configuration.md)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Cfg.RefuseSessionKey(); err != nil {
		return cli.UsageError{Err: err}
	}
	worker.SetCacheSize(d.Cfg.WorkerCacheSize)
	o := worker.Options{
		MaxConcurrentActivities: d.Cfg.WorkerMaxActivities,
		SendsPerSecond:          d.Cfg.WorkerSendsPerSecond,
	}
	return cli.ServeWorker(ctx, d, o, nil)
}
