package mirror_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// runtimeOf connects to db's schema as a member of the runtime role: a
// connection for the test's own SQL and a store over a pool, both closed
// when the test ends, and the role's URL.
func runtimeOf(t *testing.T, db testenv.DB) (*pgx.Conn, *mirror.Store, string) {
	t.Helper()
	url := testenv.RuntimeRole(t, db)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return connect(t, url), mirror.New(pool), url
}

// connect opens a connection of its own (a session of its own), closed
// when the test ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func eventTypes(t *testing.T, store *mirror.Store, id string) []string {
	t.Helper()
	events, err := store.Events(context.Background(), id)
	require.NoError(t, err)
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

// ageAll moves every row of db's schema 100 days into the past, as the
// owner may (the audit trail's trigger is off only for that), so prune
// finds it old.
func ageAll(t *testing.T, db testenv.DB) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `
ALTER TABLE reminder_events DISABLE TRIGGER reminder_events_append_only;
UPDATE reminder_events SET at = at - interval '100 days';
ALTER TABLE reminder_events ENABLE TRIGGER reminder_events_append_only;
UPDATE reminders SET due_at = due_at - interval '100 days', updated_at = updated_at - interval '100 days';
UPDATE deliveries SET created_at = created_at - interval '100 days', finished_at = finished_at - interval '100 days',
                      lease_until = lease_until - interval '100 days';
UPDATE outcome_escalations SET created_at = created_at - interval '100 days', due_at = due_at - interval '100 days',
                               started_at = now() - interval '100 days';`)
	require.NoError(t, err)
}

// The SQL twins of the trail's vocabulary (migration 00019) agree with
// reminder.EventInto, EventFollows and EventReaches on every event type the
// mirror writes, and some it does not, over details naming every state.
func TestTheSQLTrailIsTheDomains(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	types := slices.Concat(reminder.MoveEvents(), reminder.NoteEvents, []string{"provider_", "approved_late", "unknown"})
	states := append(slices.Clip(reminder.States), "bogus")
	details := []map[string]any{{}, {"state": 5}}
	for _, a := range states {
		details = append(details, map[string]any{"state": string(a)}, map[string]any{"to": string(a)},
			map[string]any{"from": string(a)})
		for _, b := range states {
			details = append(details, map[string]any{"from": string(a), "to": string(b)})
		}
	}
	froms := []*string{nil}
	for _, s := range reminder.States {
		froms = append(froms, new(string(s)))
	}
	var ts, fs, tos []*string
	var ds []map[string]any
	for _, typ := range types {
		for _, d := range details {
			for _, f := range froms {
				for _, to := range reminder.States {
					ts, ds, fs, tos = append(ts, new(typ)), append(ds, d), append(fs, f), append(tos, new(string(to)))
				}
			}
		}
	}
	i := 0
	rows, err := db.Pool.Query(context.Background(), `
SELECT reminder_event_into(t, d), reminder_event_follows(t, d, f, s), reminder_event_reaches(t, d, s)
  FROM unnest($1::text[], $2::jsonb[], $3::text[], $4::text[]) WITH ORDINALITY AS x(t, d, f, s, n)
 ORDER BY n`, ts, ds, fs, tos)
	require.NoError(t, err)
	var into *string
	var follows, reaches bool
	_, err = pgx.ForEachRow(rows, []any{&into, &follows, &reaches}, func() error {
		typ, d, to := *ts[i], ds[i], reminder.State(*tos[i])
		var from reminder.State
		if fs[i] != nil {
			from = reminder.State(*fs[i])
		}
		what := fmt.Sprintf("%s %v after %q → %s", typ, d, from, to)
		want, ok := reminder.EventInto(typ, d)
		if ok {
			require.NotNil(t, into, what)
			require.Equal(t, want, reminder.State(*into), what)
		} else {
			require.Nil(t, into, what)
		}
		require.Equal(t, reminder.EventFollows(typ, d, from, to), follows, what)
		require.Equal(t, reminder.EventReaches(typ, d, to), reaches, what)
		i++
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, len(ts), i)
}

// The role the product runs as cannot append a move its reminder did not
// make in the same transaction: a forged "approved by alice" or "sent" is
// refused with the reason and writes nothing, and neither a hand move in
// an earlier transaction nor another move in the same one covers it. The
// real decision (the workflow's, through TransitionFrom) still writes its
// approved event. The owner, trusted, may.
func TestTheRuntimeRoleCannotForgeAMove(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	runtime, store, url := runtimeOf(t, db)
	ctx := context.Background()
	u := update("SHP-forge-move", time.Now().Add(time.Hour), time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	u.Subscribers[0].RequiresApproval = true
	u.EscalationEmail = "lead@shipper.example"
	stored := insert(t, store, u, time.Now()).Reminders
	awaiting, scheduled, owned := stored[0].Requested.ID, stored[1].Requested.ID, stored[2].Requested.ID
	require.Equal(t, reminder.AwaitingApproval, stored[0].State)

	forge := func(id, typ string) error {
		_, err := runtime.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, $2, '{"by": "alice"}')`, id, typ)
		return err
	}
	refusal := func(typ, id string, state reminder.State) string {
		return fmt.Sprintf("an event of type %s records a move that reminder %s did not make in this transaction (it is %s)", typ, id, state)
	}
	require.ErrorContains(t, forge(awaiting, "approved"), refusal("approved", awaiting, reminder.AwaitingApproval))
	require.ErrorContains(t, forge(scheduled, "sent"), refusal("sent", scheduled, reminder.Scheduled))

	_, err := runtime.Exec(ctx, `UPDATE reminders SET state = 'sent' WHERE id = $1`, scheduled)
	require.NoError(t, err, "a move the machine allows is made")
	require.ErrorContains(t, forge(scheduled, "sent"), refusal("sent", scheduled, reminder.Sent),
		"a move by hand is no cover for a claim in a later transaction")

	tx, err := runtime.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE reminders SET state = 'cancelled' WHERE id = $1`, awaiting)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'approved', '{"by": "alice"}')`, awaiting)
	require.ErrorContains(t, err, refusal("approved", awaiting, reminder.Cancelled), "a cancel is no approval")
	require.NoError(t, tx.Rollback(ctx))
	tx, err = runtime.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE reminders SET last_move_from = 'scheduled', last_move_xact = pg_current_xact_id() WHERE id = $1`, scheduled)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type) VALUES ($1, 'sent')`, scheduled)
	require.ErrorContains(t, err, refusal("sent", scheduled, reminder.Sent), "the caller cannot write the move it claims")
	require.NoError(t, tx.Rollback(ctx))

	// Temporary tables are the caller's: one named as a table the trust
	// functions read (the catalog's pg_class, the reminders) changes
	// nothing. Each in a session of its own, whose plans it made.
	for name, setup := range map[string]string{
		"pg_class": `CREATE TEMP TABLE pg_class AS
SELECT 'reminder_events'::regclass::oid AS oid, oid AS relowner FROM pg_roles WHERE rolname = current_user`,
		"reminders": `CREATE TEMP TABLE reminders AS
SELECT id, 'scheduled'::text AS state, 'awaiting_approval'::text AS last_move_from, pg_current_xact_id() AS last_move_xact
  FROM reminders`,
	} {
		tx, err := connect(t, url).Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, setup)
		require.NoError(t, err, name)
		var owns bool
		require.NoError(t, tx.QueryRow(ctx, `SELECT caller_owns('reminder_events'::regclass)`).Scan(&owns))
		require.False(t, owns, "a temporary %s makes no owner", name)
		_, err = tx.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'approved', '{"by": "alice"}')`, awaiting)
		require.ErrorContains(t, err, refusal("approved", awaiting, reminder.AwaitingApproval), "a temporary %s", name)
		require.NoError(t, tx.Rollback(ctx))
	}
	require.Equal(t, []string{"scheduled"}, eventTypes(t, store, awaiting), "nothing forged is on the trail")
	require.Equal(t, []string{"scheduled"}, eventTypes(t, store, scheduled))

	require.NoError(t, store.TransitionFrom(ctx, awaiting, []reminder.State{reminder.AwaitingApproval}, reminder.Scheduled,
		"approved", map[string]any{"by": "alice", "reason": "customer confirmed"}))
	events, err := store.Events(ctx, awaiting)
	require.NoError(t, err)
	require.Equal(t, []string{"scheduled", "approved"}, eventTypes(t, store, awaiting))
	require.Equal(t, "alice", events[1].Detail["by"])

	_, err = db.Pool.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'cancelled', '{"by": "ops"}')`, owned)
	require.NoError(t, err, "the owner's hand repair is trusted")
	_, err = runtime.Exec(ctx, `INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at,
                       requested_due_at, state, delivery_key, workflow_id)
SELECT id || '-x', shipment_id, update_id, subscriber_id || '-x', channel, email, due_at, requested_due_at, 'cancelled',
       delivery_key || '-x', workflow_id || '-x' FROM reminders WHERE id = $1`, owned)
	require.ErrorContains(t, err, "a reminder starts scheduled or awaiting_approval, not cancelled")
}

// Prune trusts the trail, not the row: a reminder the runtime role moved to
// cancelled by hand, with no event, is never pruned however old, nor can
// prune's own path delete its events; one the real path cancelled is.
func TestPruneTakesOnlyWhatTheTrailFinished(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	runtime, store, _ := runtimeOf(t, db)
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	stored := insert(t, store, update("SHP-hand", due, due), time.Now()).Reminders
	hand, real := stored[0].Requested.ID, stored[1].Requested.ID
	_, err := runtime.Exec(ctx, `UPDATE reminders SET state = 'cancelled' WHERE id = $1`, hand)
	require.NoError(t, err)
	require.NoError(t, store.TransitionFrom(ctx, real, reminder.PendingStates, reminder.Cancelled, "cancelled",
		map[string]any{"by": "tracker"}))
	ageAll(t, db)

	var candidate bool
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM reminders_prune_candidates(90 * 86400, '-infinity', '', 1000) WHERE id = $1)`, hand).Scan(&candidate))
	require.False(t, candidate, "prune's locking function does not take it")
	owner := mirror.New(db.Pool)
	dry, err := owner.Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day, DryRun: true})
	require.NoError(t, err)
	require.EqualValues(t, 1, dry.Reminders)
	require.Zero(t, dry.Skipped, "the dry run does not take it either")
	stats, err := owner.Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day})
	require.NoError(t, err)
	require.EqualValues(t, 1, stats.Reminders)
	require.Zero(t, stats.Skipped, "not even a candidate")
	require.Equal(t, []string{hand}, remaining(t, db.Pool), "the hand-cancelled row stays")
	again, err := owner.Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day})
	require.NoError(t, err)
	require.Zero(t, again.Reminders, "and stays on every run")

	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL shipnotify.prune = 'on'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM reminder_events WHERE reminder_id = $1`, hand)
		return err
	})
	require.ErrorContains(t, err, "whose trail records its finish (not reminder "+hand+")")
}

// Every path that moves a reminder writes its event, as the runtime role,
// in the same statement or transaction as its move: creation, a decision,
// an expiry, a failure, each cancel, a send (email and webhook), the
// provider's reports, a repair, and the late arrivals (a cancel after the
// send, a send after the cancel) as notes. Every type written is the
// trail's vocabulary, and every reminder so finished is prunable.
func TestTheRealPathsWriteTheirMovesAsTheRuntimeRole(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	_, store, _ := runtimeOf(t, db)
	ctx := context.Background()
	due := time.Now().Add(-time.Minute)
	dues := make([]time.Time, 10)
	for i := range dues {
		dues[i] = due
	}
	u := update("SHP-paths", dues...)
	for _, i := range []int{0, 1, 2} {
		u.Subscribers[i].RequiresApproval = true
	}
	u.EscalationEmail = "lead@shipper.example"
	st := insert(t, store, u, time.Now().Add(-time.Hour)).Reminders
	hookU, hookRows := hookUpdate("SHP-paths-hook", time.Now())
	hookStored, err := store.ScheduleUpdate(ctx, hookU, hookRows)
	require.NoError(t, err)
	st = append(st, hookStored.Reminders...)
	id := func(i int) string { return st[i].Requested.ID }
	claim := func(i int) {
		t.Helper()
		res, err := store.ClaimDelivery(ctx, mirror.Claim{Key: st[i].DeliveryKey, ReminderID: id(i),
			Purpose: reminder.PurposeReminder, Owner: "test", LeaseFor: time.Minute})
		require.NoError(t, err)
		require.Equal(t, mirror.Claimed, res.Verdict)
	}
	send := func(i int) {
		t.Helper()
		claim(i)
		require.NoError(t, ignoreDelivered(store.RecordSent(ctx, st[i].DeliveryKey, "msg-"+id(i), nil)))
	}
	decide := func(i int, to reminder.State, typ string) {
		t.Helper()
		require.NoError(t, store.TransitionFrom(ctx, id(i), []reminder.State{reminder.AwaitingApproval}, to, typ,
			map[string]any{"by": "alice"}))
	}
	finish := func(i int, to reminder.State, typ string) {
		t.Helper()
		require.NoError(t, store.TransitionFrom(ctx, id(i), reminder.PendingStates, to, typ, map[string]any{"reason": "test"}))
	}
	cancel := func(i int) reminder.State {
		t.Helper()
		state, err := store.Cancel(ctx, id(i), "cancelled", map[string]any{"by": "tracker"})
		require.NoError(t, err)
		return state
	}

	decide(0, reminder.Scheduled, "approved")
	send(0)
	_, err = store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{event("ev-0", st[0].DeliveryKey, reminder.OutcomeDelivered, time.Now())}, time.Hour)
	require.NoError(t, err)
	decide(1, reminder.Cancelled, "rejected")
	finish(2, reminder.Expired, "expired")
	claim(3)
	require.NoError(t, store.RecordDeliveryFailed(ctx, st[3].DeliveryKey, "test", "550 no such user"))
	finish(3, reminder.Failed, "failed")
	newDue := due.Add(time.Hour)
	require.NoError(t, store.Reschedule(ctx, id(4), newDue, reminder.DeliveryKey(id(4), st[4].Requested.SubscriberID, newDue), nil))
	require.NoError(t, store.RequestCancel(ctx, id(4), nil))
	require.Equal(t, reminder.Cancelled, cancel(4))
	send(5)
	_, err = store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{event("ev-5", st[5].DeliveryKey, reminder.OutcomeBounce, time.Now())}, time.Hour)
	require.NoError(t, err)
	changed, err := store.Transition(ctx, id(5), reminder.Cancelled, "cancelled", map[string]any{"after": "sent"})
	require.NoError(t, err)
	require.False(t, changed)
	require.Equal(t, reminder.Undeliverable, cancel(5))
	claim(6)
	require.Equal(t, reminder.Cancelled, cancel(6))
	require.NoError(t, ignoreDelivered(store.RecordSent(ctx, st[6].DeliveryKey, "msg-6", nil)))
	done, err := store.CancelUnstarted(ctx, id(7), map[string]any{"by": "tracker"})
	require.NoError(t, err)
	require.True(t, done)
	changed, err = store.Transition(ctx, id(8), reminder.Cancelled, "cancelled", map[string]any{"workflow": "not found"})
	require.NoError(t, err)
	require.True(t, changed)
	row, err := store.Get(ctx, id(9))
	require.NoError(t, err)
	repaired, err := store.Repair(ctx, mirror.Repair{ReminderID: id(9), From: row.State, Seen: row.UpdatedAt, To: reminder.Sent})
	require.NoError(t, err)
	require.True(t, repaired)
	send(10)

	for i, want := range [][]string{
		{"scheduled", "approved", "sent", "provider_delivered"},
		{"scheduled", "rejected"},
		{"scheduled", "expired"},
		{"scheduled", "delivery_failed", "failed"},
		{"scheduled", "rescheduled", "cancel_requested", "cancelled"},
		{"scheduled", "sent", "provider_bounce", "cancelled_late", "cancelled_late"},
		{"scheduled", "cancelled", "sent_late"},
		{"scheduled", "cancelled"},
		{"scheduled", "cancelled"},
		{"scheduled", "repaired"},
		{"scheduled", "sent", "delivered"},
	} {
		require.Equal(t, want, eventTypes(t, store, id(i)), "reminder %d", i)
	}
	rows, err := db.Pool.Query(ctx, `SELECT DISTINCT type FROM reminder_events`)
	require.NoError(t, err)
	written, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Subset(t, slices.Concat(reminder.MoveEvents(), reminder.NoteEvents), written, "every type written is the trail's")

	ageAll(t, db)
	stats, err := mirror.New(db.Pool).Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day})
	require.NoError(t, err)
	require.Equal(t, map[reminder.State]int64{reminder.Delivered: 2, reminder.Cancelled: 5, reminder.Expired: 1,
		reminder.Failed: 1, reminder.Undeliverable: 1, reminder.Sent: 1}, stats.ByState, "every finished reminder goes")
	require.Empty(t, remaining(t, db.Pool))
}
