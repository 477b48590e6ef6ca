package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/config"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/metrics"
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
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sdkMetrics, closeSDKMetrics, err := metrics.TemporalHandler(reg)
	if err != nil {
		return err
	}
	defer closeSDKMetrics.Close()
	d.sdkMetrics = sdkMetrics
	tc, err := d.temporal(ctx)
	if err != nil {
		return err
	}
	acts := newActivities(d.cfg, store)
	acts.Metrics = metrics.New(reg)
	metrics.WatchCredentials(reg, "sendgrid", acts.Email)
	if d.cfg.MetricsAddr != "" {
		// The mirror's gauges are refreshed in the background, one read at
		// a time, whatever the scrape rate.
		metrics.WatchMirror(ctx, reg, store, metrics.MirrorOptions{Every: d.cfg.MetricsRefresh, Logger: d.logger})
		// A refused SendGrid key makes the worker unready. Readiness only
		// takes a pod out of service endpoints (a worker has none: it pulls
		// from Temporal), so it keeps working and retrying while the probe
		// tells the operator why. Do not use /readyz as a liveness probe: a
		// restart would not fix the key. The probe's body names what is
		// down; the driver's detail goes to the log.
		credentials := metrics.CredentialsReady(acts.Email)
		stop, err := serveOps(d, reg, func(ctx context.Context) error {
			err := credentials(ctx)
			if err == nil {
				if perr := store.Pool().Ping(ctx); perr != nil {
					err = &metrics.Unready{Reason: "postgres: unavailable", Err: perr}
				}
			}
			if err == nil {
				if _, terr := tc.CheckHealth(ctx, &client.CheckHealthRequest{}); terr != nil {
					err = &metrics.Unready{Reason: "temporal: unavailable", Err: terr}
				}
			}
			if err != nil {
				d.logger.Warn("not ready", "error", err)
			}
			return err
		})
		if err != nil {
			return err
		}
		defer stop()
	}

	worker.SetCacheSize(d.cfg.WorkerCacheSize)
	w := worker.New(tc, d.cfg.TaskQueue, acts, worker.Options{
		MaxConcurrentActivities: d.cfg.WorkerMaxActivities,
		ActivitiesPerSecond:     d.cfg.WorkerActivitiesPerSecond,
	})
	if err := w.Start(); err != nil {
		return fmt.Errorf("error starting worker: %w", err)
	}
	d.logger.Info("worker started", "task_queue", d.cfg.TaskQueue, "namespace", d.cfg.Temporal.Namespace,
		"decision_links", acts.Links != nil)
	<-ctx.Done()
	w.Stop()
	d.logger.Info("worker stopped")
	return nil
}

// serveOps serves /metrics, /healthz and /readyz on the configured address.
func serveOps(d *deps, reg *prometheus.Registry, ready func(context.Context) error) (stop func(), err error) {
	ln, err := net.Listen("tcp", d.cfg.MetricsAddr)
	if err != nil {
		return nil, usageError{fmt.Errorf("SHIPNOTIFY_METRICS_ADDR: %w", err)}
	}
	srv := metrics.NewServer(metrics.Handler(reg, ready))
	go func() { _ = srv.Serve(ln) }()
	d.logger.Info("serving metrics and health", "address", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

func newActivities(cfg config.Config, store *mirror.Store) *activities.Activities {
	acts := &activities.Activities{
		Mirror: store,
		Email: email.NewSender(email.Options{
			APIKey: cfg.SendGridAPIKey, BaseURL: cfg.SendGridBaseURL,
			FromEmail: cfg.FromEmail, FromName: cfg.FromName, Now: time.Now,
		}),
		Webhook: webhook.NewSender(webhook.Options{Guard: cfg.Webhooks, Now: time.Now}),
	}
	// Without a public URL and a key, escalations carry no decision links.
	if l := cfg.Links(time.Now); l != nil {
		acts.Links = l
	}
	return acts
}
