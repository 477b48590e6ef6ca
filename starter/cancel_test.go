package starter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// failing is n answers of status.
func failing(status, n int) []sink.Answer {
	out := make([]sink.Answer, n)
	for i := range out {
		out[i] = sink.Answer{Status: status}
	}
	return out
}

// A cancelled shipment's reminder whose send is retrying (the mail API
// answering 503) is stopped: the cancel answers "cancelled" at once, nothing
// is sent then or later, and no notice follows a send that never happened.
func TestCancelStopsARetryingSend(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	s.Mail.Fail(failing(503, 100)...)
	u := s.Update(t, time.Now(), reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Mail.Requests() >= 2 }, time.Minute, 50*time.Millisecond, "the send is retrying")

	began := time.Now()
	outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker", Reason: "order withdrawn"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusCancelled, outs[0].Status)
	require.Less(t, time.Since(began), 15*time.Second, "answered well within the cancel wait, not after the retry budget")
	require.Equal(t, reminder.Cancelled, waitFor(t, s, results[0].WorkflowID).State)
	require.Equal(t, reminder.Cancelled, row(t, s, results[0].ReminderID).State)
	require.Empty(t, s.Mail.Mails(), "nothing was accepted")
	require.Empty(t, mailsFor(s, results[0].ReminderID, reminder.PurposeCancellation))
	testenv.RecordHistory(t, s.Temporal, results[0].WorkflowID, testenv.AtCurrentLevel("cancel-stops-retrying-send"))
}

// A cancel that comes while the provider is answering the send cannot
// unsend it: the send finishes, and the notice follows, once. If the
// provider refuses the notice for good, the cancel says so instead of
// "compensated". (The workflow stops the activity, which already called the
// provider; it waits for the activity's answer, then compensates.)
func TestCancelDuringAnInFlightSendIsCompensated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		refuseNotice bool
		want         string
	}{
		{"notice accepted", false, starter.StatusCompensated},
		{"notice refused", true, starter.StatusCompensationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := testenv.NewStack(t)
			ctx := context.Background()
			s.Mail.SetLatency(2 * time.Second)
			u := s.Update(t, time.Now(), reminder.Email)
			results, err := s.Starter.Schedule(ctx, u)
			require.NoError(t, err)
			r := results[0]
			require.Eventually(t, func() bool { return s.Mail.InFlight() > 0 }, time.Minute, 10*time.Millisecond)
			if tc.refuseNotice {
				s.Mail.Fail(sink.Answer{Status: 400})
			}

			outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker"})
			require.NoError(t, err)
			require.Equal(t, tc.want, outs[0].Status)
			res := waitFor(t, s, r.WorkflowID)
			require.Equal(t, reminder.Sent, res.State)
			require.Len(t, mailsFor(s, r.ReminderID, reminder.PurposeReminder), 1)
			notices := 1
			if tc.refuseNotice {
				notices = 0
			}
			require.Len(t, mailsFor(s, r.ReminderID, reminder.PurposeCancellation), notices)
			require.Equal(t, reminder.Sent, row(t, s, r.ReminderID).State, "a sent reminder stays sent")
			if !tc.refuseNotice {
				testenv.RecordHistory(t, s.Temporal, r.WorkflowID, testenv.AtCurrentLevel("cancel-during-send"))
			}
		})
	}
}

// No worker answers: the cancel returns within its bound, says
// cancel_requested, and the mirror shows it. Temporal holds the request;
// when a worker returns the reminder ends cancelled, nothing sent.
func TestCancelWithNoWorkerAnswersCancelRequested(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	ctx := context.Background()
	s.Starter.CancelWait = 2 * time.Second
	u := s.Update(t, time.Now().Add(time.Second), reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]

	began := time.Now()
	outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker", Reason: "order withdrawn"})
	require.NoError(t, err)
	require.Less(t, time.Since(began), 10*time.Second)
	require.Equal(t, starter.StatusCancelRequested, outs[0].Status)
	got := row(t, s, r.ReminderID)
	require.NotNil(t, got.CancelRequestedAt, "the mirror shows the request")
	require.Equal(t, reminder.Scheduled, got.State)
	require.Equal(t, []string{"scheduled", "cancel_requested"}, eventTypes(t, s, r.ReminderID))

	s.StartWorker(t)
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var res workflows.ReminderResult
	err = s.Temporal.GetWorkflow(ctx2, r.WorkflowID, "").Get(ctx2, &res)
	var canceled *temporal.CanceledError
	require.True(t, err == nil || errors.As(err, &canceled), "got %v", err)
	require.Eventually(t, func() bool { return row(t, s, r.ReminderID).State == reminder.Cancelled }, 30*time.Second, 100*time.Millisecond)
	require.Zero(t, s.Mail.Requests(), "nothing sent though it came due")
}

// A cancel from the Web UI or the temporal CLI (a cancel of the workflow
// itself, which no shipnotify code sent) is written to the mirror by the
// workflow, which notices its own cancellation.
func TestWorkflowCancelledFromOutsideIsMirrored(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Hour), reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]

	require.NoError(t, s.Temporal.CancelWorkflow(ctx, r.WorkflowID, ""))
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = s.Temporal.GetWorkflow(ctx2, r.WorkflowID, "").Get(ctx2, nil)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled, "the workflow shows as cancelled")
	require.Equal(t, reminder.Cancelled, row(t, s, r.ReminderID).State)
	events, err := s.Mirror.Events(ctx, r.ReminderID)
	require.NoError(t, err)
	require.Equal(t, "cancelled", events[len(events)-1].Type)
	require.Equal(t, "workflow cancellation", events[len(events)-1].Detail["via"])
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus())
	testenv.RecordHistory(t, s.Temporal, r.WorkflowID, "cancelled-from-outside")
}

// A cancel of the workflow itself while its send is retrying (the mail API
// answering 503) ends it cancelled, with nothing sent and no notice: the
// notice asks the mirror, which holds no delivery that may have gone. It
// ended failed, escalating, though nothing had failed for good.
func TestWorkflowCancelledWhileItsSendRetriesEndsCancelled(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	s.Mail.Fail(failing(503, 100)...)
	u := s.Update(t, time.Now(), reminder.Email)
	u.EscalationEmail = "lead@shipper.example"
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]
	require.Eventually(t, func() bool { return s.Mail.Requests() >= 2 }, time.Minute, 50*time.Millisecond, "the send is retrying")

	require.NoError(t, s.Temporal.CancelWorkflow(ctx, r.WorkflowID, ""))
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = s.Temporal.GetWorkflow(ctx2, r.WorkflowID, "").Get(ctx2, nil)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled, "the workflow shows as cancelled")
	require.Equal(t, reminder.Cancelled, row(t, s, r.ReminderID).State, "not failed")
	require.Empty(t, s.Mail.Mails(), "nothing was sent: no reminder, no notice, no escalation")
	events, err := s.Mirror.Events(ctx, r.ReminderID)
	require.NoError(t, err)
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{"scheduled", "cancelled"}, types)
	require.Equal(t, "send", events[1].Detail["during"])
	testenv.RecordHistory(t, s.Temporal, r.WorkflowID, testenv.AtCurrentLevel("cancelled-from-outside-while-send-retries"))
}

// A cancel that meets a send which may have reached the provider (the mail
// API took the mail and did not answer within the client's timeout), to an
// address that opted out meanwhile: the reminder was sent, so the row stays
// sent, the trail says cancelled_late, no notice goes (no more mail to that
// address), and the cancel answers compensation_skipped, never cancelled
// ("nothing was sent"). The answer tells the row's story. (It answered
// cancelled while the row said sent.)
func TestACancelAfterAMaybeSentSendToAnAddressThatOptedOutSaysSo(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	ctx := context.Background()
	// The mail API takes each mail at once and answers after 3 s; the
	// client gives up after 300 ms: the send's outcome is unknown, and no
	// evidence comes within the wait.
	s.Mail.SetLatency(3 * time.Second)
	s.Activities.Email = email.NewSender(email.Options{
		APIKey: testenv.MailAPIKey, BaseURL: s.Mail.URL(), FromEmail: "reminders@shipnotify.example", Timeout: 300 * time.Millisecond,
	})
	s.Activities.EvidenceWait = 10 * time.Minute
	s.StartWorker(t)
	u := s.Update(t, time.Now(), reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]
	require.Eventually(t, func() bool {
		var status string
		err := s.DB.Pool.QueryRow(ctx, `SELECT status FROM deliveries WHERE delivery_key = $1`, r.DeliveryKey).Scan(&status)
		return err == nil && status == "maybe_sent"
	}, time.Minute, 20*time.Millisecond, "the send may have gone")
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = s.Mail.Wait(wctx, func(m []sink.Mail) bool { return len(m) == 1 && s.Mail.InFlight() == 0 })
	require.NoError(t, err, "the mail API took it")
	found, err := s.Mirror.SuppressAddressOf(ctx, r.ReminderID, "unsubscribe")
	require.NoError(t, err)
	require.True(t, found)

	outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker", Reason: "order withdrawn"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusCompensationSkipped, outs[0].Status, "it may have been sent: %+v", outs[0])
	require.Equal(t, reminder.Sent, outs[0].State)
	res := waitFor(t, s, r.WorkflowID)
	require.Equal(t, reminder.Sent, res.State)
	require.False(t, res.Compensated)
	require.Equal(t, reminder.Sent, row(t, s, r.ReminderID).State, "the row says sent")
	require.Empty(t, mailsFor(s, r.ReminderID, reminder.PurposeCancellation), "no mail to an address that opted out")
	trail := eventTypes(t, s, r.ReminderID)
	require.Contains(t, trail, "sent")
	require.Equal(t, "cancelled_late", trail[len(trail)-1], "%v", trail)
	testenv.RecordHistory(t, s.Temporal, r.WorkflowID, testenv.AtCurrentLevel("cancelled-after-maybe-sent-notice-skipped"))
}

// A cancellation notice that failed is not reported as already done: a
// second cancel starts it again.
func TestFailedCancellationNoticeIsNotReportedCompensated(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now(), reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]
	require.Equal(t, reminder.Sent, waitFor(t, s, r.WorkflowID).State)
	s.Mail.Fail(failing(400, 2)...)

	notice := workflows.CancellationNoticeWorkflowID(r.ReminderID)
	for range 2 {
		outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker"})
		require.NoError(t, err)
		require.Equal(t, starter.StatusCompensationFailed, outs[0].Status)
		ctx2, cancel := context.WithTimeout(ctx, time.Minute)
		err = s.Temporal.GetWorkflow(ctx2, notice, "").Get(ctx2, nil)
		cancel()
		require.Error(t, err, "the notice failed for good")
	}
}

// A reminder of the releases that made the first attempt a local activity,
// cancelled while that attempt waits on the provider: the real server holds
// the cancel until the attempt's workflow task completes (and refuses the
// completion the task would have closed the workflow with), so the send is
// recorded once and compensated with one notice, by the reminder's workflow
// or, when the attempt's task closed it, by the cancellation-notice
// workflow. (The test environment
// delivers the cancel in the middle of the attempt, which the server does
// not: workflows.TestCancelDuringTheLocalAttemptIsCompensated.)
func TestCancelDuringTheLocalAttemptIsCompensatedOnTheServer(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{Versions: map[string]workflow.Version{workflows.ChangeLocalFirstAttempt: 1}})
	ctx := context.Background()
	release := s.Mail.Hold()
	defer release()
	u := s.Update(t, time.Now(), reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]
	require.Eventually(t, func() bool { return s.Mail.Held() == 1 }, time.Minute, 10*time.Millisecond, "the local attempt waits on the provider")

	type answer struct {
		outs []starter.Outcome
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker"})
		done <- answer{outs, err}
	}()
	// The cancel is with the server, waiting for the attempt's task.
	require.Eventually(t, func() bool {
		desc, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
		return err == nil && desc.GetPendingWorkflowTask() != nil
	}, 30*time.Second, 10*time.Millisecond)
	release()
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, starter.StatusCompensated, got.outs[0].Status, "%+v", got.outs[0])
	require.Len(t, mailsFor(s, r.ReminderID, reminder.PurposeReminder), 1, "sent once")
	require.Len(t, mailsFor(s, r.ReminderID, reminder.PurposeCancellation), 1, "and compensated once")
	require.Equal(t, reminder.Sent, row(t, s, r.ReminderID).State)
	activityTasks := 0
	for _, ev := range testenv.History(t, s.Temporal, r.WorkflowID).GetEvents() {
		if ev.GetEventType() == enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			activityTasks++
		}
	}
	// The notice came from the reminder's workflow, or, when the attempt's
	// task had closed it first, from the cancellation-notice workflow: no
	// activity task was ever the send's.
	require.LessOrEqual(t, activityTasks, 1, "the send was the local attempt")
}
