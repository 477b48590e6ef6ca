package main

import (
	"context"
	"fmt"
	"time"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/config"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/worker"
)

func init() {
	register("worker", "run a worker: reminder workflows and the notify activity", runWorker)
}

func runWorker(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "worker", "worker   (configured by the environment: see docs/configuration.md)")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	d, err := newDeps(e)
	if err != nil {
		return err
	}
	defer d.close()
	worker.SetCacheSize(d.cfg.WorkerCacheSize)
	o := worker.Options{
		MaxConcurrentActivities: d.cfg.WorkerMaxActivities,
		ActivitiesPerSecond:     d.cfg.WorkerActivitiesPerSecond,
	}
	return serveWorker(ctx, d, o, nil)
}

// serveWorker runs the reminder worker with o until ctx ends; ready, when
// set, hears when its pollers have started. The benchmark runs its full
// path through here with every option pinned, and tune adjusts its
// activities (the outage workload's old backoff). o.MaxConcurrentActivities
// must be set: the PostgreSQL pool is sized to it.
func serveWorker(ctx context.Context, d *deps, o worker.Options, ready func(), tune ...func(*activities.Activities)) error {
	if err := d.cfg.RequireSender(); err != nil {
		return usageError{err}
	}
	store, err := d.mirror(ctx, int32(o.MaxConcurrentActivities)+4)
	if err != nil {
		return err
	}
	if err := requireMigrated(ctx, store); err != nil {
		return err
	}
	reg, tc, closeMetrics, err := opsTemporal(ctx, d)
	if err != nil {
		return err
	}
	defer closeMetrics()
	acts := newActivities(d.cfg, store)
	for _, t := range tune {
		t(acts)
	}
	acts.Metrics = metrics.New(reg)
	metrics.WatchCredentials(reg, "sendgrid", acts.Email)
	if d.cfg.MetricsAddr != "" {
		// The mirror's gauges are refreshed in the background, one read at
		// a time, whatever the scrape rate.
		metrics.WatchMirror(ctx, reg, store, metrics.MirrorOptions{Every: d.cfg.MetricsRefresh, Logger: d.logger,
			UnconfirmedGrace: d.cfg.OutcomeGrace})
		// A refused SendGrid key makes the worker unready. Readiness only
		// takes a pod out of service endpoints (a worker has none: it pulls
		// from Temporal), so it keeps working and retrying while the probe
		// tells the operator why. Do not use /readyz as a liveness probe: a
		// restart would not fix the key. The probe's body names what is
		// down; the driver's detail goes to the log.
		stop, err := serveOps(d, reg, readiness(d, store, tc, metrics.CredentialsReady(acts.Email)))
		if err != nil {
			return err
		}
		defer stop()
	}

	w := worker.New(tc, d.cfg.TaskQueue, acts, o)
	if err := w.Start(); err != nil {
		return fmt.Errorf("error starting worker: %w", err)
	}
	if ready != nil {
		ready()
	}
	d.logger.Info("worker started", "task_queue", d.cfg.TaskQueue, "namespace", d.cfg.Temporal.Namespace,
		"decision_links", acts.Links != nil)
	<-ctx.Done()
	w.Stop()
	d.logger.Info("worker stopped")
	return nil
}

func newActivities(cfg config.Config, store *mirror.Store) *activities.Activities {
	acts := &activities.Activities{
		Mirror: store,
		Email: email.NewSender(email.Options{
			APIKey: cfg.SendGridAPIKey, BaseURL: cfg.SendGridBaseURL,
			FromEmail: cfg.FromEmail, FromName: cfg.FromName, Now: time.Now,
		}),
		Webhook:        webhook.NewSender(webhook.Options{Guard: cfg.Webhooks, Now: time.Now}),
		EvidenceWait:   cfg.UnconfirmedSendWait,
		SendsPerSecond: cfg.WorkerActivitiesPerSecond,
	}
	// Without a public URL and a key, escalations carry no decision links.
	if l := cfg.Links(time.Now); l != nil {
		acts.Links = l
	}
	return acts
}
