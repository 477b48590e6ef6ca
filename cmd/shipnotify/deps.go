package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/shipnotify/shipnotify/config"
	"github.com/shipnotify/shipnotify/mirror"
)

func loadConfig(e env) (config.Config, error) {
	cfg, err := config.Load(e.lookup)
	if err != nil {
		return config.Config{}, usageError{err}
	}
	return cfg, nil
}

// newLogger logs JSON to stderr: structured, one event a line.
func newLogger(e env, cfg config.Config) *slog.Logger {
	return slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

// openMirror connects to PostgreSQL; maxConns 0 keeps pgx's default.
func openMirror(ctx context.Context, cfg config.Config, maxConns int32) (*mirror.Store, func(), error) {
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("DATABASE_URL: %w", err)}
	}
	if maxConns > 0 {
		pcfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("error connecting to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("error connecting to PostgreSQL at DATABASE_URL: %w", err)
	}
	return mirror.New(pool), pool.Close, nil
}

func dialTemporal(ctx context.Context, cfg config.Config, logger *slog.Logger) (client.Client, error) {
	opts := cfg.Temporal
	opts.Logger = tlog.NewStructuredLogger(logger)
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("error connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	return c, nil
}
