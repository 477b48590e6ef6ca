package activities_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// slowMailAPI makes the fixture's mail API take every mail at once and
// answer after answerAfter, while our client gives up after giveUp: each
// call's outcome is unknown to the activity, as with a slow SendGrid.
func (f *fixture) slowMailAPI(answerAfter, giveUp time.Duration) {
	f.mail.SetLatency(answerAfter)
	f.acts.Email = email.NewSender(email.Options{
		APIKey: "SG.test-key", BaseURL: f.mail.URL(), FromEmail: "reminders@shipnotify.example", Timeout: giveUp,
	})
}

func errType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// waitMails waits until the mail sink has taken n mails.
func (f *fixture) waitMails(t *testing.T, n int) []sink.Mail {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mails, err := f.mail.Wait(ctx, func(m []sink.Mail) bool { return len(m) >= n && f.mail.InFlight() == 0 })
	require.NoError(t, err)
	return mails
}

// unconfirmedSend schedules an email reminder whose first notify gets no
// answer within the client's timeout from a mail API that takes it anyway,
// waits until the mail is taken, and returns the reminder and the mail.
func (f *fixture) unconfirmedSend(t *testing.T, evidenceWait time.Duration) (activities.NotifyInput, sink.Mail) {
	t.Helper()
	f.slowMailAPI(time.Second, 200*time.Millisecond)
	f.acts.EvidenceWait = evidenceWait
	in := f.schedule(t, reminder.Email)
	_, err := f.notify(t, in)
	require.Equal(t, activities.ErrTypeSendUnconfirmed, errType(err), "got %v", err)
	return in, f.waitMails(t, 1)[0]
}

// A call cut after its request may have reached the provider is a send:
// the attempt keeps its claim, marked maybe sent with why, and the next
// attempt sends nothing while it waits for the provider's evidence. (Before,
// the claim was released as "nothing was sent" and the retry sent again:
// every slow answer became a duplicate.)
func TestAnUnansweredSendKeepsItsClaim(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in, _ := f.unconfirmedSend(t, time.Minute)
	require.Equal(t, "maybe_sent", f.delivery(t, in.Key()).Status, "the claim is kept")

	_, err := f.notify(t, in)
	require.Equal(t, activities.ErrTypeSendUnconfirmed, errType(err), "the retry waits for evidence: %v", err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.False(t, appErr.NonRetryable())
	require.Positive(t, appErr.NextRetryDelay(), "it says when to look again")
	require.Equal(t, 1, f.mail.Requests(), "nothing sent again")
	require.Equal(t, []string{"scheduled", "send_unconfirmed"}, f.eventTypes(t, in.ReminderID))
}

// The provider's own event for the key (SendGrid's processed, delivered...)
// settles an unconfirmed send: the reminder is recorded sent under the
// provider's message id, and nothing is sent again.
func TestAProviderEventSettlesAnUnconfirmedSend(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in, m := f.unconfirmedSend(t, time.Minute)
	_, err := f.mirror.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{{
		ID: "ev-1", DeliveryKey: in.Key(), Outcome: reminder.OutcomeProcessed, At: time.Now().UTC().Truncate(time.Second),
		MessageID: m.MessageID,
	}}, time.Hour)
	require.NoError(t, err)

	res, err := f.notify(t, in)
	require.NoError(t, err)
	require.True(t, res.AlreadySent, "nothing sent again")
	require.Equal(t, m.MessageID, res.ProviderMessageID)
	require.Equal(t, 1, f.mail.Requests())
	d := f.delivery(t, in.Key())
	require.Equal(t, "sent", d.Status)
	require.Equal(t, m.MessageID, d.ProviderMessageID)
	row, err := f.mirror.Get(context.Background(), in.ReminderID)
	require.NoError(t, err)
	require.Equal(t, reminder.Sent, row.State)
	require.Equal(t, []string{"scheduled", "send_unconfirmed", "provider_processed", "sent"}, f.eventTypes(t, in.ReminderID))
	events, err := f.mirror.Events(context.Background(), in.ReminderID)
	require.NoError(t, err)
	require.Equal(t, "the provider's event for the key", events[3].Detail["settled_by"])
}

// With no event for the key within the wait (no Event Webhook, or the
// provider never had it), the key is sent again, under the same key, and
// the record says it may have gone out twice: the documented window.
func TestWithoutEvidenceAnUnconfirmedSendGoesAgainAfterTheWait(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in, _ := f.unconfirmedSend(t, 2*time.Second)
	unconfirmedAt := time.Now()

	f.mail.SetLatency(0)
	require.Eventually(t, func() bool {
		_, err := f.notify(t, in)
		return err == nil
	}, 20*time.Second, 200*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(unconfirmedAt), time.Second, "not before the wait")
	mails := f.waitMails(t, 2)
	require.Len(t, mails, 2)
	require.Equal(t, mails[0].CustomArgs["delivery_key"], mails[1].CustomArgs["delivery_key"], "the same key, which a receiver can drop")
	events, err := f.mirror.Events(context.Background(), in.ReminderID)
	require.NoError(t, err)
	last := events[len(events)-1]
	require.Equal(t, "sent", last.Type)
	require.NotEmpty(t, last.Detail["maybe_sent_before"], "the record says it may have gone twice")
}

// lapsedClaim leaves in's key claimed by an attempt that died mid-call:
// 'sending', its lease lapsed, no record.
func (f *fixture) lapsedClaim(t *testing.T, in activities.NotifyInput) {
	t.Helper()
	_, err := f.db.Pool.Exec(context.Background(), `
INSERT INTO deliveries (delivery_key, reminder_id, purpose, status, claimed_by, lease_until)
VALUES ($1, $2, 'reminder', 'sending', 'a-worker-that-died', now() - interval '1 second')`, in.Key(), in.ReminderID)
	require.NoError(t, err)
}

// A claim whose holder died mid-call (its lease lapsed with no record, no
// release) may have sent: it waits for evidence like an unconfirmed send,
// and the provider's event settles it.
func TestALapsedClaimIsAnUnconfirmedSend(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.acts.EvidenceWait = time.Minute
	in := f.schedule(t, reminder.Email)
	f.lapsedClaim(t, in)

	_, err := f.notify(t, in)
	require.Equal(t, activities.ErrTypeSendUnconfirmed, errType(err), "got %v", err)
	require.Zero(t, f.mail.Requests(), "nothing sent while it may have been")
	require.Equal(t, "maybe_sent", f.delivery(t, in.Key()).Status)

	_, err = f.mirror.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{{
		ID: "ev-lapsed", DeliveryKey: in.Key(), Outcome: reminder.OutcomeDelivered, At: time.Now().UTC().Truncate(time.Second),
		MessageID: "msg-of-the-dead-worker",
	}}, time.Hour)
	require.NoError(t, err)
	res, err := f.notify(t, in)
	require.NoError(t, err)
	require.Equal(t, "msg-of-the-dead-worker", res.ProviderMessageID)
	require.Zero(t, f.mail.Requests())
	row, err := f.mirror.Get(context.Background(), in.ReminderID)
	require.NoError(t, err)
	require.Equal(t, reminder.Delivered, row.State, "the delivered event came before the record")
}

// A webhook receiver's answer is the only evidence there is, and Standard
// Webhooks receivers drop a repeated webhook-id: an unconfirmed webhook is
// sent again at the next attempt, under the same id.
func TestAnUnconfirmedWebhookGoesAgainUnderTheSameID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.acts.EvidenceWait = time.Hour
	var calls atomic.Int32
	var mu sync.Mutex
	var ids []string
	release := make(chan struct{})
	slowFirst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		mu.Unlock()
		if calls.Add(1) == 1 {
			<-release // no answer before our client gives up
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(slowFirst.Close)
	t.Cleanup(func() { close(release) })
	f.acts.Webhook = webhook.NewSender(webhook.Options{Guard: webhook.Guard{AllowLoopback: true}, Timeout: 300 * time.Millisecond})
	in := f.schedule(t, reminder.Webhook)
	_, err := f.db.Pool.Exec(context.Background(), `UPDATE reminders SET webhook_url = $2 WHERE id = $1`, in.ReminderID, slowFirst.URL+"/in")
	require.NoError(t, err)

	_, err = f.notify(t, in)
	require.Equal(t, activities.ErrTypeSendUnconfirmed, errType(err), "got %v", err)
	require.Equal(t, "maybe_sent", f.delivery(t, in.Key()).Status)
	_, err = f.notify(t, in)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{in.Key(), in.Key()}, ids, "sent again under the same webhook-id")
}

// A "deferred too long" escalation reads its reminder as committed: while a
// batch of provider events that delivers it is applying (it holds the row),
// the escalation waits for it, then finds the reminder delivered and sends
// nothing. (It read the moment before the batch committed, "sent", and
// escalated a delivered reminder.)
func TestADeferredEscalationWaitsForTheBatchThatDeliveredIt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	in := f.schedule(t, reminder.Email)
	_, err := f.notify(t, in)
	require.NoError(t, err)
	_, err = f.db.Pool.Exec(ctx, `UPDATE updates SET escalation_email = 'lead@shipper.example'`)
	require.NoError(t, err)

	batch, err := f.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = batch.Rollback(ctx) }()
	_, err = batch.Exec(ctx, `UPDATE reminders SET state = 'delivered', delivered_at = now() WHERE id = $1`, in.ReminderID)
	require.NoError(t, err)

	type answer struct {
		res activities.NotifyResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := f.notify(t, activities.NotifyInput{Purpose: reminder.PurposeEscalation, ReminderID: in.ReminderID,
			SubscriberID: in.SubscriberID, Reason: "delivery_deferred"})
		done <- answer{res, err}
	}()
	require.Eventually(t, func() bool {
		waiting, err := f.db.WaitersBehind(ctx, batch, "FOR SHARE OF r")
		require.NoError(t, err)
		return waiting > 0
	}, 10*time.Second, 20*time.Millisecond, "the escalation waits for the batch holding the reminder")
	require.NoError(t, batch.Commit(ctx))
	got := <-done
	require.NoError(t, got.err)
	require.True(t, got.res.Skipped, "the reminder was delivered: nothing to escalate")
	require.Contains(t, got.res.SkipReason, "delivered")
	require.Len(t, f.mail.Mails(), 1, "the reminder alone; no escalation mail")
}

// A webhook whose holder died mid-call is sent again at once (its receiver
// deduplicates on webhook-id), and the trail says first that the dead
// attempt may have sent it, as it does for every unconfirmed send: the
// audit shows why the receiver may see the id twice. (Before, the takeover
// left the trail silent, and only the sent event's detail knew.)
func TestALapsedWebhookClaimIsOnTheTrailBeforeItGoesAgain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.acts.EvidenceWait = time.Hour
	in := f.schedule(t, reminder.Webhook)
	f.lapsedClaim(t, in)

	_, err := f.notify(t, in)
	require.NoError(t, err)
	require.Len(t, f.hooks.Hooks(), 1, "sent again at once, under the same id")
	require.Equal(t, []string{"scheduled", "send_unconfirmed", "sent", "delivered"}, f.eventTypes(t, in.ReminderID))
	events, err := f.mirror.Events(context.Background(), in.ReminderID)
	require.NoError(t, err)
	require.Equal(t, in.Key(), events[1].Detail["delivery_key"])
	require.Contains(t, events[1].Detail["reason"], "lapsed")
	require.NotEmpty(t, events[2].Detail["maybe_sent_before"])
}

// A resend whose worker died mid-call may have sent the key a second time:
// the next attempt waits for the evidence of that send, counted from when
// its claim lapsed (the latest moment it may have gone out), not from the
// first attempt's unanswered call, whose wait is long over; once that wait
// passes with no event, the key goes again and its record says since when
// it may have gone twice. (The takeover kept the first attempt's
// maybe_sent_at, and the third attempt sent at once.)
func TestAResendWhoseWorkerDiedIsWaitedForLikeTheFirstSend(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	in, _ := f.unconfirmedSend(t, activities.DefaultEvidenceWait)
	// No event came within the production wait: the resend may go.
	_, err := f.db.Pool.Exec(ctx, `
UPDATE deliveries SET maybe_sent_at = maybe_sent_at - interval '6 minutes', lease_until = lease_until - interval '6 minutes'`)
	require.NoError(t, err)
	second, err := f.mirror.ClaimDelivery(ctx, mirror.Claim{
		Key: in.Key(), ReminderID: in.ReminderID, Purpose: reminder.PurposeReminder, Owner: "attempt-2-whose-worker-dies",
		LeaseFor: time.Minute, EvidenceWait: activities.DefaultEvidenceWait,
	})
	require.NoError(t, err)
	require.Equal(t, mirror.Claimed, second.Verdict, "the resend takes the key")
	// Its worker dies mid-call, after the provider took the mail: no
	// record, no release; its lease lapses.
	_, err = f.db.Pool.Exec(ctx, `UPDATE deliveries SET lease_until = now() - interval '1 second'`)
	require.NoError(t, err)
	f.mail.SetLatency(0)
	f.acts.Email = email.NewSender(email.Options{APIKey: testenv.MailAPIKey, BaseURL: f.mail.URL(), FromEmail: "reminders@shipnotify.example"})

	for range 2 {
		_, err = f.notify(t, in)
		require.Equal(t, activities.ErrTypeSendUnconfirmed, errType(err), "the third attempt waits for the second's evidence: %v", err)
		require.Greater(t, retryDelay(t, err), time.Duration(0))
		require.Equal(t, 1, f.mail.Requests(), "nothing sent while the resend may have gone")
	}
	var sinceLapse float64
	require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - maybe_sent_at) FROM deliveries`).Scan(&sinceLapse))
	require.Less(t, sinceLapse, 60.0, "the wait counts from the resend's lapse, not from the first call")

	// No event within the wait from the lapse either: sent again.
	_, err = f.db.Pool.Exec(ctx, `
UPDATE deliveries SET maybe_sent_at = maybe_sent_at - interval '5 minutes 1 second', lease_until = lease_until - interval '5 minutes 1 second'`)
	require.NoError(t, err)
	_, err = f.notify(t, in)
	require.NoError(t, err)
	require.Equal(t, 2, f.mail.Requests())
	events, err := f.mirror.Events(ctx, in.ReminderID)
	require.NoError(t, err)
	last := events[len(events)-1]
	require.Equal(t, "sent", last.Type)
	require.NotEmpty(t, last.Detail["maybe_sent_before"])
}

// A cancel that meets a send which may have reached the provider (its call
// got no answer, or its attempt ended holding the claim without a word)
// finds a sent reminder: the row stays sent, the trail says sent (and why it
// may have gone) and then cancelled_late, the tracker hears sent, then
// cancelled, and the notice goes, as for a sent reminder cancelled later.
// Without such a send it is a plain cancel and no notice goes. (The row
// ended cancelled, while the notice went out and the cancel answered
// compensated.)
func TestACancelMeetingAMaybeSentSendFindsItSent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		claim func(f *fixture, t *testing.T) activities.NotifyInput
		want  reminder.State
		trail []string
	}{
		{"no answer after the request left", func(f *fixture, t *testing.T) activities.NotifyInput {
			in, _ := f.unconfirmedSend(t, 0)
			return in
		}, reminder.Sent, []string{"scheduled", "send_unconfirmed", "sent", "cancelled_late", "cancellation_sent"}},
		{"its attempt ended holding the claim", func(f *fixture, t *testing.T) activities.NotifyInput {
			in := f.schedule(t, reminder.Email)
			f.lapsedClaim(t, in)
			return in
		}, reminder.Sent, []string{"scheduled", "send_unconfirmed", "sent", "cancelled_late", "cancellation_sent"}},
		{"released: nothing was sent", func(f *fixture, t *testing.T) activities.NotifyInput {
			in := f.schedule(t, reminder.Email)
			f.mail.Fail(sink.Answer{Status: 503})
			_, err := f.notify(t, in)
			require.Error(t, err)
			return in
		}, reminder.Cancelled, []string{"scheduled", "cancelled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			ctx := context.Background()
			in := tc.claim(f, t)
			f.mail.SetLatency(0)
			f.acts.Email = email.NewSender(email.Options{APIKey: testenv.MailAPIKey, BaseURL: f.mail.URL(), FromEmail: "reminders@shipnotify.example"})
			sent := f.mail.Requests()

			state, err := f.acts.RecordCancel(ctx, activities.TransitionInput{ReminderID: in.ReminderID, To: reminder.Cancelled,
				Event: "cancelled", Detail: map[string]any{"by": "tracker", "during": "send"}})
			require.NoError(t, err)
			require.Equal(t, tc.want, state, "the state the workflow takes")
			row, err := f.mirror.Get(ctx, in.ReminderID)
			require.NoError(t, err)
			require.Equal(t, tc.want, row.State)

			res, err := f.notify(t, activities.NotifyInput{Purpose: reminder.PurposeCancellation, ReminderID: in.ReminderID, SubscriberID: in.SubscriberID})
			require.NoError(t, err)
			require.Equal(t, tc.want == reminder.Cancelled, res.Skipped, "the notice goes exactly when the reminder may have")
			require.Equal(t, tc.trail, f.eventTypes(t, in.ReminderID))
			var latest, at string
			require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT type, state FROM reminder_changes WHERE reminder_id = $1`, in.ReminderID).
				Scan(&latest, &at))
			require.Equal(t, []string{"cancelled", string(tc.want)}, []string{latest, at}, "what the tracker hears last")
			if tc.want == reminder.Sent {
				require.Equal(t, sent+1, f.mail.Requests(), "the one notice")
			}
		})
	}
}
