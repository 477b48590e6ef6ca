package bench_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// PruneLoad seeds old finished reminders with their trail beside a young
// one, prunes every old one in batches, and leaves the young one alone.
func TestPruneLoadPrunesWhatItSeeded(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('SHP-LIVE', 'u', 'k', 's', 'b');
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
VALUES ('SHP-LIVE/u/s', 'SHP-LIVE', 'u', 's', 'email', 'a@b.example', now() - interval '1 hour', now() - interval '1 hour', 'sent', md5('x'), 'reminder/SHP-LIVE/u/s')`)
	require.NoError(t, err)

	res, err := bench.PruneLoad(ctx, db.Pool, bench.PruneLoadOptions{Seed: 2000, Batch: 500})
	require.NoError(t, err)
	require.EqualValues(t, 2000, res.Seeded.Reminders)
	require.EqualValues(t, 2000, res.Stats.Reminders)
	require.Equal(t, res.Seeded.Events, res.Stats.Events)
	require.Equal(t, res.Seeded.Deliveries, res.Stats.Deliveries)
	require.Equal(t, 4, res.Batch.N)
	require.Positive(t, res.RowsPerSecond)
	require.False(t, res.Interrupted)
	rows, _ := db.Pool.Query(ctx, `SELECT id FROM reminders`)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"SHP-LIVE/u/s"}, left)
}

// Ended early, PruneLoad reports what it did, not an error.
func TestPruneLoadStopsWithItsContext(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	_, err := bench.SeedPrunable(context.Background(), db.Pool, 100)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := bench.PruneLoad(ctx, db.Pool, bench.PruneLoadOptions{})
	require.NoError(t, err)
	require.True(t, res.Interrupted)
	require.Zero(t, res.Stats.Reminders)
}
