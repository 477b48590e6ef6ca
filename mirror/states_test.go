package mirror_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

var quoted = regexp.MustCompile(`'([a-z_]+)'`)

// quotedNames is the quoted names in an SQL definition, in order.
func quotedNames(def string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(def, -1) {
		out = append(out, m[1])
	}
	return out
}

func names[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// The schema's lists are the domain's: the CHECK constraints on a
// reminder's state, its provider's outcome and its channel, and the predicate of the
// partial indexes on pending reminders.
func TestTheSchemaHoldsTheDomainsLists(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	constraint := func(name string) []string {
		var def string
		require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'reminders'::regclass AND conname = $1`, name).Scan(&def), name)
		return quotedNames(def)
	}
	require.ElementsMatch(t, names(reminder.States), constraint("reminders_state_check"))
	require.ElementsMatch(t, names(reminder.ProviderOutcomes), constraint("reminders_provider_outcome_check"))
	require.ElementsMatch(t, names(reminder.Channels), constraint("reminders_channel_check"))
	for _, index := range []string{"reminders_pending_due_at_idx", "reminders_pending_id_idx"} {
		var pred string
		require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace`, index).Scan(&pred), index)
		require.ElementsMatch(t, names(reminder.PendingStates), quotedNames(pred), index)
	}
}

// reminder_state_after_send, the SQL twin of reminder.StateAfterSend,
// agrees with it on every input.
func TestTheSQLStateAfterSendIsTheDomains(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	at := time.Now()
	for _, ch := range []reminder.Channel{reminder.Email, reminder.Webhook} {
		for _, delivered := range []bool{false, true} {
			for _, undeliverable := range []bool{false, true} {
				var d, u *time.Time
				if delivered {
					d = &at
				}
				if undeliverable {
					u = &at
				}
				var got string
				require.NoError(t, db.Pool.QueryRow(context.Background(),
					`SELECT reminder_state_after_send($1, $2, $3)`, string(ch), d, u).Scan(&got))
				require.Equal(t, reminder.StateAfterSend(ch, delivered, undeliverable), reminder.State(got),
					"%s delivered=%t undeliverable=%t", ch, delivered, undeliverable)
			}
		}
	}
}

// Every state change the mirror makes follows the state machine, from
// every state: a move, a cancel, the claim of a send (refused for a
// finished reminder), and prune's notion of finished.
func TestTheMirrorsStateChangesFollowTheStateMachine(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	n := 0
	// in stores a reminder, due and last changed long ago, and puts it in
	// state s by hand, as the owner, who also appends the event that
	// records a final state (named as the state) for prune to find.
	in := func(s reminder.State) (id, key string) {
		n++
		due := time.Now().Add(-30 * 24 * time.Hour)
		r := insert(t, store, update(fmt.Sprintf("SHP-sm-%d", n), due), due.Add(-time.Hour)).Reminders[0]
		_, err := db.Pool.Exec(ctx, `UPDATE reminders SET state = $2 WHERE id = $1`, r.Requested.ID, string(s))
		require.NoError(t, err)
		if s.Terminal() {
			_, err = db.Pool.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type) VALUES ($1, $2)`, r.Requested.ID, string(s))
			require.NoError(t, err)
		}
		_, err = db.Pool.Exec(ctx, `UPDATE reminders SET updated_at = now() - interval '20 days' WHERE id = $1`, r.Requested.ID)
		require.NoError(t, err)
		return r.Requested.ID, r.DeliveryKey
	}
	state := func(id string) reminder.State {
		row, err := store.Get(ctx, id)
		require.NoError(t, err)
		return row.State
	}
	for _, from := range reminder.States {
		for _, to := range reminder.States {
			id, _ := in(from)
			changed, err := store.Transition(ctx, id, to, "test_move", nil)
			require.NoError(t, err)
			require.Equal(t, from.CanBecome(to), changed, "%s → %s", from, to)
			if !changed {
				require.Equal(t, from, state(id), "%s → %s left the row alone", from, to)
			}
		}

		id, _ := in(from)
		after, err := store.Cancel(ctx, id, "test_cancel", nil)
		require.NoError(t, err)
		if from.CanBecome(reminder.Cancelled) {
			require.Equal(t, reminder.Cancelled, after, "a cancel of a %s reminder", from)
		} else {
			require.Equal(t, from, after, "a cancel of a %s reminder leaves it", from)
		}

		for _, sameKey := range []bool{true, false} {
			id, key := in(from)
			if !sameKey {
				key = reminder.DeliveryKey(id, "sub-a", time.Now())
			}
			res, err := store.ClaimDelivery(ctx, mirror.Claim{Key: key, ReminderID: id, Purpose: reminder.PurposeReminder,
				Owner: "test", LeaseFor: time.Minute})
			require.NoError(t, err)
			refused := res.Verdict == mirror.Refused || res.Verdict == mirror.Moved
			require.Equal(t, from.RefusesSend(sameKey), refused,
				"the claim of a %s reminder's send (same key: %t) is %v", from, sameKey, res.Verdict)
			// A pending row under another key moved while its workflow did
			// not hear: the claim says where to.
			require.Equal(t, from.Pending() && !sameKey, res.Verdict == mirror.Moved,
				"the claim of a %s reminder's send (same key: %t) is %v", from, sameKey, res.Verdict)
			if res.Verdict == mirror.Moved {
				row, err := store.Get(ctx, id)
				require.NoError(t, err)
				require.Equal(t, row.DeliveryKey, res.Target.DeliveryKey)
				require.True(t, row.DueAt.Equal(res.Target.Reminder.DueAt))
			}
		}

		id, _ = in(from)
		var candidate bool
		require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM reminders_prune_candidates(7 * 86400, '-infinity', '', 1000) WHERE id = $1)`, id).Scan(&candidate))
		require.Equal(t, from.Terminal(), candidate, "prune takes a %s reminder", from)
	}
}

// reminder_move_allowed, the SQL twin of the state machine that the
// runtime role's updates are held to, agrees with reminder.CanBecome on
// every pair of states.
func TestTheSQLStateMachineIsTheDomains(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	for _, from := range reminder.States {
		for _, to := range reminder.States {
			var allowed bool
			require.NoError(t, db.Pool.QueryRow(context.Background(),
				`SELECT reminder_move_allowed($1, $2)`, string(from), string(to)).Scan(&allowed))
			require.Equal(t, from.CanBecome(to), allowed, "%s → %s", from, to)
		}
	}
}

// The role the product runs as cannot forge the trail or make a live
// reminder prunable: the database sets an event's time and a reminder's
// last change whatever the caller writes, and refuses a move the state
// machine does not allow. The attack (cancel a reminder awaiting
// approval by hand, backdated 200 days) leaves a row the next prune of
// 90-day-old reminders does not take.
func TestTheRuntimeRoleCannotForgeTimesOrMoves(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	runtime, err := pgx.Connect(ctx, testenv.RuntimeRole(t, db))
	require.NoError(t, err)
	t.Cleanup(func() { _ = runtime.Close(context.Background()) })
	u := update("SHP-forge", time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	u.Subscribers[0].RequiresApproval = true
	u.EscalationEmail = "lead@shipper.example"
	stored := insert(t, store, u, time.Now()).Reminders
	awaiting, other := stored[0].Requested.ID, stored[1].Requested.ID
	require.Equal(t, reminder.AwaitingApproval, stored[0].State)

	_, err = runtime.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, at, detail)
VALUES ($1, 'cancel_requested', now() - interval '200 days', '{"by": "alice"}')`, awaiting)
	require.NoError(t, err)
	var at time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT at FROM reminder_events WHERE reminder_id = $1 AND type = 'cancel_requested'`, awaiting).Scan(&at))
	require.WithinDuration(t, time.Now(), at, time.Minute, "the event is dated when it was written, not when the caller says")

	_, err = runtime.Exec(ctx, `UPDATE reminders SET state = 'cancelled', updated_at = now() - interval '200 days',
       due_at = now() - interval '200 days' WHERE id = $1`, awaiting)
	require.NoError(t, err)
	var updated time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT updated_at FROM reminders WHERE id = $1`, awaiting).Scan(&updated))
	require.WithinDuration(t, time.Now(), updated, time.Minute, "the last change is dated by the database")
	var prunable bool
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM reminders_prune_candidates(90 * 86400, '-infinity', '', 1000) WHERE id = $1)`, awaiting).Scan(&prunable))
	require.False(t, prunable, "the hand-edited row is not prunable")

	for _, tc := range []struct {
		id   string
		from reminder.State
		to   reminder.State
	}{
		{awaiting, reminder.Cancelled, reminder.Scheduled},
		{awaiting, reminder.Cancelled, reminder.Sent},
	} {
		_, err = runtime.Exec(ctx, `UPDATE reminders SET state = $2 WHERE id = $1`, tc.id, string(tc.to))
		require.ErrorContains(t, err, fmt.Sprintf("a %s reminder may not become %s", tc.from, tc.to))
	}
	_, err = runtime.Exec(ctx, `UPDATE reminders SET state = 'sent' WHERE id = $1`, other)
	require.NoError(t, err, "a move the machine allows is made")
	_, err = runtime.Exec(ctx, `UPDATE reminders SET state = 'scheduled' WHERE id = $1`, other)
	require.ErrorContains(t, err, "a sent reminder may not become scheduled")
}

// Nor can it backdate the trail by holding its transaction open: the
// database dates an event and a reminder's last change when the row is
// written, not when the transaction began. Here a transaction of the
// runtime role waits until the clock is 2 s past its start before it
// writes; what it writes is dated after that, not at the start.
func TestTheTrailIsDatedWhenWrittenNotWhenItsTransactionBegan(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	runtime, err := pgx.Connect(ctx, testenv.RuntimeRole(t, db))
	require.NoError(t, err)
	t.Cleanup(func() { _ = runtime.Close(context.Background()) })
	id := insert(t, store, update("SHP-held", time.Now().Add(time.Hour)), time.Now()).Reminders[0].Requested.ID

	tx, err := runtime.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var began time.Time
	require.NoError(t, tx.QueryRow(ctx, `SELECT now()`).Scan(&began))
	require.Eventually(t, func() bool {
		var past bool
		require.NoError(t, tx.QueryRow(ctx, `SELECT clock_timestamp() >= now() + interval '2 seconds'`).Scan(&past))
		return past
	}, 30*time.Second, 50*time.Millisecond, "the transaction is held open 2 s")
	_, err = tx.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'cancel_requested', '{"by": "alice"}')`, id)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE reminders SET cancel_requested_at = now(), updated_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	var at, updated time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT e.at, r.updated_at FROM reminder_events e JOIN reminders r ON r.id = e.reminder_id
 WHERE e.reminder_id = $1 AND e.type = 'cancel_requested'`, id).Scan(&at, &updated))
	require.GreaterOrEqual(t, at.Sub(began), 2*time.Second, "the event is dated when written (%s), not at its transaction's start (%s)", at, began)
	require.GreaterOrEqual(t, updated.Sub(began), 2*time.Second, "so is the reminder's last change (%s)", updated)
}

// The state lists written into the triggers are the domain's: the states a
// reminder may start in when the runtime role inserts it (reminders_guard:
// the pending ones), and those whose events prune may delete
// (reminder_events_prunable: the final ones). Each is the SQL twin of a
// Go list, written out in a migration, so a new state the Go gains and
// the migration forgets is caught here.
func TestTheTriggersStateListsAreTheDomains(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	list := func(function string, pattern *regexp.Regexp) []string {
		var def string
		require.NoError(t, db.Pool.QueryRow(context.Background(), `
SELECT pg_get_functiondef(p.oid) FROM pg_proc p
 WHERE p.proname = $1 AND p.pronamespace = current_schema()::regnamespace`, function).Scan(&def), function)
		m := pattern.FindStringSubmatch(def)
		require.NotNil(t, m, "%s has its state list", function)
		return quotedNames(m[1])
	}
	require.ElementsMatch(t, names(reminder.PendingStates),
		list("reminders_guard", regexp.MustCompile(`NEW\.state NOT IN \(([^)]*)\)`)), "the states a reminder starts in")
	require.ElementsMatch(t, names(reminder.FinalStates),
		list("reminder_events_prunable", regexp.MustCompile(`r\.state NOT IN \(([^)]*)\)`)), "the states prune deletes the events of")
}
