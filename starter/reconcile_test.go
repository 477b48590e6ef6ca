package starter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// The starter dies between writing the mirror and starting the workflows;
// the reconciler finds the rows and starts them, once.
func TestReconcileStartsWhatTheStarterDidNot(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Second), reminder.Email, reminder.Webhook)
	u.Subscribers[1].RequiresApproval = true
	u.EscalationEmail = "lead@shipper.example"

	crashing := *s.Starter
	crashing.CrashAfterMirror(errors.New("starter killed"))
	_, err := crashing.Schedule(ctx, u)
	require.ErrorContains(t, err, "starter killed")
	wfID := workflows.ReminderWorkflowID(reminder.ID("", u.ShipmentID, u.UpdateID, u.Subscribers[0].ID))
	_, err = s.Temporal.DescribeWorkflowExecution(ctx, wfID, "")
	require.Error(t, err, "no workflow was started")

	results, err := s.Starter.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Len(t, results, 2)
	for _, r := range results {
		require.Equal(t, starter.Scheduled, r.Status)
	}
	again, err := s.Starter.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, again, "started rows are marked; nothing is left to reconcile")

	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, wfID, "").Get(ctx, &res))
	require.Equal(t, reminder.Sent, res.State)
	require.Len(t, s.Mail.Mails(), 1)
	gated := workflows.ReminderWorkflowID(reminder.ID("", u.ShipmentID, u.UpdateID, u.Subscribers[1].ID))
	v, err := s.Temporal.QueryWorkflow(ctx, gated, "", workflows.QueryStatus)
	require.NoError(t, err)
	var st workflows.Status
	require.NoError(t, v.Get(&st))
	require.Equal(t, reminder.AwaitingApproval, st.State, "the approval policy is restored from the mirror")
	require.NoError(t, s.Temporal.TerminateWorkflow(ctx, gated, "", "test over"))

	// A row whose workflow exists already is reported, not started again.
	_, err = s.DB.Pool.Exec(ctx, `UPDATE reminders SET workflow_started_at = NULL`)
	require.NoError(t, err)
	again, err = s.Starter.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Len(t, again, 1, "only the pending one; the sent one is not a candidate")
	require.Equal(t, starter.AlreadyScheduled, again[0].Status)

	// Rows younger than the grace period are a Schedule in progress: left alone.
	_, err = s.DB.Pool.Exec(ctx, `UPDATE reminders SET workflow_started_at = NULL, state = 'scheduled'`)
	require.NoError(t, err)
	young, err := s.Starter.Reconcile(ctx, time.Hour)
	require.NoError(t, err)
	require.Empty(t, young)
}

// A fresh mirror against an engine that kept the workflows of the mirror
// before: the same ids meet a workflow that started before their rows were
// written. That is not theirs: the start reports a conflict (never
// already_scheduled, which would leave the reminder waiting on a workflow
// that will never send it), the row stays unstarted for the reconciler,
// and a row whose own workflow exists is still already_scheduled.
func TestAStartThatMeetsAnotherRowsWorkflowIsAConflict(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Hour), reminder.Email, reminder.Email)
	first, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	for _, r := range first {
		require.Equal(t, starter.Scheduled, r.Status)
	}
	// The old engine's workflows end (closed, kept by retention).
	require.NoError(t, s.Temporal.TerminateWorkflow(ctx, first[0].WorkflowID, "", "the mirror before"))
	t.Cleanup(func() { _ = s.Temporal.TerminateWorkflow(context.Background(), first[1].WorkflowID, "", "test over") })

	// The fresh mirror: same engine, same ids, rows written after.
	fresh := *s.Starter
	fresh.Mirror = mirror.New(testenv.Postgres(t).Pool).SealSecretsWith(testenv.Codec(t))
	fresh.ClockSkew = time.Millisecond
	results, err := fresh.Schedule(ctx, u)
	require.ErrorIs(t, err, starter.ErrWorkflowIDTaken)
	require.Len(t, results, 2)
	for _, r := range results {
		require.Equal(t, starter.Conflict, r.Status, r.ReminderID)
	}
	row, err := fresh.Mirror.Get(ctx, first[0].ReminderID)
	require.NoError(t, err)
	require.Nil(t, row.WorkflowStartedAt, "not marked started: the reconciler keeps it")
	require.Equal(t, reminder.Scheduled, row.State)

	// The mirror of the workflows: its own are recognised, as ever.
	_, err = s.DB.Pool.Exec(ctx, `UPDATE reminders SET workflow_started_at = NULL`)
	require.NoError(t, err)
	again, err := s.Starter.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Len(t, again, 2)
	for _, r := range again {
		require.Equal(t, starter.AlreadyScheduled, r.Status, r.ReminderID)
	}
}
