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

// ErrTypeMirrorUnavailable is an operator's change the mirror did not take
// within operatorWriteBudget: nothing moved; try again. (Reminders before
// changeAcceptedFirst; from it an accepted change's write is retried until
// the mirror takes or refuses it.)
const ErrTypeMirrorUnavailable = "MirrorUnavailable"

// checkDeadline refuses a request that reaches the workflow after its
// deadline. The caller waits longer than the deadline plus a workflow
// task's timeout (budget.UpdateWait): a change it did not see accepted by
// then can no longer be, so its "nothing changed" stays true.
func checkDeadline(ctx workflow.Context, deadline time.Time) error {
	if !deadline.IsZero() && workflow.Now(ctx).After(deadline) {
		return errors.New("the request reached the reminder after its deadline (a worker stalled or far behind); nothing was changed")
	}
	return nil
}

// acceptedFirstTimer is the timer that ends the workflow task accepting
// an operator's change: the shortest the server takes.
const acceptedFirstTimer = time.Millisecond

// acceptedFirst ends the workflow task that accepted an operator's change,
// so its acceptance is in the history before the mirror hears of it
// (changeAcceptedFirst). A workflow task that times out, its worker stalled,
// takes its acceptance with it; the mirror, written only in a task after
// it, has then moved for nothing. A timer is the lightest command that ends
// a task.
func acceptedFirst(ctx workflow.Context) error {
	return workflow.NewTimerWithOptions(ctx, acceptedFirstTimer, workflow.TimerOptions{
		Summary: "the change is accepted; the mirror is written next",
	}).Get(ctx, nil)
}

func mirrorUnavailable(what string, err error) error {
	return temporal.NewApplicationErrorWithCause(
		"the mirror did not take the "+what+" in time; nothing moved, try again", ErrTypeMirrorUnavailable, err)
}

func (r *run) validateReschedule(ctx workflow.Context, req RescheduleRequest) error {
	if err := checkDeadline(ctx, req.Deadline); err != nil {
		return err
	}
	if r.expiring {
		return errExpiring
	}
	return r.checkReschedule(ctx, req)
}

// errExpiring refuses a change that arrives while the expiry is written:
// the reminder is expired, or about to be. (Checked by the validators only:
// they do not run on replay, so the check changes no reminder's history.)
var errExpiring = errors.New("refused: the reminder is expiring (no decision by its final deadline)")

func (r *run) checkReschedule(ctx workflow.Context, req RescheduleRequest) error {
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

// reschedule moves the due time. Its acceptance reaches the history first
// (changeAcceptedFirst), then the mirror takes the new due time and key,
// retried until it takes or refuses them; only then do the timer, the key
// and the search attribute move. A reschedule the workflow did not accept
// has moved nothing, and one it accepted lands in both or is refused by the
// mirror in both. Moving to the due time it already has changes nothing,
// so repeating a reschedule is safe.
func (r *run) reschedule(ctx workflow.Context, req RescheduleRequest) (RescheduleResult, error) {
	r.busy++
	defer func() { r.busy-- }()
	if err := r.mu.Lock(ctx); err != nil {
		return RescheduleResult{}, err
	}
	defer r.mu.Unlock()
	// Checked again: an earlier handler or the main loop may have moved on.
	if err := r.checkReschedule(ctx, req); err != nil {
		return RescheduleResult{}, err
	}
	if r.version(ctx, changeRescheduleWritesFirst) == workflow.DefaultVersion {
		return r.rescheduleMemoryFirst(ctx, req)
	}
	due := reminder.NormalizeTime(req.DueAt)
	if due.Equal(r.due) {
		return RescheduleResult{DueAt: r.due, DeliveryKey: r.deliveryKey, Unchanged: true}, nil
	}
	wctx := operatorWriteOptions(ctx)
	if r.version(ctx, changeAcceptedFirst) == 1 {
		if err := acceptedFirst(ctx); err != nil {
			return RescheduleResult{}, err
		}
		// A cancel may have come while the task ended.
		if err := r.checkReschedule(ctx, req); err != nil {
			return RescheduleResult{}, err
		}
		wctx = acceptedWriteOptions(ctx)
	}
	key := reminder.DeliveryKey(r.in.ReminderID, r.in.SubscriberID, due)
	err := workflow.ExecuteLocalActivity(wctx, a.RecordReschedule, activities.RescheduleInput{
		ReminderID: r.in.ReminderID, DueAt: due, DeliveryKey: key,
		Detail: map[string]any{"from": r.due, "to": due, "delivery_key": key, "by": req.By, "key": req.Key, "reason": req.Reason},
	}).Get(wctx, nil)
	if _, refused := refusedAs(err); refused {
		return RescheduleResult{}, err
	}
	if err != nil {
		return RescheduleResult{}, mirrorUnavailable("reschedule", err)
	}
	from := r.due
	r.due, r.deliveryKey, r.wake = due, key, true
	r.reschedules++
	r.note(ctx, "rescheduled", from.UTC().Format(time.RFC3339)+" → "+due.UTC().Format(time.RFC3339))
	if err := workflow.UpsertTypedSearchAttributes(ctx, DueAtKey.ValueSet(due)); err != nil {
		return RescheduleResult{}, err
	}
	return RescheduleResult{DueAt: due, DeliveryKey: key}, nil
}

// rescheduleMemoryFirst is reschedule as reminders started before
// changeRescheduleWritesFirst ran it; they replay through it.
func (r *run) rescheduleMemoryFirst(ctx workflow.Context, req RescheduleRequest) (RescheduleResult, error) {
	from := r.due
	r.due = reminder.NormalizeTime(req.DueAt)
	r.deliveryKey = reminder.DeliveryKey(r.in.ReminderID, r.in.SubscriberID, r.due)
	r.wake = true
	r.reschedules++
	r.note(ctx, "rescheduled", from.UTC().Format(time.RFC3339)+" → "+r.due.UTC().Format(time.RFC3339))
	err := workflow.ExecuteLocalActivity(operatorWriteOptions(ctx), a.RecordReschedule, activities.RescheduleInput{
		ReminderID: r.in.ReminderID, DueAt: r.due, DeliveryKey: r.deliveryKey,
		Detail: map[string]any{"from": from, "to": r.due, "delivery_key": r.deliveryKey, "by": req.By, "key": req.Key, "reason": req.Reason},
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
	if err := checkDeadline(ctx, d.Deadline); err != nil {
		return err
	}
	if r.expiring {
		return errExpiring
	}
	return r.checkDecision(d)
}

func (r *run) checkDecision(d Decision) error {
	if r.deciding {
		return errors.New("another decision is being recorded")
	}
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

// decide takes a decision: its acceptance reaches the history first
// (changeAcceptedFirst), then the mirror takes it, retried until it takes
// or refuses it, then the workflow. A decision the workflow did not accept
// has changed nothing, and one it accepted lands in both or is refused by
// the mirror in both. (Before changeAcceptedFirst the mirror write ran in
// the accepting task, in the same commands as the memory-first order
// reminders started before that ran: the main loop waits for the handler
// either way, and local-activity markers are matched apart from other
// commands. The recorded approved and rejected histories replay through it.)
func (r *run) decide(ctx workflow.Context, d Decision, approved bool) (DecisionResult, error) {
	r.busy++
	defer func() { r.busy-- }()
	if err := r.mu.Lock(ctx); err != nil {
		return DecisionResult{}, err
	}
	defer r.mu.Unlock()
	if err := r.checkDecision(d); err != nil {
		return DecisionResult{}, err
	}
	record := &DecisionRecord{Approved: approved, By: d.By, Reason: d.Reason, At: workflow.Now(ctx), Key: d.Key}
	detail := map[string]any{"by": d.By, "key": d.Key, "reason": d.Reason}
	to, event := reminder.Cancelled, "rejected"
	if approved {
		to, event = reminder.Scheduled, "approved"
	}
	r.deciding = true
	wctx := operatorWriteOptions(ctx)
	if r.version(ctx, changeAcceptedFirst) == 1 {
		err := acceptedFirst(ctx)
		if err == nil && r.cancel != nil {
			// A cancel came while the task ended.
			err = errors.New("reminder is being cancelled")
		}
		if err != nil {
			r.deciding = false
			return DecisionResult{}, err
		}
		wctx = acceptedWriteOptions(ctx)
	}
	err := workflow.ExecuteLocalActivity(wctx, a.RecordTransition, activities.TransitionInput{
		ReminderID: r.in.ReminderID, From: []reminder.State{reminder.AwaitingApproval}, To: to, Event: event, Detail: detail,
	}).Get(wctx, nil)
	r.deciding = false
	if _, refused := refusedAs(err); refused {
		// The mirror holds another state (another path finished it):
		// the decision is refused, and nothing changed.
		return DecisionResult{}, err
	}
	if err != nil {
		return DecisionResult{}, mirrorUnavailable("decision", err)
	}
	r.decision, r.state = record, to
	r.note(ctx, event, "")
	if err := upsertState(ctx, to); err != nil {
		return DecisionResult{}, err
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
