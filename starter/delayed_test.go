package starter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// eventCounts counts a closed workflow's history events by type.
func eventCounts(t *testing.T, s *testenv.Stack, workflowID string) (total int, byType map[enums.EventType]int) {
	t.Helper()
	byType = map[enums.EventType]int{}
	for _, ev := range testenv.History(t, s.Temporal, workflowID).GetEvents() {
		byType[ev.GetEventType()]++
		total++
	}
	return total, byType
}

// A plain reminder starts with a start delay to its due time: the engine
// runs its first workflow task then, so the delivered reminder records no
// timer, two workflow tasks and at most 12 events (the timer path records
// 17 and 3), and it is sent once, not before its due time. A reminder that
// needs approval starts at once.
func TestADelayedStartSendsOnceAtTheDueTimeWithNoTimer(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{DelayedStart: true})
	ctx := context.Background()
	due := time.Now().Add(3 * time.Second)
	u := s.Update(t, due, reminder.Email, reminder.Email)
	u.Subscribers[1].DueAt = due.Add(time.Hour)
	u.Subscribers[1].RequiresApproval = true
	u.Approval = reminder.Approval{Timeout: time.Hour, ExpireAfter: 2 * time.Hour}
	u.EscalationEmail = escalationContact
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	plain, approval := results[0], results[1]
	terminateAtCleanup(t, s, approval.WorkflowID)

	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, approval.WorkflowID, "")
	require.NoError(t, err)
	info := desc.GetWorkflowExecutionInfo()
	require.Equal(t, info.GetStartTime().AsTime(), info.GetExecutionTime().AsTime(), "approval reminders start at once")

	require.Equal(t, reminder.Sent, waitFor(t, s, plain.WorkflowID).State)
	sent := row(t, s, plain.ReminderID)
	require.False(t, sent.SentAt.Before(due), "not before its due time: sent %s, due %s", sent.SentAt, due)
	require.Len(t, mailsFor(s, plain.ReminderID, reminder.PurposeReminder), 1)
	require.Equal(t, []string{"scheduled", "sent"}, eventTypes(t, s, plain.ReminderID))

	total, byType := eventCounts(t, s, plain.WorkflowID)
	require.Zero(t, byType[enums.EVENT_TYPE_TIMER_STARTED], "no timer")
	require.Equal(t, 2, byType[enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED], "two workflow tasks")
	require.LessOrEqual(t, total, 12, "history events")
	testenv.RecordHistory(t, s.Temporal, plain.WorkflowID, testenv.AtCurrentLevel("sent-after-start-delay"))
}

// In its start delay a reminder can be read, listed, rescheduled and
// cancelled: the status comes from what its start recorded and says it
// waits; visibility lists it running, scheduled, with its due time as its
// execution time; a reschedule wakes it to sleep to the new time (and an
// earlier one sends then); the API's cancel (an Update) and the Web UI's
// (a cancel request) both end it cancelled with nothing sent.
func TestAReminderInItsStartDelay(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{DelayedStart: true})
	ctx := context.Background()
	due := time.Now().Add(6 * time.Hour).UTC().Truncate(time.Second)
	u := s.Update(t, due, reminder.Email, reminder.Email, reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	require.Len(t, results, 3)
	// The API cancels a shipment: this one's only reminder is a webhook.
	cancelled := s.Update(t, due, reminder.Webhook)
	cancelled.ShipmentID += "-cancelled"
	more, err := s.Starter.Schedule(ctx, cancelled)
	require.NoError(t, err)
	results = append(results, more...)
	for _, r := range results {
		terminateAtCleanup(t, s, r.WorkflowID)
	}
	read, moved, viaWebUI, viaAPI := results[0], results[1], results[2], results[3]

	t.Run("status", func(t *testing.T) {
		st, err := starter.LiveStatus(ctx, s.Temporal, row(t, s, read.ReminderID), nil)
		require.NoError(t, err)
		require.Equal(t, reminder.Scheduled, st.State)
		require.True(t, due.Equal(st.DueAt))
		require.Equal(t, read.DeliveryKey, st.DeliveryKey)
		require.WithinDuration(t, due, st.WaitingUntil, time.Second)
		require.Contains(t, starter.Waiting(st), "due at "+due.Format(time.RFC3339)+", waiting")
		_, err = s.Temporal.QueryWorkflow(ctx, read.WorkflowID, "", workflows.QueryStatus)
		var notReady *serviceerror.WorkflowNotReady
		require.ErrorAs(t, err, &notReady, "the query itself has no worker's answer yet")
	})

	t.Run("visibility", func(t *testing.T) {
		query := fmt.Sprintf("WorkflowId = '%s' AND ExecutionStatus = 'Running' AND %s = 'scheduled' AND %s BETWEEN '%s' AND '%s'",
			read.WorkflowID, workflows.ReminderStateKey.GetName(), workflows.DueAtKey.GetName(),
			due.Add(-time.Second).Format(time.RFC3339), due.Add(time.Second).Format(time.RFC3339))
		var got *workflowservice.ListWorkflowExecutionsResponse
		require.Eventually(t, func() bool {
			got, err = s.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
			require.NoError(t, err)
			return len(got.GetExecutions()) == 1
		}, 30*time.Second, 50*time.Millisecond, "listed as running and scheduled: %s", query)
		require.WithinDuration(t, due, got.GetExecutions()[0].GetExecutionTime().AsTime(), time.Second, "its execution time is its due time")
	})

	t.Run("reschedule", func(t *testing.T) {
		soon := time.Now().Add(2 * time.Second)
		out, err := s.Starter.RescheduleReminder(ctx, "", moved.ReminderID, soon, starter.Actor{By: "planner"})
		require.NoError(t, err)
		require.Equal(t, starter.StatusRescheduled, out.Status, out.Error)
		require.Equal(t, reminder.Sent, waitFor(t, s, moved.WorkflowID).State, "woken, it sends at the new time")
		after := row(t, s, moved.ReminderID)
		require.WithinDuration(t, soon, after.DueAt, time.Second)
		require.NotEqual(t, moved.DeliveryKey, after.DeliveryKey, "the key follows the due time")
		mails := mailsFor(s, moved.ReminderID, reminder.PurposeReminder)
		require.Len(t, mails, 1)
		require.Equal(t, after.DeliveryKey, mails[0].CustomArgs["delivery_key"])
		require.Equal(t, []string{"scheduled", "rescheduled", "sent"}, eventTypes(t, s, moved.ReminderID))
		testenv.RecordHistory(t, s.Temporal, moved.WorkflowID, testenv.AtCurrentLevel("rescheduled-in-start-delay"))
	})

	t.Run("cancel through the API", func(t *testing.T) {
		outs, err := s.Starter.Cancel(ctx, "", cancelled.ShipmentID, starter.Actor{By: "tracker", Reason: "withdrawn"})
		require.NoError(t, err)
		require.Len(t, outs, 1)
		require.Equal(t, starter.StatusCancelled, outs[0].Status, outs[0].Error)
		require.Equal(t, reminder.Cancelled, waitFor(t, s, viaAPI.WorkflowID).State)
		require.Equal(t, reminder.Cancelled, row(t, s, viaAPI.ReminderID).State)
		require.Equal(t, []string{"scheduled", "cancelled"}, eventTypes(t, s, viaAPI.ReminderID))
		require.Zero(t, s.Hooks.Requests(), "nothing sent")
		testenv.RecordHistory(t, s.Temporal, viaAPI.WorkflowID, testenv.AtCurrentLevel("cancelled-in-start-delay"))
	})

	t.Run("cancel from the Web UI", func(t *testing.T) {
		require.NoError(t, s.Temporal.CancelWorkflow(ctx, viaWebUI.WorkflowID, ""))
		require.Eventually(t, func() bool { return row(t, s, viaWebUI.ReminderID).State == reminder.Cancelled },
			time.Minute, 50*time.Millisecond, "the mirror follows the engine's cancel")
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_ = s.Temporal.GetWorkflow(ctx, viaWebUI.WorkflowID, "").Get(ctx, nil)
		desc, err := s.Temporal.DescribeWorkflowExecution(ctx, viaWebUI.WorkflowID, "")
		require.NoError(t, err)
		require.NotEqual(t, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus(), "woken and ended")
		require.Empty(t, mailsFor(s, viaWebUI.ReminderID, reminder.PurposeReminder), "nothing sent")
		testenv.RecordHistory(t, s.Temporal, viaWebUI.WorkflowID, testenv.AtCurrentLevel("cancelled-from-outside-in-start-delay"))
	})
}
