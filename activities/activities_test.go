package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/workflows"
)

// fixture is the notify activity over a private schema and local stand-ins
// for SendGrid and a webhook receiver; no Temporal server is needed.
type fixture struct {
	db     testenv.DB
	mirror *mirror.Store
	mail   *sink.MailSink
	hooks  *sink.WebhookSink
	secret string
	acts   *activities.Activities
	now    time.Time
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{db: testenv.Postgres(t), secret: webhook.NewSecret(), now: time.Now()}
	f.mirror = mirror.New(f.db.Pool).SealSecretsWith(testenv.Codec(t))
	var err error
	f.mail, err = sink.StartMail("", testenv.MailAPIKey)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.mail.Close() })
	f.hooks, err = sink.StartWebhook("", f.secret)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.hooks.Close() })
	f.acts = &activities.Activities{
		Mirror: f.mirror,
		Email: email.NewSender(email.Options{
			APIKey: testenv.MailAPIKey, BaseURL: f.mail.URL(), FromEmail: "reminders@shipnotify.example",
			Now: func() time.Time { return f.now },
		}),
		Webhook:       webhook.NewSender(webhook.Options{Guard: webhook.Guard{AllowLoopback: true}}),
		RecordRetries: 1,
	}
	return f
}

// schedule mirrors one reminder on channel and returns its notify input.
func (f *fixture) schedule(t *testing.T, channel reminder.Channel) activities.NotifyInput {
	t.Helper()
	sub := reminder.Subscriber{ID: "sub-1", Channel: channel, DueAt: f.now}
	if channel == reminder.Email {
		sub.Email = "ops@customer.example"
	} else {
		sub.URL, sub.Secret = f.hooks.URL()+"/in", f.secret
	}
	u := reminder.Update{
		ShipmentID: testenv.ID(t, "SHP"), UpdateID: "window-1", Kind: "delivery_window",
		WindowStart: f.now.Add(72 * time.Hour),
		Message:     reminder.Message{Subject: "Window opens in 3 days", Text: "Dock 4."},
		Subscribers: []reminder.Subscriber{sub},
	}
	rems, err := u.Plan(reminder.PlanOptions{Now: f.now, WebhookDestination: func(string) error { return nil }})
	require.NoError(t, err)
	r := rems[0]
	_, err = f.mirror.ScheduleUpdate(context.Background(), u, []mirror.NewReminder{{
		Reminder: r, WorkflowID: workflows.ReminderWorkflowID(r.ID),
	}})
	require.NoError(t, err)
	return activities.NotifyInput{ReminderID: r.ID, SubscriberID: r.SubscriberID, DueAt: r.DueAt}
}

// notify runs the activity in a fresh activity environment, as a new
// execution would.
func (f *fixture) notify(t *testing.T, in activities.NotifyInput) (activities.NotifyResult, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(f.acts)
	val, err := env.ExecuteActivity(f.acts.Notify, in)
	var res activities.NotifyResult
	if err == nil {
		require.NoError(t, val.Get(&res))
	}
	return res, err
}

type deliveryRow struct {
	Status, Purpose, ProviderMessageID string
	Attempts                           int
}

func (f *fixture) delivery(t *testing.T, key string) deliveryRow {
	t.Helper()
	var d deliveryRow
	err := f.db.Pool.QueryRow(context.Background(), `
SELECT status, purpose, coalesce(provider_message_id, ''), attempts FROM deliveries WHERE delivery_key = $1`, key).
		Scan(&d.Status, &d.Purpose, &d.ProviderMessageID, &d.Attempts)
	require.NoError(t, err)
	return d
}

func (f *fixture) eventTypes(t *testing.T, reminderID string) []string {
	t.Helper()
	events, err := f.mirror.Events(context.Background(), reminderID)
	require.NoError(t, err)
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	return types
}

func TestNotifyTwiceForOneKeySendsOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	key := reminder.DeliveryKey(in.ReminderID, in.SubscriberID, in.DueAt)

	first, err := f.notify(t, in)
	require.NoError(t, err)
	second, err := f.notify(t, in)
	require.NoError(t, err)

	mails := f.mail.Mails()
	require.Len(t, mails, 1, "the second execution for the same key sends nothing")
	require.Equal(t, 1, f.mail.Requests())
	require.False(t, first.AlreadySent)
	require.True(t, second.AlreadySent)
	require.Equal(t, key, first.DeliveryKey)
	require.Equal(t, mails[0].MessageID, first.ProviderMessageID)
	require.Equal(t, first.ProviderMessageID, second.ProviderMessageID)

	m := mails[0]
	require.Equal(t, []string{"ops@customer.example"}, m.To)
	require.Equal(t, "Window opens in 3 days", m.Subject)
	require.Equal(t, key, m.CustomArgs["delivery_key"], "the key travels in custom_args")

	d := f.delivery(t, key)
	require.Equal(t, deliveryRow{Status: "sent", Purpose: "reminder", ProviderMessageID: m.MessageID, Attempts: 1}, d)
	row, err := f.mirror.Get(context.Background(), in.ReminderID)
	require.NoError(t, err)
	require.Equal(t, reminder.Sent, row.State)
	require.NotNil(t, row.SentAt)
	require.Equal(t, []string{"scheduled", "sent"}, f.eventTypes(t, in.ReminderID))
}

func TestNotifyWebhookIsSignedAndKeyed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Webhook)
	key := reminder.DeliveryKey(in.ReminderID, in.SubscriberID, in.DueAt)

	_, err := f.notify(t, in)
	require.NoError(t, err)

	hooks := f.hooks.Hooks()
	require.Len(t, hooks, 1)
	require.Zero(t, f.hooks.Rejected(), "the receiver verified the signature with the official library")
	require.Equal(t, key, hooks[0].ID, "webhook-id is the delivery key")
	require.Equal(t, key, hooks[0].IdempotencyKey)
	require.Equal(t, "/in", hooks[0].Path)
	var ev activities.WebhookEvent
	require.NoError(t, json.Unmarshal(hooks[0].Body, &ev))
	require.Equal(t, "shipment.reminder", ev.Type)
	require.Equal(t, in.ReminderID, ev.Data.ReminderID)
	require.Equal(t, key, ev.Data.DeliveryKey)
	require.Equal(t, "Dock 4.", ev.Data.Text)
	require.Equal(t, "sent", f.delivery(t, key).Status)
}

func TestPermanentMailFailureIsNotRetried(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	f.mail.Fail(sink.Answer{Status: 400})

	_, err := f.notify(t, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, activities.ErrTypePermanentDelivery, appErr.Type())
	require.True(t, appErr.NonRetryable())
	key := reminder.DeliveryKey(in.ReminderID, in.SubscriberID, in.DueAt)
	require.Equal(t, "failed", f.delivery(t, key).Status)
	require.Equal(t, []string{"scheduled", "delivery_failed"}, f.eventTypes(t, in.ReminderID))

	// A later execution for the same key does not try again.
	_, err = f.notify(t, in)
	require.True(t, errors.As(err, &appErr))
	require.True(t, appErr.NonRetryable())
	require.Equal(t, 1, f.mail.Requests())
}

func TestRateLimitedMailRetriesAfterTheReset(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	reset := f.now.Add(42 * time.Second).Unix()
	f.mail.Fail(sink.Answer{Status: 429, Headers: map[string]string{"X-RateLimit-Reset": strconv.FormatInt(reset, 10)}})

	_, err := f.notify(t, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.False(t, appErr.NonRetryable())
	require.InDelta(t, 42, appErr.NextRetryDelay().Seconds(), 1, "retry when SendGrid's limit resets")

	// The retry (same execution) takes its own claim over and delivers.
	res, err := f.notify(t, in)
	require.NoError(t, err)
	require.Len(t, f.mail.Mails(), 1)
	require.Equal(t, 2, f.delivery(t, res.DeliveryKey).Attempts)
}

// A claim another execution holds is not taken while its lease runs. Once
// the lease lapses its holder may have died mid-call, after the provider
// took the mail: at the production evidence wait nothing is sent until the
// wait, counted from the lapse, passes with no event for the key; then the
// key is taken over, and its record says it may have gone twice. (The
// fixture's wait of 0 hid this: "taken over at once".)
func TestClaimHeldByALiveExecutionIsNotTaken(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.acts.EvidenceWait = activities.DefaultEvidenceWait
	in := f.schedule(t, reminder.Email)
	key := reminder.DeliveryKey(in.ReminderID, in.SubscriberID, in.DueAt)
	ctx := context.Background()
	_, err := f.db.Pool.Exec(ctx, `
INSERT INTO deliveries (delivery_key, reminder_id, purpose, status, claimed_by, lease_until)
VALUES ($1, $2, 'reminder', 'sending', 'another-worker', now() + interval '1 minute')`, key, in.ReminderID)
	require.NoError(t, err)

	_, err = f.notify(t, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, "DeliveryInProgress", appErr.Type())
	require.False(t, appErr.NonRetryable(), "retry later: the other execution may still finish")
	require.LessOrEqual(t, appErr.NextRetryDelay(), time.Minute+time.Second, "looked at again by the holder's lease")
	require.Zero(t, f.mail.Requests(), "nothing sent while another execution holds the key")

	// The holder's lease lapses (it died, maybe mid-call): nothing is sent
	// while the provider's event for its send may still come.
	_, err = f.db.Pool.Exec(ctx, `UPDATE deliveries SET lease_until = now() - interval '1 second'`)
	require.NoError(t, err)
	_, err = f.notify(t, in)
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.Equal(t, activities.ErrTypeSendUnconfirmed, appErr.Type())
	require.Zero(t, f.mail.Requests(), "not taken over at once: the dead holder may have sent")
	require.Equal(t, "maybe_sent", f.delivery(t, key).Status)

	// No event within the wait from the lapse: taken over, sent once more.
	_, err = f.db.Pool.Exec(ctx, `
UPDATE deliveries SET maybe_sent_at = maybe_sent_at - interval '5 minutes 1 second', lease_until = lease_until - interval '5 minutes 1 second'`)
	require.NoError(t, err)
	_, err = f.notify(t, in)
	require.NoError(t, err)
	require.Len(t, f.mail.Mails(), 1)
	require.Equal(t, 2, f.delivery(t, key).Attempts)
	events, err := f.mirror.Events(ctx, in.ReminderID)
	require.NoError(t, err)
	require.Equal(t, []string{"scheduled", "send_unconfirmed", "sent"}, f.eventTypes(t, in.ReminderID))
	require.NotEmpty(t, events[2].Detail["maybe_sent_before"], "the record says the key may have gone twice")
}

// A reminder the mirror does not hold fails for good, for its own delivery
// and for an escalation about it, instead of retrying for three days.
func TestUnknownReminderIsPermanent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, in := range []activities.NotifyInput{
		{ReminderID: "SHP-0/u/s", SubscriberID: "s", DueAt: f.now},
		{Purpose: reminder.PurposeEscalation, ReminderID: "SHP-0/u/s", SubscriberID: "s", Reason: "delivery_failed"},
	} {
		_, err := f.notify(t, in)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "got %v", err)
		require.Equal(t, activities.ErrTypeReminderNotFound, appErr.Type(), in.Purpose)
		require.True(t, appErr.NonRetryable())
	}
}

// 410 Gone disables the endpoint: that delivery fails for good, and no
// later delivery to the same URL is attempted.
func TestGoneDisablesTheEndpoint(t *testing.T) {
	t.Parallel()
	f := setup(t)
	first := f.schedule(t, reminder.Webhook)
	f.hooks.Fail(sink.Answer{Status: 410})

	_, err := f.notify(t, first)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.True(t, appErr.NonRetryable())
	require.Equal(t, 1, f.hooks.Requests())
	require.Equal(t, []string{"scheduled", "endpoint_disabled", "delivery_failed"}, f.eventTypes(t, first.ReminderID))

	second := f.schedule(t, reminder.Webhook) // same receiver URL, another shipment
	_, err = f.notify(t, second)
	require.True(t, errors.As(err, &appErr), "got %v", err)
	require.True(t, appErr.NonRetryable())
	require.Contains(t, appErr.Error(), "disabled")
	require.Equal(t, 1, f.hooks.Requests(), "nothing more is sent to a disabled endpoint")
}
