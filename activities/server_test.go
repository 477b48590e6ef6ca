package activities_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// notifyTwice runs the notify activity twice for one delivery key, at the
// same time, as a duplicated workflow or a zombie attempt would.
func notifyTwice(ctx workflow.Context, in activities.NotifyInput) ([]activities.NotifyResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	first := workflow.ExecuteActivity(ctx, "Notify", in)
	second := workflow.ExecuteActivity(ctx, "Notify", in)
	out := make([]activities.NotifyResult, 2)
	if err := first.Get(ctx, &out[0]); err != nil {
		return nil, err
	}
	if err := second.Get(ctx, &out[1]); err != nil {
		return nil, err
	}
	return out, nil
}

// gate is a sink that can hold the requests it is about to accept.
type gate interface {
	Hold() (release func())
	Held() int
}

// On the real dev server: two executions of the notify activity for one key
// send once. They are made to overlap: the provider holds the first
// claimant's call unanswered until the second claimant has tried the key
// and been refused (its attempt failed and is retried), or has reached the
// provider too; the refused one's retry then finds the key sent.
func TestNotifyActivityTwiceOnTheServerSendsOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tc := testenv.Temporal(t)
	queue := testenv.TaskQueue(t)
	w := sdkworker.New(tc, queue, sdkworker.Options{})
	w.RegisterWorkflow(notifyTwice)
	w.RegisterActivity(f.acts)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	for _, tt := range []struct {
		channel reminder.Channel
		sink    gate
	}{{reminder.Email, f.mail}, {reminder.Webhook, f.hooks}} {
		in := f.schedule(t, tt.channel)
		release := tt.sink.Hold()
		t.Cleanup(release)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		id := testenv.ID(t, "twice")
		run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, notifyTwice, in)
		require.NoError(t, err)

		// Both claimants met while the first held the key: the second
		// was refused, or (a broken claim) reached the provider too.
		refused := func() bool {
			desc, err := tc.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				return false
			}
			for _, a := range desc.GetPendingActivities() {
				if a.GetAttempt() > 1 {
					return true
				}
			}
			return false
		}
		require.Eventually(t, func() bool { return tt.sink.Held() >= 2 || (tt.sink.Held() == 1 && refused()) },
			30*time.Second, 50*time.Millisecond, "the two claimants never overlapped")
		release()

		var results []activities.NotifyResult
		require.NoError(t, run.Get(ctx, &results))
		cancel()

		key := reminder.DeliveryKey(in.ReminderID, in.SubscriberID, in.DueAt)
		require.Equal(t, key, results[0].DeliveryKey)
		require.Equal(t, key, results[1].DeliveryKey)
		require.NotEqual(t, results[0].AlreadySent, results[1].AlreadySent, "one sent, the other found it sent")
		require.Equal(t, "sent", f.delivery(t, key).Status)
	}
	require.Len(t, f.mail.Mails(), 1)
	require.Equal(t, 1, f.mail.Requests(), "the refused claimant never called the provider")
	require.Len(t, f.hooks.Hooks(), 1)
	require.Equal(t, 1, f.hooks.Requests())
}

// failFirstSentRecord makes the first write of a "sent" event in the
// schema fail, as a database that drops out just after the provider
// accepted would. A sequence counts the writes: nextval is not undone when
// the statement is, so the failure happens once.
const failFirstSentRecord = `
CREATE SEQUENCE %[1]s.sent_records;
CREATE FUNCTION %[1]s.fail_first_sent_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.type = 'sent' AND nextval('%[1]s.sent_records') = 1 THEN
        RAISE EXCEPTION 'injected: recording the send fails';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER fail_first_sent_record BEFORE INSERT ON %[1]s.reminder_events
    FOR EACH ROW EXECUTE FUNCTION %[1]s.fail_first_sent_record();`

// On the real dev server: the provider accepted the mail, recording it
// failed for the whole first (local) attempt, and the notify activity that
// takes over records it instead of sending again (the local attempt's
// failure carried the provider's message id; a regular attempt also leaves
// it in its heartbeat).
func TestRetryAfterAnUnrecordedSendRecordsInsteadOfSending(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	s.Activities.RecordRetries = 1 // the attempt gives up after one failed write
	s.StartWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.DB.Pool.Exec(ctx, fmt.Sprintf(failFirstSentRecord, s.DB.Schema))
	require.NoError(t, err)

	results, err := s.Starter.Schedule(ctx, s.Update(t, time.Now(), reminder.Email))
	require.NoError(t, err)
	r := results[0]
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &res))

	require.Equal(t, reminder.Sent, res.State)
	mails := s.Mail.Mails()
	require.Len(t, mails, 1, "the send is not repeated")
	require.Equal(t, 1, s.Mail.Requests())
	require.Equal(t, mails[0].MessageID, res.ProviderMessageID)
	var writes int
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `SELECT last_value FROM sent_records`).Scan(&writes))
	require.Equal(t, 2, writes, "the first record failed, the retry's succeeded")
	var started []int32
	for _, ev := range testenv.History(t, s.Temporal, r.WorkflowID).GetEvents() {
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			started = append(started, a.GetAttempt())
		}
	}
	require.Equal(t, []int32{2}, started, "the first attempt sent and could not record; its retry recorded from the heartbeat")

	var status, providerID string
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `
SELECT status, provider_message_id FROM deliveries WHERE delivery_key = $1`, r.DeliveryKey).Scan(&status, &providerID))
	require.Equal(t, "sent", status)
	require.Equal(t, mails[0].MessageID, providerID, "the retry recorded the first attempt's message")
	row, err := s.Mirror.Get(ctx, r.ReminderID)
	require.NoError(t, err)
	require.Equal(t, reminder.Sent, row.State)
	events, err := s.Mirror.Events(ctx, r.ReminderID)
	require.NoError(t, err)
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{"scheduled", "sent"}, types)
}
