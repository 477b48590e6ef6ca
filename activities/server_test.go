package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/internal/testenv"
	"github.com/shipnotify/shipnotify/reminder"
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
