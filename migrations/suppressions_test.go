package migrations

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// 00022 adds suppressed to the state machine's SQL, keeping prune's
// functions pinned to the schema, and its down puts every function and the
// CHECK constraint back as they were and drops the table.
func TestSuppressionsKeepPrunesPinsAndGoBack(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 21)
	ctx := context.Background()
	functions := func() map[string]function {
		return functionsIn(t, pool, "reminder_move_allowed", "reminder_event_into", "reminder_events_prunable", "reminders_prune_candidates")
	}
	check := func() (def string) {
		require.NoError(t, pool.QueryRow(ctx, `
SELECT pg_get_constraintdef(oid) || CASE WHEN convalidated THEN '' ELSE ' NOT VALID' END FROM pg_constraint
 WHERE conrelid = 'reminders'::regclass AND conname = 'reminders_state_check'`).Scan(&def))
		return def
	}
	table := func() (exists bool) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('suppressions') IS NOT NULL`).Scan(&exists))
		return exists
	}
	var schema string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	before, beforeCheck := functions(), check()
	require.Len(t, before, 4)
	require.NotContains(t, beforeCheck, "suppressed")

	_, err := p.UpTo(ctx, 22)
	require.NoError(t, err)
	after := functions()
	for _, name := range []string{"reminder_events_prunable", "reminders_prune_candidates"} {
		require.Equal(t, []string{"search_path=" + schema + ", pg_temp"}, after[name].Config, name)
		require.Contains(t, after[name].Source, "'suppressed'", name)
	}
	require.Contains(t, check(), "'suppressed'")
	require.NotContains(t, check(), "NOT VALID", "validated")
	require.True(t, table())
	var allowed bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT reminder_move_allowed('sent', 'suppressed') AND reminder_event_into('suppressed', '{}') = 'suppressed'`).Scan(&allowed))
	require.True(t, allowed)

	_, err = p.Down(ctx)
	require.NoError(t, err)
	require.Equal(t, before, functions(), "after 00022's down")
	require.Equal(t, beforeCheck, check())
	require.False(t, table())
}
