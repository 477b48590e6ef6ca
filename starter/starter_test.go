package starter_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// waitDone waits a minute at most for each reminder's workflow and
// returns how it ended.
func waitDone(t *testing.T, s *testenv.Stack, results []starter.Result) map[string]workflows.ReminderResult {
	t.Helper()
	return waitEnded(t, s, results, time.Now().Add(time.Minute))
}

// The spine, end to end on the real dev server and PostgreSQL: a
// three-subscriber update gives exactly three deliveries with the right keys,
// and scheduling it again starts no workflow and sends nothing.
func TestThreeSubscriberUpdateDeliversExactlyThree(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	due := time.Now().Add(2 * time.Second)
	u := s.Update(t, due, reminder.Email, reminder.Email, reminder.Webhook)

	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	require.Len(t, results, 3)
	var wantKeys []string
	for i, r := range results {
		sub := u.Subscribers[i]
		require.Equal(t, starter.Scheduled, r.Status)
		require.Equal(t, reminder.ID("", u.ShipmentID, u.UpdateID, sub.ID), r.ReminderID)
		require.Equal(t, workflows.ReminderWorkflowID(reminder.ID("", u.ShipmentID, u.UpdateID, sub.ID)), r.WorkflowID)
		require.Equal(t, reminder.DeliveryKey(r.ReminderID, sub.ID, reminder.NormalizeTime(due)), r.DeliveryKey)
		wantKeys = append(wantKeys, r.DeliveryKey)
	}

	final := waitDone(t, s, results)
	for _, r := range results {
		require.Equal(t, reminder.Sent, final[r.ReminderID].State)
	}
	var gotKeys []string
	for _, m := range s.Mail.Mails() {
		gotKeys = append(gotKeys, m.CustomArgs["delivery_key"])
		require.False(t, m.Received.Before(due), "no reminder is sent before its due time")
	}
	for _, h := range s.Hooks.Hooks() {
		gotKeys = append(gotKeys, h.ID)
	}
	sort.Strings(wantKeys)
	sort.Strings(gotKeys)
	require.Equal(t, wantKeys, gotKeys, "exactly one delivery per key")
	require.Zero(t, s.Hooks.Rejected())

	for i, r := range results {
		row, err := s.Mirror.Get(ctx, r.ReminderID)
		require.NoError(t, err)
		// An email waits for SendGrid's report; a webhook's 2xx is its delivery.
		want, trail := reminder.Sent, []string{"scheduled", "sent"}
		if u.Subscribers[i].Channel == reminder.Webhook {
			want, trail = reminder.Delivered, []string{"scheduled", "sent", "delivered"}
		}
		require.Equal(t, want, row.State)
		require.NotNil(t, row.WorkflowStartedAt, "the starter marks the workflow started")
		events, err := s.Mirror.Events(ctx, r.ReminderID)
		require.NoError(t, err)
		var types []string
		for _, e := range events {
			types = append(types, e.Type)
		}
		require.Equal(t, trail, types)
	}

	// Once more: nothing new is started, so nothing is sent.
	runIDs := map[string]string{}
	for _, r := range results {
		desc, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
		require.NoError(t, err)
		runIDs[r.WorkflowID] = desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	again, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	for i, r := range again {
		require.Equal(t, starter.AlreadyScheduled, r.Status)
		require.Equal(t, results[i].DeliveryKey, r.DeliveryKey)
		desc, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
		require.NoError(t, err)
		require.Equal(t, runIDs[r.WorkflowID], desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "no new run")
		require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())
	}
	require.Len(t, s.Mail.Mails(), 2)
	require.Len(t, s.Hooks.Hooks(), 1)
	require.Equal(t, 2, s.Mail.Requests())
}

// A pending reminder scheduled again is reported as already scheduled (the
// SDK would otherwise hand back the running workflow as if it were new).
func TestSchedulingAPendingUpdateAgainChangesNothing(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(30*24*time.Hour), reminder.Email, reminder.Webhook)

	first, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range first {
			_ = s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})
	second, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	for i := range first {
		require.Equal(t, starter.Scheduled, first[i].Status)
		require.Equal(t, starter.AlreadyScheduled, second[i].Status)
	}
	rows, err := s.Mirror.List(ctx, mirrorFilter(u.ShipmentID))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, r := range rows {
		require.Equal(t, reminder.Scheduled, r.State)
		events, err := s.Mirror.Events(ctx, r.ID)
		require.NoError(t, err)
		require.Len(t, events, 1, "one scheduled event, not two")
	}
}

// Bad input writes nothing: no mirror row and no workflow.
func TestScheduleRejectsBadUpdateBeforeWriting(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Hour), reminder.Email, reminder.Email)
	u.Subscribers[1].ID = u.Subscribers[0].ID

	_, err := s.Starter.Schedule(ctx, u)
	require.ErrorContains(t, err, "subscribers[1].id")
	var n int
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM updates`).Scan(&n))
	require.Zero(t, n)
	_, err = s.Temporal.DescribeWorkflowExecution(ctx, workflows.ReminderWorkflowID(reminder.ID("", u.ShipmentID, u.UpdateID, u.Subscribers[0].ID)), "")
	require.Error(t, err, "no workflow was started")
	require.Zero(t, s.Mail.Requests())
}

func mirrorFilter(shipmentID string) mirror.Filter { return mirror.Filter{ShipmentID: shipmentID} }
