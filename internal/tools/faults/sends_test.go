package faults

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// Every send is safe, seen from outside through the binary: a slow
// provider, a rate cap and a cancel from the Web UI during a send.

// A mail API that takes each mail as soon as its body arrives (as SendGrid
// queues it) and answers 202 only after 6 s gets each key once: the call
// has the client's own 20 s, and a cut call would keep its claim. (The
// local first attempt cut it at 5 s and sent every key again.)
func TestASlowMailAPIGetsEachKeyOnce(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	s.Mail.SetLatency(6 * time.Second)
	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	results, err := s.Starter.Schedule(context.Background(), emailUpdate(t, 4, time.Now().Add(time.Second), 0))
	require.NoError(t, err)
	waitAll(t, s, results, 2*time.Minute)
	require.Empty(t, audit(t, s, results), "each key once\n%s", worker.Log())
	require.Equal(t, len(results), s.Mail.Requests(), "no call was made twice")
}

// With a cap of 2 deliveries a second (SHIPNOTIFY_WORKER_SENDS_PER_SECOND)
// 30 reminders due at one instant reach the mail API over at least 12 s,
// never more than 4 in any second: the cap holds on the task queue and,
// exactly, in the mirror, whichever partition or path reached a worker.
// (Local first attempts passed by the task queue's limit: all 30 came
// within 0.2 s.)
func TestTheRateCapHoldsForABurst(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	worker := testenv.StartProcess(t, s.Env("SHIPNOTIFY_WORKER_SENDS_PER_SECOND=2"), testenv.Binary(t), "worker")
	results, err := s.Starter.Schedule(context.Background(), emailUpdate(t, 30, time.Now().Add(2*time.Second), 0))
	require.NoError(t, err)
	waitAll(t, s, results, 3*time.Minute)
	require.Empty(t, audit(t, s, results), worker.Log())
	var at []time.Time
	for _, m := range s.Mail.Mails() {
		at = append(at, m.Received)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	require.GreaterOrEqual(t, at[len(at)-1].Sub(at[0]), 12*time.Second, "30 at 2/s take at least 12 s")
	for i := 0; i+4 < len(at); i++ {
		require.GreaterOrEqual(t, at[i+4].Sub(at[i]), time.Second, "five within a second at a cap of 2/s (from %s)", at[i].Format(time.StampMilli))
	}
	t.Logf("30 due at once at 2/s: the first to the last took %s", at[len(at)-1].Sub(at[0]).Round(100*time.Millisecond))
}

// A cancel of the workflow itself, as the Web UI and the temporal CLI make
// it, while the provider holds the reminder's call: the call finishes and is
// recorded, the workflow ends cancelled, and the subscriber gets the one
// cancellation notice. (It ended failed, with an escalation and no notice.)
func TestAWebUICancelDuringASendEndsCancelledWithOneNotice(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	release := s.Mail.Hold()
	defer release()
	results, err := s.Starter.Schedule(context.Background(), emailUpdate(t, 1, time.Now(), 0))
	require.NoError(t, err)
	r := results[0]
	require.Eventually(t, func() bool { return s.Mail.Held() == 1 }, time.Minute, 20*time.Millisecond, worker.Log())

	out, err := exec.Command(os.Getenv("SHIPNOTIFY_DEV_TEMPORAL_BIN"), "workflow", "cancel", "--address", s.TemporalAddress,
		"--workflow-id", r.WorkflowID).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// The cancel reaches the workflow while its send is in the provider's hands.
	require.Eventually(t, func() bool { return hasEvent(s, r.WorkflowID, enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED) },
		30*time.Second, 20*time.Millisecond)
	release()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Eventually(t, func() bool {
		desc, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
		return err == nil && desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	}, time.Minute, 50*time.Millisecond)
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus(), "the Web UI shows it cancelled")

	_, err = s.Mail.Wait(ctx, func(m []sink.Mail) bool { return len(m) == 2 })
	require.NoError(t, err, "the reminder and one notice")
	purposes := map[string]int{}
	for _, m := range s.Mail.Mails() {
		purposes[m.CustomArgs["purpose"]]++
	}
	require.Equal(t, map[string]int{string(reminder.PurposeReminder): 1, string(reminder.PurposeCancellation): 1}, purposes)
	events, err := s.Mirror.Events(ctx, r.ReminderID)
	require.NoError(t, err)
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{"scheduled", "sent", "cancelled_late", "cancellation_sent"}, types, "never failed, never silent")
	require.Equal(t, reminder.Sent, row(t, s, r.ReminderID), "it was sent: the row says so, the trail says it was cancelled after")
	testenv.RecordHistory(t, s.Temporal, r.WorkflowID, testenv.AtCurrentLevel("cancelled-from-outside-during-send"))
}

// A cancel that comes while the send waits for its slot of the rate cap is
// heard before the provider is called: the cancel answers cancelled,
// nothing is sent then or after, no notice follows, and the claim is given
// up. The attempt is held at the cap's row after its claim until Temporal
// has the cancel request, then waits 3 s in place for its slot: at the cap
// of 0.2/s a slot is seconds away. (The attempt heartbeated only before its
// claim and waited for its slot without listening: the reminder went out,
// then the notice, and the cancel answered compensated.)
func TestACancelDuringTheSlotWaitSendsNothing(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	worker := testenv.StartProcess(t, s.Env("SHIPNOTIFY_WORKER_SENDS_PER_SECOND=0.2"), testenv.Binary(t), "worker")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	slots := testenv.HoldSendRate(t, s.DB)
	u := emailUpdate(t, 1, time.Now(), 0)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]
	require.Eventually(t, func() bool { return claimStatus(s, r.DeliveryKey) == "sending" }, time.Minute, 10*time.Millisecond,
		"the send claims its key and asks for its slot\n%s", worker.Log())

	answer := make(chan []starter.Outcome, 1)
	go func() {
		outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker", Reason: "order withdrawn"})
		if err != nil {
			outs = []starter.Outcome{{Error: err.Error()}}
		}
		answer <- outs
	}()
	require.Eventually(t, func() bool { return cancelRequested(ctx, s, r.WorkflowID) }, time.Minute, 10*time.Millisecond,
		"the workflow asks its send to stop")
	slots.Release(t, 3*time.Second)

	outs := <-answer
	require.Equal(t, starter.StatusCancelled, outs[0].Status, "%+v\n%s", outs[0], worker.Log())
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &res))
	require.Equal(t, reminder.Cancelled, res.State)
	require.Zero(t, s.Mail.Requests(), "nothing was sent, then or after the slot")
	require.Equal(t, reminder.Cancelled, row(t, s, r.ReminderID))
	require.Equal(t, []string{"scheduled", "cancelled"}, trail(t, s, r.ReminderID))
	require.Equal(t, "released", claimStatus(s, r.DeliveryKey), "the claim is given up: nothing was sent")
}

// cancelRequested reports whether Temporal holds a cancel request for the
// workflow's running activity.
func cancelRequested(ctx context.Context, s *testenv.Stack, workflowID string) bool {
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return false
	}
	for _, a := range desc.GetPendingActivities() {
		if a.GetState() == enums.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED {
			return true
		}
	}
	return false
}

// A reminder whose send may have reached the provider, then cancelled, was
// sent as far as anyone can tell, and every account says so: the mail API
// takes the mail at once and answers 6 s later, the worker is SIGKILLed
// before the answer, there is no Event Webhook. The row stays sent, the
// trail notes the cancel after it, the tracker hears sent and then
// cancelled, the workflow ends sent and compensated, and the one notice
// goes out. (The row ended cancelled, the tracker heard cancelled, while
// the cancel answered "compensated" and the notice went: trail
// [scheduled cancelled send_unconfirmed cancellation_sent].)
func TestAMaybeSentReminderThatIsCancelledStaysSent(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	s.Mail.SetLatency(6 * time.Second)
	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u := emailUpdate(t, 1, time.Now(), 0)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]
	// The mail API has the reminder (it accepts it whether or not its
	// caller is still there) and holds its answer: the worker dies.
	_, err = s.Mail.Wait(ctx, func([]sink.Mail) bool { return s.Mail.InFlight() == 1 })
	require.NoError(t, err, worker.Log())
	worker.Kill()
	worker.Start()

	outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker", Reason: "order withdrawn"})
	require.NoError(t, err)
	// The workflow answers once the dead attempt times out (30 s), which
	// may be after the cancel's own wait (20 s): then cancel_requested.
	require.Contains(t, []string{starter.StatusCompensated, starter.StatusCancelRequested}, outs[0].Status, worker.Log())
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &res))
	require.Equal(t, reminder.Sent, res.State, "the workflow ends as a sent reminder does")
	require.True(t, res.Compensated)

	_, err = s.Mail.Wait(ctx, func(m []sink.Mail) bool { return len(m) == 2 && s.Mail.InFlight() == 0 })
	require.NoError(t, err, "the reminder and one notice")
	purposes := map[string]int{}
	for _, m := range s.Mail.Mails() {
		purposes[m.CustomArgs["purpose"]]++
	}
	require.Equal(t, map[string]int{string(reminder.PurposeReminder): 1, string(reminder.PurposeCancellation): 1}, purposes)
	require.Equal(t, reminder.Sent, row(t, s, r.ReminderID), "a maybe-sent reminder is a sent one")
	require.Equal(t, []string{"scheduled", "send_unconfirmed", "sent", "cancelled_late", "cancellation_sent"},
		slices.DeleteFunc(trail(t, s, r.ReminderID), func(e string) bool { return e == "cancel_requested" }))
	var latest, state string
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `SELECT type, state FROM reminder_changes WHERE reminder_id = $1`, r.ReminderID).
		Scan(&latest, &state))
	require.Equal(t, []string{"cancelled", "sent"}, []string{latest, state}, "the tracker hears a sent reminder's cancel")
}

// claimStatus is a delivery key's claim status ("" when it has none).
func claimStatus(s *testenv.Stack, key string) string {
	var status string
	_ = s.DB.Pool.QueryRow(context.Background(), `SELECT status FROM deliveries WHERE delivery_key = $1`, key).Scan(&status)
	return status
}

// trail is a reminder's event types in order.
func trail(t *testing.T, s *testenv.Stack, id string) []string {
	t.Helper()
	events, err := s.Mirror.Events(context.Background(), id)
	require.NoError(t, err)
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	return types
}

func row(t *testing.T, s *testenv.Stack, id string) reminder.State {
	t.Helper()
	got, err := s.Mirror.Get(context.Background(), id)
	require.NoError(t, err)
	return got.State
}
