package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
)

// Activity timeouts and retries. The notify activity's retry budget is about
// three days, as Stripe and Svix give webhooks; after that the reminder fails.
const (
	notifyAttemptTimeout = 30 * time.Second
	notifyRetryBudget    = 72 * time.Hour
	// maxTransitions bounds the steps the status query carries (and
	// continue-as-new hands on); the mirror keeps every one.
	maxTransitions = 50
	// historyLimit continues as new even if the server has not suggested it
	// yet, far below Temporal's hard limit of 51,200 events.
	historyLimit = 10_000
)

var a *activities.Activities

// ReminderWorkflow is one reminder's life. It waits for approval when the
// update asks for it (escalating when the decision is overdue, expiring at
// the final deadline), sleeps on a durable timer until the due time (9
// seconds or 9 months: there is no ceiling; a timer that came due while no
// worker ran fires when one returns), then runs the idempotent notify
// activity. Reschedule, approve, reject and cancel arrive as updates; a
// permanent delivery failure escalates once; a cancel after the send is
// compensated by a cancellation notice. The delivered path's history is kept
// lean: one timer, one activity, one search-attribute upsert.
func ReminderWorkflow(ctx workflow.Context, in ReminderInput) (ReminderResult, error) {
	r := newRun(ctx, in)
	if err := r.register(ctx); err != nil {
		return ReminderResult{}, err
	}
	if r.state == reminder.AwaitingApproval {
		done, err := r.awaitDecision(ctx)
		if done || err != nil {
			return r.result(), err
		}
	}
	done, err := r.awaitDue(ctx)
	if done || err != nil {
		return r.result(), err
	}
	err = r.deliver(ctx)
	return r.result(), err
}

// run is one run's state; handlers and the main loop share it on the
// workflow's single thread.
type run struct {
	in          ReminderInput
	state       reminder.State
	due         time.Time
	requestedAt time.Time
	decision    *DecisionRecord
	escalated   bool
	reschedules int
	transitions []Transition
	count       int

	deliveryKey   string
	providerID    string
	sending       bool
	compensated   bool
	cancel        *CancelRequest
	cancelOutcome string
	// wake tells the main loop to look again (the due time moved).
	wake bool
	// busy counts handlers still writing the mirror; the main loop lets them
	// finish before it acts, so the audit trail keeps its order.
	busy int
	mu   workflow.Mutex
}

func newRun(ctx workflow.Context, in ReminderInput) *run {
	r := &run{in: in, due: in.DueAt, mu: workflow.NewMutex(ctx)}
	if c := in.Carried; c != nil {
		r.state, r.requestedAt, r.decision, r.escalated = c.State, c.ApprovalRequestedAt, c.Decision, c.Escalated
		r.reschedules, r.transitions, r.count = c.Reschedules, c.Transitions, c.TransitionCount
	} else {
		r.state, r.requestedAt = reminder.Scheduled, workflow.Now(ctx)
		if in.Approval.Required {
			r.state = reminder.AwaitingApproval
		}
		r.note(ctx, "scheduled", "")
	}
	r.deliveryKey = reminder.DeliveryKey(in.ReminderID, in.SubscriberID, r.due)
	return r
}

func (r *run) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, r.status); err != nil {
		return err
	}
	for _, h := range []struct {
		name               string
		handler, validator any
	}{
		{UpdateReschedule, r.reschedule, r.validateReschedule},
		{UpdateApprove, r.approve, r.validateDecision},
		{UpdateReject, r.reject, r.validateDecision},
		{UpdateCancel, r.cancelUpdate, nil},
	} {
		err := workflow.SetUpdateHandlerWithOptions(ctx, h.name, h.handler, workflow.UpdateHandlerOptions{Validator: h.validator})
		if err != nil {
			return err
		}
	}
	return nil
}

// awaitDecision waits while the reminder awaits approval. done is true when
// the reminder ended there (rejected, expired, cancelled).
func (r *run) awaitDecision(ctx workflow.Context) (done bool, err error) {
	timeoutAt := r.requestedAt.Add(r.in.Approval.Timeout)
	expiresAt := r.requestedAt.Add(r.in.Approval.ExpireAfter)
	for r.state == reminder.AwaitingApproval {
		if r.cancel != nil {
			return true, r.endCancelled(ctx)
		}
		if r.continueAsNewDue(ctx) {
			return true, r.continueAsNew(ctx)
		}
		now := workflow.Now(ctx)
		if !r.escalated && !now.Before(timeoutAt) {
			r.escalated = true
			r.escalate(ctx, "approval_timeout", fmt.Sprintf("no decision within %s of scheduling", r.in.Approval.Timeout))
			continue
		}
		if !now.Before(expiresAt) {
			r.setState(ctx, reminder.Expired, "expired", map[string]any{"reason": "no decision by the final deadline"})
			return true, r.finish(ctx)
		}
		next := expiresAt
		if !r.escalated {
			next = timeoutAt
		}
		_, err := workflow.AwaitWithTimeout(ctx, next.Sub(now), func() bool {
			return r.state != reminder.AwaitingApproval || r.cancel != nil || r.continueAsNewDue(ctx)
		})
		if err != nil {
			return true, err
		}
	}
	if err := workflow.Await(ctx, func() bool { return r.busy == 0 }); err != nil {
		return true, err
	}
	if r.state == reminder.Cancelled { // rejected
		return true, r.finish(ctx)
	}
	return false, nil
}

// awaitDue sleeps until the due time, which a reschedule may move. done is
// true when the reminder ended before it (cancelled, or continued as new).
func (r *run) awaitDue(ctx workflow.Context) (done bool, err error) {
	for {
		if r.cancel != nil {
			return true, r.endCancelled(ctx)
		}
		if r.continueAsNewDue(ctx) {
			return true, r.continueAsNew(ctx)
		}
		wait := r.due.Sub(workflow.Now(ctx))
		if wait <= 0 {
			if r.busy == 0 {
				return false, nil
			}
			// A reschedule is still writing the mirror; it may move the due time.
			if err := workflow.Await(ctx, func() bool { return r.busy == 0 }); err != nil {
				return true, err
			}
			continue
		}
		r.wake = false
		_, err := workflow.AwaitWithTimeout(ctx, wait, func() bool {
			return r.wake || r.cancel != nil || r.continueAsNewDue(ctx)
		})
		if err != nil {
			return true, err
		}
	}
}

// deliver runs the notify activity; a permanent failure fails the reminder
// and escalates once.
func (r *run) deliver(ctx workflow.Context) error {
	r.sending = true
	var sent activities.NotifyResult
	err := workflow.ExecuteActivity(notifyOptions(ctx), a.Notify, activities.NotifyInput{
		ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID, DueAt: r.due,
	}).Get(ctx, &sent)
	r.sending = false
	if err != nil {
		reason := failureReason(err)
		workflow.GetLogger(ctx).Warn("delivery failed for good", "reminder_id", r.in.ReminderID, "error", reason)
		r.setState(ctx, reminder.Failed, "failed", map[string]any{"reason": reason})
		r.escalate(ctx, "delivery_failed", reason)
		return r.finish(ctx)
	}
	r.deliveryKey, r.providerID = sent.DeliveryKey, sent.ProviderMessageID
	// The activity wrote "sent" to the mirror with the delivery.
	r.state = reminder.Sent
	r.note(ctx, "sent", "")
	if err := upsertState(ctx, reminder.Sent); err != nil {
		return err
	}
	return r.finish(ctx)
}

// finish lets the handlers complete, answering any cancel that arrives
// until the very end: after a send it is compensated.
func (r *run) finish(ctx workflow.Context) error {
	for {
		if r.cancel != nil && r.cancelOutcome == "" {
			outcome := "already_" + string(r.state)
			if r.state == reminder.Sent {
				r.compensate(ctx)
				outcome = OutcomeCompensated
			}
			// Set last: the cancel handlers answer as soon as it is.
			r.cancelOutcome = outcome
		}
		err := workflow.Await(ctx, func() bool {
			return workflow.AllHandlersFinished(ctx) || (r.cancel != nil && r.cancelOutcome == "")
		})
		if err != nil || workflow.AllHandlersFinished(ctx) {
			return err
		}
	}
}

// endCancelled ends a reminder cancelled before it was sent: nothing is sent.
func (r *run) endCancelled(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return r.busy == 0 }); err != nil {
		return err
	}
	r.setState(ctx, reminder.Cancelled, "cancelled", map[string]any{"by": r.cancel.By, "reason": r.cancel.Reason})
	r.cancelOutcome = OutcomeCancelled
	return r.finish(ctx)
}

// compensate tells a subscriber already reminded that the shipment was
// cancelled, under the notice's own delivery key.
func (r *run) compensate(ctx workflow.Context) {
	recordTransition(ctx, r.in.ReminderID, reminder.Cancelled, "cancelled",
		map[string]any{"by": r.cancel.By, "reason": r.cancel.Reason, "after": "sent"})
	var res activities.NotifyResult
	err := workflow.ExecuteActivity(notifyOptions(ctx), a.Notify, activities.NotifyInput{
		Purpose: reminder.PurposeCancellation, ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID, DueAt: r.due,
	}).Get(ctx, &res)
	if err != nil {
		r.note(ctx, "cancellation_failed", failureReason(err))
		return
	}
	r.compensated = true
	r.note(ctx, "cancellation_sent", res.SkipReason)
}

// escalate tells the update's escalation contact, once per reason (the
// notice's delivery key makes a repeat a no-op).
func (r *run) escalate(ctx workflow.Context, reason, detail string) {
	var res activities.NotifyResult
	err := workflow.ExecuteActivity(notifyOptions(ctx), a.Notify, activities.NotifyInput{
		Purpose: reminder.PurposeEscalation, ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID,
		DueAt: r.due, Reason: reason, Detail: detail,
	}).Get(ctx, &res)
	switch {
	case err != nil:
		workflow.GetLogger(ctx).Warn("escalation failed", "reminder_id", r.in.ReminderID, "error", err)
		r.note(ctx, "escalation_failed", reason)
	case res.Skipped:
		r.note(ctx, "escalation_skipped", res.SkipReason)
	default:
		r.note(ctx, "escalated", reason)
	}
}

func (r *run) continueAsNewDue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= historyLimit
}

// continueAsNew hands the reminder's state to a fresh run once its
// handlers are done, so a long life (a thousand reschedules) never
// exhausts the history.
func (r *run) continueAsNew(ctx workflow.Context) error {
	err := workflow.Await(ctx, func() bool {
		return workflow.AllHandlersFinished(ctx) || r.cancel != nil
	})
	if err != nil {
		return err
	}
	if r.cancel != nil {
		return r.endCancelled(ctx)
	}
	next := r.in
	next.DueAt = r.due
	next.Carried = &Carried{
		State: r.state, ApprovalRequestedAt: r.requestedAt, Decision: r.decision, Escalated: r.escalated,
		Reschedules: r.reschedules, Transitions: r.transitions, TransitionCount: r.count,
	}
	return workflow.NewContinueAsNewError(ctx, ReminderWorkflowName, next)
}

func (r *run) result() ReminderResult {
	return ReminderResult{State: r.state, DeliveryKey: r.deliveryKey, ProviderMessageID: r.providerID, Compensated: r.compensated}
}

func (r *run) status() (Status, error) {
	s := Status{
		State: r.state, DueAt: r.due, DeliveryKey: r.deliveryKey, CancelRequested: r.cancel != nil,
		Reschedules: r.reschedules, Transitions: r.transitions, TransitionCount: r.count,
		Approval: ApprovalStatus{Required: r.in.Approval.Required, Escalated: r.escalated, Decision: r.decision},
	}
	if r.in.Approval.Required {
		s.Approval.TimeoutAt = r.requestedAt.Add(r.in.Approval.Timeout)
		s.Approval.ExpiresAt = r.requestedAt.Add(r.in.Approval.ExpireAfter)
	}
	return s, nil
}

// note adds a step to the status query's transitions, keeping the newest.
func (r *run) note(ctx workflow.Context, event, detail string) {
	r.count++
	r.transitions = append(r.transitions, Transition{At: workflow.Now(ctx), Event: event, State: r.state, Detail: detail})
	if len(r.transitions) > maxTransitions {
		r.transitions = append([]Transition(nil), r.transitions[len(r.transitions)-maxTransitions:]...)
	}
}

// setState moves the reminder to a state: in memory at once (the main loop
// and handlers see it), then in the mirror and the search attributes.
func (r *run) setState(ctx workflow.Context, to reminder.State, event string, detail map[string]any) {
	r.state = to
	r.note(ctx, event, "")
	recordTransition(ctx, r.in.ReminderID, to, event, detail)
	if err := upsertState(ctx, to); err != nil {
		workflow.GetLogger(ctx).Error("search attribute upsert failed", "error", err)
	}
}

// --- update handlers ---

func (r *run) validateReschedule(ctx workflow.Context, req RescheduleRequest) error {
	if err := r.pending("rescheduled"); err != nil {
		return err
	}
	now := workflow.Now(ctx)
	switch {
	case req.DueAt.IsZero():
		return errors.New("a new due time is required")
	case req.DueAt.Before(now.Add(-reminder.MaxPastDue)):
		return fmt.Errorf("the new due time %s is more than %d days in the past",
			req.DueAt.UTC().Format(time.RFC3339), reminder.MaxPastDue/(24*time.Hour))
	case req.DueAt.After(now.Add(reminder.MaxHorizon)):
		return fmt.Errorf("the new due time %s is more than %d days ahead",
			req.DueAt.UTC().Format(time.RFC3339), reminder.MaxHorizon/(24*time.Hour))
	}
	return nil
}

// pending refuses a change to a reminder that is finished or on its way out.
func (r *run) pending(what string) error {
	switch {
	case r.state.Terminal():
		return fmt.Errorf("reminder is already %s and cannot be %s", r.state, what)
	case r.sending:
		return fmt.Errorf("reminder is being sent and cannot be %s", what)
	case r.cancel != nil:
		return fmt.Errorf("reminder is being cancelled and cannot be %s", what)
	}
	return nil
}

func (r *run) reschedule(ctx workflow.Context, req RescheduleRequest) (RescheduleResult, error) {
	r.busy++
	defer func() { r.busy-- }()
	if err := r.mu.Lock(ctx); err != nil {
		return RescheduleResult{}, err
	}
	defer r.mu.Unlock()
	// Checked again: an earlier handler or the main loop may have moved on.
	if err := r.validateReschedule(ctx, req); err != nil {
		return RescheduleResult{}, err
	}
	from := r.due
	r.due = reminder.NormalizeTime(req.DueAt)
	r.deliveryKey = reminder.DeliveryKey(r.in.ReminderID, r.in.SubscriberID, r.due)
	r.wake = true
	r.reschedules++
	r.note(ctx, "rescheduled", from.UTC().Format(time.RFC3339)+" → "+r.due.UTC().Format(time.RFC3339))
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.RecordReschedule, activities.RescheduleInput{
		ReminderID: r.in.ReminderID, DueAt: r.due, DeliveryKey: r.deliveryKey,
		Detail: map[string]any{"from": from, "to": r.due, "delivery_key": r.deliveryKey, "by": req.By, "reason": req.Reason},
	}).Get(ctx, nil)
	if err != nil {
		return RescheduleResult{}, err
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, DueAtKey.ValueSet(r.due)); err != nil {
		return RescheduleResult{}, err
	}
	return RescheduleResult{DueAt: r.due, DeliveryKey: r.deliveryKey}, nil
}

func (r *run) validateDecision(ctx workflow.Context, d Decision) error {
	if r.state != reminder.AwaitingApproval {
		return fmt.Errorf("reminder is %s, not awaiting approval", r.state)
	}
	if r.cancel != nil {
		return errors.New("reminder is being cancelled")
	}
	if d.By == "" {
		return errors.New("who decides is required")
	}
	return nil
}

func (r *run) approve(ctx workflow.Context, d Decision) (DecisionResult, error) {
	return r.decide(ctx, d, true)
}

func (r *run) reject(ctx workflow.Context, d Decision) (DecisionResult, error) {
	return r.decide(ctx, d, false)
}

func (r *run) decide(ctx workflow.Context, d Decision, approved bool) (DecisionResult, error) {
	r.busy++
	defer func() { r.busy-- }()
	if err := r.mu.Lock(ctx); err != nil {
		return DecisionResult{}, err
	}
	defer r.mu.Unlock()
	if err := r.validateDecision(ctx, d); err != nil {
		return DecisionResult{}, err
	}
	r.decision = &DecisionRecord{Approved: approved, By: d.By, Reason: d.Reason, At: workflow.Now(ctx)}
	detail := map[string]any{"by": d.By, "reason": d.Reason}
	if approved {
		r.setState(ctx, reminder.Scheduled, "approved", detail)
	} else {
		r.setState(ctx, reminder.Cancelled, "rejected", detail)
	}
	return DecisionResult{State: r.state}, nil
}

// cancelUpdate records the request and answers once the main loop has acted
// on it. If the workflow ends first, the caller learns the workflow is gone
// and compensates from outside (CancellationNoticeWorkflow).
func (r *run) cancelUpdate(ctx workflow.Context, req CancelRequest) (CancelResult, error) {
	if r.cancel == nil {
		r.cancel = &req
	}
	if err := workflow.Await(ctx, func() bool { return r.cancelOutcome != "" }); err != nil {
		return CancelResult{}, err
	}
	return CancelResult{Outcome: r.cancelOutcome, State: r.state}, nil
}

// --- shared helpers ---

func notifyOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    notifyAttemptTimeout,
		ScheduleToCloseTimeout: notifyRetryBudget,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Minute,
			NonRetryableErrorTypes: []string{
				activities.ErrTypePermanentDelivery,
				activities.ErrTypeReminderNotFound,
			},
		},
	})
}

func localOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
		},
	})
}

// recordTransition mirrors a state change as a local activity (one marker
// event, no task round trip). It retries until the mirror takes it: the
// mirror must not lie for long.
func recordTransition(ctx workflow.Context, reminderID string, to reminder.State, event string, detail map[string]any) {
	err := workflow.ExecuteLocalActivity(localOptions(ctx), a.RecordTransition, activities.TransitionInput{
		ReminderID: reminderID, To: to, Event: event, Detail: detail,
	}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Error("mirror write failed", "reminder_id", reminderID, "event", event, "error", err)
	}
}

func upsertState(ctx workflow.Context, s reminder.State) error {
	return workflow.UpsertTypedSearchAttributes(ctx, ReminderStateKey.ValueSet(string(s)))
}

// failureReason is the message of an activity failure, without the SDK's
// wrapping.
func failureReason(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Error()
	}
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		return "retry budget exhausted: " + timeoutErr.Error()
	}
	return err.Error()
}
