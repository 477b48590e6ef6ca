package migrations

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// 00019 pins every function that decides trust to the schema (caller_owns
// to pg_catalog), pg_temp last, and its down puts back the functions as
// they were, settings and all, and drops what it added.
func TestEventsFollowMovesPinsTrustAndGoesBack(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 18)
	ctx := context.Background()
	functions := func() map[string]function {
		return functionsIn(t, pool, "caller_owns", "reminders_guard", "reminder_events_time", "reminder_events_prunable",
			"reminders_prune_candidates")
	}
	added := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `
SELECT (SELECT count(*) FROM pg_attribute WHERE attrelid = 'reminders'::regclass AND attname IN ('last_move_from', 'last_move_xact') AND NOT attisdropped)
     + (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'reminder_events'::regclass AND tgname = 'reminder_events_follow_moves')
     + (SELECT count(*) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace AND proname IN ('reminder_event_text', 'reminder_event_into', 'reminder_event_reaches', 'reminder_event_follows'))`).Scan(&n))
		return n
	}
	var schema string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	before := functions()
	require.Len(t, before, 5)
	require.Zero(t, added())

	_, err := p.UpTo(ctx, 19)
	require.NoError(t, err)
	for name, f := range functions() {
		want := "search_path=" + schema + ", pg_temp"
		if name == "caller_owns" {
			want = "search_path=pg_catalog, pg_temp"
		}
		require.Equal(t, []string{want}, f.Config, name)
	}
	require.Equal(t, 2+1+4, added(), "two columns, a trigger, four functions")

	_, err = p.Down(ctx)
	require.NoError(t, err)
	require.Equal(t, before, functions(), "after 00019's down")
	require.Zero(t, added())
}

// function is a function of the test's schema as the catalog holds it:
// its settings and its source.
type function struct {
	Config []string
	Source string
}

// functionsIn are the named functions of the pool's schema, by name.
func functionsIn(t *testing.T, pool *pgxpool.Pool, names ...string) map[string]function {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT proname, coalesce(proconfig, '{}'), prosrc FROM pg_proc
 WHERE pronamespace = current_schema()::regnamespace AND proname = ANY($1)`, names)
	require.NoError(t, err)
	out := map[string]function{}
	for rows.Next() {
		var name string
		var f function
		require.NoError(t, rows.Scan(&name, &f.Config, &f.Source))
		out[name] = f
	}
	require.NoError(t, rows.Err())
	return out
}
