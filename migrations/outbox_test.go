package migrations

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// 00023 adds the status outbox and the change feed beside the rows of
// before (they have no place in the feed until they change, and then
// take one), pins its definer trigger to the schema, pg_temp last, and
// its down takes everything it added away.
func TestStatusOutboxComesAndGoes(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 22)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'U', 'k', 's', 'b');
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
VALUES ('S/U/a', 'S', 'U', 'a', 'email', 'a@b.example', now(), now(), 'scheduled', 'ka', 'reminder/S/U/a');
INSERT INTO reminder_events (reminder_id, type) VALUES ('S/U/a', 'scheduled')`)
	require.NoError(t, err)
	added := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `
SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace
           AND relname IN ('status_endpoints', 'status_outbox', 'reminder_changes'))
     + (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'reminder_events'::regclass AND tgname = 'reminder_events_status')
     + (SELECT count(*) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace
           AND proname IN ('reminder_status_event', 'reminder_events_status', 'status_event_time'))`).Scan(&n))
		return n
	}
	require.Zero(t, added())

	_, err = p.UpTo(ctx, 23)
	require.NoError(t, err)
	require.Equal(t, 3+1+3, added(), "three tables, a trigger, three functions")
	var schema string
	var config []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	require.NoError(t, pool.QueryRow(ctx, `
SELECT coalesce(proconfig, '{}') FROM pg_proc WHERE pronamespace = current_schema()::regnamespace AND proname = 'reminder_events_status'`).Scan(&config))
	require.Equal(t, []string{"search_path=" + schema + ", pg_temp"}, config)
	var changes int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reminder_changes`).Scan(&changes))
	require.Zero(t, changes, "a reminder of before has no place in the feed")
	_, err = pool.Exec(ctx, `
UPDATE reminders SET state = 'cancelled' WHERE id = 'S/U/a';
INSERT INTO reminder_events (reminder_id, type) VALUES ('S/U/a', 'cancelled')`)
	require.NoError(t, err)
	var seq int
	require.NoError(t, pool.QueryRow(ctx, `SELECT seq FROM reminder_changes WHERE reminder_id = 'S/U/a'`).Scan(&seq))
	require.Equal(t, 1, seq, "until it changes: the feed's events are numbered from there")

	_, err = p.Down(ctx)
	require.NoError(t, err)
	require.Zero(t, added())
}

// 00023 adds foreign keys to reminders and a trigger to reminder_events,
// each under a lock that writers of the table wait behind. Behind a
// transaction that holds a write on reminders it gives up after its
// lock_timeout, with nothing applied, rather than queue every writer
// behind it for as long as that transaction runs; once the transaction
// has ended, it applies.
func TestStatusOutboxWaitsForItsLocksBriefly(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 22)
	ctx := context.Background()
	seedReminders(t, pool, 1)
	writer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback(ctx) }()
	_, err = writer.Exec(ctx, `UPDATE reminders SET updated_at = now() WHERE id = 'r1'`)
	require.NoError(t, err)

	migrating, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = p.UpTo(migrating, 23)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "a lock timeout, not a wait as long as the writer's")
	require.Equal(t, "55P03", pgErr.Code, "lock_not_available: %s", pgErr.Message)
	v, err := p.GetDBVersion(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 22, v, "nothing of 00023 applied")

	require.NoError(t, writer.Rollback(ctx))
	_, err = p.UpTo(ctx, 23)
	require.NoError(t, err)
}
