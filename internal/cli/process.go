package cli

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/migrations"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/worker"
)

// RequireMigrated refuses to run a long-lived process on a mirror whose
// schema is behind the binary.
func RequireMigrated(ctx context.Context, store *mirror.Store) error {
	pending, err := migrations.Pending(ctx, store.Pool())
	if err != nil {
		return err
	}
	if pending {
		return fmt.Errorf("the mirror's schema is out of date: run shipnotify migrate")
	}
	return nil
}

// OpsRegistry is a long-lived process's Prometheus registry, with the Go
// and process collectors and, through d, the Temporal SDK's metrics; call
// it before d.Temporal. close flushes the SDK's metrics.
func OpsRegistry(d *Deps) (reg *prometheus.Registry, close func(), err error) {
	reg = prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sdkMetrics, closer, err := metrics.TemporalHandler(reg)
	if err != nil {
		return nil, nil, err
	}
	d.SDKMetrics = sdkMetrics
	return reg, func() { _ = closer.Close() }, nil
}

// OpsTemporal is a long-lived process's registry and its Temporal client,
// in the order that sends the SDK's metrics to the registry; close
// flushes them.
func OpsTemporal(ctx context.Context, d *Deps) (reg *prometheus.Registry, tc client.Client, closeMetrics func(), err error) {
	reg, closeMetrics, err = OpsRegistry(d)
	if err != nil {
		return nil, nil, nil, err
	}
	if tc, err = d.Temporal(ctx); err != nil {
		closeMetrics()
		return nil, nil, nil, err
	}
	return reg, tc, closeMetrics, nil
}

// Readiness checks, in order, what a process needs: the checks given
// first, then PostgreSQL, then Temporal. The probe's body names what is
// down; the driver's detail goes to the log only.
func Readiness(d *Deps, store *mirror.Store, tc client.Client, first ...func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		var err error
		for _, check := range first {
			if err = check(ctx); err != nil {
				break
			}
		}
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
			d.Logger.Warn("not ready", "error", err)
		}
		return err
	}
}

// ServeOps serves /metrics, /healthz and /readyz on the configured address.
func ServeOps(d *Deps, reg *prometheus.Registry, ready func(context.Context) error) (stop func(), err error) {
	ln, err := net.Listen("tcp", d.Cfg.MetricsAddr)
	if err != nil {
		return nil, UsageError{Err: fmt.Errorf("SHIPNOTIFY_METRICS_ADDR: %w", err)}
	}
	srv := metrics.NewServer(metrics.Handler(reg, ready))
	go func() { _ = srv.Serve(ln) }()
	d.Logger.Info("serving metrics and health", "address", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// ServeWorker runs the reminder worker with o until ctx ends; ready, when
// set, hears when its pollers have started. The benchmark runs its full
// path through here with every option pinned, and tune adjusts its
// activities (the outage workload's old backoff). o.MaxConcurrentActivities
// must be set: the PostgreSQL pool is sized to it.
func ServeWorker(ctx context.Context, d *Deps, o worker.Options, ready func(), tune ...func(*activities.Activities)) error {
	if err := d.Cfg.RequireSender(); err != nil {
		return UsageError{Err: err}
	}
	store, err := d.Mirror(ctx, WorkerPoolSize(o.MaxConcurrentActivities))
	if err != nil {
		return err
	}
	if err := RequireMigrated(ctx, store); err != nil {
		return err
	}
	reg, tc, closeMetrics, err := OpsTemporal(ctx, d)
	if err != nil {
		return err
	}
	defer closeMetrics()
	acts := NewActivities(d.Cfg, store)
	for _, t := range tune {
		t(acts)
	}
	acts.Metrics = metrics.New(reg)
	metrics.WatchCredentials(reg, "sendgrid", acts.Email)
	if d.Cfg.MetricsAddr != "" {
		// The mirror's gauges are refreshed in the background, one read at
		// a time, whatever the scrape rate.
		metrics.WatchMirror(ctx, reg, store, metrics.MirrorOptions{Every: d.Cfg.MetricsRefresh, Logger: d.Logger,
			UnconfirmedGrace: d.Cfg.OutcomeGrace})
		// A refused SendGrid key makes the worker unready. Readiness only
		// takes a pod out of service endpoints (a worker has none: it pulls
		// from Temporal), so it keeps working and retrying while the probe
		// tells the operator why. Do not use /readyz as a liveness probe: a
		// restart would not fix the key. The probe's body names what is
		// down; the driver's detail goes to the log.
		stop, err := ServeOps(d, reg, Readiness(d, store, tc, metrics.CredentialsReady(acts.Email)))
		if err != nil {
			return err
		}
		defer stop()
	}

	w := worker.New(tc, d.Cfg.TaskQueue, acts, o)
	if err := w.Start(); err != nil {
		return fmt.Errorf("error starting worker: %w", err)
	}
	if ready != nil {
		ready()
	}
	d.Logger.Info("worker started", "task_queue", d.Cfg.TaskQueue, "namespace", d.Cfg.Temporal.Namespace,
		"decision_links", acts.Links != nil, "unsubscribe", d.Cfg.UnsubscribeMode)
	<-ctx.Done()
	w.Stop()
	d.Logger.Info("worker stopped")
	return nil
}

// NewActivities is the notify activity's dependencies from the
// configuration, over store.
func NewActivities(cfg config.Config, store *mirror.Store) *activities.Activities {
	acts := &activities.Activities{
		Mirror: store,
		Email: email.NewSender(email.Options{
			APIKey: cfg.SendGridAPIKey, BaseURL: cfg.SendGridBaseURL,
			FromEmail: cfg.FromEmail, FromName: cfg.FromName, Now: time.Now,
		}),
		Webhook:        webhook.NewSender(webhook.Options{Guard: cfg.Webhooks, Now: time.Now}),
		EvidenceWait:   cfg.UnconfirmedSendWait,
		SendsPerSecond: cfg.WorkerSendsPerSecond,
	}
	// Without a public URL and a key, escalations carry no decision links.
	if l := cfg.Links(time.Now); l != nil {
		acts.Links = l
	}
	acts.Unsubscribe = cfg.Unsubscribe()
	return acts
}
