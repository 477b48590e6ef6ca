package cli_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// Issue 35: the mirror's times come back in UTC whatever the host's zone
// (pgx's default is time.Local), so every JSON output (list --json, show
// --json, the API) states them with Z as export and the trail do.
func TestTheMirrorReadsTimesInUTC(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	env := map[string]string{"DATABASE_URL": db.URL, "TEMPORAL_CONFIG_FILE": "/nonexistent"}
	d, err := cli.NewDeps(cli.Env{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
	require.NoError(t, err)
	defer d.Close()
	ctx := context.Background()
	store, err := d.Mirror(ctx, 2)
	require.NoError(t, err)
	var at time.Time
	var ats []time.Time
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT now(), ARRAY[now()]`).Scan(&at, &ats))
	require.Same(t, time.UTC, at.Location())
	require.Len(t, ats, 1)
	require.Same(t, time.UTC, ats[0].Location())
}

// The product's sessions on the mirror (the pool DATABASE_URL opens, as a
// member of the runtime role) have the server end a transaction left idle
// past budget.IdleInTransaction, and on PostgreSQL 17 one that lasts past
// budget.Transaction: a role setting would not reach a member's session,
// so the pool sets them on each. Then the server's own enforcement, shown
// on such a session with a short bound: the idle transaction is ended and
// its session with it.
func TestTheProductsSessionsEndATransactionLeftIdle(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	env := map[string]string{"DATABASE_URL": testenv.RuntimeRole(t, db), "TEMPORAL_CONFIG_FILE": "/nonexistent"}
	d, err := cli.NewDeps(cli.Env{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
	require.NoError(t, err)
	defer d.Close()
	ctx := context.Background()
	store, err := d.Mirror(ctx, 2)
	require.NoError(t, err)
	conn, err := store.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	var idle time.Duration
	var version int
	require.NoError(t, conn.QueryRow(ctx, `
SELECT current_setting('idle_in_transaction_session_timeout')::interval, current_setting('server_version_num')::int`).
		Scan(&idle, &version))
	require.Equal(t, budget.IdleInTransaction, idle)
	if version >= 170000 {
		var total time.Duration
		require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('transaction_timeout')::interval`).Scan(&total))
		require.Equal(t, budget.Transaction, total)
	}

	_, err = conn.Exec(ctx, `SET idle_in_transaction_session_timeout = '300ms'`)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	var pid int
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	require.Eventually(t, func() bool {
		var alive bool
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive))
		return !alive
	}, 30*time.Second, 50*time.Millisecond, "the server ends the idle transaction's session")
	_, err = tx.Exec(ctx, `SELECT 1`)
	require.Error(t, err, "nothing more runs in it")
}
