package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// The mirror workload at a small scale, so its code cannot rot: it loads
// exactly N reminders with a trail, on exactly the product's indexes,
// finds rows for every query it times, and reports every bar.
func TestMirrorLoadSmall(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	var progress bytes.Buffer
	res, err := bench.MirrorLoad(ctx, db.URL, bench.MirrorOptions{
		N: 10_000, Windows: 50, Lookups: 50, Overdue: 20, Scrapes: 5, Pages: 5, Trail: true, PruneFor: time.Minute, Seed: 1, Progress: &progress,
	})
	require.NoError(t, err, progress.String())
	require.Empty(t, res.Failures)
	require.EqualValues(t, 10_000, res.Loaded.Reminders)
	require.InDelta(t, 1000, res.Loaded.Shipments, 250, "about ten reminders a shipment")
	require.Greater(t, res.Loaded.Events, res.Loaded.Reminders, "a trail: at least an event a reminder")
	require.Greater(t, res.Loaded.Deliveries, res.Loaded.Reminders/2, "most reminders were sent")

	var product []string
	rows, err := db.Pool.Query(ctx, `
SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'reminders' ORDER BY indexname`)
	require.NoError(t, err)
	for rows.Next() {
		var d string
		require.NoError(t, rows.Scan(&d))
		product = append(product, strings.ReplaceAll(d, db.Schema+".", res.Schema+"."))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, product, res.Indexes, "the workload measures the product's indexes, no more")

	for _, l := range []bench.Latency{res.DueBetween, res.ByShipment, res.OldestOverdue, res.PendingBefore, res.PendingList, res.GaugesRefresh, res.Scrape, res.MetricsFull} {
		require.NotZero(t, l.N)
		require.Positive(t, l.P99)
		require.LessOrEqual(t, l.P50, l.P99)
	}
	require.NotNil(t, res.Export)
	require.EqualValues(t, 10_000, res.Export.Rows)
	require.Len(t, res.Bars, 5)
	for _, name := range []string{"due_between", "by_shipment", "oldest_overdue", "count_by_state", "pending_before", "pending_list", "export"} {
		require.NotEmpty(t, res.Plans[name], name)
	}
	require.NotNil(t, res.Prune)
	require.Greater(t, res.Prune.Stats.Reminders, int64(5_000), "most of a year is older than 90 days")
	require.Positive(t, res.Prune.Stats.Events)
	require.False(t, res.Prune.Interrupted)
	var table bytes.Buffer
	require.NoError(t, bench.WriteMirrorTable(&table, res))
	require.Contains(t, table.String(), "list --shipment")
	require.Contains(t, table.String(), "prune: ")

	var left bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, res.Schema).Scan(&left))
	require.False(t, left, "the workload's schema is dropped")
}

// The spread is the one the issue asks for: due times over a year, states
// mostly finished, some pending, a few overdue.
func TestMirrorLoadSpread(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	res, err := bench.MirrorLoad(ctx, db.URL, bench.MirrorOptions{
		N: 5_000, Windows: 1, Lookups: 1, Overdue: 1, Scrapes: 1, Pages: 1, SkipExport: true, Keep: true, Seed: 2,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.Pool.Exec(context.Background(), "DROP SCHEMA "+res.Schema+" CASCADE") })
	var finished, pending, overdue int
	var first, last time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE state IN ('sent', 'failed', 'cancelled', 'expired')),
       count(*) FILTER (WHERE state IN ('scheduled', 'awaiting_approval')),
       count(*) FILTER (WHERE state = 'scheduled' AND due_at < now()),
       min(due_at), max(due_at)
  FROM `+res.Schema+`.reminders`).Scan(&finished, &pending, &overdue, &first, &last))
	require.Greater(t, finished, 5_000*8/10)
	require.Greater(t, pending, 5_000/50)
	require.Positive(t, overdue)
	require.Greater(t, last.Sub(first), 360*24*time.Hour)
}
