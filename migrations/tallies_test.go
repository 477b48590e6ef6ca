package migrations

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"
)

// schemaAt is a new schema migrated to version, for a test of the next
// migration. (testenv migrates to the latest, and importing it here would
// be a cycle.)
func schemaAt(t *testing.T, version int64) (*pgxpool.Pool, *goose.Provider) {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		// internal/tools/testenv's rule, restated: it imports this package.
		msg := "TEST_DATABASE_URL is not set; run the tests with `make test`"
		if os.Getenv("SHIPNOTIFY_TEST_SKIP_SERVERS") == "1" {
			t.Skip(msg)
		}
		t.Fatal(msg + " (set SHIPNOTIFY_TEST_SKIP_SERVERS=1 to skip the tests that need it)")
	}
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	admin, err := pgxpool.New(ctx, base)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	p, err := newProvider(ctx, db, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	_, err = p.UpTo(ctx, version)
	require.NoError(t, err)
	return pool, p
}

// The tallies the gauges read equal a count of the table: from the rows
// there when migration 00006 ran, through inserts (several rows in one
// statement, COPY), state changes, updates that change no state, and
// deletes.
func TestTalliesCountTheTable(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 5) // before the tallies
	ctx := context.Background()
	insert := func(from, to int, state string) {
		t.Helper()
		_, err := pool.Exec(ctx, `
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
SELECT 'r' || g, 'S', 'u', 's' || g, 'email', 'a@b.example', now(), now(), $3, md5(g::text), 'w' || g
  FROM generate_series($1::int, $2::int) g`, from, to, state)
		require.NoError(t, err)
	}
	check := func(when string) {
		t.Helper()
		counted := map[string]int64{}
		rows, _ := pool.Query(ctx, `SELECT state, count(*) FROM reminders GROUP BY state`)
		var s string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&s, &n}, func() error { counted[s] = n; return nil })
		require.NoError(t, err)
		tallied := map[string]int64{}
		rows, _ = pool.Query(ctx, `SELECT state, sum(n)::bigint FROM reminder_tallies GROUP BY state HAVING sum(n) <> 0`)
		_, err = pgx.ForEachRow(rows, []any{&s, &n}, func() error { tallied[s] = n; return nil })
		require.NoError(t, err)
		require.Equal(t, counted, tallied, when)
	}
	_, err := pool.Exec(ctx, `INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'u', 'k', 's', 'b')`)
	require.NoError(t, err)
	insert(1, 30, "scheduled")
	insert(31, 40, "sent")

	_, err = p.UpTo(ctx, 6)
	require.NoError(t, err)
	check("the rows before the migration")

	insert(41, 60, "awaiting_approval")
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"reminders"},
		[]string{"id", "shipment_id", "update_id", "subscriber_id", "channel", "email", "due_at", "requested_due_at", "state", "delivery_key", "workflow_id"},
		pgx.CopyFromSlice(5, func(i int) ([]any, error) {
			id := "c" + string(rune('a'+i))
			due := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			return []any{id, "S", "u", id, "email", "a@b.example", due, due, "expired", id, "w" + id}, nil
		}))
	require.NoError(t, err)
	check("after an insert and a COPY")

	_, err = pool.Exec(ctx, `UPDATE reminders SET state = 'sent' WHERE id IN ('r1', 'r2', 'r41')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE reminders SET workflow_started_at = now()`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE reminders SET state = 'cancelled' WHERE id = 'nobody'`)
	require.NoError(t, err)
	check("after state changes, and updates that change none")

	_, err = pool.Exec(ctx, `DELETE FROM reminders WHERE state = 'expired' OR id = 'r3'`)
	require.NoError(t, err)
	check("after a delete")
}
