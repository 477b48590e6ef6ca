package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/shipnotify/shipnotify/config"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

// deps is a command's configuration and the connections it opened; close
// releases them all.
type deps struct {
	cfg     config.Config
	logger  *slog.Logger
	closers []func()
	// sdkMetrics, when set before temporal(), receives the SDK's metrics.
	sdkMetrics client.MetricsHandler
}

// newDeps loads the configuration; a bad value is a usage error naming its
// variable. Nothing is connected yet.
func newDeps(e env) (*deps, error) {
	cfg, err := config.Load(e.lookup)
	if err != nil {
		return nil, usageError{err}
	}
	// Logs are JSON on stderr: structured, one event a line.
	logger := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	return &deps{cfg: cfg, logger: logger}, nil
}

func (d *deps) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// mirror connects to PostgreSQL with a pool of maxConns (0: pgx's default).
func (d *deps) mirror(ctx context.Context, maxConns int32) (*mirror.Store, error) {
	return d.mirrorAt(ctx, "DATABASE_URL", d.cfg.DatabaseURL, maxConns)
}

// mirrorAt connects to the mirror at url, named by its variable in errors.
func (d *deps) mirrorAt(ctx context.Context, variable, url string, maxConns int32) (*mirror.Store, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", variable, err)}
	}
	if maxConns > 0 {
		pcfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("error connecting to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("error connecting to PostgreSQL at %s: %w", variable, err)
	}
	d.closers = append(d.closers, pool.Close)
	store := mirror.New(pool)
	if c := d.cfg.Codec; c != nil {
		// Webhook secrets are sealed at rest with the payload keys.
		store.SealSecretsWith(c)
	}
	return store, nil
}

// temporal dials the Temporal frontend, with the payload codec.
func (d *deps) temporal(ctx context.Context) (client.Client, error) {
	if err := d.cfg.RequireCodec(); err != nil {
		return nil, usageError{err}
	}
	opts := d.cfg.Temporal
	opts.Logger = tlog.NewStructuredLogger(d.logger)
	if c := d.cfg.Codec; c != nil {
		opts.DataConverter, opts.FailureConverter = c.DataConverter(), c.FailureConverter()
	}
	if d.sdkMetrics != nil {
		opts.MetricsHandler = d.sdkMetrics
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("error connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	d.closers = append(d.closers, c.Close)
	return c, nil
}

// newStarter is a starter on the configured task queue, not yet connected.
func (d *deps) newStarter() *starter.Starter {
	return &starter.Starter{TaskQueue: d.cfg.TaskQueue, Webhooks: d.cfg.Webhooks, Now: time.Now}
}

// starter connects a starter to the mirror and Temporal.
func (d *deps) starter(ctx context.Context) (*starter.Starter, error) {
	st := d.newStarter()
	var err error
	if st.Mirror, err = d.mirror(ctx, 0); err != nil {
		return nil, err
	}
	if st.Temporal, err = d.temporal(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// withMirror loads the configuration, connects the mirror (maxConns 0:
// pgx's default) and runs fn; connections close after.
func withMirror(ctx context.Context, e env, maxConns int32, fn func(*deps, *mirror.Store) error) error {
	d, err := newDeps(e)
	if err != nil {
		return err
	}
	defer d.close()
	store, err := d.mirror(ctx, maxConns)
	if err != nil {
		return err
	}
	return fn(d, store)
}

// withTemporal loads the configuration, dials Temporal and runs fn.
func withTemporal(ctx context.Context, e env, fn func(*deps, client.Client) error) error {
	d, err := newDeps(e)
	if err != nil {
		return err
	}
	defer d.close()
	tc, err := d.temporal(ctx)
	if err != nil {
		return err
	}
	return fn(d, tc)
}

// withStarter loads the configuration, connects a starter and runs fn.
func withStarter(ctx context.Context, e env, fn func(*deps, *starter.Starter) error) error {
	d, err := newDeps(e)
	if err != nil {
		return err
	}
	defer d.close()
	st, err := d.starter(ctx)
	if err != nil {
		return err
	}
	return fn(d, st)
}
