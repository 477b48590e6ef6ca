package workflows_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/worker"
	"github.com/shipnotify/shipnotify/workflows"
)

var acts *activities.Activities

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// landing is how long after its acceptance an operator's change lands: the
// timer that ends the workflow task accepting it (changeAcceptedFirst).
const landing = time.Millisecond

func input(due time.Time) workflows.ReminderInput {
	return workflows.ReminderInput{
		ReminderID: "SHP-1/window-1/ops", ShipmentID: "SHP-1", UpdateID: "window-1",
		SubscriberID: "ops", DueAt: due,
	}
}

func withApproval(in workflows.ReminderInput) workflows.ReminderInput {
	in.Approval = reminder.Approval{Required: true, Timeout: day, ExpireAfter: 3 * day}
	return in
}

type notifyCall struct {
	At time.Time
	In activities.NotifyInput
	// Local: the call ran as a local activity.
	Local bool
}

// harness runs ReminderWorkflow in the time-skipping test environment with
// the real registrations and recording stand-ins for the activities.
type harness struct {
	t           *testing.T
	env         *testsuite.TestWorkflowEnvironment
	notifies    []notifyCall
	transitions []activities.TransitionInput
	reschedules []activities.RescheduleInput
	// transition is the RecordTransition mock; .After(d) makes each mirror
	// write take d of workflow time.
	transition *testsuite.MockCallWrapper
	// transitionsAt is when each mirror write completed (workflow time).
	transitionsAt []time.Time
	// fail, when set, makes the reminder's own delivery fail with it.
	fail error
	// respond, when set, answers the reminder's own delivery instead.
	respond func(activities.NotifyInput) (activities.NotifyResult, error)
	// failEscalation, failReschedule and failDecision make those fail
	// (the last two until failUntil of workflow time, when it is set).
	failEscalation, failReschedule, failDecision error
	failUntil                                    time.Time
	// mayHaveSent: a reminder's own send reported a send, or an unknown
	// outcome; the cancellation notice stand-in sends only then, as the
	// notify activity does from the mirror, and a cancel that meets the
	// send finds it sent (mirror.Store.CancelDuringSend).
	mayHaveSent bool
	// noticeSuppressed: the subscriber's address opted out since the
	// reminder may have reached it, so the notice is skipped whatever was
	// sent (the notify's mirror.NoticeSuppressed).
	noticeSuppressed bool
	// row is the mirror row's state as the stand-ins keep it, refusing as
	// the mirror does: a change that must leave a pending state finds a
	// finished row and is refused, naming its state; a note on a finished
	// row changes nothing. "" is a pending row no change has reached yet.
	row reminder.State
}

// refuse is the mirror's refusal of a change to a row in state.
func refuse(state reminder.State) error {
	return temporal.NewNonRetryableApplicationError("refused: the reminder is "+string(state)+" in the mirror",
		activities.ErrTypeTransitionRefused, nil, state)
}

// failing reports whether failReschedule and failDecision still fail.
func (h *harness) failing() bool { return h.failUntil.IsZero() || h.env.Now().Before(h.failUntil) }

// finished reports whether the stand-in row is in a final state.
func (h *harness) finished() bool { return h.row != "" && !h.row.Pending() }

// pin makes new runs record version v for changeID (reminders started on
// an earlier release record what it knew; a test of their path pins it).
func (h *harness) pin(changeID string, v workflow.Version) {
	h.env.SetWorkerOptions(sdkworker.Options{
		PreferredVersionProvider: func(in sdkworker.PreferredVersionProviderInput) *sdkworker.VersionPreference {
			if in.ChangeID == changeID {
				return &sdkworker.VersionPreference{Version: v}
			}
			return nil
		},
	})
}

// newHarness builds a harness whose notify activity takes sendTime (of
// workflow time) to complete.
func newHarness(t *testing.T, sendTime ...time.Duration) *harness {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	h := &harness{t: t, env: suite.NewTestWorkflowEnvironment()}
	h.env.SetStartTime(t0)
	worker.Register(h.env, &activities.Activities{})
	notify := h.env.OnActivity(acts.Notify, mock.Anything, mock.Anything)
	if len(sendTime) > 0 {
		notify = notify.After(sendTime[0])
	}
	notify.Return(
		func(ctx context.Context, in activities.NotifyInput) (activities.NotifyResult, error) {
			h.notifies = append(h.notifies, notifyCall{At: h.env.Now().UTC(), In: in, Local: activity.GetInfo(ctx).IsLocalActivity})
			switch {
			case in.Purpose == reminder.PurposeEscalation && h.failEscalation != nil:
				return activities.NotifyResult{}, h.failEscalation
			case in.Purpose == reminder.PurposeCancellation && !h.mayHaveSent:
				return activities.NotifyResult{Skipped: true, SkipReason: "the reminder was never delivered"}, nil
			case in.Purpose == reminder.PurposeCancellation && h.noticeSuppressed:
				return activities.NotifyResult{Skipped: true, SkipReason: "the subscriber's address has since unsubscribed (suppressed)"}, nil
			case in.Purpose != "":
			case h.respond != nil:
				res, err := h.respond(in)
				h.mayHaveSent = h.mayHaveSent || err == nil || errorType(err) == activities.ErrTypeSendUnconfirmed ||
					errorType(err) == activities.ErrTypeSentNotRecorded
				return res, err
			case h.fail != nil:
				return activities.NotifyResult{}, h.fail
			}
			if in.Purpose == "" {
				h.mayHaveSent = true
			}
			return activities.NotifyResult{DeliveryKey: in.Key(), ProviderMessageID: "pm-1"}, nil
		})
	h.transition = h.env.OnActivity(acts.RecordTransition, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TransitionInput) error {
			if h.failDecision != nil && (in.Event == "approved" || in.Event == "rejected") && h.failing() {
				return h.failDecision
			}
			switch {
			case len(in.From) > 0 && h.row == in.To:
				return nil // a retry of a change that was taken
			case len(in.From) > 0 && h.finished():
				return refuse(h.row)
			case in.To != "" && !h.finished():
				h.row = in.To
			}
			h.transitions = append(h.transitions, in)
			h.transitionsAt = append(h.transitionsAt, h.env.Now().UTC())
			return nil
		})
	h.env.OnActivity(acts.RecordCancel, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TransitionInput) (reminder.State, error) {
			h.transitions = append(h.transitions, in)
			h.transitionsAt = append(h.transitionsAt, h.env.Now().UTC())
			switch {
			case h.finished():
			case h.mayHaveSent:
				// An ambiguous send is a send: the row ends sent, the
				// cancel a note after it.
				h.row = reminder.Sent
			default:
				h.row = reminder.Cancelled
			}
			return h.row, nil
		})
	h.env.OnActivity(acts.RecordReschedule, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RescheduleInput) error {
			if h.failReschedule != nil && h.failing() {
				return h.failReschedule
			}
			if h.finished() {
				return refuse(h.row)
			}
			h.reschedules = append(h.reschedules, in)
			return nil
		})
	return h
}

// sends are the calls of one purpose ("" for the reminder itself).
func (h *harness) sends(p reminder.Purpose) []notifyCall {
	var out []notifyCall
	for _, c := range h.notifies {
		if c.In.Purpose == p {
			out = append(out, c)
		}
	}
	return out
}

func (h *harness) events() []string {
	var out []string
	for _, tr := range h.transitions {
		out = append(out, tr.Event)
	}
	return out
}

// outcome is what an update sent from the test got back.
type outcome struct {
	done     bool
	rejected error
	result   any
	err      error
	// at is when the answer came (workflow time).
	at time.Time
}

// update sends an update after d of workflow time.
func (h *harness) update(d time.Duration, name string, arg any) *outcome {
	o := &outcome{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnAccept:   func() {},
			OnReject:   func(err error) { o.done, o.rejected, o.at = true, err, h.env.Now().UTC() },
			OnComplete: func(res any, err error) { o.done, o.result, o.err, o.at = true, res, err, h.env.Now().UTC() },
		}, arg)
	}, d)
	return o
}

// runCancelled runs the workflow with a cancel of the workflow itself (the
// Web UI's, the temporal CLI's) after d of workflow time, and requires it
// to end cancelled.
func (h *harness) runCancelled(in workflows.ReminderInput, d time.Duration) {
	h.t.Helper()
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, d)
	h.env.ExecuteWorkflow(workflows.ReminderWorkflow, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	var canceled *temporal.CanceledError
	require.ErrorAs(h.t, h.env.GetWorkflowError(), &canceled, "the workflow shows as cancelled")
}

func (h *harness) run(in workflows.ReminderInput) workflows.ReminderResult {
	h.t.Helper()
	h.env.ExecuteWorkflow(workflows.ReminderWorkflow, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var res workflows.ReminderResult
	require.NoError(h.t, h.env.GetWorkflowResult(&res))
	return res
}

func TestReminderDueIn90DaysFiresAtDay90AndNotBefore(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	due := t0.Add(90 * day)
	h.env.RegisterDelayedCallback(func() {
		require.Empty(t, h.notifies, "nothing may be sent a minute before the due time")
	}, 90*day-time.Minute)

	res := h.run(input(due))

	require.Len(t, h.notifies, 1)
	require.Equal(t, due, h.notifies[0].At, "sent at day 90 exactly")
	require.Equal(t, reminder.Sent, res.State)
	require.Equal(t, reminder.DeliveryKey("SHP-1/window-1/ops", "ops", due), res.DeliveryKey)
}

func TestReminderPastDueFiresAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(input(t0.Add(-6 * time.Hour)))
	require.Len(t, h.notifies, 1)
	require.Equal(t, t0, h.notifies[0].At, "a reminder that came due while nothing ran is sent at once (backfill)")
}

func TestTemporaryFailuresAreRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
		if len(h.notifies) < 3 {
			return activities.NotifyResult{}, errors.New("mail API answered 503")
		}
		return activities.NotifyResult{DeliveryKey: in.Key()}, nil
	}
	res := h.run(input(t0))
	require.Len(t, h.notifies, 3)
	require.Equal(t, reminder.Sent, res.State)
}

func TestPermanentFailureFailsAndEscalatesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fail = temporal.NewNonRetryableApplicationError("mail API answered 400", activities.ErrTypePermanentDelivery, nil)

	res := h.run(input(t0.Add(time.Hour)))

	require.Equal(t, reminder.Failed, res.State)
	require.Len(t, h.sends(""), 1, "a permanent failure is not retried")
	esc := h.sends(reminder.PurposeEscalation)
	require.Len(t, esc, 1, "escalated once")
	require.Equal(t, "delivery_failed", esc[0].In.Reason)
	require.Contains(t, esc[0].In.Detail, "400")
	require.Equal(t, []string{"failed"}, h.events())
	require.Equal(t, reminder.Failed, h.transitions[0].To)
}

func TestCancelBeforeDueSendsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	o := h.update(time.Hour, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker", Reason: "shipment cancelled"})

	res := h.run(input(t0.Add(3 * day)))

	require.Equal(t, reminder.Cancelled, res.State)
	require.Empty(t, h.notifies, "a cancelled reminder sends nothing")
	require.NoError(t, o.err)
	require.Equal(t, workflows.OutcomeCancelled, o.result.(workflows.CancelResult).Outcome)
	require.Equal(t, []string{"cancelled"}, h.events())
	require.Equal(t, "tracker", h.transitions[0].Detail["by"])
}

// A cancel that arrives while the send is still retrying (the mail API
// answering 503) stops it: nothing is sent, nothing is compensated, and the
// cancel answers at once instead of after the 72-hour retry budget. (A send
// already in flight when the cancel comes is finished and compensated:
// starter.TestCancelDuringAnInFlightSendIsCompensated, on the real server.)
func TestCancelStopsASendStillRetrying(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fail = errors.New("mail API answered 503")
	cancelAt := time.Hour + 90*time.Second
	first := h.update(cancelAt, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker"})
	second := h.update(cancelAt, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker"})

	res := h.run(input(t0.Add(time.Hour)))

	require.Equal(t, reminder.Cancelled, res.State)
	require.False(t, res.Compensated)
	require.GreaterOrEqual(t, len(h.sends("")), 3, "the send was retrying when the cancel came")
	last := h.sends("")[len(h.sends(""))-1]
	require.True(t, last.At.Before(t0.Add(cancelAt)), "no attempt after the cancel: %v", h.sends(""))
	// The mirror decides whether anything may have gone (here nothing did):
	// the notice asks it and sends nothing.
	require.Len(t, h.sends(reminder.PurposeCancellation), 1, "the notice asked the mirror")
	require.Empty(t, h.sends(reminder.PurposeEscalation))
	for _, o := range []*outcome{first, second} {
		require.True(t, o.done)
		require.NoError(t, o.err)
		require.Equal(t, workflows.OutcomeCancelled, o.result.(workflows.CancelResult).Outcome)
	}
	require.Equal(t, []string{"cancelled"}, h.events(), "who cancelled is on the trail")
	require.Equal(t, "tracker", h.transitions[0].Detail["by"])
	require.Equal(t, "send", h.transitions[0].Detail["during"])
}

func TestCancellationNoticeWorkflowSendsOneNotice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mayHaveSent = true
	h.env.ExecuteWorkflow(workflows.CancellationNoticeWorkflow, workflows.CancellationNoticeInput{
		ReminderID: "SHP-1/window-1/ops", ShipmentID: "SHP-1", UpdateID: "window-1", SubscriberID: "ops", By: "tracker",
	})
	require.NoError(t, h.env.GetWorkflowError())
	var res workflows.ReminderResult
	require.NoError(t, h.env.GetWorkflowResult(&res))
	require.True(t, res.Compensated)
	require.Len(t, h.sends(reminder.PurposeCancellation), 1)
	require.Equal(t, []string{"cancelled"}, h.events())
}

func TestRescheduleLaterEarlierAndIntoThePast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		moveTo time.Time
		sentAt time.Time
	}{
		{"later", t0.Add(5 * day), t0.Add(5 * day)},
		{"earlier", t0.Add(time.Hour), t0.Add(time.Hour)},
		{"into the past", t0.Add(-time.Hour), t0.Add(30*time.Minute + landing)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			o := h.update(30*time.Minute, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: tc.moveTo, By: "ops"})

			res := h.run(input(t0.Add(2 * day)))

			require.NoError(t, o.err)
			require.Nil(t, o.rejected)
			newKey := reminder.DeliveryKey("SHP-1/window-1/ops", "ops", tc.moveTo)
			require.Equal(t, newKey, o.result.(workflows.RescheduleResult).DeliveryKey, "the key follows the due time")
			require.Len(t, h.notifies, 1)
			require.Equal(t, tc.sentAt, h.notifies[0].At)
			require.Equal(t, tc.moveTo, h.notifies[0].In.DueAt)
			require.Equal(t, newKey, res.DeliveryKey)
			require.Len(t, h.reschedules, 1)
			require.Equal(t, newKey, h.reschedules[0].DeliveryKey, "the mirror gets the new key")
		})
	}
}

func TestRescheduleValidatorRejectsAbsurdTimes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	zero := h.update(time.Minute, workflows.UpdateReschedule, workflows.RescheduleRequest{})
	past := h.update(2*time.Minute, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: t0.AddDate(-1, 0, 0)})
	future := h.update(3*time.Minute, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: t0.AddDate(10, 0, 0)})

	h.run(input(t0.Add(time.Hour)))

	require.ErrorContains(t, zero.rejected, "due time is required")
	require.ErrorContains(t, past.rejected, "days in the past")
	require.ErrorContains(t, future.rejected, "days ahead")
	require.Empty(t, h.reschedules)
	require.Equal(t, t0.Add(time.Hour), h.notifies[0].At, "the due time did not move")
}

func TestRescheduleOfASentReminderIsRejected(t *testing.T) {
	t.Parallel()
	h := newHarness(t, time.Minute)
	during := h.update(time.Hour+30*time.Second, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: t0.Add(2 * day)})
	h.run(input(t0.Add(time.Hour)))
	require.ErrorContains(t, during.rejected, "being sent")
}

// A thousand reschedules of one reminder end in continue-as-new, the state
// carried over intact; the next run sends at the last due time.
func TestAThousandReschedulesContinueAsNewWithStateIntact(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const n = 1000
	var last time.Time
	// One update a second, each callback scheduling the next (the test
	// environment holds at most 1,000 pending callbacks).
	var send func(i int)
	send = func(i int) {
		h.env.RegisterDelayedCallback(func() {
			last = t0.Add(30*day + time.Duration(i)*time.Minute)
			h.env.UpdateWorkflow(workflows.UpdateReschedule, "", &testsuite.TestUpdateCallback{
				OnAccept: func() {}, OnReject: func(err error) { t.Errorf("reschedule %d rejected: %v", i, err) },
				OnComplete: func(any, error) {},
			}, workflows.RescheduleRequest{DueAt: last, By: "ops"})
			if i < n {
				send(i + 1)
				return
			}
			// Then the server suggests continuing as new (the history grew).
			h.env.RegisterDelayedCallback(func() { h.env.SetContinueAsNewSuggested(true) }, time.Second)
		}, time.Second)
	}
	send(1)

	h.env.ExecuteWorkflow(workflows.ReminderWorkflow, input(t0.Add(10*day)))

	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "got %v", h.env.GetWorkflowError())
	require.Equal(t, workflows.ReminderWorkflowName, can.WorkflowType.Name)
	var next workflows.ReminderInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, last, next.DueAt)
	require.NotNil(t, next.Carried)
	require.Equal(t, n, next.Carried.Reschedules)
	require.Equal(t, reminder.Scheduled, next.Carried.State)
	require.Equal(t, n+1, next.Carried.TransitionCount)
	require.LessOrEqual(t, len(next.Carried.Transitions), 50, "carried state stays small")
	require.Len(t, h.reschedules, n)
	require.Empty(t, h.notifies)

	// The continuation picks up where the run left off.
	h2 := newHarness(t)
	var status workflows.Status
	h2.env.RegisterDelayedCallback(func() {
		v, err := h2.env.QueryWorkflow(workflows.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&status))
	}, time.Minute)
	res := h2.run(next)
	require.Equal(t, reminder.Sent, res.State)
	require.Len(t, h2.notifies, 1)
	require.Equal(t, last, h2.notifies[0].At)
	require.Equal(t, n, status.Reschedules)
	require.Equal(t, reminder.DeliveryKey("SHP-1/window-1/ops", "ops", last), status.DeliveryKey)
}

func TestApproveBeforeDueSendsAtDue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	due := t0.Add(2 * day)
	o := h.update(2*time.Hour, workflows.UpdateApprove, workflows.Decision{By: "alice", Reason: "customer confirmed"})

	res := h.run(withApproval(input(due)))

	require.NoError(t, o.err)
	require.Equal(t, reminder.Scheduled, o.result.(workflows.DecisionResult).State)
	require.Equal(t, reminder.Sent, res.State)
	require.Len(t, h.sends(""), 1)
	require.Equal(t, due, h.sends("")[0].At, "approved early: sent at the due time")
	require.Empty(t, h.sends(reminder.PurposeEscalation), "decided before the timeout: no escalation")
	require.Equal(t, []string{"approved"}, h.events())
	require.Equal(t, "alice", h.transitions[0].Detail["by"])
	require.Equal(t, "customer confirmed", h.transitions[0].Detail["reason"])
}

func TestApproveAfterDueSendsAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.update(5*time.Hour, workflows.UpdateApprove, workflows.Decision{By: "alice"})

	h.run(withApproval(input(t0.Add(time.Hour))))

	require.Len(t, h.sends(""), 1)
	require.Equal(t, t0.Add(5*time.Hour+landing), h.sends("")[0].At, "approved after the due time: sent at once")
}

// A second decision that arrives while the reject is still being written
// to the mirror (the workflow is running) is refused, and nothing is sent.
func TestRejectCancels(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.transition.After(5 * time.Second)
	o := h.update(time.Hour, workflows.UpdateReject, workflows.Decision{By: "bob", Reason: "wrong consignee"})
	late := h.update(time.Hour+2*time.Second, workflows.UpdateApprove, workflows.Decision{By: "alice"})

	res := h.run(withApproval(input(t0.Add(day))))

	require.NoError(t, o.err)
	require.Equal(t, reminder.Cancelled, o.result.(workflows.DecisionResult).State)
	require.Equal(t, reminder.Cancelled, res.State)
	require.Empty(t, h.notifies)
	require.Equal(t, []string{"rejected"}, h.events())
	require.True(t, late.done, "the late decision got an answer")
	require.Equal(t, t0.Add(time.Hour+2*time.Second), late.at, "answered when it arrived")
	require.True(t, late.at.Before(h.transitionsAt[0]), "it arrived while the reject was still being written")
	require.ErrorContains(t, late.rejected, "another decision is being recorded", "the validator refused the second decision")
	require.Nil(t, late.result)
}

func TestDecisionNeedsWhoAndAWaitingReminder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	anon := h.update(time.Minute, workflows.UpdateApprove, workflows.Decision{})
	h.run(withApproval(input(t0)))
	require.ErrorContains(t, anon.rejected, "who decides")

	h = newHarness(t)
	notWaiting := h.update(time.Minute, workflows.UpdateApprove, workflows.Decision{By: "alice"})
	h.run(input(t0.Add(time.Hour)))
	require.ErrorContains(t, notWaiting.rejected, "not awaiting approval")
}

// No decision within the timeout: the escalation contact hears of it once,
// the reminder keeps waiting, and expires at the final deadline.
func TestApprovalTimeoutEscalatesThenExpires(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var during workflows.Status
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&during))
	}, 2*day)

	res := h.run(withApproval(input(t0.Add(12 * time.Hour))))

	require.Equal(t, reminder.Expired, res.State)
	require.Empty(t, h.sends(""), "an expired reminder is never sent")
	esc := h.sends(reminder.PurposeEscalation)
	require.Len(t, esc, 1, "escalated once")
	require.Equal(t, t0.Add(day), esc[0].At, "at the approval timeout")
	require.Equal(t, "approval_timeout", esc[0].In.Reason)
	require.Equal(t, []string{"expired"}, h.events())
	require.Equal(t, reminder.AwaitingApproval, during.State, "still waiting after the escalation")
	require.True(t, during.Approval.Escalated)
	require.Equal(t, t0.Add(3*day), during.Approval.ExpiresAt)
}

func TestApprovalAfterEscalationStillSends(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.update(2*day, workflows.UpdateApprove, workflows.Decision{By: "alice"})
	res := h.run(withApproval(input(t0.Add(12 * time.Hour))))
	require.Equal(t, reminder.Sent, res.State)
	require.Len(t, h.sends(reminder.PurposeEscalation), 1)
	require.Equal(t, t0.Add(2*day+landing), h.sends("")[0].At)
}

func TestStatusQuery(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.update(time.Hour, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: t0.Add(4 * day), By: "ops"})
	var st workflows.Status
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&st))
	}, 2*time.Hour)
	h.run(input(t0.Add(2 * day)))

	require.Equal(t, reminder.Scheduled, st.State)
	require.Equal(t, t0.Add(4*day), st.DueAt)
	require.Equal(t, reminder.DeliveryKey("SHP-1/window-1/ops", "ops", t0.Add(4*day)), st.DeliveryKey)
	require.Equal(t, 1, st.Reschedules)
	require.False(t, st.Approval.Required)
	var events []string
	for _, tr := range st.Transitions {
		events = append(events, tr.Event)
	}
	require.Equal(t, []string{"scheduled", "rescheduled"}, events)
}

// A reschedule whose mirror write fails moves nothing, as reminders before
// changeAcceptedFirst write it (in the task that accepts it, for 20 s): the
// update fails, and the reminder is sent at its old due time under its old
// key.
func TestFailedRescheduleMovesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.pin(workflows.ChangeAcceptedFirst, workflow.DefaultVersion)
	h.failReschedule = errors.New("connection refused")
	due := t0.Add(2 * day)
	o := h.update(time.Hour, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: t0.Add(5 * day), By: "ops"})
	var st workflows.Status
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&st))
	}, 2*time.Hour)

	res := h.run(input(due))

	require.ErrorContains(t, o.err, "nothing moved")
	require.Equal(t, due, st.DueAt)
	require.Zero(t, st.Reschedules)
	require.Len(t, h.notifies, 1)
	require.Equal(t, due, h.notifies[0].At, "the timer did not move")
	require.Equal(t, reminder.DeliveryKey("SHP-1/window-1/ops", "ops", due), res.DeliveryKey)
}

// Moving a reminder to the due time it has already is a no-op: nothing is
// written, so repeating a window move shifts once.
func TestRescheduleToTheSameTimeChangesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	due := t0.Add(2 * day)
	o := h.update(time.Hour, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: due, By: "ops"})
	h.run(input(due))
	require.NoError(t, o.err)
	require.True(t, o.result.(workflows.RescheduleResult).Unchanged)
	require.Empty(t, h.reschedules)
}

// A request that reaches the workflow after its deadline is refused: a
// change its caller stopped waiting for, unaccepted, never lands later.
func TestLateRequestsAreRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	stale := t0.Add(time.Minute)
	resched := h.update(time.Hour, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: t0.Add(day), By: "ops", Deadline: stale})
	decide := h.update(time.Hour, workflows.UpdateApprove, workflows.Decision{By: "alice", Deadline: stale})
	h.run(withApproval(input(t0.Add(2 * day))))
	require.ErrorContains(t, resched.rejected, "after its deadline")
	require.ErrorContains(t, decide.rejected, "after its deadline")
	require.Empty(t, h.reschedules)
}

// A decision whose mirror write fails changes nothing, as reminders before
// changeAcceptedFirst write it: the reminder keeps waiting, and expires at
// its deadline.
func TestFailedDecisionChangesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.pin(workflows.ChangeAcceptedFirst, workflow.DefaultVersion)
	h.failDecision = errors.New("connection refused")
	o := h.update(time.Hour, workflows.UpdateApprove, workflows.Decision{By: "alice"})
	res := h.run(withApproval(input(t0.Add(2 * day))))
	require.ErrorContains(t, o.err, "nothing moved")
	require.Equal(t, reminder.Expired, res.State)
	require.Empty(t, h.sends(""))
}

// A reschedule the workflow accepted is seen through: its mirror write,
// failing for two hours (PostgreSQL failing over), is retried until the
// mirror takes it, and only then do the timer and the key move. The old
// due time passes meanwhile and nothing is sent at it: the reminder goes
// out once, at the new time, under the new key.
func TestAnAcceptedRescheduleLandsOnceTheMirrorTakesIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.failReschedule, h.failUntil = errors.New("connection refused"), t0.Add(3*time.Hour)
	due, moved := t0.Add(90*time.Minute), t0.Add(5*day)
	o := h.update(time.Hour, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: moved, By: "ops"})

	res := h.run(input(due))

	require.NoError(t, o.err)
	require.True(t, o.at.After(h.failUntil), "answered once the mirror took it, at %s", o.at)
	require.Equal(t, moved, o.result.(workflows.RescheduleResult).DueAt)
	require.Len(t, h.reschedules, 1)
	require.Len(t, h.sends(""), 1, "sent once")
	require.Equal(t, moved, h.sends("")[0].At, "at the new due time, not the old one")
	require.Equal(t, reminder.DeliveryKey("SHP-1/window-1/ops", "ops", moved), res.DeliveryKey)
}

// A decision the workflow accepted is seen through likewise: the reminder
// stays awaiting approval until the mirror takes the approval, then is
// sent at its due time.
func TestAnAcceptedDecisionLandsOnceTheMirrorTakesIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.failDecision, h.failUntil = errors.New("connection refused"), t0.Add(3*time.Hour)
	o := h.update(time.Hour, workflows.UpdateApprove, workflows.Decision{By: "alice"})
	var st workflows.Status
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&st))
	}, 2*time.Hour)

	res := h.run(withApproval(input(t0.Add(2 * day))))

	require.Equal(t, reminder.AwaitingApproval, st.State, "not approved before the mirror took it")
	require.NoError(t, o.err)
	require.True(t, o.at.After(h.failUntil))
	require.Equal(t, reminder.Sent, res.State)
	require.Equal(t, []string{"approved"}, h.events()[:1])
	require.Len(t, h.sends(""), 1)
	require.Equal(t, t0.Add(2*day), h.sends("")[0].At)
}

// The mirror hears of an accepted change only in a workflow task after the
// one that accepted it (a timer ends that task): a task that times out with
// its worker stalled takes the acceptance with it, and the mirror never
// heard of a change the workflow lost. (A real server's history shows the
// order: TestAStalledWorkerNeverHidesAnOperatorsChange, in internal/tools/faults.)
func TestTheMirrorHearsOfAChangeAfterItsAcceptance(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var timers int
	h.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		if d == time.Millisecond {
			timers++
		}
	})
	approve := h.update(time.Hour, workflows.UpdateApprove, workflows.Decision{By: "alice"})
	move := h.update(2*time.Hour, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: t0.Add(3 * day), By: "ops"})
	h.run(withApproval(input(t0.Add(2 * day))))
	require.NoError(t, approve.err)
	require.NoError(t, move.err)
	require.Equal(t, 2, timers, "each change ended its accepting task before its write")
}

// A reminder whose mirror row another path finished (cancelled while its
// workflow was being started) ends as the mirror says when its notify
// refuses to send; the mirror is not written again.
func TestReminderFinishedInTheMirrorEndsAsTheMirrorSays(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fail = temporal.NewNonRetryableApplicationError("the reminder is cancelled in the mirror", activities.ErrTypeReminderFinished, nil, reminder.Cancelled)
	res := h.run(input(t0.Add(time.Hour)))
	require.Equal(t, reminder.Cancelled, res.State)
	require.Len(t, h.sends(""), 1)
	require.Empty(t, h.sends(reminder.PurposeEscalation), "not a failure: no escalation")
	require.Empty(t, h.transitions, "the mirror says so already")
}

// A reminder whose address is suppressed (its notify found it so and wrote
// suppressed to the mirror) ends suppressed, with no escalation: not a
// delivery failure.
func TestASuppressedAddressEndsTheReminderSuppressed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fail = temporal.NewNonRetryableApplicationError("the reminder is suppressed in the mirror", activities.ErrTypeReminderFinished, nil, reminder.Suppressed)
	res := h.run(input(t0.Add(time.Hour)))
	require.Equal(t, reminder.Suppressed, res.State)
	require.Len(t, h.sends(""), 1)
	require.Empty(t, h.sends(reminder.PurposeEscalation), "not a failure: no escalation")
	require.Empty(t, h.transitions, "the activity wrote it with its refusal")
}

// A cancel of the workflow itself (Web UI, temporal CLI) is recorded as a
// cancel; the workflow ends cancelled.
func TestWorkflowCancellationIsRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.runCancelled(input(t0.Add(day)), time.Hour)
	require.Empty(t, h.notifies)
	require.Equal(t, []string{"cancelled"}, h.events())
	require.Equal(t, "workflow cancellation", h.transitions[0].Detail["via"])
}

// Reminders at the fast path's version (changeLocalFirstAttempt 1, from the
// releases before it was retired) keep it: the first attempt runs as a
// local activity at the due time; when it fails for now, the regular
// activity delivers, once, a retry's backoff later.
func TestFailedLocalAttemptFallsBackToTheActivity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.pin(workflows.ChangeLocalFirstAttempt, 1)
	h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
		if len(h.notifies) == 1 {
			return activities.NotifyResult{}, errors.New("mail API answered 503")
		}
		return activities.NotifyResult{DeliveryKey: in.Key(), ProviderMessageID: "pm-2"}, nil
	}
	due := t0.Add(time.Hour)

	res := h.run(input(due))

	require.Equal(t, reminder.Sent, res.State)
	require.Equal(t, "pm-2", res.ProviderMessageID)
	sends := h.sends("")
	require.Len(t, sends, 2, "one local attempt, one activity attempt")
	require.True(t, sends[0].Local, "the first attempt is local")
	require.False(t, sends[0].In.Fallback)
	require.Equal(t, due, sends[0].At, "the first attempt runs when the timer fires")
	require.False(t, sends[1].Local, "the fallback is the regular activity")
	require.True(t, sends[1].In.Fallback, "the activity knows it retries")
	require.Equal(t, due.Add(time.Second), sends[1].At, "the fallback waits a retry's first backoff")
}

// A delivered reminder of the fast path's version made its one attempt
// locally.
func TestDeliveredReminderSendsOnceLocally(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.pin(workflows.ChangeLocalFirstAttempt, 1)
	res := h.run(input(t0.Add(time.Hour)))
	require.Equal(t, reminder.Sent, res.State)
	require.Len(t, h.sends(""), 1)
	require.True(t, h.sends("")[0].Local)
}

// A provider that asks to be called back later (Retry-After) is called
// back no sooner by the fast path's fallback.
func TestFallbackWaitsAsTheProviderAsked(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.pin(workflows.ChangeLocalFirstAttempt, 1)
	h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
		if len(h.notifies) == 1 {
			return activities.NotifyResult{}, temporal.NewApplicationErrorWithOptions("mail API answered 429", "DeliveryFailed",
				temporal.ApplicationErrorOptions{NextRetryDelay: 45 * time.Second})
		}
		return activities.NotifyResult{DeliveryKey: in.Key()}, nil
	}
	h.run(input(t0))
	sends := h.sends("")
	require.Len(t, sends, 2)
	require.Equal(t, sends[0].At.Add(45*time.Second), sends[1].At)
}

// A local attempt that sent but could not record hands the provider's
// message id to the fallback, which records it and sends nothing (the
// regular activity keeps the same proof in its heartbeat).
func TestLocalSendNotRecordedIsRecordedNotSentAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.pin(workflows.ChangeLocalFirstAttempt, 1)
	h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
		if len(h.notifies) == 1 {
			return activities.NotifyResult{}, temporal.NewApplicationErrorWithOptions("sent, but not recorded: database down",
				activities.ErrTypeSentNotRecorded, temporal.ApplicationErrorOptions{
					Details: []any{activities.SentProof{ProviderMessageID: "pm-local"}},
				})
		}
		return activities.NotifyResult{DeliveryKey: in.Key(), ProviderMessageID: in.SentAs}, nil
	}
	res := h.run(input(t0))
	require.Equal(t, reminder.Sent, res.State)
	sends := h.sends("")
	require.Len(t, sends, 2)
	require.Equal(t, "pm-local", sends[1].In.SentAs, "the fallback is told what was sent")
	require.Equal(t, "pm-local", res.ProviderMessageID)
}

// A cancel that arrives while the local attempt is calling the provider
// waits for it: the send it makes is compensated, not lost from the trail.
func TestCancelDuringTheLocalAttemptIsCompensated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3*time.Second)
	h.pin(workflows.ChangeLocalFirstAttempt, 1)
	due := t0.Add(time.Hour)
	o := h.update(time.Hour+time.Second, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker"})

	res := h.run(input(due))

	require.Equal(t, reminder.Sent, res.State)
	require.True(t, res.Compensated)
	require.True(t, h.sends("")[0].Local)
	require.Len(t, h.sends(reminder.PurposeCancellation), 1)
	require.NoError(t, o.err)
	require.Equal(t, workflows.OutcomeCompensated, o.result.(workflows.CancelResult).Outcome)
	require.Equal(t, due.Add(3*time.Second), h.sends("")[0].At, "the send, begun at the due time, was answered after the cancel came")
	require.False(t, o.at.Before(h.sends("")[0].At), "the cancel answered once the send it waited for was done: %v", o.at)
}

func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// A reminder's one attempt is the regular notify activity, at the due time:
// the local first attempt is retired for new reminders (it passed by the
// provider's rate cap and a cancel).
func TestDeliveredReminderSendsOnceAsAnActivity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	due := t0.Add(time.Hour)
	res := h.run(input(due))
	require.Equal(t, reminder.Sent, res.State)
	require.Len(t, h.sends(""), 1)
	require.False(t, h.sends("")[0].Local, "a regular activity, rate-capped on its task queue")
	require.Equal(t, due, h.sends("")[0].At)
}

// A cancel of the workflow itself (the Web UI, the temporal CLI, the
// starter's fallback) while an attempt is in the provider's hands waits for
// the activity's answer: the reminder it sent ends cancelled with one
// notice, never failed, never silent. (The test environment cancels the
// attempt itself; on the real server it finishes its call:
// starter.TestWorkflowCancelledDuringTheSendIsCompensated.)
func TestWorkflowCancelledDuringTheSendIsCompensated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 3*time.Second)
	due := t0.Add(time.Hour)
	h.runCancelled(input(due), time.Hour+time.Second)
	require.Len(t, h.sends(""), 1)
	require.Len(t, h.sends(reminder.PurposeCancellation), 1, "one notice")
	require.Empty(t, h.sends(reminder.PurposeEscalation), "not a failure")
	require.Equal(t, []string{"cancelled"}, h.events(), "no failed")
	require.Equal(t, "temporal", h.transitions[0].Detail["by"])
}

// A cancel of the workflow itself while the send retries (nothing reached
// the provider) ends cancelled with nothing sent: the notice asks the
// mirror and finds nothing to compensate. Before changeCancelSettlesTheSend
// this ended failed, with an escalation.
func TestWorkflowCancelledWhileTheSendRetriesEndsCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fail = errors.New("mail API answered 503")
	h.runCancelled(input(t0.Add(time.Hour)), time.Hour+90*time.Second)
	require.Empty(t, h.sends(reminder.PurposeEscalation), "a cancel is no failure")
	require.Equal(t, []string{"cancelled"}, h.events())
	require.Equal(t, "send", h.transitions[0].Detail["during"])
	require.Equal(t, "temporal", h.transitions[0].Detail["by"])
}

// An unconfirmed send (no answer after the request left) is a send: a
// cancel while its retries wait for the provider's evidence finds it sent
// in the mirror, and the reminder stays sent, with the notice.
func TestCancelAfterAnUnconfirmedSendSendsTheNotice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
		return activities.NotifyResult{}, temporal.NewApplicationError("mail API gave no answer after the request may have reached it",
			activities.ErrTypeSendUnconfirmed)
	}
	o := h.update(time.Hour+90*time.Second, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker"})
	res := h.run(input(t0.Add(time.Hour)))
	require.Equal(t, reminder.Sent, res.State, "a maybe-sent send is a send")
	require.True(t, res.Compensated)
	require.Len(t, h.sends(reminder.PurposeCancellation), 1)
	require.NoError(t, o.err)
	require.Equal(t, workflows.OutcomeCompensated, o.result.(workflows.CancelResult).Outcome)
	require.Equal(t, reminder.Sent, o.result.(workflows.CancelResult).State)
	require.Equal(t, []string{"cancelled"}, h.events())
}

// A cancel that meets a maybe-sent send whose notice is then skipped (the
// subscriber unsubscribed after the reminder may have reached them, so no
// more mail goes) tells the row's story: the reminder was sent, the notice
// skipped, and the answer says compensation_skipped, as a cancel after a
// recorded send does, never "cancelled" (nothing sent).
func TestACancelAfterAMaybeSentSendWhoseNoticeIsSkippedSaysItWasSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.noticeSuppressed = true
	h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
		return activities.NotifyResult{}, temporal.NewApplicationError("mail API gave no answer after the request may have reached it",
			activities.ErrTypeSendUnconfirmed)
	}
	o := h.update(time.Hour+90*time.Second, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker"})
	res := h.run(input(t0.Add(time.Hour)))

	require.Equal(t, reminder.Sent, res.State, "the row says sent")
	require.False(t, res.Compensated, "no notice went")
	require.Len(t, h.sends(reminder.PurposeCancellation), 1, "the notice was asked for, and skipped")
	require.NoError(t, o.err)
	got := o.result.(workflows.CancelResult)
	require.Equal(t, workflows.OutcomeCompensationSkipped, got.Outcome, "it may have been sent: not a plain cancel")
	require.Equal(t, reminder.Sent, got.State)
	v, err := h.env.QueryWorkflow(workflows.QueryStatus)
	require.NoError(t, err)
	var st workflows.Status
	require.NoError(t, v.Get(&st))
	last := st.Transitions[len(st.Transitions)-1]
	require.Equal(t, "cancellation_skipped", last.Event)
	require.Equal(t, reminder.Sent, last.State)
	require.Contains(t, last.Detail, "unsubscribed")
}

// A cancel that finds the reminder already sent in the mirror (its record
// was taken, the activity's answer lost) takes the mirror's state.
func TestCancelDuringTheSendTakesTheMirrorsState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.fail = errors.New("mail API answered 503")
	h.row, h.mayHaveSent = reminder.Sent, true
	o := h.update(time.Hour+90*time.Second, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker"})
	res := h.run(input(t0.Add(time.Hour)))
	require.Equal(t, reminder.Sent, res.State)
	require.True(t, res.Compensated)
	require.Equal(t, workflows.OutcomeCompensated, o.result.(workflows.CancelResult).Outcome)
}

// A fast-path reminder whose local attempt sent but could not record, then
// is cancelled while its fallback waits: the proof only the workflow holds
// is recorded (its record-only activity is not stopped), then compensated.
func TestCancelAfterALocalSentNotRecordedRecordsThenCompensates(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"update", "workflow"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t)
			h.pin(workflows.ChangeLocalFirstAttempt, 1)
			h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
				if in.SentAs == "" {
					return activities.NotifyResult{}, temporal.NewApplicationErrorWithOptions("sent, but not recorded: database down",
						activities.ErrTypeSentNotRecorded, temporal.ApplicationErrorOptions{
							Details: []any{activities.SentProof{ProviderMessageID: "pm-local"}},
						})
				}
				return activities.NotifyResult{DeliveryKey: in.Key(), ProviderMessageID: in.SentAs}, nil
			}
			// The cancel comes during the fallback's one-second backoff.
			at := time.Hour + 500*time.Millisecond
			var o *outcome
			if how == "update" {
				o = h.update(at, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker"})
			} else {
				h.env.RegisterDelayedCallback(h.env.CancelWorkflow, at)
			}
			h.env.ExecuteWorkflow(workflows.ReminderWorkflow, input(t0.Add(time.Hour)))
			require.True(t, h.env.IsWorkflowCompleted())
			sends := h.sends("")
			require.Len(t, sends, 2)
			require.Equal(t, "pm-local", sends[1].In.SentAs, "the proof was recorded")
			require.Len(t, h.sends(reminder.PurposeCancellation), 1, "then compensated")
			if o != nil {
				require.NoError(t, h.env.GetWorkflowError())
				require.Equal(t, workflows.OutcomeCompensated, o.result.(workflows.CancelResult).Outcome)
			}
		})
	}
}

// A reminder started at the current level knows the version of every
// change made up to it: it asks GetVersion for none, so its history has no
// version marker and no TemporalChangeVersion upsert, on the delivered path
// and through a cancel during its send. One started at an earlier level
// asks for the changes made since; one started before levels, for all.
func TestAReminderAtTheCurrentLevelAsksForNoVersion(t *testing.T) {
	t.Parallel()
	for _, level := range []int{workflows.CurrentLevel, 1, 0} {
		h := newHarness(t)
		var asked []string
		h.env.SetWorkerOptions(sdkworker.Options{
			PreferredVersionProvider: func(in sdkworker.PreferredVersionProviderInput) *sdkworker.VersionPreference {
				asked = append(asked, in.ChangeID)
				return nil
			},
		})
		h.fail = errors.New("mail API answered 503")
		in := input(t0.Add(time.Hour))
		in.Level = level
		h.update(time.Hour+90*time.Second, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker"})
		res := h.run(in)
		require.Equal(t, reminder.Cancelled, res.State)
		switch level {
		case 0:
			require.Equal(t, []string{"notify-first-attempt-local", "notify-timeout-retry-ceiling", "cancel-stops-a-retrying-send", "cancel-settles-the-send"}, asked,
				"started before levels, it asks")
			continue
		case 1:
			require.Equal(t, []string{"notify-timeout-retry-ceiling"}, asked, "level 1 asks for the change made after it")
			continue
		}
		require.Empty(t, asked, "no version asked at level %d", level)
	}
}

// A decision or a reschedule that arrives while the expiry is being written
// (PostgreSQL slow, or failing over) is refused: the expiry and a decision
// exclude each other, so the reminder never closes "approved" in a state
// that is not final while the mirror says expired. (Before, the approval
// passed validation, its write found the row expired and changed nothing,
// yet it answered "approved".)
func TestADecisionDuringTheExpiryIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Every mirror write takes an hour of workflow time.
	h.transition.After(time.Hour)
	expiry := 3 * day
	approve := h.update(expiry+30*time.Minute, workflows.UpdateApprove, workflows.Decision{By: "alice"})
	move := h.update(expiry+31*time.Minute, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: t0.Add(4 * day), By: "ops"})

	res := h.run(withApproval(input(t0.Add(12 * time.Hour))))

	require.Equal(t, reminder.Expired, res.State)
	require.True(t, approve.done)
	require.ErrorContains(t, approve.rejected, "expiring", "the approval is refused, not answered approved")
	require.True(t, move.done)
	require.ErrorContains(t, move.rejected, "expiring")
	require.Equal(t, []string{"expired"}, h.events(), "no approved event beside the expiry")
	require.Empty(t, h.sends(""))
}

// A change of the workflow's own that finds the mirror row finished by
// another path (reconcile --verify cancelled it, say) is refused there, and
// the reminder takes the mirror's state: the mirror and the engine agree.
func TestAStateChangeTheMirrorRefusesEndsAsTheMirrorSays(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.row = reminder.Cancelled
	res := h.run(withApproval(input(t0.Add(12 * time.Hour))))
	require.Equal(t, reminder.Cancelled, res.State, "the expiry was refused: the row is cancelled")
	require.Empty(t, h.events(), "the refused change wrote nothing")
	require.Empty(t, h.sends(""))

	h = newHarness(t)
	h.row = reminder.Expired
	o := h.update(time.Hour, workflows.UpdateApprove, workflows.Decision{By: "alice"})
	res = h.run(withApproval(input(t0.Add(12 * time.Hour))))
	require.True(t, o.done)
	require.ErrorContains(t, o.err, "refused: the reminder is expired", "a decision the mirror refused is an answer")
	require.Equal(t, reminder.Expired, res.State)
}

// moved is the notify's refusal of a key whose pending mirror row moved to
// due (activities.ErrTypeReminderMoved).
func moved(in activities.NotifyInput, due time.Time) error {
	return temporal.NewNonRetryableApplicationError("the reminder moved in the mirror", activities.ErrTypeReminderMoved, nil,
		reminder.Scheduled, activities.MovedTo{DueAt: due, DeliveryKey: reminder.DeliveryKey(in.ReminderID, in.SubscriberID, due)})
}

// A send refused because the mirror row moved to another due time and key
// while the workflow did not hear (a window move that found no workflow
// for a row whose mark failed) takes the row's due time and key and sleeps
// again: it is sent once, at the row's due time under its key, never at
// the old time, and the mirror is not written (it holds the move). The
// workflow asks the notify to say where a row moved (FollowsMoves). (It
// ended "as the mirror says" in the pending state scheduled: lost.)
func TestASendRefusedUnderAMovedKeyFollowsTheMirror(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		level int
	}{{"current level", workflows.CurrentLevel}, {"started before levels", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			due, later := t0.Add(time.Hour), t0.Add(3*time.Hour)
			h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
				require.True(t, in.FollowsMoves, "the workflow follows a move")
				if !in.DueAt.Equal(later) {
					return activities.NotifyResult{}, moved(in, later)
				}
				return activities.NotifyResult{DeliveryKey: in.Key(), ProviderMessageID: "pm-1"}, nil
			}
			var st workflows.Status
			h.env.RegisterDelayedCallback(func() {
				v, err := h.env.QueryWorkflow(workflows.QueryStatus)
				require.NoError(t, err)
				require.NoError(t, v.Get(&st))
			}, 2*time.Hour)
			in := input(due)
			in.Level = tc.level
			res := h.run(in)

			key := reminder.DeliveryKey(in.ReminderID, in.SubscriberID, later)
			require.Equal(t, reminder.Sent, res.State)
			require.Equal(t, key, res.DeliveryKey)
			sends := h.sends("")
			require.Len(t, sends, 2, "refused at the old due time, sent at the new one")
			require.Equal(t, due, sends[0].At)
			require.Equal(t, later, sends[1].At, "not before the row's due time")
			require.Equal(t, key, sends[1].In.Key())
			require.Empty(t, h.events(), "the mirror holds the move already")
			require.Equal(t, reminder.Scheduled, st.State, "sleeping again")
			require.Equal(t, later, st.DueAt)
			require.Equal(t, key, st.DeliveryKey)
			require.Equal(t, "moved_by_the_mirror", st.Transitions[len(st.Transitions)-1].Event)
		})
	}
}

// A cancel that comes while the reminder sleeps again after following the
// mirror's move is a plain cancel: nothing was sent, nor is.
func TestACancelAfterFollowingTheMirrorsMoveSendsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
		return activities.NotifyResult{}, moved(in, t0.Add(3*time.Hour))
	}
	o := h.update(2*time.Hour, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker"})
	res := h.run(input(t0.Add(time.Hour)))
	require.Equal(t, reminder.Cancelled, res.State)
	require.Len(t, h.sends(""), 1, "the refused one only")
	require.Empty(t, h.sends(reminder.PurposeCancellation))
	require.NoError(t, o.err)
	require.Equal(t, workflows.OutcomeCancelled, o.result.(workflows.CancelResult).Outcome)
	require.Equal(t, []string{"cancelled"}, h.events())
}

// A refusal the workflow cannot follow ends it as the mirror says, in the
// pending state, once, rather than going round: a reminder of a release
// before changeFollowsTheMirrorsMove (here pinned to it), and a move to the
// due time the workflow already has. reconcile --verify starts such a
// reminder again (starter.TestVerifyStartsAgainAReminderWhoseWorkflowEndedPending).
func TestARefusalUnderAMovedKeyItCannotFollowEndsAsTheMirrorSays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		pin  bool
		to   time.Duration
	}{{"before the change", true, 3 * time.Hour}, {"moved to its own due time", false, time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			in := input(t0.Add(time.Hour))
			if tc.pin {
				h.pin(workflows.ChangeFollowsTheMirrorsMove, workflow.DefaultVersion)
				in.Level = 0
			}
			h.respond = func(in activities.NotifyInput) (activities.NotifyResult, error) {
				return activities.NotifyResult{}, moved(in, t0.Add(tc.to))
			}
			res := h.run(in)
			require.Equal(t, reminder.Scheduled, res.State, "ended as the mirror says")
			require.Len(t, h.sends(""), 1, "once, not round again")
			require.Empty(t, h.sends(reminder.PurposeEscalation), "not a failure")
			require.Empty(t, h.events())
		})
	}
}
