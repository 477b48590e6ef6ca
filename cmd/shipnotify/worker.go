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
	fs := newFlags(e, "worker", "worker [--max-activities N]")
	maxActivities := fs.Int("max-activities", 200, "notify activities in flight at once; the PostgreSQL pool is sized to match")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *maxActivities < 1 {
		return usagef("--max-activities must be at least 1")
	}
	cfg, err := loadConfig(e)
	if err != nil {
		return err
	}
	if err := cfg.RequireSender(); err != nil {
		return usageError{err}
	}
	logger := newLogger(e, cfg)
	store, closeStore, err := openMirror(ctx, cfg, int32(*maxActivities)+4)
	if err != nil {
		return err
	}
	defer closeStore()
	pending, err := migrations.Pending(ctx, store.Pool())
	if err != nil {
		return err
	}
	if pending {
		return fmt.Errorf("the mirror's schema is out of date: run shipnotify migrate")
	}
	tc, err := dialTemporal(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer tc.Close()

	w := worker.New(tc, cfg.TaskQueue, newActivities(cfg, store), worker.Options{MaxConcurrentActivities: *maxActivities})
	if err := w.Start(); err != nil {
		return fmt.Errorf("error starting worker: %w", err)
	}
	logger.Info("worker started", "task_queue", cfg.TaskQueue, "namespace", cfg.Temporal.Namespace)
	<-ctx.Done()
	w.Stop()
	logger.Info("worker stopped")
	return nil
}

func newActivities(cfg config.Config, store *mirror.Store) *activities.Activities {
	return &activities.Activities{
		Mirror: store,
		Email: email.NewSender(email.Options{
			APIKey: cfg.SendGridAPIKey, BaseURL: cfg.SendGridBaseURL,
			FromEmail: cfg.FromEmail, FromName: cfg.FromName, Now: time.Now,
		}),
		Webhook: webhook.NewSender(webhook.Options{Now: time.Now}),
	}
}
