package migrations_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// seedEvent inserts a reminder in state, last changed changedAgo ago, with
// one event appended eventAgo ago, and returns the event's id.
func seedEvent(t *testing.T, pool *pgxpool.Pool, id, state string, changedAgo, eventAgo time.Duration) int64 {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ($1, 'u', 'k', 's', 'b') ON CONFLICT DO NOTHING`, id)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state,
                       delivery_key, workflow_id, created_at, updated_at)
VALUES ($1, $1, 'u', 's', 'email', 'a@b.example', now() - $3::interval, now() - $3::interval, $2,
        md5($1), 'reminder/' || $1, now() - $3::interval, now() - $3::interval)`, id, state, changedAgo)
	require.NoError(t, err)
	var ev int64
	require.NoError(t, pool.QueryRow(ctx, `
INSERT INTO reminder_events (reminder_id, type, at) VALUES ($1, 'sent', now() - $2::interval) RETURNING id`,
		id, eventAgo).Scan(&ev))
	return ev
}

const old = 10 * 24 * time.Hour

// The audit trail stays append-only except on prune's documented path: a
// transaction that set shipnotify.prune, deleting events at least 4 days
// old of reminders finished and unchanged for 4 days.
func TestEventsLeaveOnlyByPrunesPath(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	prunable := seedEvent(t, db.Pool, "R-old-sent", "sent", old, old)
	pending := seedEvent(t, db.Pool, "R-old-scheduled", "scheduled", old, old)
	justFinished := seedEvent(t, db.Pool, "R-young-sent", "sent", 3*24*time.Hour, old)
	lateEvent := seedEvent(t, db.Pool, "R-late-event", "cancelled", old, 2*24*time.Hour)

	// inPrune runs stmt in a transaction marked as prune's, rolled back.
	inPrune := func(stmt string, args ...any) error {
		return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL shipnotify.prune = 'on'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, stmt, args...)
			if err == nil {
				err = errRollback
			}
			return err
		})
	}
	for name, err := range map[string]error{
		"an update":                           exec(db.Pool, `UPDATE reminder_events SET type = 'failed' WHERE id = $1`, prunable),
		"an update, marked as prune":          inPrune(`UPDATE reminder_events SET type = 'failed' WHERE id = $1`, prunable),
		"a delete, unmarked":                  exec(db.Pool, `DELETE FROM reminder_events WHERE id = $1`, prunable),
		"a truncate, marked as prune":         inPrune(`TRUNCATE reminder_events`),
		"a pending reminder's event":          inPrune(`DELETE FROM reminder_events WHERE id = $1`, pending),
		"a reminder finished 3 days ago":      inPrune(`DELETE FROM reminder_events WHERE id = $1`, justFinished),
		"an event appended 2 days ago":        inPrune(`DELETE FROM reminder_events WHERE id = $1`, lateEvent),
		"one refused among allowed ones":      inPrune(`DELETE FROM reminder_events WHERE id IN ($1, $2)`, prunable, pending),
		"a delete after a marked transaction": markedThenCommitted(t, db.Pool, prunable),
	} {
		require.Error(t, err, name)
		require.NotErrorIs(t, err, errRollback, name)
		require.Regexp(t, `append-only|prune deletes only`, err.Error(), name)
	}
	require.ErrorIs(t, inPrune(`DELETE FROM reminder_events WHERE id = $1`, prunable), errRollback, "prune's path works")

	var left int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM reminder_events`).Scan(&left))
	require.Equal(t, 4, left, "nothing was deleted outside the rolled-back prune")
}

// markedThenCommitted sets the prune mark in one transaction, commits it,
// and deletes in the next: the mark is transaction-local.
func markedThenCommitted(t *testing.T, pool *pgxpool.Pool, event int64) error {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `BEGIN; SET LOCAL shipnotify.prune = 'on'; COMMIT`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `DELETE FROM reminder_events WHERE id = $1`, event)
	return err
}

func exec(pool *pgxpool.Pool, stmt string, args ...any) error {
	_, err := pool.Exec(context.Background(), stmt, args...)
	return err
}

var errRollback = errors.New("rolled back on purpose")

// The runtime role cannot delete on prune's path either; a member of
// shipnotify_pruner can, and can do nothing else to the trail.
func TestOnlyThePrunerRoleDeletes(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	ev := seedEvent(t, db.Pool, "R-roles", "sent", old, old)

	runtime, err := pgx.Connect(ctx, testenv.RuntimeRole(t, db))
	require.NoError(t, err)
	defer runtime.Close(ctx)
	_, err = runtime.Exec(ctx, `BEGIN; SET LOCAL shipnotify.prune = 'on'; DELETE FROM reminder_events WHERE id = `+itoa(ev)+`; COMMIT`)
	require.ErrorContains(t, err, "permission denied")
	_, err = runtime.Exec(ctx, `ROLLBACK`)
	require.NoError(t, err)
	_, err = runtime.Exec(ctx, `SELECT * FROM reminders_prune_candidates(90 * 86400, '-infinity', '', 10)`)
	require.ErrorContains(t, err, "permission denied", "only prune locks prune's candidates")

	pruner, err := pgx.Connect(ctx, testenv.PrunerRole(t, db))
	require.NoError(t, err)
	defer pruner.Close(ctx)
	for _, stmt := range []string{
		`UPDATE reminders SET state = 'sent'`,
		`INSERT INTO reminder_events (reminder_id, type) VALUES ('R-roles', 'sent')`,
		`ALTER TABLE reminder_events DISABLE TRIGGER reminder_events_append_only`,
		`TRUNCATE reminder_events`,
	} {
		_, err := pruner.Exec(ctx, stmt)
		require.Error(t, err, stmt)
		require.Regexp(t, `permission denied|must be owner`, err.Error(), stmt)
	}
	var candidate string
	require.NoError(t, pruner.QueryRow(ctx, `SELECT id FROM reminders_prune_candidates(5 * 86400, '-infinity', '', 10)`).Scan(&candidate))
	require.Equal(t, "R-roles", candidate, "the pruner locks candidates through the owner's function")
	var none int
	require.NoError(t, pruner.QueryRow(ctx, `SELECT count(*) FROM reminders_prune_candidates(3 * 86400, '-infinity', '', 10)`).Scan(&none))
	require.Zero(t, none, "never under the 4-day floor")
	_, err = pruner.Exec(ctx, `BEGIN; SET LOCAL shipnotify.prune = 'on';
DELETE FROM reminder_events WHERE id = `+itoa(ev)+`; DELETE FROM reminders WHERE id = 'R-roles';
DELETE FROM updates WHERE shipment_id = 'R-roles'; COMMIT`)
	require.NoError(t, err)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
