package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/reminder"
)

// Activity timeouts and retries. The notify activity's retry budget is about
// three days, as Stripe and Svix give webhooks; after that the reminder fails.
const (
	notifyAttemptTimeout = budget.NotifyAttempt
	// localAttemptTimeout bounds the local first attempt reminders at
	// changeLocalFirstAttempt's version 1 make: an honest provider call
	// (budget.SendAllowance, as on every path) and the time its record
	// may take. (A local activity's timeout is not in the history.)
	localAttemptTimeout = budget.LocalAttempt
	notifyRetryBudget   = budget.NotifyRetries
	// notifyPolicyCeiling is the notify retry policy's longest wait from
	// changeTimeoutRetryCeiling on: what an attempt that timed out, or
	// whose worker stopped, waits at most. Every failure the activity
	// reports names its own wait, which the ceiling does not bound.
	notifyPolicyCeiling = budget.TimedOutRetryCeiling
	// operatorWriteBudget bounds the mirror write of an operator's change
	// (a reschedule, a decision). Past it the change fails, nothing moves,
	// and the caller, who waits longer than this, hears so.
	operatorWriteBudget = budget.OperatorWrite
	// mirrorWriteBudget is, in effect, no budget: a state change the
	// workflow makes on its own (sent, failed, expired, cancelled) is
	// retried until PostgreSQL takes it, however long a failover lasts.
	mirrorWriteBudget = 100 * 365 * 24 * time.Hour
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
// compensated by a cancellation notice; a cancel of the workflow itself (the
// Web UI, the temporal CLI) is recorded as a cancel. The delivered path's
// history is kept lean: one timer, one activity, one search-attribute upsert.
func ReminderWorkflow(ctx workflow.Context, in ReminderInput) (ReminderResult, error) {
	r := newRun(ctx, in)
	if err := r.register(ctx); err != nil {
		return ReminderResult{}, err
	}
	err := r.live(ctx)
	if err != nil && ctx.Err() != nil && temporal.IsCanceledError(err) {
		err = r.cancelledFromOutside(ctx, err)
	}
	return r.result(), err
}

// run is one run's state; handlers and the main loop share it on the
// workflow's single thread. Each of its concerns keeps its own part, in
// its own file: the approval (approval.go), the due time (due.go), the
// send (send.go) and a cancel (cancel.go); run keeps what they share.
type run struct {
	in          ReminderInput
	state       reminder.State
	transitions []Transition
	count       int
	// busy counts handlers still writing the mirror; the main loop lets them
	// finish before it acts, so the audit trail keeps its order.
	busy int
	mu   workflow.Mutex

	approvalState
	dueState
	sendState
	cancelState
}

func newRun(ctx workflow.Context, in ReminderInput) *run {
	r := &run{in: in, mu: workflow.NewMutex(ctx)}
	r.due = in.DueAt
	if c := in.Carried; c != nil {
		r.state, r.requestedAt, r.decision, r.escalated = c.State, c.ApprovalRequestedAt, c.Decision, c.Escalated
		r.reschedules, r.transitions, r.count = c.Reschedules, c.Transitions, c.TransitionCount
	} else {
		r.state, r.requestedAt = reminder.Scheduled, workflow.Now(ctx)
		if in.Approval.Required {
			r.state = reminder.AwaitingApproval
		}
		// Dated when the execution was created, not when its first task
		// ran: a reminder started with a start delay runs it at its due time.
		r.noteAt(workflow.GetInfo(ctx).WorkflowStartTime, "scheduled", "")
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

// live runs the reminder from where it stands to its end. A send refused
// because the mirror moved the reminder (followTheMirror) sleeps again, to
// the mirror's due time.
func (r *run) live(ctx workflow.Context) error {
	if r.state == reminder.AwaitingApproval {
		done, err := r.awaitDecision(ctx)
		if done || err != nil {
			return err
		}
	}
	for {
		done, err := r.awaitDue(ctx)
		if done || err != nil {
			return err
		}
		if err := r.deliver(ctx); !errors.Is(err, errFollowed) {
			return err
		}
	}
}

// finish lets the handlers and any escalation still running complete,
// answering every cancel that arrives until the very end: after a send it
// is compensated.
func (r *run) finish(ctx workflow.Context) error {
	done := func() bool { return workflow.AllHandlersFinished(ctx) && r.escalations == 0 }
	r.showDone(ctx)
	for {
		if r.cancel != nil && r.cancelOutcome == "" {
			outcome := "already_" + string(r.state)
			if r.state == reminder.Sent {
				outcome = r.compensate(ctx)
			}
			// Set last: the cancel handlers answer as soon as it is.
			r.cancelOutcome = outcome
		}
		err := workflow.Await(ctx, func() bool {
			return done() || (r.cancel != nil && r.cancelOutcome == "")
		})
		if err != nil || done() {
			return err
		}
	}
}

func (r *run) continueAsNewDue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= historyLimit
}

// continueAsNew hands the reminder's state to a fresh run once its
// handlers and any escalation running beside it are done (the new run would
// not know of it), so a long life (a thousand reschedules) never exhausts
// the history.
func (r *run) continueAsNew(ctx workflow.Context) error {
	err := workflow.Await(ctx, func() bool {
		return (workflow.AllHandlersFinished(ctx) && r.escalations == 0) || r.cancel != nil
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
	return ReminderResult{State: r.state, DeliveryKey: r.deliveryKey, ProviderMessageID: r.providerID,
		Compensated: r.compensated, NotifyStartedAt: r.notifyStartedAt}
}

func (r *run) status() (Status, error) {
	s := Status{
		State: r.state, DueAt: r.due, DeliveryKey: r.deliveryKey, CancelRequested: r.cancel != nil,
		Reschedules: r.reschedules, Transitions: r.transitions, TransitionCount: r.count,
		Approval: ApprovalStatus{Required: r.in.Approval.Required, Escalated: r.escalated, Decision: r.decision},
	}
	if at, ok := r.knownGoesOut(); ok {
		s.GoesOutAt = at
	}
	if r.in.Approval.Required {
		s.Approval.TimeoutAt = r.requestedAt.Add(r.in.Approval.Timeout)
		s.Approval.ExpiresAt = r.requestedAt.Add(r.in.Approval.ExpireAfter)
	}
	return s, nil
}

// note adds a step to the status query's transitions, keeping the newest.
func (r *run) note(ctx workflow.Context, event, detail string) {
	r.noteAt(workflow.Now(ctx), event, detail)
}

func (r *run) noteAt(at time.Time, event, detail string) {
	r.count++
	r.transitions = append(r.transitions, Transition{At: at, Event: event, State: r.state, Detail: detail})
	if len(r.transitions) > maxTransitions {
		r.transitions = append([]Transition(nil), r.transitions[len(r.transitions)-maxTransitions:]...)
	}
}

// setState moves the pending reminder to a state the workflow reached on
// its own: first in the mirror (retried until PostgreSQL takes it), then in
// memory, where the main loop and handlers see it, and in the search
// attributes. A mirror row another path had finished refuses the change;
// the reminder then takes the state the mirror holds.
func (r *run) setState(ctx workflow.Context, to reminder.State, event string, detail map[string]any) {
	to = recordStateChange(ctx, r.in.ReminderID, to, event, detail)
	r.state = to
	r.note(ctx, event, "")
	if err := upsertState(ctx, to); err != nil {
		workflow.GetLogger(ctx).Error("search attribute upsert failed", "error", err)
	}
}

// --- shared helpers ---

// mirrorWriteOptions retry a state change the workflow made on its own
// until the mirror takes it (backoff capped at a minute).
func mirrorWriteOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: mirrorWriteBudget,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
		},
	})
}

// acceptedWriteOptions write an operator's change the workflow has
// accepted (changeAcceptedFirst) as the workflow's own changes are
// written: retried until the mirror takes or refuses it, on a context a
// cancel of the workflow does not stop, since an attempt cut short may
// have been taken. The change is in the history already; it must land in
// the mirror or nowhere.
func acceptedWriteOptions(ctx workflow.Context) workflow.Context {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	return mirrorWriteOptions(ctx)
}

// operatorWriteOptions retry an operator's change a short while only: the
// operator waits for the answer and can try again. Reminders before
// changeAcceptedFirst wrote with them in the task that accepted the change.
func operatorWriteOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    5 * time.Second,
		ScheduleToCloseTimeout: operatorWriteBudget,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
		},
	})
}

// recordTransition mirrors a state change as a local activity (one marker
// event, no task round trip), retried until the mirror takes it: the mirror
// must not lie for long. It runs on a disconnected context, so even a
// cancel of the workflow itself does not stop the write; only termination
// does.
func recordTransition(ctx workflow.Context, reminderID string, to reminder.State, event string, detail map[string]any) {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	err := workflow.ExecuteLocalActivity(mirrorWriteOptions(ctx), a.RecordTransition, activities.TransitionInput{
		ReminderID: reminderID, To: to, Event: event, Detail: detail,
	}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Error("mirror write failed", "reminder_id", reminderID, "event", event, "error", err)
	}
}

// recordStateChange mirrors a pending reminder's change to to as
// recordTransition does, and returns the state the mirror holds after: to,
// or the final state of a row another path had finished, which refused it.
func recordStateChange(ctx workflow.Context, reminderID string, to reminder.State, event string, detail map[string]any) reminder.State {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	err := workflow.ExecuteLocalActivity(mirrorWriteOptions(ctx), a.RecordTransition, activities.TransitionInput{
		ReminderID: reminderID, From: reminder.PendingStates, To: to, Event: event, Detail: detail,
	}).Get(ctx, nil)
	if state, refused := refusedAs(err); refused {
		workflow.GetLogger(ctx).Info("the mirror had finished the reminder; it ends as the mirror says",
			"reminder_id", reminderID, "event", event, "state", string(state))
		return state
	}
	if err != nil {
		workflow.GetLogger(ctx).Error("mirror write failed", "reminder_id", reminderID, "event", event, "error", err)
	}
	return to
}

// refusedAs reads the mirror's refusal of a change: the state it holds.
func refusedAs(err error) (reminder.State, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrTypeTransitionRefused {
		return "", false
	}
	var state reminder.State
	if appErr.HasDetails() && appErr.Details(&state) == nil {
		return state, true
	}
	return "", false
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

// errorType is the type of an activity's application error ("" for others).
func errorType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}
