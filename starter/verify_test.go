package starter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// verify runs Verify with no grace period.
func verify(t *testing.T, s *testenv.Stack, repair bool) []starter.Divergence {
	t.Helper()
	return verifyWith(t, s, starter.VerifyOptions{Repair: repair})
}

func verifyWith(t *testing.T, s *testenv.Stack, o starter.VerifyOptions) []starter.Divergence {
	t.Helper()
	divs, err := s.Starter.Verify(context.Background(), o)
	require.NoError(t, err)
	return divs
}

// verifyRepairs requires that Verify finds exactly one divergence, of kind
// and for reminderID, and repairs it; and that a second run finds nothing.
func verifyRepairs(t *testing.T, s *testenv.Stack, kind, reminderID string) starter.Divergence {
	t.Helper()
	return verifyRepairsWith(t, s, starter.VerifyOptions{Repair: true}, kind, reminderID)
}

func verifyRepairsWith(t *testing.T, s *testenv.Stack, o starter.VerifyOptions, kind, reminderID string) starter.Divergence {
	t.Helper()
	divs := verifyWith(t, s, o)
	require.Len(t, divs, 1, "%+v", divs)
	d := divs[0]
	require.Equal(t, kind, d.Kind, "%+v", d)
	require.Equal(t, reminderID, d.ReminderID)
	require.True(t, d.Repaired(), "%+v", d)
	require.Empty(t, verifyWith(t, s, o), "a second run finds nothing")
	return d
}

// scheduleOne schedules one email reminder due at due; a workflow still
// running when the test ends is terminated.
func scheduleOne(t *testing.T, s *testenv.Stack, due time.Time, edit ...func(*reminder.Update)) starter.Result {
	t.Helper()
	u := s.Update(t, due, reminder.Email)
	for _, f := range edit {
		f(&u)
	}
	results, err := s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	terminateAtCleanup(t, s, results[0].WorkflowID)
	return results[0]
}

// terminateAtCleanup ends workflows a test leaves sleeping, so the shared
// dev server is not littered with them.
func terminateAtCleanup(t *testing.T, s *testenv.Stack, workflowIDs ...string) {
	t.Cleanup(func() {
		for _, id := range workflowIDs {
			_ = s.Temporal.TerminateWorkflow(context.Background(), id, "", "test over")
		}
	})
}

// deleteWorkflow removes a workflow from Temporal, as retention would. On
// the shared dev server a deletion waits up to a minute and a half for the
// close to be acknowledged; privateDevServer makes that a second.
func deleteWorkflow(t *testing.T, s *testenv.Stack, workflowID string) {
	t.Helper()
	ctx := context.Background()
	_ = s.Temporal.TerminateWorkflow(ctx, workflowID, "", "test: about to delete")
	_, err := s.Temporal.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: "default", WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID},
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := s.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
		var nf *serviceerror.NotFound
		return errors.As(err, &nf)
	}, time.Minute, 100*time.Millisecond, "the workflow is deleted")
}

// waitListed waits until visibility lists the workflows as running
// reminders of the stack's task queue, as Verify's reverse pass asks.
func waitListed(t *testing.T, s *testenv.Stack, workflowIDs ...string) {
	t.Helper()
	query := fmt.Sprintf(`WorkflowType = 'ReminderWorkflow' AND ExecutionStatus = 'Running' AND TaskQueue = '%s' AND ReminderState IN ('scheduled', 'awaiting_approval')`, s.TaskQueue)
	require.Eventually(t, func() bool {
		resp, err := s.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		require.NoError(t, err)
		listed := map[string]bool{}
		for _, e := range resp.GetExecutions() {
			listed[e.GetExecution().GetWorkflowId()] = true
		}
		for _, id := range workflowIDs {
			if !listed[id] {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond)
}

func exec(t *testing.T, s *testenv.Stack, sql string, args ...any) {
	t.Helper()
	tag, err := s.DB.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), sql)
}

func lastEvent(t *testing.T, s *testenv.Stack, reminderID string) (string, map[string]any) {
	t.Helper()
	events, err := s.Mirror.Events(context.Background(), reminderID)
	require.NoError(t, err)
	e := events[len(events)-1]
	return e.Type, e.Detail
}

// The starter died between the mirror write and the start: verify starts
// the workflow, and the reminder is delivered.
func TestVerifyStartsAnUnstartedReminder(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(2*time.Second), reminder.Email)
	crashing := *s.Starter
	crashing.CrashAfterMirror(errors.New("killed"))
	_, err := crashing.Schedule(ctx, u)
	require.ErrorContains(t, err, "killed")
	id := reminder.ID("", u.ShipmentID, u.UpdateID, u.Subscribers[0].ID)

	divs := verify(t, s, true)
	require.Len(t, divs, 1, "%+v", divs)
	require.Equal(t, starter.DivergenceUnstarted, divs[0].Kind)
	require.Equal(t, id, divs[0].ReminderID)
	require.Equal(t, "no workflow", divs[0].Engine)
	require.True(t, divs[0].Repaired(), "%+v", divs[0])

	require.Equal(t, reminder.Sent, waitFor(t, s, divs[0].WorkflowID).State)
	require.Len(t, s.Mail.Mails(), 1)
	require.Empty(t, verify(t, s, true))
}

// Temporal forgot the workflows of two pending rows (retention, a restored
// namespace). The one whose delivery is recorded as sent is marked sent and
// not sent again; the other is started again from the mirror.
func TestVerifyWhenTemporalForgotTheWorkflow(t *testing.T) {
	t.Parallel()
	// Deleting a closed workflow waits until the server has persisted its
	// queue state (every 30 s by default): a private server does it every second.
	server := testenv.StartDevServer(t, `history.transferProcessorUpdateAckInterval="1s"`)
	s := testenv.NewStackWith(t, testenv.StackOptions{TemporalAddress: server.Address})
	ctx := context.Background()
	sent := scheduleOne(t, s, time.Now().Add(time.Second))
	pending := scheduleOne(t, s, time.Now().Add(48*time.Hour))
	require.Equal(t, reminder.Sent, waitFor(t, s, sent.WorkflowID).State)
	exec(t, s, `UPDATE reminders SET state = 'scheduled', sent_at = NULL WHERE id = $1`, sent.ReminderID)
	deleteWorkflow(t, s, sent.WorkflowID)
	deleteWorkflow(t, s, pending.WorkflowID)

	divs := verify(t, s, true)
	require.Len(t, divs, 2, "%+v", divs)
	byID := map[string]starter.Divergence{}
	for _, d := range divs {
		require.True(t, d.Repaired(), "%+v", d)
		byID[d.ReminderID] = d
	}
	require.Equal(t, starter.DivergenceSentNotMirrored, byID[sent.ReminderID].Kind)
	require.Equal(t, starter.DivergenceWorkflowMissing, byID[pending.ReminderID].Kind)
	require.Empty(t, verify(t, s, true), "a second run finds nothing")

	got := row(t, s, sent.ReminderID)
	require.Equal(t, reminder.Sent, got.State)
	require.NotNil(t, got.SentAt)
	typ, detail := lastEvent(t, s, sent.ReminderID)
	require.Equal(t, "repaired", typ)
	require.Equal(t, "scheduled", detail["from"])
	require.Equal(t, "reconcile", detail["by"])
	require.Len(t, s.Mail.Mails(), 1, "nothing is sent again")

	require.Contains(t, byID[pending.ReminderID].Repair, "started")
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, pending.WorkflowID, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())
	require.Equal(t, reminder.Scheduled, row(t, s, pending.ReminderID).State)
}

// The workflow completed and the row did not hear: the row takes the
// workflow's result.
func TestVerifyMirrorsAClosedWorkflow(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	r := scheduleOne(t, s, time.Now().Add(time.Second))
	require.Equal(t, reminder.Sent, waitFor(t, s, r.WorkflowID).State)
	exec(t, s, `UPDATE reminders SET state = 'scheduled' WHERE id = $1`, r.ReminderID)

	d := verifyRepairs(t, s, starter.DivergenceClosedNotMirrored, r.ReminderID)
	require.Contains(t, d.Engine, "completed, sent")
	require.Equal(t, reminder.Sent, row(t, s, r.ReminderID).State)
	require.Len(t, s.Mail.Mails(), 1)
}

// Someone terminated a reminder's workflow: it will never send, so the
// row ends cancelled. Young rows and a dry run are left alone.
func TestVerifyCancelsATerminatedReminder(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	r := scheduleOne(t, s, time.Now().Add(48*time.Hour))
	require.NoError(t, s.Temporal.TerminateWorkflow(ctx, r.WorkflowID, "", "operator"))

	young, err := s.Starter.Verify(ctx, starter.VerifyOptions{Grace: time.Hour, Repair: true})
	require.NoError(t, err)
	require.Empty(t, young, "a row changed within the grace period may be mid-change")
	dry := verify(t, s, false)
	require.Len(t, dry, 1)
	require.Equal(t, starter.DivergenceWorkflowTerminated, dry[0].Kind)
	require.Empty(t, dry[0].Repair)
	require.Equal(t, reminder.Scheduled, row(t, s, r.ReminderID).State, "a dry run repairs nothing")

	verifyRepairs(t, s, starter.DivergenceWorkflowTerminated, r.ReminderID)
	require.Equal(t, reminder.Cancelled, row(t, s, r.ReminderID).State)
	typ, detail := lastEvent(t, s, r.ReminderID)
	require.Equal(t, "repaired", typ)
	require.Contains(t, detail["reason"], "terminated outside shipnotify")
}

// The row lost its state: it takes the running workflow's back.
func TestVerifyRestoresTheWorkflowsState(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	r := scheduleOne(t, s, time.Now().Add(48*time.Hour), func(u *reminder.Update) {
		u.Approval.Required = true
		u.EscalationEmail = escalationContact
	})
	exec(t, s, `UPDATE reminders SET state = 'scheduled' WHERE id = $1`, r.ReminderID)

	d := verifyRepairs(t, s, starter.DivergenceStateDiffers, r.ReminderID)
	require.Contains(t, d.Engine, "awaiting_approval")
	require.Equal(t, reminder.AwaitingApproval, row(t, s, r.ReminderID).State)
}

// The mirror records an approval its workflow never took: a worker of the
// release before changeAcceptedFirst, stalled past the workflow task that
// wrote the approval, lost the task and the approval with it. Verify does
// not put the row back to awaiting_approval, undoing a decision that was
// acknowledged: the workflow takes the approval the mirror records, and the
// trail records it once.
func TestVerifyGivesTheWorkflowAnApprovalTheMirrorRecords(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	r := scheduleOne(t, s, time.Now().Add(48*time.Hour), func(u *reminder.Update) {
		u.Approval.Required = true
		u.EscalationEmail = escalationContact
	})
	// As the lost task left it: the row approved, the approval recorded.
	exec(t, s, `UPDATE reminders SET state = 'scheduled' WHERE id = $1`, r.ReminderID)
	exec(t, s, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'approved', '{"by": "alice", "reason": "customer confirmed"}')`, r.ReminderID)

	d := verifyRepairs(t, s, starter.DivergenceApprovalNotInWorkflow, r.ReminderID)
	require.Contains(t, d.Mirror, "approved by alice")
	require.Contains(t, d.Engine, "awaiting_approval")
	require.Equal(t, reminder.Scheduled, row(t, s, r.ReminderID).State, "the approval stands")
	st := status(t, s, r.WorkflowID)
	require.Equal(t, reminder.Scheduled, st.State, "the workflow took it")
	require.NotNil(t, st.Approval.Decision)
	require.Equal(t, "alice", st.Approval.Decision.By)
	require.Equal(t, []string{"scheduled", "approved"}, eventTypes(t, s, r.ReminderID), "recorded once")
}

// The same, found by a repeat of the decision: it answers already_approved
// from the mirror, and the workflow takes the approval it recorded.
func TestARepeatedApprovalGivesTheWorkflowTheOneTheMirrorRecords(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	r := scheduleOne(t, s, time.Now().Add(48*time.Hour), func(u *reminder.Update) {
		u.Approval.Required = true
		u.EscalationEmail = escalationContact
	})
	exec(t, s, `UPDATE reminders SET state = 'scheduled' WHERE id = $1`, r.ReminderID)
	exec(t, s, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'approved', '{"by": "alice"}')`, r.ReminderID)

	outs, err := s.Starter.Decide(context.Background(), starter.Selection{ReminderID: r.ReminderID}, true, starter.Actor{By: "alice"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusAlreadyApproved, outs[0].Status, outs[0].Error)
	require.Equal(t, reminder.Scheduled, status(t, s, r.WorkflowID).State, "the workflow took it")
	require.Empty(t, verify(t, s, true))
	require.Equal(t, []string{"scheduled", "approved"}, eventTypes(t, s, r.ReminderID))
}

// The row lost its due time and key: it takes the running workflow's back.
func TestVerifyRestoresTheWorkflowsDueTime(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	r := scheduleOne(t, s, time.Now().Add(48*time.Hour))
	exec(t, s, `UPDATE reminders SET due_at = due_at + interval '1 hour', delivery_key = md5('x') || md5('y') WHERE id = $1`, r.ReminderID)

	verifyRepairs(t, s, starter.DivergenceDueDiffers, r.ReminderID)
	got := row(t, s, r.ReminderID)
	require.True(t, r.DueAt.Equal(got.DueAt), "%s != %s", r.DueAt, got.DueAt)
	require.Equal(t, r.DeliveryKey, got.DeliveryKey)
}

// The row says cancelled and the workflow still runs: verify cancels the
// workflow, which ends cancelled having sent nothing.
func TestVerifyCancelsAWorkflowTheMirrorCancelled(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	r := scheduleOne(t, s, time.Now().Add(48*time.Hour))
	waitListed(t, s, r.WorkflowID)
	exec(t, s, `UPDATE reminders SET state = 'cancelled' WHERE id = $1`, r.ReminderID)

	d := verifyRepairs(t, s, starter.DivergenceCancelledButRunning, r.ReminderID)
	require.Contains(t, d.Repair, "cancelled its workflow")
	require.Equal(t, reminder.Cancelled, waitFor(t, s, r.WorkflowID).State)
	require.Empty(t, s.Mail.Mails())
}

// What has no one right answer is reported, not touched: a running
// workflow without a row, and one whose row says sent.
func TestVerifyReportsWhatItCannotRepair(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	in := workflows.ReminderInput{
		ReminderID: reminder.ID("", testenv.ID(t, "SHP"), "window-1", "ghost"), SubscriberID: "ghost",
		DueAt: time.Now().Add(48 * time.Hour),
	}
	ghost := "reminder/" + in.ReminderID
	_, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: ghost, TaskQueue: s.TaskQueue, TypedSearchAttributes: workflows.StartSearchAttributes(in),
	}, workflows.ReminderWorkflowName, in)
	require.NoError(t, err)
	terminateAtCleanup(t, s, ghost)
	r := scheduleOne(t, s, time.Now().Add(48*time.Hour))
	waitListed(t, s, ghost, r.WorkflowID)
	exec(t, s, `UPDATE reminders SET state = 'sent' WHERE id = $1`, r.ReminderID)

	divs := verify(t, s, true)
	require.Len(t, divs, 2, "%+v", divs)
	byKind := map[string]starter.Divergence{}
	for _, d := range divs {
		require.False(t, d.Repaired(), "%+v", d)
		require.NotEmpty(t, d.Error, "says why it was not repaired")
		byKind[d.Kind] = d
	}
	require.Equal(t, in.ReminderID, byKind[starter.DivergenceRowMissing].ReminderID)
	require.Equal(t, r.ReminderID, byKind[starter.DivergenceFinishedButRunning].ReminderID)
	for _, id := range []string{ghost, r.WorkflowID} {
		desc, err := s.Temporal.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err)
		require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus(), "left running")
	}

	require.NoError(t, s.Temporal.TerminateWorkflow(ctx, ghost, "", "an operator decided"))
	require.NoError(t, s.Temporal.TerminateWorkflow(ctx, r.WorkflowID, "", "an operator decided"))
	require.Empty(t, verify(t, s, true))
}

// With no worker to answer the status query, verify compares the row with
// the search attributes the workflow upserts.
func TestVerifyWithoutAWorkerReadsTheSearchAttributes(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	r := scheduleOne(t, s, time.Now().Add(48*time.Hour))
	o := starter.VerifyOptions{Repair: true, QueryWait: time.Second}
	require.Empty(t, verifyWith(t, s, o), "the search attributes agree with the row")
	exec(t, s, `UPDATE reminders SET due_at = due_at + interval '1 hour', delivery_key = md5('x') || md5('y') WHERE id = $1`, r.ReminderID)

	verifyRepairsWith(t, s, o, starter.DivergenceDueDiffers, r.ReminderID)
	got := row(t, s, r.ReminderID)
	require.True(t, r.DueAt.Equal(got.DueAt), "%s != %s", r.DueAt, got.DueAt)
	require.Equal(t, r.DeliveryKey, got.DeliveryKey)
}

// A pending row whose cancel was asked for and never finished (it answered
// cancel_requested), and whose workflow Temporal then forgot: verify does
// not start it again. It ends cancelled in the mirror, and nothing runs.
func TestVerifyDoesNotRestartWhatWasAskedToBeCancelled(t *testing.T) {
	t.Parallel()
	server := testenv.StartDevServer(t, `history.transferProcessorUpdateAckInterval="1s"`)
	s := testenv.NewStackWith(t, testenv.StackOptions{TemporalAddress: server.Address})
	ctx := context.Background()
	pending := scheduleOne(t, s, time.Now().Add(48*time.Hour))
	require.NoError(t, s.Mirror.RequestCancel(ctx, pending.ReminderID, map[string]any{"by": "tracker"}))
	deleteWorkflow(t, s, pending.WorkflowID)

	divs := verify(t, s, true)
	require.Len(t, divs, 1, "%+v", divs)
	require.Equal(t, starter.DivergenceWorkflowMissing, divs[0].Kind)
	require.True(t, divs[0].Repaired(), "%+v", divs[0])
	require.Contains(t, divs[0].Repair, "cancelled")
	require.Equal(t, reminder.Cancelled, row(t, s, pending.ReminderID).State)
	_, err := s.Temporal.DescribeWorkflowExecution(ctx, pending.WorkflowID, "")
	require.Error(t, err, "no workflow was started again for it")
	require.Empty(t, verify(t, s, true), "a second run finds nothing")
}

// A reminder whose workflow ended while its row was pending: its send was
// refused under a key the row no longer holds (a window move reached the
// mirror and not the workflow), and the workflow, of a release before it
// followed the mirror's move (here: pinned to that path), ended "as the
// mirror says", in the pending state scheduled. Nothing was sent and
// nothing ever would be: verify reports it and starts its workflow again
// from the row (a new run under the same id), which sends once, under the
// row's key. Its mark in the mirror may have failed too; it is one
// divergence, not two. (Verify reported closed_not_mirrored, "ended in a
// state that is not final; look at its history", and left it lost.)
func TestVerifyStartsAgainAReminderWhoseWorkflowEndedPending(t *testing.T) {
	t.Parallel()
	for _, unmarked := range []bool{false, true} {
		t.Run(map[bool]string{false: "marked started", true: "its mark failed"}[unmarked], func(t *testing.T) {
			t.Parallel()
			s := testenv.NewStackWith(t, testenv.StackOptions{
				Versions: map[string]workflow.Version{workflows.ChangeFollowsTheMirrorsMove: workflow.DefaultVersion},
			})
			ctx := context.Background()
			r := scheduleOne(t, s, time.Now().Add(2*time.Second))
			if unmarked {
				exec(t, s, `UPDATE reminders SET workflow_started_at = NULL WHERE id = $1`, r.ReminderID)
			}
			// The row alone moves, as a window move that found no workflow does.
			due := reminder.NormalizeTime(time.Now().Add(5 * time.Second))
			key := reminder.DeliveryKey(r.ReminderID, r.SubscriberID, due)
			require.NoError(t, s.Mirror.Reschedule(ctx, r.ReminderID, due, key, map[string]any{"by": "planner"}))
			require.Equal(t, reminder.Scheduled, waitFor(t, s, r.WorkflowID).State, "the workflow ended pending")
			require.Zero(t, s.Mail.Requests(), "nothing was sent at the old time")
			if !unmarked {
				testenv.RecordHistory(t, s.Temporal, r.WorkflowID, "ended-pending-under-a-moved-key-unleveled")
			}

			divs := verify(t, s, true)
			require.Len(t, divs, 1, "%+v", divs)
			d := divs[0]
			require.Equal(t, starter.DivergenceClosedPending, d.Kind, "%+v", d)
			require.Equal(t, r.ReminderID, d.ReminderID)
			require.Contains(t, d.Engine, "completed, scheduled")
			require.True(t, d.Repaired(), "%+v", d)
			require.Contains(t, d.Repair, "started its workflow again")

			res := waitFor(t, s, r.WorkflowID)
			require.Equal(t, reminder.Sent, res.State, "the new run sent it")
			require.Equal(t, key, res.DeliveryKey)
			mails := s.Mail.Mails()
			require.Len(t, mails, 1)
			require.Equal(t, key, mails[0].CustomArgs["delivery_key"])
			got := row(t, s, r.ReminderID)
			require.Equal(t, reminder.Sent, got.State)
			require.NotNil(t, got.WorkflowStartedAt, "marked started")
			require.Empty(t, verify(t, s, true), "a second run finds nothing")
		})
	}
}

// A row whose delivery key is not its due time's (no path writes one) ends
// its workflow pending too, and is reported, not started again: a new run
// would be refused under the key it derives and end pending, over and over.
func TestVerifyReportsAnEndedPendingRowItCannotStartAgain(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{
		Versions: map[string]workflow.Version{workflows.ChangeFollowsTheMirrorsMove: workflow.DefaultVersion},
	})
	r := scheduleOne(t, s, time.Now().Add(time.Second))
	exec(t, s, `UPDATE reminders SET delivery_key = md5('x') || md5('y') WHERE id = $1`, r.ReminderID)
	require.Equal(t, reminder.Scheduled, waitFor(t, s, r.WorkflowID).State, "the workflow ended pending")

	divs := verify(t, s, true)
	require.Len(t, divs, 1, "%+v", divs)
	require.Equal(t, starter.DivergenceClosedPending, divs[0].Kind)
	require.False(t, divs[0].Repaired(), "%+v", divs[0])
	require.Contains(t, divs[0].Error, "delivery key is not its due time's")
	require.Equal(t, reminder.Scheduled, waitFor(t, s, r.WorkflowID).State, "no new run")
	require.Zero(t, s.Mail.Requests())
}
