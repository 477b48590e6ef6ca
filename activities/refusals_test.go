package activities_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// A reminder whose row is finished is never sent: not when cancelled, not
// when expired, not when sent under another key. Nothing is claimed.
func TestNotifyRefusesAFinishedReminder(t *testing.T) {
	t.Parallel()
	for _, state := range []reminder.State{reminder.Cancelled, reminder.Expired, reminder.Failed, reminder.Suppressed, reminder.Sent} {
		t.Run(string(state), func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			in := f.schedule(t, reminder.Email)
			_, err := f.db.Pool.Exec(context.Background(), `UPDATE reminders SET state = $1, delivery_key = 'another-key'`, string(state))
			require.NoError(t, err)

			_, err = f.notify(t, in)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, activities.ErrTypeReminderFinished, appErr.Type())
			require.True(t, appErr.NonRetryable())
			var got reminder.State
			require.NoError(t, appErr.Details(&got))
			require.Equal(t, state, got)
			require.Zero(t, f.mail.Requests(), "nothing sent")
			var claims int
			require.NoError(t, f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM deliveries`).Scan(&claims))
			require.Zero(t, claims, "nothing claimed")
		})
	}
}

// A reminder's own delivery under a key its pending row no longer holds is
// refused: the mirror moved the reminder (a window move while its workflow
// was not marked started) and the workflow still asks for its old due time.
// Nothing is claimed or sent at the old time. A workflow that follows a
// move hears where the row moved to (ErrTypeReminderMoved, after the
// row's state); one of a release before hears the pending state as a
// finished reminder's refusal, which it knows. Under the row's key it goes.
func TestAKeyThePendingRowNoLongerHoldsIsNotSent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	in := f.schedule(t, reminder.Email)
	moved := reminder.NormalizeTime(in.DueAt.Add(time.Hour))
	key := reminder.DeliveryKey(in.ReminderID, in.SubscriberID, moved)
	require.NoError(t, f.mirror.Reschedule(ctx, in.ReminderID, moved, key, nil))

	_, err := f.notify(t, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "the old key is refused")
	require.Equal(t, activities.ErrTypeReminderFinished, appErr.Type(), "a workflow of a release before hears what it knows")
	var got reminder.State
	require.NoError(t, appErr.Details(&got))
	require.Equal(t, reminder.Scheduled, got)

	in.FollowsMoves = true
	_, err = f.notify(t, in)
	require.ErrorAs(t, err, &appErr, "the old key is refused")
	require.Equal(t, activities.ErrTypeReminderMoved, appErr.Type())
	require.True(t, appErr.NonRetryable())
	var to activities.MovedTo
	require.NoError(t, appErr.Details(&got, &to))
	require.Equal(t, reminder.Scheduled, got, "the state first, as a finished reminder's refusal has it")
	require.True(t, to.DueAt.Equal(moved), "%s", to.DueAt)
	require.Equal(t, key, to.DeliveryKey)

	require.Zero(t, f.mail.Requests(), "nothing sent at the old time")
	var claims int
	require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM deliveries`).Scan(&claims))
	require.Zero(t, claims, "nothing claimed")

	in.DueAt = moved
	_, err = f.notify(t, in)
	require.NoError(t, err)
	require.Len(t, f.mail.Mails(), 1)
	require.Equal(t, key, f.mail.Mails()[0].CustomArgs["delivery_key"])
}

// A pending reminder whose address its tenant's subscriber opted out of
// is never sent: the notify refuses it, nothing is claimed, and the
// mirror says suppressed, with the event that records it.
func TestNotifyRefusesASuppressedAddressAndEndsItSuppressed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	_, err := f.db.Pool.Exec(context.Background(), `
INSERT INTO suppressions (tenant, address_sha256, reason, reminder_id)
SELECT tenant, suppression_address(upper(email)), 'unsubscribe', 'an/earlier/reminder' FROM reminders`)
	require.NoError(t, err)

	_, err = f.notify(t, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrTypeReminderFinished, appErr.Type())
	var got reminder.State
	require.NoError(t, appErr.Details(&got))
	require.Equal(t, reminder.Suppressed, got)
	require.Zero(t, f.mail.Requests(), "nothing sent")
	var state string
	var claims, events int
	require.NoError(t, f.db.Pool.QueryRow(context.Background(), `
SELECT r.state, (SELECT count(*) FROM deliveries), (SELECT count(*) FROM reminder_events e WHERE e.reminder_id = r.id AND e.type = 'suppressed')
  FROM reminders r`).Scan(&state, &claims, &events))
	require.Equal(t, "suppressed", state)
	require.Zero(t, claims, "nothing claimed")
	require.Equal(t, 1, events)
}

// A cancellation notice carries the due time the reminder was sent for,
// not the zero time its (due-less) input has.
func TestCancellationNoticeCarriesTheRealDueTime(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Webhook)
	_, err := f.notify(t, in)
	require.NoError(t, err)
	_, err = f.notify(t, activities.NotifyInput{
		Purpose: reminder.PurposeCancellation, ReminderID: in.ReminderID, SubscriberID: in.SubscriberID,
	})
	require.NoError(t, err)

	hooks := f.hooks.Hooks()
	require.Len(t, hooks, 2)
	var ev activities.WebhookEvent
	require.NoError(t, json.Unmarshal(hooks[1].Body, &ev))
	require.Equal(t, activities.EventCancelled, ev.Type)
	require.True(t, in.DueAt.Equal(ev.Data.DueAt), "due_at %s, want %s", ev.Data.DueAt, in.DueAt)
	require.True(t, in.DueAt.Equal(ev.Timestamp))
}

// A retryable refusal releases the claim, so the next attempt takes it at
// once; a claim whose holder said nothing is held until its lease, which is
// counted on the database's clock.
func TestClaimIsReleasedWhenNothingWasSent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	f.mail.Fail(sink.Answer{Status: 503})
	_, err := f.notify(t, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.False(t, appErr.NonRetryable())

	var released bool
	require.NoError(t, f.db.Pool.QueryRow(context.Background(),
		`SELECT lease_until <= now() FROM deliveries`).Scan(&released))
	require.True(t, released, "the refused attempt gave its claim up")
	res, err := f.notify(t, in)
	require.NoError(t, err, "the next attempt takes the key at once")
	require.Equal(t, 2, f.delivery(t, res.DeliveryKey).Attempts)
	require.Len(t, f.mail.Mails(), 1)
}

func TestLeaseIsCountedOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	key := reminder.DeliveryKey(in.ReminderID, in.SubscriberID, in.DueAt)
	_, err := f.mirror.ClaimDelivery(context.Background(), mirror.Claim{
		Key: key, ReminderID: in.ReminderID, Purpose: reminder.PurposeReminder, Owner: "o", LeaseFor: 42 * time.Second,
	})
	require.NoError(t, err)
	var left float64
	require.NoError(t, f.db.Pool.QueryRow(context.Background(),
		`SELECT extract(epoch FROM lease_until - now()) FROM deliveries`).Scan(&left))
	require.InDelta(t, 42, left, 2)
}

// An attempt cancelled between its claim and the provider call, here while
// it waits seconds for its slot of the rate cap, sends nothing then or after
// the wait, and gives its claim up, so the next attempt takes the key at
// once. (The test cancelled before the activity began, never after the
// claim.)
func TestCancelledAttemptSendsNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.acts.SendsPerSecond = 0.25 // a slot every 4 s
	in := f.schedule(t, reminder.Email)
	slots := testenv.HoldSendRate(t, f.db)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.runNotify(ctx, in)
		done <- err
	}()
	require.Eventually(t, func() bool { return f.status(in.Key()) == "sending" }, 30*time.Second, 10*time.Millisecond,
		"the attempt claims the key, then asks for its slot")
	slots.Release(t, 3*time.Second)
	require.Zero(t, f.mail.Requests())
	cancel()
	err := <-done
	require.ErrorContains(t, err, "canceled")
	require.Zero(t, f.mail.Requests(), "nothing sent after the wait")
	require.Equal(t, "released", f.status(in.Key()), "nothing was sent: the claim is given up")

	f.acts.SendsPerSecond = 0
	_, err = f.notify(t, in)
	require.NoError(t, err, "the next attempt takes the key at once")
	require.Len(t, f.mail.Mails(), 1)
}

// runNotify runs the activity with ctx as its worker's background context,
// from any goroutine (it asserts nothing).
func (f *fixture) runNotify(ctx context.Context, in activities.NotifyInput) (activities.NotifyResult, error) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivity(f.acts)
	val, err := env.ExecuteActivity(f.acts.Notify, in)
	var res activities.NotifyResult
	if err == nil {
		err = val.Get(&res)
	}
	return res, err
}

// status is a delivery key's claim status ("" when it has none), from any
// goroutine.
func (f *fixture) status(key string) string {
	var status string
	_ = f.db.Pool.QueryRow(context.Background(), `SELECT status FROM deliveries WHERE delivery_key = $1`, key).Scan(&status)
	return status
}

// A webhook whose host resolves somewhere the guard refuses at connection
// time fails with one fixed reason, the address left out: that reason is
// what the reminder's trail, the tracker and the escalation contact read.
// Nothing was sent, so the claim is released for the retry.
func TestAGuardRefusalNamesNoAddress(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.acts.Webhook = webhook.NewSender(webhook.Options{Guard: webhook.Guard{}}) // loopback refused
	in := f.schedule(t, reminder.Webhook)
	_, err := f.notify(t, in)
	require.Error(t, err)
	require.Contains(t, err.Error(), webhook.RefusedDestination)
	require.NotContains(t, err.Error(), "127.0.0.1", "the internal address is the operator's to know")
	require.Zero(t, f.hooks.Requests(), "nothing reached the receiver")
	require.Equal(t, "released", f.delivery(t, in.Key()).Status)
}

// A webhook whose host does not resolve fails with a fixed reason: that
// error is what the failed event's reason becomes once the retries are
// spent, what the tenant reads through the API and what the escalation
// mail says, so it names neither the customer's host nor the resolver the
// worker asked. Nothing was sent, so the claim is released for the retry.
func TestAWebhookHostThatDoesNotResolveNamesNoHost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Webhook)
	const host = "hooks.customer-42.invalid"
	_, err := f.db.Pool.Exec(context.Background(), `UPDATE reminders SET webhook_url = $1`, "https://"+host+"/in")
	require.NoError(t, err)

	_, err = f.notify(t, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, "webhook receiver unreachable: "+delivery.ReasonNotResolved, appErr.Message())
	for _, leak := range []string{host, "lookup", ":53"} {
		require.NotContains(t, appErr.Error(), leak)
	}
	require.Zero(t, f.hooks.Requests(), "nothing reached the receiver")
	require.Equal(t, "released", f.delivery(t, in.Key()).Status)
}
