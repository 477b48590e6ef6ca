package mirror_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

const day = 24 * time.Hour

// aged is one reminder of a prune test: its state, how long ago it was due
// and last changed, and the events and deliveries it has.
type aged struct {
	id      string
	update  string
	state   string
	dueAgo  time.Duration
	idleFor time.Duration
	// events are appended this long ago; deliveries are (status,
	// finished this long ago).
	events     []time.Duration
	deliveries []delivery
	// disabled: a webhook endpoint was disabled by this reminder.
	disabled bool
}

type delivery struct {
	status string
	ago    time.Duration
}

func seedAged(t *testing.T, pool *pgxpool.Pool, rems ...aged) {
	t.Helper()
	ctx := context.Background()
	for _, r := range rems {
		_, err := pool.Exec(ctx, `
INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('SHP-P', $1, 'k', 's', 'b') ON CONFLICT DO NOTHING`, r.update)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state,
                       delivery_key, workflow_id, created_at, updated_at)
VALUES ($1, 'SHP-P', $2, $1, 'email', 'a@b.example', now() - $3::interval, now() - $3::interval, $4,
        md5($1), 'reminder/' || $1, now() - $3::interval - interval '1 day', now() - $5::interval)`,
			r.id, r.update, r.dueAgo, r.state, r.idleFor)
		require.NoError(t, err)
		// Typed as the state the reminder is in: a final state's name is
		// the event that records the move into it, so the trail records
		// the finish prune asks for.
		for _, ago := range r.events {
			_, err = pool.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, at) VALUES ($1, $2, now() - $3::interval)`, r.id, r.state, ago)
			require.NoError(t, err)
		}
		for i, d := range r.deliveries {
			_, err = pool.Exec(ctx, `
INSERT INTO deliveries (delivery_key, reminder_id, purpose, status, claimed_by, lease_until, created_at, finished_at)
VALUES (md5($1) || $2, $1, 'reminder', $3, 'w', now() - $4::interval, now() - $4::interval,
        CASE WHEN $3 = 'sending' THEN NULL ELSE now() - $4::interval END)`, r.id, strconv.Itoa(i), d.status, d.ago)
			require.NoError(t, err)
		}
		if r.disabled {
			_, err = pool.Exec(ctx, `INSERT INTO disabled_endpoints (url_sha256, reminder_id, reason) VALUES (md5($1), $1, 'gone')`, r.id)
			require.NoError(t, err)
		}
	}
}

// remaining is the ids of the reminders left, sorted.
func remaining(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, _ := pool.Query(context.Background(), `SELECT id FROM reminders ORDER BY id`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n))
	return n
}

// old is a finished reminder prune takes at 90 days: due, changed and
// every trail row 100 days ago.
func old(id, update, state string) aged {
	return aged{id: id, update: update, state: state, dueAgo: 100 * day, idleFor: 100 * day,
		events: []time.Duration{101 * day, 100 * day}, deliveries: []delivery{{"sent", 100 * day}}}
}

// Prune removes finished reminders past the age with their events and
// deliveries, in batches, and the update rows they leave empty; it keeps
// every reminder that is pending, young, or still has something going on.
func TestPruneRemovesOnlyWhatIsOldFinishedAndQuiet(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	stuck := old("k-stuck-scheduled", "u2", "scheduled")
	waiting := old("k-awaiting", "u2", "awaiting_approval")
	young := old("k-young", "u2", "sent")
	young.idleFor = 20 * day
	notDue := old("k-cancelled-not-due", "u2", "cancelled")
	notDue.dueAgo = -10 * day
	sending := old("k-escalation-sending", "u2", "failed")
	sending.deliveries = append(sending.deliveries, delivery{"sending", 100 * day})
	lateEvent := old("k-late-event", "u2", "sent")
	lateEvent.events = append(lateEvent.events, 5*day)
	lateDelivery := old("k-late-delivery", "u2", "cancelled")
	lateDelivery.deliveries = append(lateDelivery.deliveries, delivery{"sent", 5 * day})
	disabled := old("k-disabled", "u2", "failed")
	disabled.disabled = true
	seedAged(t, db.Pool,
		old("p-sent-1", "u1", "sent"), old("p-sent-2", "u1", "sent"), old("p-failed", "u1", "failed"),
		old("p-cancelled", "u1", "cancelled"), old("p-expired", "u1", "expired"),
		old("p-sent-3", "u2", "sent"),
		stuck, waiting, young, notDue, sending, lateEvent, lateDelivery, disabled)

	var seen []mirror.PruneStats
	stats, err := mirror.New(db.Pool).Prune(ctx, mirror.PruneOptions{
		OlderThan: 90 * day, Batch: 2, Updates: true, OnBatch: func(s mirror.PruneStats) { seen = append(seen, s) },
	})
	require.NoError(t, err)
	require.Equal(t, []string{"k-awaiting", "k-cancelled-not-due", "k-disabled", "k-escalation-sending", "k-late-delivery",
		"k-late-event", "k-stuck-scheduled", "k-young"}, remaining(t, db.Pool))
	require.EqualValues(t, 6, stats.Reminders)
	require.Equal(t, map[reminder.State]int64{reminder.Sent: 3, reminder.Failed: 1, reminder.Cancelled: 1, reminder.Expired: 1}, stats.ByState)
	require.EqualValues(t, 12, stats.Events)
	require.EqualValues(t, 6, stats.Deliveries)
	require.EqualValues(t, 1, stats.Updates, "u1 is left empty and goes; u2 keeps reminders")
	require.EqualValues(t, 4, stats.Skipped, "sending, late event, late delivery, disabled endpoint")
	require.GreaterOrEqual(t, len(seen), 5, "batches of two")
	require.Equal(t, stats.Batches, len(seen))
	require.Equal(t, 8*2+1, countRows(t, db.Pool, "reminder_events"), "the kept reminders keep their trail")
	require.Equal(t, 1, countRows(t, db.Pool, "updates"))

	gauges, err := mirror.New(db.Pool).Gauges(ctx)
	require.NoError(t, err)
	require.Equal(t, map[reminder.State]int64{reminder.Scheduled: 1, reminder.AwaitingApproval: 1, reminder.Sent: 2,
		reminder.Cancelled: 2, reminder.Failed: 2}, gauges.ByState, "the gauges' tallies follow the deletes")

	again, err := mirror.New(db.Pool).Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day})
	require.NoError(t, err)
	require.Zero(t, again.Reminders, "nothing left to prune")
}

// A dry run counts what would go and removes nothing.
func TestPruneDryRunRemovesNothing(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	seedAged(t, db.Pool, old("p-1", "u1", "sent"), old("p-2", "u1", "cancelled"), old("k-1", "u1", "scheduled"))
	stats, err := mirror.New(db.Pool).Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day, DryRun: true, Batch: 1})
	require.NoError(t, err)
	require.EqualValues(t, 2, stats.Reminders)
	require.EqualValues(t, 4, stats.Events)
	require.EqualValues(t, 2, stats.Deliveries)
	require.Len(t, remaining(t, db.Pool), 3)
	require.Equal(t, 6, countRows(t, db.Pool, "reminder_events"))
}

// The archive gets each batch while its reminders are still in the mirror,
// and a batch whose archive fails is not deleted.
func TestPruneArchivesBeforeDeleting(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	seedAged(t, db.Pool, old("p-1", "u1", "sent"), old("p-2", "u1", "sent"), old("p-3", "u1", "sent"))
	store := mirror.New(db.Pool)

	errFull := errors.New("disk full")
	_, err := store.Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day, Archive: func([]mirror.Row) error { return errFull }})
	require.ErrorIs(t, err, errFull)
	require.Len(t, remaining(t, db.Pool), 3, "nothing deleted when the archive failed")

	var archived []string
	_, err = store.Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day, Batch: 2, Archive: func(rows []mirror.Row) error {
		for _, r := range rows {
			// Another connection still finds the row: not deleted yet.
			_, err := store.Get(ctx, r.ID)
			require.NoError(t, err)
			archived = append(archived, r.ID)
		}
		return nil
	}})
	require.NoError(t, err)
	slices.Sort(archived)
	require.Equal(t, []string{"p-1", "p-2", "p-3"}, archived)
	require.Empty(t, remaining(t, db.Pool))
	require.Equal(t, 1, countRows(t, db.Pool, "updates"), "update rows stay unless asked")
}

// threeOldOneHeld seeds three old sent reminders, p-1 to p-3, and runs
// hold in a transaction left open until the test ends: it holds a lock on
// something of p-2's.
func threeOldOneHeld(t *testing.T, db testenv.DB, hold string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	seedAged(t, db.Pool, old("p-1", "u1", "sent"), old("p-2", "u1", "sent"), old("p-3", "u1", "sent"))
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, hold)
	require.NoError(t, err)
	return tx
}

// A reminder another transaction holds (here, one appending an event to
// it, uncommitted) is passed over, not waited for: the rest of its batch
// goes.
func TestPruneSkipsRowsOthersHold(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	tx := threeOldOneHeld(t, db, `INSERT INTO reminder_events (reminder_id, type) VALUES ('p-2', 'cancel_requested')`)

	stats, err := mirror.New(db.Pool).Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day, Batch: 10})
	require.NoError(t, err)
	require.Equal(t, []string{"p-2"}, remaining(t, db.Pool))
	require.EqualValues(t, 2, stats.Reminders)
	require.Equal(t, 1, stats.Batches, "one batch, the held row skipped within it")
	require.NoError(t, tx.Commit(ctx), "the event's writer never waited on prune")
}

// An age under the floor is refused before anything is read.
func TestPruneRefusesAnAgeUnderTheFloor(t *testing.T) {
	t.Parallel()
	_, err := mirror.New(nil).Prune(context.Background(), mirror.PruneOptions{OlderThan: 3 * day})
	require.ErrorIs(t, err, mirror.ErrPruneTooYoung)
}

// A batch that would wait on a row lock past its timeout (a delivery row
// another transaction holds) is given up and left for the next run; the
// batches after it go on.
func TestPruneLeavesABatchThatWaitsTooLong(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	threeOldOneHeld(t, db, `SELECT 1 FROM deliveries WHERE reminder_id = 'p-2' FOR UPDATE`)

	stats, err := mirror.New(db.Pool).Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day, Batch: 1})
	require.NoError(t, err)
	require.Equal(t, []string{"p-2"}, remaining(t, db.Pool))
	require.EqualValues(t, 2, stats.Reminders)
	require.EqualValues(t, 1, stats.Skipped)
	require.EqualValues(t, 4, stats.Events, "the given-up batch's deletes are not counted")
}

// A reminder the provider reported on goes with its event ids and its
// escalation once started; one whose escalation is still owed stays.
func TestPruneTakesProviderOutcomesAlong(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	seedAged(t, db.Pool, old("p-delivered", "u1", "delivered"), old("p-bounced", "u1", "undeliverable"),
		old("k-owed", "u1", "undeliverable"), old("k-escalating", "u1", "undeliverable"))
	_, err := db.Pool.Exec(ctx, `
INSERT INTO provider_events (event_id, reminder_id, received_at)
SELECT 'ev-' || id, id, now() - interval '100 days' FROM reminders;
INSERT INTO outcome_escalations (reminder_id, reason, due_at, created_at, started_at)
VALUES ('p-bounced', 'undeliverable', now() - interval '100 days', now() - interval '100 days', now() - interval '100 days'),
       ('k-owed', 'undeliverable', now() - interval '100 days', now() - interval '100 days', NULL),
       ('k-escalating', 'delivery_deferred', now() - interval '1 day', now() - interval '100 days', now() - interval '1 day')`)
	require.NoError(t, err)
	stats, err := mirror.New(db.Pool).Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day})
	require.NoError(t, err)
	require.EqualValues(t, 2, stats.Reminders)
	require.Equal(t, map[reminder.State]int64{reminder.Delivered: 1, reminder.Undeliverable: 1}, stats.ByState)
	require.Equal(t, []string{"k-escalating", "k-owed"}, remaining(t, db.Pool),
		"an escalation still owed, or started within the age, keeps its reminder")
	require.Equal(t, 2, countRows(t, db.Pool, "provider_events"))
	require.Equal(t, 2, countRows(t, db.Pool, "outcome_escalations"))
}

// A reminder goes with its status events once they were delivered or
// given up, and its place in the change feed; one whose event still waits
// for the tracker's endpoint stays until that event is done with.
func TestPruneTakesDeliveredStatusEventsAlong(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	store := mirror.New(db.Pool)
	require.NoError(t, store.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{
		{Name: "tracker", Events: reminder.StatusTypes, URL: "https://tracker.example/status"}}))
	seedAged(t, db.Pool, old("p-told", "u1", "sent"), old("p-given-up", "u1", "delivered"), old("k-owed", "u1", "sent"))
	_, err := db.Pool.Exec(ctx, `
UPDATE status_outbox SET status = 'delivered' WHERE reminder_id = 'p-told';
UPDATE status_outbox SET status = 'given_up' WHERE reminder_id = 'p-given-up';
UPDATE status_outbox SET status = 'delivered' WHERE reminder_id = 'k-owed' AND seq = 1`)
	require.NoError(t, err)
	require.Equal(t, 6, countRows(t, db.Pool, "status_outbox"), "two events each")
	require.Equal(t, 3, countRows(t, db.Pool, "reminder_changes"))

	dry, err := store.Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day, DryRun: true})
	require.NoError(t, err)
	require.EqualValues(t, 4, dry.StatusEvents, "a dry run counts them")
	stats, err := store.Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day})
	require.NoError(t, err)
	require.EqualValues(t, 2, stats.Reminders)
	require.EqualValues(t, 4, stats.StatusEvents)
	require.Equal(t, []string{"k-owed"}, remaining(t, db.Pool), "an event still owed keeps its reminder")
	require.Equal(t, 2, countRows(t, db.Pool, "status_outbox"))
	require.Equal(t, 1, countRows(t, db.Pool, "reminder_changes"), "places in the feed go with their reminders")

	_, err = db.Pool.Exec(ctx, `UPDATE status_outbox SET status = 'given_up' WHERE status = 'pending'`)
	require.NoError(t, err)
	stats, err = store.Prune(ctx, mirror.PruneOptions{OlderThan: 90 * day})
	require.NoError(t, err)
	require.EqualValues(t, 1, stats.Reminders, "once given up, it goes")
	require.Zero(t, countRows(t, db.Pool, "status_outbox"))
}
