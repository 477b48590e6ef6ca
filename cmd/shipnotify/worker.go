package main

import (
	"context"
	"fmt"
	"time"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/config"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/migrations"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/worker"
)

func init() {
	register("worker", "run a worker: reminder workflows and the notify activity", runWorker)
}

func runWorker(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "worker", "worker   (configured by the environment: see the README)")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	d, err := newDeps(e)
	if err != nil {
		return err
	}
	defer d.close()
	if err := d.cfg.RequireSender(); err != nil {
		return usageError{err}
	}
	store, err := d.mirror(ctx, int32(d.cfg.WorkerMaxActivities)+4)
	if err != nil {
		return err
	}
	pending, err := migrations.Pending(ctx, store.Pool())
	if err != nil {
		return err
	}
	if pending {
		return fmt.Errorf("the mirror's schema is out of date: run shipnotify migrate")
	}
	tc, err := d.temporal(ctx)
	if err != nil {
		return err
	}

	worker.SetCacheSize(d.cfg.WorkerCacheSize)
	w := worker.New(tc, d.cfg.TaskQueue, newActivities(d.cfg, store), worker.Options{
		MaxConcurrentActivities: d.cfg.WorkerMaxActivities,
		ActivitiesPerSecond:     d.cfg.WorkerActivitiesPerSecond,
	})
	if err := w.Start(); err != nil {
		return fmt.Errorf("error starting worker: %w", err)
	}
	d.logger.Info("worker started", "task_queue", d.cfg.TaskQueue, "namespace", d.cfg.Temporal.Namespace)
	<-ctx.Done()
	w.Stop()
	d.logger.Info("worker stopped")
	return nil
}

func newActivities(cfg config.Config, store *mirror.Store) *activities.Activities {
	return &activities.Activities{
		Mirror: store,
		Email: email.NewSender(email.Options{
			APIKey: cfg.SendGridAPIKey, BaseURL: cfg.SendGridBaseURL,
			FromEmail: cfg.FromEmail, FromName: cfg.FromName, Now: time.Now,
		}),
		Webhook: webhook.NewSender(webhook.Options{Guard: cfg.Webhooks, Now: time.Now}),
	}
}
