package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// stored is a reminder's id and its delivery key.
type stored struct{ ID, DeliveryKey string }

// pending stores one email reminder, due, and claims its delivery: a send
// in flight.
func pending(t *testing.T, store *mirror.Store, shipment string) stored {
	t.Helper()
	s := insert(t, store, update(shipment, time.Now().Add(-time.Minute)), time.Now().Add(-time.Hour)).Reminders[0]
	r := stored{ID: s.Requested.ID, DeliveryKey: s.DeliveryKey}
	res, err := store.ClaimDelivery(context.Background(), mirror.Claim{
		Key: r.DeliveryKey, ReminderID: r.ID, Purpose: reminder.PurposeReminder, Owner: "test", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, mirror.Claimed, res.Verdict)
	return r
}

// sentReminder stores one email reminder and records its send.
func sentReminder(t *testing.T, store *mirror.Store, shipment string) stored {
	t.Helper()
	r := pending(t, store, shipment)
	require.NoError(t, ignoreDelivered(store.RecordSent(context.Background(), r.DeliveryKey, "msg-1", nil)))
	return r
}

type outcomeState struct {
	State                      reminder.State
	Outcome                    *string
	DeliveredAt, Undeliverable *time.Time
	Awaiting                   *time.Time
}

func readOutcome(t *testing.T, db testenv.DB, id string) outcomeState {
	t.Helper()
	var o outcomeState
	var state string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
SELECT state, provider_outcome, delivered_at, undeliverable_at, awaiting_outcome_since FROM reminders WHERE id = $1`, id).
		Scan(&state, &o.Outcome, &o.DeliveredAt, &o.Undeliverable, &o.Awaiting))
	o.State = reminder.State(state)
	return o
}

func owed(t *testing.T, db testenv.DB, id string) map[string]string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
SELECT reason, CASE WHEN settled_at IS NOT NULL THEN 'settled' WHEN started_at IS NOT NULL THEN 'started' ELSE 'owed' END
  FROM outcome_escalations WHERE reminder_id = $1`, id)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var reason, status string
		require.NoError(t, rows.Scan(&reason, &status))
		out[reason] = status
	}
	require.NoError(t, rows.Err())
	return out
}

func event(id, key string, o reminder.ProviderOutcome, at time.Time) mirror.ProviderEvent {
	return mirror.ProviderEvent{ID: id, DeliveryKey: key, Outcome: o, At: at.Truncate(time.Second)}
}

func TestDeliveredEventDeliversASentEmail(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	r := sentReminder(t, store, "SHP-D")
	require.NotNil(t, readOutcome(t, db, r.ID).Awaiting, "an accepted email awaits its outcome")

	now := time.Now()
	res, err := store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("e1", r.DeliveryKey, reminder.OutcomeProcessed, now),
		event("e2", r.DeliveryKey, reminder.OutcomeDelivered, now),
	}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 2, mirror.Count(res.Applied))
	require.Len(t, res.Delivered, 1)
	got := readOutcome(t, db, r.ID)
	require.Equal(t, reminder.Delivered, got.State)
	require.Equal(t, "delivered", *got.Outcome, "processed and delivered in the same second: delivered is the later")
	require.Nil(t, got.Awaiting)

	// A late processed (older timestamp) does not overwrite the outcome.
	_, err = store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("e0", r.DeliveryKey, reminder.OutcomeProcessed, now.Add(-time.Minute))}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, "delivered", *readOutcome(t, db, r.ID).Outcome)
}

func TestBounceAfterDeliveredIsUndeliverableAndOwesOneEscalation(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	r := sentReminder(t, store, "SHP-B")
	now := time.Now()
	_, err := store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("e1", r.DeliveryKey, reminder.OutcomeDelivered, now)}, time.Hour)
	require.NoError(t, err)
	res, err := store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("e2", r.DeliveryKey, reminder.OutcomeBounce, now.Add(time.Second)),
		event("e3", r.DeliveryKey, reminder.OutcomeDropped, now.Add(2*time.Second)),
	}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 1, res.Escalations, "a bounce and a drop owe one escalation")
	require.Equal(t, reminder.Undeliverable, readOutcome(t, db, r.ID).State)
	// undeliverable is final: a late delivered does not undo it.
	_, err = store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("e4", r.DeliveryKey, reminder.OutcomeDelivered, now.Add(3*time.Second))}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, reminder.Undeliverable, readOutcome(t, db, r.ID).State)
	require.Equal(t, map[string]string{reminder.ReasonUndeliverable: "owed"}, owed(t, db, r.ID))
	// A cancel now owes no notice: it would go to the address that bounced.
	delivered, err := store.WasDelivered(context.Background(), r.ID)
	require.NoError(t, err)
	require.False(t, delivered)
}

// SendGrid can report a mail before its send is recorded (a record retried
// after a blip): the outcome waits on the row, and recording the send takes
// it, so the reminder never stays sent for good.
func TestOutcomeReportedBeforeTheSendIsRecorded(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	for _, tc := range []struct {
		outcome reminder.ProviderOutcome
		want    reminder.State
	}{
		{reminder.OutcomeDelivered, reminder.Delivered},
		{reminder.OutcomeBounce, reminder.Undeliverable},
	} {
		r := pending(t, store, "SHP-early-"+string(tc.outcome))
		key := r.DeliveryKey
		_, err := store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
			event("early-"+string(tc.outcome), key, tc.outcome, time.Now())}, time.Hour)
		require.NoError(t, err)
		require.Equal(t, reminder.Scheduled, readOutcome(t, db, r.ID).State, "the workflow's record moves the state")
		delivered, err := store.RecordSent(context.Background(), key, "msg-1", nil)
		require.NoError(t, err)
		// The record is where this delivery meets the SLO's histogram.
		require.Equal(t, tc.want == reminder.Delivered, len(delivered) == 1)
		got := readOutcome(t, db, r.ID)
		require.Equal(t, tc.want, got.State)
		require.Nil(t, got.Awaiting, "a final outcome already came")
	}
}

func TestDeferralOwesAnEscalationUnlessDeliveredFirst(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	late, prompt := sentReminder(t, store, "SHP-late"), sentReminder(t, store, "SHP-prompt")
	now := time.Now()
	_, err := store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("d1", late.DeliveryKey, reminder.OutcomeDeferred, now),
		event("d2", prompt.DeliveryKey, reminder.OutcomeDeferred, now),
		event("d3", late.DeliveryKey, reminder.OutcomeDeferred, now.Add(time.Second)),
	}, time.Hour)
	require.NoError(t, err)
	_, err = store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("d4", prompt.DeliveryKey, reminder.OutcomeDelivered, now.Add(2*time.Second))}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, map[string]string{reminder.ReasonDeliveryDeferred: "owed"}, owed(t, db, late.ID))
	require.Equal(t, map[string]string{reminder.ReasonDeliveryDeferred: "settled"}, owed(t, db, prompt.ID))
	require.Equal(t, reminder.Sent, readOutcome(t, db, late.ID).State, "deferred is not a final outcome")

	next, ok, err := store.NextEscalationDue(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	require.WithinDuration(t, now.Add(time.Hour), next, 2*time.Second, "due an hour after the first deferral")
	n, err := store.StartDueEscalations(context.Background(), 10, func(context.Context, mirror.OwedEscalation) error {
		return fmt.Errorf("nothing is due yet")
	})
	require.NoError(t, err)
	require.Zero(t, n)
}

// Two servers taking the same batch at once (SendGrid retrying while the
// first is still answered) apply it once.
func TestConcurrentBatchesApplyOnce(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	var batch []mirror.ProviderEvent
	now := time.Now()
	for i := range 20 {
		r := sentReminder(t, store, fmt.Sprintf("SHP-c%d", i))
		batch = append(batch,
			event(fmt.Sprintf("c%d-p", i), r.DeliveryKey, reminder.OutcomeProcessed, now),
			event(fmt.Sprintf("c%d-b", i), r.DeliveryKey, reminder.OutcomeBounce, now))
	}
	var wg sync.WaitGroup
	results := make([]mirror.AppliedEvents, 4)
	for i := range results {
		wg.Go(func() {
			var err error
			results[i], err = store.ApplyProviderEvents(context.Background(), batch, time.Hour)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	applied, escalations := 0, 0
	for _, r := range results {
		applied += mirror.Count(r.Applied)
		escalations += r.Escalations
	}
	require.Equal(t, len(batch), applied, "each event applied by exactly one of them")
	require.Equal(t, 20, escalations)
	var events int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM reminder_events WHERE type LIKE 'provider_%'`).Scan(&events))
	require.Equal(t, len(batch), events)
}

func TestEscalationsStartOnceAndSkipCancelledReminders(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	bounced, cancelled := sentReminder(t, store, "SHP-e1"), sentReminder(t, store, "SHP-e2")
	_, err := store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("x1", bounced.DeliveryKey, reminder.OutcomeBounce, time.Now()),
		event("x2", cancelled.DeliveryKey, reminder.OutcomeBounce, time.Now()),
	}, time.Hour)
	require.NoError(t, err)
	_, err = db.Pool.Exec(context.Background(), `UPDATE reminders SET state = 'cancelled' WHERE id = $1`, cancelled.ID)
	require.NoError(t, err)

	fail := true
	var started []string
	start := func(_ context.Context, o mirror.OwedEscalation) error {
		if fail {
			return fmt.Errorf("temporal is away")
		}
		started = append(started, o.ReminderID+" "+o.Reason)
		return nil
	}
	n, err := store.StartDueEscalations(context.Background(), 10, start)
	require.ErrorContains(t, err, "temporal is away")
	require.Zero(t, n)
	require.Equal(t, map[string]string{reminder.ReasonUndeliverable: "owed"}, owed(t, db, bounced.ID), "a failed start is owed still")
	require.Equal(t, map[string]string{reminder.ReasonUndeliverable: "settled"}, owed(t, db, cancelled.ID))

	next, ok, err := store.NextEscalationDue(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, time.Until(next), 30*time.Second, "a failed start waits a minute, behind the others")
	n, err = store.StartDueEscalations(context.Background(), 10, start)
	require.NoError(t, err)
	require.Zero(t, n, "not due yet")

	fail = false
	_, err = db.Pool.Exec(context.Background(), `UPDATE outcome_escalations SET due_at = now() WHERE reminder_id = $1`, bounced.ID)
	require.NoError(t, err) // the minute has passed
	n, err = store.StartDueEscalations(context.Background(), 10, start)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = store.StartDueEscalations(context.Background(), 10, start)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, []string{bounced.ID + " undeliverable"}, started)
}

func TestUnknownKeysAndOtherDeliveriesChangeNoState(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	r := sentReminder(t, store, "SHP-u")
	notice := reminder.EscalationKey(r.ID, "undeliverable")
	res, err := store.ClaimDelivery(context.Background(), mirror.Claim{
		Key: notice, ReminderID: r.ID, Purpose: reminder.PurposeEscalation, Owner: "test", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, mirror.Claimed, res.Verdict)
	applied, err := store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("u1", unknownKey(r.DeliveryKey), reminder.OutcomeBounce, time.Now()),
		event("u2", notice, reminder.OutcomeBounce, time.Now()),
	}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 1, mirror.Count(applied.Unknown))
	require.Equal(t, 1, mirror.Count(applied.Applied))
	require.Zero(t, applied.Escalations, "an escalation's own bounce does not escalate")
	require.Equal(t, reminder.Sent, readOutcome(t, db, r.ID).State)
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM provider_events`).Scan(&n))
	require.Equal(t, 1, n, "the unknown key's event is not kept")
}

// unknownKey is a key of the delivery key's form that is not it.
func unknownKey(key string) string {
	if strings.HasPrefix(key, "00") {
		return "ff" + key[2:]
	}
	return "00" + key[2:]
}

func ignoreDelivered(_ []mirror.DeliveredReminder, err error) error { return err }

// A batch never waits on an escalation pass that is starting a workflow
// (Temporal may be slow): the deferral it would settle is passed over, and
// the notice, finding the reminder delivered, sends nothing.
func TestABatchNeverWaitsOnAnEscalationBeingStarted(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	r := sentReminder(t, store, "SHP-held")
	now := time.Now()
	_, err := store.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		event("h-deferred", r.DeliveryKey, reminder.OutcomeDeferred, now.Add(-time.Minute))}, time.Second)
	require.NoError(t, err)
	inStart, release := make(chan struct{}), make(chan struct{})
	passDone := make(chan error, 1)
	go func() {
		_, err := store.StartDueEscalations(context.Background(), 10, func(context.Context, mirror.OwedEscalation) error {
			close(inStart)
			<-release // Temporal answering slowly
			return nil
		})
		passDone <- err
	}()
	<-inStart
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{
		event("h-delivered", r.DeliveryKey, reminder.OutcomeDelivered, now)}, time.Second)
	close(release)
	require.NoError(t, err, "the batch went through while the pass held its row")
	require.NoError(t, <-passDone)
	require.Equal(t, reminder.Delivered, readOutcome(t, db, r.ID).State)

	// The escalation the pass started runs its notice: the reminder is
	// delivered, so it sends nothing, though the update names a contact.
	_, err = db.Pool.Exec(context.Background(), `UPDATE updates SET escalation_email = 'lead@shipper.example'`)
	require.NoError(t, err)
	mail, err := sink.StartMail("", "SG.key")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mail.Close() })
	acts := &activities.Activities{Mirror: store, Email: email.NewSender(email.Options{APIKey: "SG.key", BaseURL: mail.URL(),
		FromEmail: "reminders@shipnotify.example"})}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	val, err := env.ExecuteActivity(acts.Notify, activities.NotifyInput{Purpose: reminder.PurposeEscalation, ReminderID: r.ID,
		SubscriberID: "sub-a", Reason: reminder.ReasonDeliveryDeferred})
	require.NoError(t, err)
	var res activities.NotifyResult
	require.NoError(t, val.Get(&res))
	require.True(t, res.Skipped, "the notice sends nothing: %+v", res)
	require.Zero(t, mail.Requests())
}

// Two batches sharing event ids in opposite orders (SendGrid retrying
// while reordering) take their locks in one order: no deadlock.
func TestBatchesSharingIDsInOppositeOrdersDoNotDeadlock(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	var rs []stored
	for i := range 20 {
		rs = append(rs, sentReminder(t, store, fmt.Sprintf("SHP-order-%d", i)))
	}
	for round := range 5 {
		var forward []mirror.ProviderEvent
		for i, r := range rs {
			for j := range 20 {
				forward = append(forward, event(fmt.Sprintf("o%d-%d-%d", round, i, j), r.DeliveryKey, reminder.OutcomeProcessed, time.Now()))
			}
		}
		backward := slices.Clone(forward)
		slices.Reverse(backward)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k, b := range [][]mirror.ProviderEvent{forward, backward} {
			wg.Go(func() { _, errs[k] = store.ApplyProviderEvents(context.Background(), b, time.Hour) })
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
	}
}
