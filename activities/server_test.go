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

// On the real dev server: two executions of the notify activity for one key
// send once.
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

	for _, ch := range []reminder.Channel{reminder.Email, reminder.Webhook} {
		in := f.schedule(t, ch)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: testenv.ID(t, "twice"), TaskQueue: queue}, notifyTwice, in)
		require.NoError(t, err)
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
	require.Len(t, f.hooks.Hooks(), 1)
}
