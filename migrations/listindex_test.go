package migrations

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// listIndexColumns are the columns 00006's covering index includes; 00008
// adds the provider outcome's.
const listIndexColumns = "shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key, " +
	"workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at"

// listIndexes are the schema's indexes named for List's covering index (the
// index and any leftover of a rebuild), by name: their definition and
// whether they are valid.
func listIndexes(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, _ := pool.Query(context.Background(), `
SELECT c.relname, pg_get_indexdef(i.indexrelid) || CASE WHEN i.indisvalid THEN '' ELSE ' INVALID' END
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relnamespace = current_schema()::regnamespace AND c.relname LIKE 'reminders\_due\_at\_list\_idx%'`)
	out := map[string]string{}
	var name, def string
	_, err := pgx.ForEachRow(rows, []any{&name, &def}, func() error { out[name] = def; return nil })
	require.NoError(t, err)
	return out
}

// seedReminders adds n sent reminders of one shipment.
func seedReminders(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'u', 'k', 's', 'b')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
SELECT 'r' || g, 'S', 'u', 's' || g, 'email', 'a@b.example', now(), now(), 'sent', md5(g::text), 'w' || g
  FROM generate_series(1, $1::int) g`, n)
	require.NoError(t, err)
}

// 00008 builds concurrently, outside a transaction, so a failure leaves
// the schema part way. A build that failed leaves an INVALID index under
// the new name; applying the migration again must not take it for done
// (IF NOT EXISTS would) and must end with one valid index that includes
// the outcome. Down brings 00006's index back.
func TestListIndexRebuildRecoversFromAFailedBuild(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 7)
	ctx := context.Background()
	seedReminders(t, pool, 20)

	// A concurrent build that failed: a unique index over duplicates.
	_, err := pool.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY reminders_due_at_list_idx_next ON reminders (shipment_id)`)
	require.ErrorContains(t, err, "could not create unique index")
	require.Contains(t, listIndexes(t, pool)["reminders_due_at_list_idx_next"], "INVALID", "the failed build's leftover")

	_, err = p.UpTo(ctx, 8)
	require.NoError(t, err)
	indexes := listIndexes(t, pool)
	require.Len(t, indexes, 1, "the leftover is gone: %v", indexes)
	require.Regexp(t, `^CREATE INDEX reminders_due_at_list_idx ON \S+\.reminders USING btree \(due_at, id\) INCLUDE \(`+
		listIndexColumns+`, provider_outcome, provider_outcome_at, delivered_at\)$`, indexes["reminders_due_at_list_idx"])

	_, err = p.DownTo(ctx, 7)
	require.NoError(t, err)
	indexes = listIndexes(t, pool)
	require.Len(t, indexes, 1, "%v", indexes)
	require.Regexp(t, `^CREATE INDEX reminders_due_at_list_idx ON \S+\.reminders USING btree \(due_at, id\) INCLUDE \(`+
		listIndexColumns+`\)$`, indexes["reminders_due_at_list_idx"])
}

// The rebuild lets writers on. A concurrent build waits for the writers
// already there (here an open transaction that inserted a row), and
// meanwhile new writes go through; a plain CREATE INDEX would queue for
// its lock behind that transaction and every new write would queue behind
// it.
func TestListIndexRebuildLetsWritersOn(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 7)
	ctx := context.Background()
	seedReminders(t, pool, 20)

	writer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback(ctx) }()
	_, err = writer.Exec(ctx, `
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
VALUES ('w-open', 'S', 'u', 'w-open', 'email', 'a@b.example', now(), now(), 'scheduled', md5('w-open'), 'w-open')`)
	require.NoError(t, err)
	var writerPID int
	require.NoError(t, writer.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&writerPID))

	migrated := make(chan error, 1)
	go func() {
		_, err := p.UpTo(ctx, 8)
		migrated <- err
	}()
	// The migration is under way once it waits for the open writer.
	require.Eventually(t, func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`,
			writerPID).Scan(&waiting)
		return err == nil && waiting
	}, 30*time.Second, 20*time.Millisecond, "the migration never waited for the open writer")

	// A write meanwhile is not held back: lock_timeout would fail it.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '2s'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE reminders SET state = 'delivered', provider_outcome = 'delivered',
       provider_outcome_at = now(), delivered_at = now() WHERE id = 'r1'`)
		return err
	})
	require.NoError(t, err, "a write during the rebuild")

	require.NoError(t, writer.Commit(ctx))
	select {
	case err := <-migrated:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the migration did not finish after the writer committed")
	}
	require.Contains(t, listIndexes(t, pool)["reminders_due_at_list_idx"], "delivered_at)")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reminders`).Scan(&n))
	require.Equal(t, 21, n)
}
