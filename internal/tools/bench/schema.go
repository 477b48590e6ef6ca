package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipnotify/shipnotify/migrations"
)

// privateSchema is a schema of a PostgreSQL-only workload's own, made by
// the product's migrations, so the workload measures exactly the product's
// tables and indexes and leaves the rest of the database alone.
type privateSchema struct {
	Name string
	// Pool reaches the schema (search_path set) as dbURL's role.
	Pool  *pgxpool.Pool
	admin *pgxpool.Pool
}

// newPrivateSchema creates and migrates prefix_<random> on dbURL.
func newPrivateSchema(ctx context.Context, dbURL, prefix string) (*privateSchema, error) {
	s := &privateSchema{Name: prefix + "_" + shortID()}
	var err error
	if s.admin, err = pgxpool.New(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("error connecting to PostgreSQL: %w", err)
	}
	if _, err := s.admin.Exec(ctx, "CREATE SCHEMA "+s.Name); err != nil {
		s.admin.Close()
		return nil, fmt.Errorf("error creating the benchmark schema: %w", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		s.Close(true)
		return nil, fmt.Errorf("error reading the database URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", s.Name)
	u.RawQuery = q.Encode()
	if s.Pool, err = pgxpool.New(ctx, u.String()); err != nil {
		s.Close(true)
		return nil, fmt.Errorf("error connecting to the benchmark schema: %w", err)
	}
	if err := migrations.Up(ctx, s.Pool, slog.New(slog.DiscardHandler)); err != nil {
		s.Close(true)
		return nil, err
	}
	return s, nil
}

// Close disconnects, dropping the schema first when drop is set.
func (s *privateSchema) Close(drop bool) {
	if s.Pool != nil {
		s.Pool.Close()
	}
	if drop {
		_, _ = s.admin.Exec(context.Background(), "DROP SCHEMA "+s.Name+" CASCADE")
	}
	s.admin.Close()
}
