package migrations

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// 00007 replaces prune's definer function, which resets its settings: the
// pinned search_path (00006) must be set again, up and down, or the
// function resolves its tables through the caller's path.
func TestProviderOutcomesKeepPrunesSearchPath(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 6)
	ctx := context.Background()
	config := func() []string {
		var c []string
		require.NoError(t, pool.QueryRow(ctx, `
SELECT proconfig FROM pg_proc
 WHERE proname = 'reminders_prune_candidates' AND pronamespace = current_schema()::regnamespace`).Scan(&c))
		return c
	}
	pinned := config()
	require.NotEmpty(t, pinned)
	_, err := p.UpTo(ctx, 7)
	require.NoError(t, err)
	require.Equal(t, pinned, config(), "after 00007")
	_, err = p.DownTo(ctx, 6)
	require.NoError(t, err)
	require.Equal(t, pinned, config(), "after 00007's down")
}

// 00007 adds its constraints NOT VALID and no index, so nothing reads the
// whole table while writers wait; 00008 validates them and builds the
// unconfirmed gauge's index concurrently.
func TestProviderOutcomesFinishWithoutHoldingWriters(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 7)
	ctx := context.Background()
	validated := func() map[string]bool {
		rows, err := pool.Query(ctx, `
SELECT conname, convalidated FROM pg_constraint
 WHERE conrelid = 'reminders'::regclass AND conname IN ('reminders_state_check', 'reminders_provider_outcome_check')`)
		require.NoError(t, err)
		out := map[string]bool{}
		for rows.Next() {
			var name string
			var ok bool
			require.NoError(t, rows.Scan(&name, &ok))
			out[name] = ok
		}
		require.NoError(t, rows.Err())
		return out
	}
	index := func() (exists, valid bool) {
		err := pool.QueryRow(ctx, `
SELECT true, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relname = 'reminders_awaiting_outcome_idx' AND c.relnamespace = current_schema()::regnamespace`).Scan(&exists, &valid)
		if err != nil {
			return false, false
		}
		return exists, valid
	}
	require.Equal(t, map[string]bool{"reminders_state_check": false, "reminders_provider_outcome_check": false}, validated())
	exists, _ := index()
	require.False(t, exists)
	_, err := pool.Exec(ctx, `INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'U', 'k', 's', 'b')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
VALUES ('r', 'S', 'U', 'x', 'email', 'a@b.example', now(), now(), 'shipped', 'k', 'w')`)
	require.Error(t, err, "a NOT VALID constraint still checks new rows")

	_, err = p.UpTo(ctx, 8)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"reminders_state_check": true, "reminders_provider_outcome_check": true}, validated())
	exists, valid := index()
	require.True(t, exists && valid)
}
