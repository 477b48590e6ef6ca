package starter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

const escalationContact = "lead@shipper.example"

func waitFor(t *testing.T, s *testenv.Stack, workflowID string) workflows.ReminderResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, workflowID, "").Get(ctx, &res), workflowID)
	return res
}

func eventTypes(t *testing.T, s *testenv.Stack, reminderID string) []string {
	t.Helper()
	events, err := s.Mirror.Events(context.Background(), reminderID)
	require.NoError(t, err)
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

func row(t *testing.T, s *testenv.Stack, reminderID string) mirror.Row {
	t.Helper()
	r, err := s.Mirror.Get(context.Background(), reminderID)
	require.NoError(t, err)
	return r
}

func mailsFor(s *testenv.Stack, reminderID string, purpose reminder.Purpose) []sink.Mail {
	var out []sink.Mail
	for _, m := range s.Mail.Mails() {
		if m.CustomArgs["reminder_id"] == reminderID && m.CustomArgs["purpose"] == string(purpose) {
			out = append(out, m)
		}
	}
	return out
}

func outcomesByID(outs []starter.Outcome) map[string]starter.Outcome {
	m := map[string]starter.Outcome{}
	for _, o := range outs {
		m[o.ReminderID] = o
	}
	return m
}

// Cancel a shipment with one reminder already sent and two pending: the
// pending ones end cancelled and send nothing; the sent one's subscriber gets
// one cancellation notice. Cancelling again changes nothing.
func TestCancelShipment(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	now := time.Now()
	u := s.Update(t, now.Add(24*time.Hour), reminder.Email, reminder.Email, reminder.Webhook)
	u.Subscribers[0].DueAt = now.Add(time.Second)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	sent, pendingMail, pendingHook := results[0], results[1], results[2]
	require.Equal(t, reminder.Sent, waitFor(t, s, sent.WorkflowID).State)

	who := starter.Actor{By: "tracker", Reason: "order withdrawn"}
	outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, who)
	require.NoError(t, err)
	got := outcomesByID(outs)
	require.Equal(t, starter.StatusCompensated, got[sent.ReminderID].Status, "the notice's outcome, waited for")
	require.Equal(t, starter.StatusCancelled, got[pendingMail.ReminderID].Status)
	require.Equal(t, starter.StatusCancelled, got[pendingHook.ReminderID].Status)

	for _, r := range []starter.Result{pendingMail, pendingHook} {
		require.Equal(t, reminder.Cancelled, waitFor(t, s, r.WorkflowID).State)
		require.Equal(t, reminder.Cancelled, row(t, s, r.ReminderID).State)
		require.Equal(t, []string{"scheduled", "cancelled"}, eventTypes(t, s, r.ReminderID))
		events, err := s.Mirror.Events(ctx, r.ReminderID)
		require.NoError(t, err)
		require.Equal(t, "tracker", events[1].Detail["by"])
		require.Equal(t, "order withdrawn", events[1].Detail["reason"])
		testenv.RecordHistory(t, s.Temporal, r.WorkflowID, "cancelled-before-due")
	}
	notice := waitFor(t, s, workflows.CancellationNoticeWorkflowID(sent.ReminderID))
	require.True(t, notice.Compensated)
	testenv.RecordHistory(t, s.Temporal, workflows.CancellationNoticeWorkflowID(sent.ReminderID), "cancellation-notice")

	notices := mailsFor(s, sent.ReminderID, reminder.PurposeCancellation)
	require.Len(t, notices, 1, "one cancellation notice")
	require.Equal(t, reminder.CancellationKey(sent.ReminderID, sent.SubscriberID), notices[0].CustomArgs["delivery_key"])
	require.Contains(t, notices[0].Subject, "Cancelled")
	require.Len(t, mailsFor(s, sent.ReminderID, reminder.PurposeReminder), 1)
	require.Len(t, s.Mail.Mails(), 2, "the pending reminders sent nothing")
	require.Empty(t, s.Hooks.Hooks())
	require.Equal(t, reminder.Sent, row(t, s, sent.ReminderID).State, "a sent reminder stays sent")
	require.Equal(t, []string{"scheduled", "sent", "cancelled_late", "cancellation_sent"}, eventTypes(t, s, sent.ReminderID))

	// Twice is harmless.
	again, err := s.Starter.Cancel(ctx, "", u.ShipmentID, who)
	require.NoError(t, err)
	got = outcomesByID(again)
	require.Equal(t, starter.StatusAlreadyCompensated, got[sent.ReminderID].Status)
	require.Equal(t, starter.StatusAlreadyCancelled, got[pendingMail.ReminderID].Status)
	require.Equal(t, starter.StatusAlreadyCancelled, got[pendingHook.ReminderID].Status)
	require.Len(t, s.Mail.Mails(), 2)

	_, err = s.Starter.Cancel(ctx, "", "SHP-never-seen", who)
	require.True(t, errors.Is(err, starter.ErrUnknownShipment))
}

// The delivery window moves: the pending reminder's due time moves with it,
// through the workflow's update; the key follows the due time.
func TestRescheduleUpdate(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	now := time.Now().UTC()
	window := now.Add(2 * time.Hour).Truncate(time.Second)
	u := s.Update(t, now.Add(time.Hour), reminder.Email)
	u.WindowStart = window
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]

	// The window moves 1h earlier, less two seconds: the reminder comes due now.
	newWindow := window.Add(-time.Hour + 2*time.Second)
	outs, err := s.Starter.RescheduleUpdate(ctx, "", u.ShipmentID, u.UpdateID, newWindow, starter.Actor{By: "planner"})
	require.NoError(t, err)
	require.Len(t, outs, 1)
	require.Equal(t, starter.StatusRescheduled, outs[0].Status, outs[0].Error)
	newDue := reminder.NormalizeTime(r.DueAt.Add(newWindow.Sub(window)))
	require.Equal(t, newDue, *outs[0].DueAt)
	newKey := reminder.DeliveryKey(r.ReminderID, r.SubscriberID, newDue)
	require.Equal(t, newKey, outs[0].DeliveryKey)
	require.NotEqual(t, r.DeliveryKey, newKey)

	require.Equal(t, reminder.Sent, waitFor(t, s, r.WorkflowID).State)
	testenv.RecordHistory(t, s.Temporal, r.WorkflowID, testenv.AtCurrentLevel("rescheduled"))
	mails := s.Mail.Mails()
	require.Len(t, mails, 1)
	require.Equal(t, newKey, mails[0].CustomArgs["delivery_key"], "sent under the new key")
	got := row(t, s, r.ReminderID)
	require.Equal(t, newDue, got.DueAt.UTC())
	require.Equal(t, newKey, got.DeliveryKey)
	require.Equal(t, []string{"scheduled", "rescheduled", "sent"}, eventTypes(t, s, r.ReminderID))
	_, ws, err := s.Mirror.Window(ctx, "", u.ShipmentID, u.UpdateID)
	require.NoError(t, err)
	require.True(t, newWindow.Equal(ws))

	// A finished reminder refuses, with a clear reason.
	out, err := s.Starter.RescheduleReminder(ctx, "", r.ReminderID, now.Add(time.Hour), starter.Actor{By: "planner"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRefused, out.Status)
	require.Contains(t, out.Error, "no longer running")
}

func TestRescheduleRefusesAbsurdTimes(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	results, err := s.Starter.Schedule(ctx, s.Update(t, time.Now().Add(time.Hour), reminder.Email))
	require.NoError(t, err)
	r := results[0]
	t.Cleanup(func() { _ = s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over") })

	out, err := s.Starter.RescheduleReminder(ctx, "", r.ReminderID, time.Now().AddDate(5, 0, 0), starter.Actor{By: "planner"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRefused, out.Status)
	require.Contains(t, out.Error, "days ahead")
	require.Equal(t, []string{"scheduled"}, eventTypes(t, s, r.ReminderID), "a refused reschedule writes nothing")
	require.Equal(t, r.DeliveryKey, row(t, s, r.ReminderID).DeliveryKey)
}

// An update needing approval: approved sends at due, rejected ends cancelled.
func TestApproveAndReject(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Second), reminder.Email, reminder.Email)
	u.Approval.Required = true
	u.EscalationEmail = escalationContact
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	approved, rejected := results[0], results[1]
	require.Equal(t, reminder.AwaitingApproval, row(t, s, approved.ReminderID).State)

	outs, err := s.Starter.Decide(ctx, starter.Selection{ReminderID: approved.ReminderID}, true,
		starter.Actor{By: "alice", Reason: "customer confirmed"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusApproved, outs[0].Status, outs[0].Error)
	outs, err = s.Starter.Decide(ctx, starter.Selection{ReminderID: rejected.ReminderID}, false,
		starter.Actor{By: "bob", Reason: "wrong consignee"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRejected, outs[0].Status, outs[0].Error)

	require.Equal(t, reminder.Sent, waitFor(t, s, approved.WorkflowID).State)
	require.Equal(t, reminder.Cancelled, waitFor(t, s, rejected.WorkflowID).State)
	testenv.RecordHistory(t, s.Temporal, approved.WorkflowID, testenv.AtCurrentLevel("approved"))
	testenv.RecordHistory(t, s.Temporal, rejected.WorkflowID, "rejected-mirror-first")
	testenv.RecordHistory(t, s.Temporal, rejected.WorkflowID, testenv.AtCurrentLevel("rejected"))
	require.Len(t, mailsFor(s, approved.ReminderID, reminder.PurposeReminder), 1)
	require.Empty(t, mailsFor(s, rejected.ReminderID, reminder.PurposeReminder))
	require.Equal(t, []string{"scheduled", "approved", "sent"}, eventTypes(t, s, approved.ReminderID))
	require.Equal(t, []string{"scheduled", "rejected"}, eventTypes(t, s, rejected.ReminderID))
	events, err := s.Mirror.Events(ctx, approved.ReminderID)
	require.NoError(t, err)
	require.Equal(t, "alice", events[1].Detail["by"])
	require.Equal(t, "customer confirmed", events[1].Detail["reason"])
	require.Equal(t, reminder.Cancelled, row(t, s, rejected.ReminderID).State)

	// A second decision the other way is refused, saying who decided; the
	// same one again (a retry whose answer was lost) reads as done.
	outs, err = s.Starter.Decide(ctx, starter.Selection{ReminderID: approved.ReminderID}, false, starter.Actor{By: "bob"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRefused, outs[0].Status)
	require.Equal(t, "alice", outs[0].DecidedBy)
	require.Contains(t, outs[0].Error, "approved already, by alice")
	outs, err = s.Starter.Decide(ctx, starter.Selection{ReminderID: approved.ReminderID}, true, starter.Actor{By: "alice"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusAlreadyApproved, outs[0].Status)
	require.Equal(t, "alice", outs[0].DecidedBy)
	require.NotNil(t, outs[0].DecidedAt)
	outs, err = s.Starter.Decide(ctx, starter.Selection{ShipmentID: u.ShipmentID, UpdateID: u.UpdateID}, false, starter.Actor{By: "bob"})
	require.NoError(t, err)
	require.Len(t, outs, 2)
	byID := map[string]starter.Outcome{outs[0].ReminderID: outs[0], outs[1].ReminderID: outs[1]}
	require.Equal(t, starter.StatusAlreadyRejected, byID[rejected.ReminderID].Status)
	require.Equal(t, "bob", byID[rejected.ReminderID].DecidedBy)
	require.Equal(t, starter.StatusRefused, byID[approved.ReminderID].Status)
	require.Equal(t, []string{"scheduled", "approved", "sent"}, eventTypes(t, s, approved.ReminderID), "nothing written")
}

// Every operator change is in the workflow's history before the mirror
// hears of it: its acceptance, then a timer that ends the accepting
// workflow task, then the local activity that writes the mirror
// (changeAcceptedFirst). A reminder started before this release (here:
// before levels) asks for the change's version at its first operator
// change (a marker the replay test holds), and takes the same order.
func TestTheHistoryHoldsAChangeBeforeTheMirrorHearsOfIt(t *testing.T) {
	t.Parallel()
	for _, earlier := range []bool{false, true} {
		t.Run(map[bool]string{false: "current level", true: "started before levels"}[earlier], func(t *testing.T) {
			t.Parallel()
			var o testenv.StackOptions
			if earlier {
				o.Versions = map[string]workflow.Version{workflows.ChangeLocalFirstAttempt: 2}
			}
			s := testenv.NewStackWith(t, o)
			ctx := context.Background()
			u := s.Update(t, time.Now().Add(time.Hour), reminder.Email)
			u.Approval.Required = true
			u.EscalationEmail = escalationContact
			results, err := s.Starter.Schedule(ctx, u)
			require.NoError(t, err)
			r := results[0]
			outs, err := s.Starter.Decide(ctx, starter.Selection{ReminderID: r.ReminderID}, true, starter.Actor{By: "alice"})
			require.NoError(t, err)
			require.Equal(t, starter.StatusApproved, outs[0].Status, outs[0].Error)
			out, err := s.Starter.RescheduleReminder(ctx, "", r.ReminderID, time.Now().Add(2*time.Second), starter.Actor{By: "ops"})
			require.NoError(t, err)
			require.Equal(t, starter.StatusRescheduled, out.Status, out.Error)
			require.Equal(t, reminder.Sent, waitFor(t, s, r.WorkflowID).State)

			h := testenv.History(t, s.Temporal, r.WorkflowID)
			var order []string
			for _, ev := range h.GetEvents() {
				switch {
				case ev.GetWorkflowExecutionUpdateAcceptedEventAttributes() != nil:
					order = append(order, "accepted")
				case ev.GetTimerStartedEventAttributes() != nil && ev.GetTimerStartedEventAttributes().GetStartToFireTimeout().AsDuration() == time.Millisecond:
					order = append(order, "task ended")
				case ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity":
					order = append(order, "mirror written")
				case ev.GetWorkflowExecutionUpdateCompletedEventAttributes() != nil:
					order = append(order, "completed")
				}
			}
			change := []string{"accepted", "task ended", "mirror written", "completed"}
			// The send writes the mirror in its activity, not locally.
			require.Equal(t, append(append([]string{}, change...), change...), order)
			name := testenv.AtCurrentLevel("approved-then-rescheduled")
			if earlier {
				name = "approved-then-rescheduled-accepted-first-unleveled"
			}
			testenv.RecordHistory(t, s.Temporal, r.WorkflowID, name)
		})
	}
}

// No decision in time: the escalation contact hears once, then the reminder
// expires at the final deadline (seconds here, a day and three by default).
func TestApprovalTimeoutEscalatesAndExpires(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Second), reminder.Email)
	u.Approval = reminder.Approval{Required: true, Timeout: time.Second, ExpireAfter: 3 * time.Second}
	u.EscalationEmail = escalationContact
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]

	require.Equal(t, reminder.Expired, waitFor(t, s, r.WorkflowID).State)
	testenv.RecordHistory(t, s.Temporal, r.WorkflowID, testenv.AtCurrentLevel("approval-expired"))
	esc := mailsFor(s, r.ReminderID, reminder.PurposeEscalation)
	require.Len(t, esc, 1)
	require.Equal(t, []string{escalationContact}, esc[0].To)
	require.Contains(t, esc[0].Subject, "approval")
	require.NotContains(t, esc[0].Text, u.Subscribers[0].Email, "the escalation names ids, not the subscriber's address")
	require.Empty(t, mailsFor(s, r.ReminderID, reminder.PurposeReminder))
	require.Equal(t, reminder.Expired, row(t, s, r.ReminderID).State)
	require.Equal(t, []string{"scheduled", "escalation_sent", "expired"}, eventTypes(t, s, r.ReminderID))
}

// A permanent refusal from the mail API fails the reminder and escalates once.
func TestPermanentFailureEscalatesOnce(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now(), reminder.Email)
	u.EscalationEmail = escalationContact
	s.Mail.Fail(sink.Answer{Status: 400})
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]

	require.Equal(t, reminder.Failed, waitFor(t, s, r.WorkflowID).State)
	require.Empty(t, mailsFor(s, r.ReminderID, reminder.PurposeReminder))
	esc := mailsFor(s, r.ReminderID, reminder.PurposeEscalation)
	require.Len(t, esc, 1)
	require.Contains(t, esc[0].Text, "400")
	require.Equal(t, reminder.Failed, row(t, s, r.ReminderID).State)
	require.Equal(t, []string{"scheduled", "delivery_failed", "failed", "escalation_sent"}, eventTypes(t, s, r.ReminderID))
}

// Operators find reminders through Temporal visibility by ShipmentId and
// ReminderState: exactly the expected ones.
func TestVisibilityByShipmentAndState(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	later := time.Now().Add(48 * time.Hour)
	u := s.Update(t, later, reminder.Email, reminder.Email, reminder.Webhook)
	u.Subscribers[0].RequiresApproval = true
	u.Subscribers[1].RequiresApproval = true
	u.EscalationEmail = escalationContact
	other := s.Update(t, later, reminder.Email)
	other.Approval.Required = true
	other.EscalationEmail = escalationContact
	var all []starter.Result
	for _, up := range []reminder.Update{u, other} {
		res, err := s.Starter.Schedule(ctx, up)
		require.NoError(t, err)
		all = append(all, res...)
	}
	t.Cleanup(func() {
		for _, r := range all {
			_ = s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})

	list := func(query string) []string {
		var ids []string
		var token []byte
		for {
			resp, err := s.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
			require.NoError(t, err)
			for _, e := range resp.GetExecutions() {
				ids = append(ids, e.GetExecution().GetWorkflowId())
			}
			if token = resp.GetNextPageToken(); len(token) == 0 {
				return ids
			}
		}
	}
	awaiting := fmt.Sprintf(`ShipmentId = %q AND ReminderState = "awaiting_approval"`, u.ShipmentID)
	want := []string{all[0].WorkflowID, all[1].WorkflowID}
	require.Eventually(t, func() bool { return len(list(awaiting)) == 2 }, 20*time.Second, 100*time.Millisecond)
	require.ElementsMatch(t, want, list(awaiting))
	require.ElementsMatch(t, []string{all[2].WorkflowID},
		list(fmt.Sprintf(`ShipmentId = %q AND ReminderState = "scheduled"`, u.ShipmentID)))

	// A state change is upserted: after approval the reminder leaves the filter.
	_, err := s.Starter.Decide(ctx, starter.Selection{ReminderID: all[0].ReminderID}, true, starter.Actor{By: "alice"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(list(awaiting)) == 1 }, 20*time.Second, 100*time.Millisecond)
	require.ElementsMatch(t, []string{all[1].WorkflowID}, list(awaiting))
}

// An overdue-approval escalation that keeps failing (the mail API answering
// 503) holds neither the expiry nor a cancel behind it: each comes on time,
// and the escalation still retrying is abandoned.
func TestFailingEscalationHoldsNothingBehindIt(t *testing.T) {
	t.Parallel()
	for _, cancel := range []bool{false, true} {
		t.Run(map[bool]string{false: "expiry", true: "cancel"}[cancel], func(t *testing.T) {
			t.Parallel()
			s := testenv.NewStack(t)
			ctx := context.Background()
			s.Mail.Fail(failing(503, 1000)...)
			u := s.Update(t, time.Now().Add(time.Hour), reminder.Email)
			u.Approval = reminder.Approval{Required: true, Timeout: time.Second, ExpireAfter: 5 * time.Second}
			if cancel {
				u.Approval.ExpireAfter = time.Hour
			}
			u.EscalationEmail = escalationContact
			results, err := s.Starter.Schedule(ctx, u)
			require.NoError(t, err)
			r := results[0]
			require.Eventually(t, func() bool { return s.Mail.Requests() >= 3 }, 30*time.Second, 50*time.Millisecond,
				"the escalation is retrying")
			want := reminder.Expired
			if cancel {
				outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker"})
				require.NoError(t, err)
				require.Equal(t, starter.StatusCancelled, outs[0].Status, "answered, not held behind the escalation")
				want = reminder.Cancelled
			}

			wctx, stop := context.WithTimeout(ctx, 30*time.Second)
			defer stop()
			var res workflows.ReminderResult
			require.NoError(t, s.Temporal.GetWorkflow(wctx, r.WorkflowID, "").Get(wctx, &res), "ended on time")
			require.Equal(t, want, res.State)
			require.Equal(t, want, row(t, s, r.ReminderID).State)
			require.Empty(t, s.Mail.Mails(), "nothing got through")
		})
	}
}
