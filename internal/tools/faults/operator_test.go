package faults

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// An operator's change that meets a stalled worker (SIGSTOP, as a long GC
// pause or a frozen node does) at production's timings (the starter's
// 60 s wait, Temporal's 10 s workflow task) is answered as it came out:
//   - an answer that nothing moved (refused, failed, no_answer) stays
//     true after the worker thaws: the mirror and the workflow both keep
//     the reminder as it was;
//   - a change answered done, or accepted, lands in the mirror and the
//     workflow alike;
//   - a repeat answers from what both hold, and reconcile --verify finds
//     nothing to repair: it never undoes an acknowledged decision.
//
// Before changeAcceptedFirst the workflow wrote the mirror inside the
// workflow task that accepted the change; the stalled worker's task timed
// out with the acceptance, and the mirror kept a change the workflow never
// took (an approval lost: reconcile put the row back to awaiting_approval),
// or, run from a stale task after the thaw, took one the workflow had
// refused.
func TestAStalledWorkerNeverHidesAnOperatorsChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		reschedule bool
		// freeze is how long the worker stays stopped.
		freeze time.Duration
		// midWrite stops the worker while the change's mirror write
		// waits on a lock, then lets the write through during the stall.
		midWrite bool
		// history names the recorded history of the path.
		history string
	}{
		{name: "approve, worker frozen as it arrives", freeze: 35 * time.Second},
		{name: "reschedule, worker frozen as it arrives", reschedule: true, freeze: 35 * time.Second},
		{name: "approve, worker frozen during its mirror write", freeze: 35 * time.Second, midWrite: true,
			history: "approved-after-a-stalled-write"},
		{name: "reschedule, worker frozen past the caller's wait", reschedule: true, freeze: 75 * time.Second},
		{name: "approve, worker frozen during its mirror write past the caller's wait", freeze: 75 * time.Second, midWrite: true,
			history: "approved-accepted-past-the-wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
			worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
			ctx := context.Background()
			u := emailUpdate(t, 1, time.Now().Add(48*time.Hour), 0)
			u.Approval.Required = true
			u.EscalationEmail = "lead@shipper.example"
			results, err := s.Starter.Schedule(ctx, u)
			require.NoError(t, err)
			r := results[0]
			t.Cleanup(func() { _ = s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over") })
			require.Eventually(t, func() bool {
				_, err := reminderStatus(s, r.WorkflowID)
				return err == nil
			}, time.Minute, 100*time.Millisecond, "the worker runs the reminder\n%s", worker.Log())

			before := mirrorRow(t, s, r.ReminderID)
			newDue := before.DueAt.Add(time.Hour)
			change := func() starter.Outcome {
				if tc.reschedule {
					out, _ := s.Starter.RescheduleReminder(ctx, "", r.ReminderID, newDue, starter.Actor{By: "ops"})
					return out
				}
				outs, _ := s.Starter.Decide(ctx, starter.Selection{ReminderID: r.ReminderID}, true, starter.Actor{By: "alice"})
				require.Len(t, outs, 1)
				return outs[0]
			}
			landed := func(row mirror.Row) bool {
				if tc.reschedule {
					return row.DueAt.Equal(newDue)
				}
				return row.State == reminder.Scheduled
			}
			answered := make(chan starter.Outcome, 1)
			if tc.midWrite {
				tx, err := s.DB.Pool.Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = tx.Rollback(ctx) }()
				_, err = tx.Exec(ctx, `LOCK TABLE reminder_events IN SHARE ROW EXCLUSIVE MODE`)
				require.NoError(t, err)
				go func() { answered <- change() }()
				require.Eventually(t, func() bool {
					waiting, err := s.DB.WaitersBehind(ctx, tx, "INSERT INTO reminder_events")
					return err == nil && waiting > 0
				}, time.Minute, 10*time.Millisecond, "the change's mirror write waits on the lock")
				worker.Signal(syscall.SIGSTOP)
				// The write goes through while the worker is stopped.
				require.NoError(t, tx.Rollback(ctx))
			} else {
				worker.Signal(syscall.SIGSTOP)
				go func() { answered <- change() }()
			}
			// The stall: a frozen node, not a wait for anything.
			<-time.After(tc.freeze)
			worker.Signal(syscall.SIGCONT)
			var out starter.Outcome
			select {
			case out = <-answered:
			case <-time.After(2 * time.Minute):
				t.Fatalf("no answer\n%s", worker.Log())
			}
			t.Logf("answered %s (%s)", out.Status, out.Error)

			// Once the worker has caught up, the mirror and the workflow
			// agree, and keep agreeing past a change made after the thaw.
			agreed := settleAgreement(t, s, r.ReminderID, r.WorkflowID, worker)
			barrier, err := s.Starter.RescheduleReminder(ctx, "", r.ReminderID, agreed.DueAt, starter.Actor{By: "ops"})
			require.NoError(t, err)
			require.Equal(t, starter.StatusUnchanged, barrier.Status, barrier.Error)
			agreed = settleAgreement(t, s, r.ReminderID, r.WorkflowID, worker)
			event := map[bool]string{true: "rescheduled", false: "approved"}[tc.reschedule]
			switch out.Status {
			case starter.StatusRefused, starter.StatusFailed, starter.StatusNoAnswer:
				require.False(t, landed(agreed), "answered %s (%s), yet the change landed", out.Status, out.Error)
				require.NotContains(t, trail(t, s, r.ReminderID), event, "answered %s, yet the mirror recorded it", out.Status)
			case starter.StatusRescheduled, starter.StatusApproved, starter.StatusAlreadyApproved, starter.StatusAccepted:
				require.True(t, landed(agreed), "answered %s, and the change did not land", out.Status)
				require.Equal(t, 1, countOf(trail(t, s, r.ReminderID), event))
			default:
				t.Fatalf("unexpected answer %+v", out)
			}

			// The same change again: answered from what both hold, it lands
			// (now, if it had not), once.
			again := change()
			settled := settleAgreement(t, s, r.ReminderID, r.WorkflowID, worker)
			require.True(t, landed(settled), "repeated: %+v", again)
			if landed(agreed) && !tc.reschedule {
				require.Equal(t, starter.StatusAlreadyApproved, again.Status, again.Error)
			}
			require.Equal(t, 1, countOf(trail(t, s, r.ReminderID), event))

			divergences, err := s.Starter.Verify(ctx, starter.VerifyOptions{Repair: true})
			require.NoError(t, err)
			for _, d := range divergences {
				require.NotEqual(t, r.ReminderID, d.ReminderID, "reconcile --verify found %+v", d)
			}
			require.Equal(t, settled.State, mirrorRow(t, s, r.ReminderID).State)
			if tc.history != "" {
				require.NoError(t, s.Temporal.TerminateWorkflow(ctx, r.WorkflowID, "", "test over"))
				testenv.RecordHistory(t, s.Temporal, r.WorkflowID, testenv.AtCurrentLevel(tc.history))
			}
		})
	}
}

// reminderStatus is the reminder's status as its workflow answers it.
func reminderStatus(s *testenv.Stack, workflowID string) (workflows.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var st workflows.Status
	v, err := s.Temporal.QueryWorkflow(ctx, workflowID, "", workflows.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err
}

// settleAgreement waits until the reminder's row and its workflow agree on its
// state, due time and key, and returns the row.
func settleAgreement(t *testing.T, s *testenv.Stack, reminderID, workflowID string, worker *testenv.Process) mirror.Row {
	t.Helper()
	var got mirror.Row
	var last string
	ok := func() bool {
		st, err := reminderStatus(s, workflowID)
		if err != nil {
			last = "status query: " + err.Error()
			return false
		}
		got = mirrorRow(t, s, reminderID)
		last = fmt.Sprintf("mirror %s due %s, workflow %s due %s", got.State, got.DueAt.UTC().Format(time.RFC3339),
			st.State, st.DueAt.UTC().Format(time.RFC3339))
		return got.State == st.State && got.DueAt.Equal(st.DueAt) && got.DeliveryKey == st.DeliveryKey
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("the mirror and the workflow disagree for good: %s\ntrail %v\n%s", last, trail(t, s, reminderID), worker.Log())
		}
		<-time.After(250 * time.Millisecond)
	}
	return got
}

func mirrorRow(t *testing.T, s *testenv.Stack, reminderID string) mirror.Row {
	t.Helper()
	got, err := s.Mirror.Get(context.Background(), reminderID)
	require.NoError(t, err)
	return got
}

func countOf(events []string, event string) int {
	n := 0
	for _, e := range events {
		if e == event {
			n++
		}
	}
	return n
}
