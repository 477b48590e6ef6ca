package workflows_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/worker"
	"github.com/shipnotify/shipnotify/workflows"
)

var acts *activities.Activities

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func input(due time.Time) workflows.ReminderInput {
	return workflows.ReminderInput{
		ReminderID: "SHP-1/window-1/ops", ShipmentID: "SHP-1", UpdateID: "window-1",
		SubscriberID: "ops", DueAt: due,
	}
}

// newEnv is a time-skipping test environment with the real registrations;
// the activities are stubbed per test.
func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetStartTime(t0)
	worker.Register(env, &activities.Activities{})
	env.SetTypedSearchAttributesOnStart(workflows.StartSearchAttributes(input(t0)))
	return env
}

// notifyRecorder stubs Notify and records the workflow time of each call.
func notifyRecorder(env *testsuite.TestWorkflowEnvironment, calls *[]time.Time, err error) {
	env.OnActivity(acts.Notify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.NotifyInput) (activities.NotifyResult, error) {
			*calls = append(*calls, env.Now().UTC())
			if err != nil {
				return activities.NotifyResult{}, err
			}
			return activities.NotifyResult{DeliveryKey: reminder.DeliveryKey(in.ReminderID, in.SubscriberID, in.DueAt)}, nil
		})
}

// expectStateUpsert requires the ReminderState search attribute to be
// upserted to state exactly once.
func expectStateUpsert(env *testsuite.TestWorkflowEnvironment, state reminder.State) {
	env.OnUpsertTypedSearchAttributes(
		temporal.NewSearchAttributes(workflows.ReminderStateKey.ValueSet(string(state))),
	).Return(nil).Once()
}

func TestReminderDueIn90DaysFiresAtDay90AndNotBefore(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	due := t0.Add(90 * 24 * time.Hour)
	var calls []time.Time
	notifyRecorder(env, &calls, nil)
	expectStateUpsert(env, reminder.Sent)
	env.RegisterDelayedCallback(func() {
		require.Empty(t, calls, "nothing may be sent a minute before the due time")
	}, 90*24*time.Hour-time.Minute)

	env.ExecuteWorkflow(workflows.ReminderWorkflow, input(due))

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, calls, 1)
	require.Equal(t, due, calls[0], "sent at day 90 exactly")
	var res workflows.ReminderResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, reminder.Sent, res.State)
	require.Equal(t, reminder.DeliveryKey("SHP-1/window-1/ops", "ops", due), res.DeliveryKey)
	env.AssertExpectations(t)
}

func TestReminderPastDueFiresAtOnce(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	var calls []time.Time
	notifyRecorder(env, &calls, nil)

	env.ExecuteWorkflow(workflows.ReminderWorkflow, input(t0.Add(-6*time.Hour)))

	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []time.Time{t0}, calls, "a reminder that came due while nothing ran is sent at once (backfill)")
}

func TestPermanentDeliveryFailureMarksReminderFailed(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	var calls []time.Time
	notifyRecorder(env, &calls, temporal.NewNonRetryableApplicationError("mail API answered 400", activities.ErrTypePermanentDelivery, nil))
	expectStateUpsert(env, reminder.Failed)
	var transitions []activities.TransitionInput
	env.OnActivity(acts.RecordTransition, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TransitionInput) error {
			transitions = append(transitions, in)
			return nil
		})

	env.ExecuteWorkflow(workflows.ReminderWorkflow, input(t0.Add(time.Hour)))

	require.NoError(t, env.GetWorkflowError())
	var res workflows.ReminderResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, reminder.Failed, res.State)
	require.Len(t, calls, 1, "a permanent failure is not retried")
	require.Len(t, transitions, 1)
	require.Equal(t, reminder.Failed, transitions[0].To)
	env.AssertExpectations(t)
}

func TestTemporaryFailuresAreRetried(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	attempts := 0
	env.OnActivity(acts.Notify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.NotifyInput) (activities.NotifyResult, error) {
			attempts++
			if attempts < 3 {
				return activities.NotifyResult{}, errors.New("mail API answered 503")
			}
			return activities.NotifyResult{DeliveryKey: "k"}, nil
		})

	env.ExecuteWorkflow(workflows.ReminderWorkflow, input(t0))

	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 3, attempts)
	var res workflows.ReminderResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, reminder.Sent, res.State)
}
