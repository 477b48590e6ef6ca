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
