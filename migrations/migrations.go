// Package migrations holds the mirror's schema as numbered SQL files, embedded
// in the binary and applied by goose.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"hash/crc64"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Up applies every pending migration. A PostgreSQL advisory lock held for the
// session makes concurrent callers (several workers starting at once) safe.
func Up(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	provider, err := newProvider(ctx, db, logger)
	if err != nil {
		return err
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("error applying migrations: %w", err)
	}
	for _, r := range results {
		logger.InfoContext(ctx, "migration applied", "version", r.Source.Version, "duration", r.Duration)
	}
	return nil
}

// Pending reports whether migrations remain to be applied.
func Pending(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	provider, err := newProvider(ctx, db, slog.New(slog.DiscardHandler))
	if err != nil {
		return false, err
	}
	pending, err := provider.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("error checking migrations: %w", err)
	}
	return pending, nil
}

func newProvider(ctx context.Context, db *sql.DB, logger *slog.Logger) (*goose.Provider, error) {
	// One lock per schema: migrations of one schema are serialised, those
	// of different schemas (parallel tests) are not.
	var schema string
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, fmt.Errorf("error reading current schema: %w", err)
	}
	lockID := int64(crc64.Checksum([]byte("shipnotify migrations "+schema), crc64.MakeTable(crc64.ECMA)) >> 1)
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("error creating migration lock: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithSessionLocker(locker),
		goose.WithSlog(logger),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("error loading migrations: %w", err)
	}
	return provider, nil
}
