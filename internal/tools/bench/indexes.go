package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dropSecondaryIndexes drops the indexes of the schema's tables that back
// no constraint and returns their definitions, so a large load is not slowed
// by index upkeep; buildIndexes makes exactly them again after it.
func dropSecondaryIndexes(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	rows, _ := pool.Query(ctx, `
SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace = current_schema()::regnamespace
   AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
 ORDER BY 1`)
	var name, def string
	var names, defs []string
	if _, err := pgx.ForEachRow(rows, []any{&name, &def}, func() error {
		names, defs = append(names, name), append(defs, def)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("error reading the indexes: %w", err)
	}
	for _, n := range names {
		if _, err := pool.Exec(ctx, "DROP INDEX "+n); err != nil {
			return nil, fmt.Errorf("error dropping index %s before the load: %w", n, err)
		}
	}
	return defs, nil
}

// buildIndexes runs the index definitions, one connection with room to
// sort.
func buildIndexes(ctx context.Context, pool *pgxpool.Pool, defs []string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL maintenance_work_mem = '256MB'"); err != nil {
			return fmt.Errorf("error building the indexes: %w", err)
		}
		for _, d := range defs {
			if _, err := tx.Exec(ctx, d); err != nil {
				return fmt.Errorf("error building an index after the load: %w", err)
			}
		}
		return nil
	})
}
