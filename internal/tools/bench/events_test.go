package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// tinyEvents is the events workload at a size a test can afford: batches
// of 20 events (10 reminders, one of them bounced in the bounce mix), three
// a run, two rounds, one and two batches in flight.
var tinyEvents = EventsOptions{BatchSize: 20, Batches: 3, Runs: 2, Concurrency: []int{1, 2}, BounceShare: 0.1}

// The events workload at a tiny size, so its code cannot rot: it posts
// every batch through the product's handler, and the mirror ends holding
// exactly what was posted; the report has every mix, ratio and statement.
func TestEventsLoadSmall(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	res, err := EventsLoad(ctx, db.URL, tinyEvents)
	require.NoError(t, err)
	require.Empty(t, res.Failures)

	// A warm-up of 2 batches, then 2 rounds of delivered c=1, bounce c=1
	// and delivered c=2, 3 batches each: 20 batches of 10 reminders.
	require.Equal(t, 200, res.Seeded)
	require.Equal(t, EventsCheck{Reminders: 200, Delivered: 194, Undeliverable: 6, EventsPosted: 400, ProviderEvents: 400,
		PostedFound: 400, TrailEvents: 400, Escalations: 6, TalliesAgree: true}, res.Verified)
	require.EqualValues(t, 6, res.Nudges, "each bounce batch calls for the escalator")
	require.Len(t, res.Measured, 1+2*4)
	for _, r := range res.Measured {
		require.Zero(t, r.Non200)
		require.Positive(t, r.EventsPerSecond)
		if r.Mix == MixReplay {
			require.Equal(t, r.Events, r.Duplicate, "a replay is all duplicates")
		} else {
			require.Equal(t, r.Events, r.Applied)
		}
	}

	require.Len(t, res.Summaries, 4)
	mixes := map[string]EventsSummary{}
	for _, s := range res.Summaries {
		require.Equal(t, 2, s.Runs)
		require.Equal(t, 6, s.Batch.N)
		require.LessOrEqual(t, s.Apply.P50, s.Batch.P50)
		mixes[fmt.Sprintf("%s/%d", s.Mix, s.Concurrency)] = s
	}
	statements := func(key string) []string {
		var names []string
		for _, st := range mixes[key].Statements {
			names = append(names, st.Statement)
		}
		return names
	}
	require.Contains(t, statements("delivered/1"), "UPDATE reminders")
	require.NotContains(t, statements("delivered/1"), "INSERT INTO outcome_escalations")
	require.Contains(t, statements("bounce/1"), "INSERT INTO outcome_escalations", "a bounce writes the outbox")
	require.NotContains(t, statements("replay/1"), "UPDATE reminders", "a duplicate changes nothing")
	require.Len(t, res.Comparisons, 3)
	for _, c := range res.Comparisons {
		require.Equal(t, 2, c.N, c.Of)
	}
	require.Nil(t, res.Target, "the target is stated for batches of 1,000 events")

	var table strings.Builder
	require.NoError(t, WriteEventsTable(&table, res))
	require.Contains(t, table.String(), "target: not judged")
	require.Contains(t, table.String(), "bounce c=1 over delivered c=1")

	var left bool
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, res.Schema).Scan(&left))
	require.False(t, left, "the workload's schema is dropped")
}

// The check after the runs is what makes a fast run worth reporting: a
// lost event, a reminder left sent, a refused batch each fail the run.
func TestEventsLoadCatchesWrongCounts(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	wrongKey, err := sink.NewEventKey()
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		spoil func(o *EventsOptions)
		want  []string
	}{
		{"an event lost", func(o *EventsOptions) {
			o.beforeVerify = execSQL(`DELETE FROM provider_events WHERE event_id = (SELECT min(event_id) FROM provider_events)`)
		}, []string{"provider_events rows: 399, want 400", "provider_events rows of a posted event: 399, want 400"}},
		{"a reminder left sent", func(o *EventsOptions) {
			o.beforeVerify = execSQL(`UPDATE reminders SET state = 'sent' WHERE id = (SELECT min(id) FROM reminders WHERE state = 'delivered')`)
		}, []string{"reminders delivered: 193, want 194", "reminders in another state: 1, want 0"}},
		{"every batch refused", func(o *EventsOptions) { o.signWith = wrongKey },
			[]string{"delivered c=1 round 1: batch 0 answered 403", "provider_events rows: 0, want 400"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := tinyEvents
			tc.spoil(&o)
			res, err := EventsLoad(context.Background(), db.URL, o)
			require.NoError(t, err)
			for _, w := range tc.want {
				require.Contains(t, res.Failures, w)
			}
		})
	}
}

func execSQL(sql string) func(context.Context, *pgxpool.Pool) error {
	return func(ctx context.Context, pool *pgxpool.Pool) error {
		_, err := pool.Exec(ctx, sql)
		return err
	}
}

// Bounces are spread evenly, the share exactly.
func TestBouncesSpread(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n     int
		share float64
		want  int
	}{{500, 0.1, 50}, {10, 0.1, 1}, {500, 0.25, 125}, {500, 1, 500}} {
		got := 0
		for j := range tc.n {
			if bounces(j, tc.share) {
				got++
			}
		}
		require.Equal(t, tc.want, got, "%d at %g", tc.n, tc.share)
	}
}
