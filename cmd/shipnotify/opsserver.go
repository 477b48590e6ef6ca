package main

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/migrations"
	"github.com/shipnotify/shipnotify/mirror"
)

// requireMigrated refuses to run a long-lived process on a mirror whose
// schema is behind the binary.
func requireMigrated(ctx context.Context, store *mirror.Store) error {
	pending, err := migrations.Pending(ctx, store.Pool())
	if err != nil {
		return err
	}
	if pending {
		return fmt.Errorf("the mirror's schema is out of date: run shipnotify migrate")
	}
	return nil
}

// opsRegistry is a long-lived process's Prometheus registry, with the Go
// and process collectors and, through d, the Temporal SDK's metrics; call
// it before d.temporal. close flushes the SDK's metrics.
func opsRegistry(d *deps) (reg *prometheus.Registry, close func(), err error) {
	reg = prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sdkMetrics, closer, err := metrics.TemporalHandler(reg)
	if err != nil {
		return nil, nil, err
	}
	d.sdkMetrics = sdkMetrics
	return reg, func() { _ = closer.Close() }, nil
}

// opsTemporal is a long-lived process's registry and its Temporal client,
// in the order that sends the SDK's metrics to the registry; close
// flushes them.
func opsTemporal(ctx context.Context, d *deps) (reg *prometheus.Registry, tc client.Client, closeMetrics func(), err error) {
	reg, closeMetrics, err = opsRegistry(d)
	if err != nil {
		return nil, nil, nil, err
	}
	if tc, err = d.temporal(ctx); err != nil {
		closeMetrics()
		return nil, nil, nil, err
	}
	return reg, tc, closeMetrics, nil
}

// readiness checks, in order, what a process needs: the checks given
// first, then PostgreSQL, then Temporal. The probe's body names what is
// down; the driver's detail goes to the log only.
func readiness(d *deps, store *mirror.Store, tc client.Client, first ...func(context.Context) error) func(context.Context) error {
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
			d.logger.Warn("not ready", "error", err)
		}
		return err
	}
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
