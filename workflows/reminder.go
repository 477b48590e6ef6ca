package workflows

import (
	"errors"
	"fmt"
	"slices"
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

	deliveryKey string
	providerID  string
	// notifyStartedAt: when the attempt that sent began.
	notifyStartedAt time.Time
	sending         bool
	compensated     bool
	cancel          *CancelRequest
	cancelOutcome   string
	// endedByMirror: another path had finished the reminder's mirror row.
	endedByMirror bool
	// wake tells the main loop to look again (the due time moved).
	wake bool
	// busy counts handlers still writing the mirror; the main loop lets them
	// finish before it acts, so the audit trail keeps its order.
	busy int
	mu   workflow.Mutex
	// deciding: a decision is being written; a second one is refused.
	deciding bool
	// expiring: the expiry is being written; a decision or a reschedule
	// arriving meanwhile is refused.
	expiring bool
	// escalations counts escalation notices still running beside the
	// reminder; stopApprovalEscalation abandons the approval one.
	escalations            int
	stopApprovalEscalation workflow.CancelFunc
	// settles caches changeCancelSettlesTheSend's version once asked.
	settles *workflow.Version
	// retryCeiling is the notify retry policy's longest wait, as the
	// run's version of changeTimeoutRetryCeiling says (0: not asked yet).
	retryCeiling time.Duration
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

// errFollowed is deliver's word that the reminder took the due time and
// key its mirror row moved to, and waits for them: live goes round again.
var errFollowed = errors.New("the reminder follows its mirror row's move")

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
			if r.busy > 0 {
				// A decision is being written; it goes first and may settle the reminder.
				if err := workflow.Await(ctx, func() bool { return r.busy == 0 }); err != nil {
					return true, err
				}
				continue
			}
			// From here a decision or a reschedule is refused: the expiry's
			// write may take a while, and nothing may land beside it.
			r.expiring = true
			r.setState(ctx, reminder.Expired, "expired", map[string]any{"reason": "no decision by the final deadline"})
			r.abandonApprovalEscalation()
			return true, r.finish(ctx)
		}
		next := expiresAt
		if !r.escalated {
			next = timeoutAt
		}
		r.showAwaitingApproval(ctx, timeoutAt, expiresAt)
		summary := "approval timeout " + timerTime(timeoutAt)
		if r.escalated {
			summary = "approval's final deadline " + timerTime(expiresAt)
		}
		_, err := workflow.AwaitWithOptions(ctx, awaitFor(next.Sub(now), summary), func() bool {
			return r.state != reminder.AwaitingApproval || r.cancel != nil || r.continueAsNewDue(ctx)
		})
		if err != nil {
			return true, err
		}
	}
	if err := workflow.Await(ctx, func() bool { return r.busy == 0 }); err != nil {
		return true, err
	}
	// Decided: an overdue-approval notice still retrying has nothing left to say.
	r.abandonApprovalEscalation()
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
		r.showSleeping(ctx)
		_, err := workflow.AwaitWithOptions(ctx, awaitFor(wait, "until due "+timerTime(r.due)), func() bool {
			return r.wake || r.cancel != nil || r.continueAsNewDue(ctx)
		})
		if err != nil {
			return true, err
		}
	}
}

// deliver sends the reminder with the notify activity, retried within the
// retry budget; the provider's rate cap, set on the task queue and kept in
// the mirror, paces it. A cancel that arrives while the activity is still
// retrying stops it: a cancelled shipment's reminder must not go out hours
// later; a cancel while an attempt is in the provider's hands waits for its
// answer. A permanent failure fails the reminder and escalates once; a
// mirror row that another path finished (cancelled while the workflow was
// being started) ends the reminder as the mirror says, with nothing sent;
// one that moved while the workflow did not hear is followed
// (followTheMirror: errFollowed). Reminders at changeLocalFirstAttempt's
// version 1 make their first attempt as a local activity first.
func (r *run) deliver(ctx workflow.Context) error {
	r.sending = true
	r.showSending(ctx)
	// FollowsMoves changes no command: the activity's input is not matched
	// on replay, and its refusal of a moved row is read by followTheMirror.
	in := activities.NotifyInput{ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID, DueAt: r.due, FollowsMoves: true}
	began := workflow.Now(ctx)
	if r.version(ctx, changeLocalFirstAttempt) == localFirstAttempt {
		sent, err := r.sendLocally(ctx, in)
		if !tryAgainAsActivity(err) || ctx.Err() != nil && r.settlesTheSend(ctx) {
			return r.sent(ctx, sent, err)
		}
		workflow.GetLogger(ctx).Info("first attempt failed; the notify activity takes over",
			"reminder_id", r.in.ReminderID, "error", failureReason(err))
		in.Fallback, in.SentAs = true, sentAs(err)
		if err := r.backOff(ctx, err); err != nil && (in.SentAs == "" || !r.settlesTheSend(ctx)) {
			return err
		}
	}
	sent, err := r.sendAsActivity(ctx, in, notifyRetryBudget-workflow.Now(ctx).Sub(began))
	return r.sent(ctx, sent, err)
}

// settlesTheSend reports whether this reminder runs changeCancelSettlesTheSend;
// it is asked only once a cancel meets a send, so a reminder never cancelled
// there carries no marker for it.
func (r *run) settlesTheSend(ctx workflow.Context) bool {
	if r.settles == nil {
		ctx, _ = workflow.NewDisconnectedContext(ctx)
		v := r.version(ctx, changeCancelSettlesTheSend)
		r.settles = &v
	}
	return *r.settles == 1
}

// sendLocally makes the first attempt as a local activity. A cancel does not
// stop it (a local activity cannot say whether a cut-short call reached the
// provider); it is bounded by localAttemptTimeout, and a send it makes is
// compensated like any other.
func (r *run) sendLocally(ctx workflow.Context, in activities.NotifyInput) (activities.NotifyResult, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: localAttemptTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var sent activities.NotifyResult
	err := workflow.ExecuteLocalActivity(ctx, a.Notify, in).Get(ctx, &sent)
	return sent, err
}

// tryAgainAsActivity says whether a local first attempt's failure leaves
// the regular activity something to try: not after a success, nor after a
// refusal no retry changes.
func tryAgainAsActivity(err error) bool {
	if err == nil {
		return false
	}
	return !slices.Contains(notifyPermanentErrors, errorType(err))
}

// sentAs is the provider's message id a failed attempt sent under, if it
// did send.
func sentAs(err error) string {
	var appErr *temporal.ApplicationError
	var proof activities.SentProof
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeSentNotRecorded && appErr.HasDetails() &&
		appErr.Details(&proof) == nil {
		return proof.ProviderMessageID
	}
	return ""
}

// backOff waits before the regular activity's first attempt as a retry
// would (as long as the provider asked, if it did), or until a cancel.
func (r *run) backOff(ctx workflow.Context, failure error) error {
	wait := activities.NotifyInitialInterval
	var appErr *temporal.ApplicationError
	if errors.As(failure, &appErr) && appErr.NextRetryDelay() > 0 {
		wait = appErr.NextRetryDelay()
	}
	_, err := workflow.AwaitWithOptions(ctx, awaitFor(wait, "back-off before the send's retry, "+wait.String()), func() bool { return r.cancel != nil })
	return err
}

// awaitFor is an await of at most timeout whose timer the Web UI names by
// summary (else it shows as "AwaitWithTimeout"). A summary is the timer's
// metadata, not part of the command a replay matches.
func awaitFor(timeout time.Duration, summary string) workflow.AwaitOptions {
	return workflow.AwaitOptions{Timeout: timeout, TimerOptions: workflow.TimerOptions{Summary: summary}}
}

// timerTime is a time as a timer's summary gives it: UTC, to the minute.
func timerTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04Z") }

// sendAsActivity runs the notify activity with budget left to retry in. A
// cancel update stops it; a cancel of the workflow itself reaches it through
// its context. Either way the activity says how it ended (it waits for the
// cancel), and its outcome is read on a disconnected context: an attempt
// already in the provider's hands finishes and reports its send. An
// activity that only records a send the workflow holds the proof of
// (in.SentAs) sends nothing, so no cancel stops it.
func (r *run) sendAsActivity(ctx workflow.Context, in activities.NotifyInput, budget time.Duration) (activities.NotifyResult, error) {
	sendCtx, stopSend := workflow.WithCancel(ctx)
	proofOnly := in.SentAs != "" && r.settlesTheSend(ctx)
	if proofOnly {
		sendCtx, stopSend = workflow.NewDisconnectedContext(ctx)
	}
	opts := r.sendOptions(sendCtx)
	if in.Fallback {
		o := workflow.GetActivityOptions(opts)
		o.ScheduleToCloseTimeout = max(budget, notifyAttemptTimeout)
		opts = workflow.WithActivityOptions(opts, o)
	}
	f := workflow.ExecuteActivity(opts, a.Notify, in)
	err := workflow.Await(ctx, func() bool { return f.IsReady() || r.cancel != nil })
	switch {
	case err != nil && !r.settlesTheSend(ctx):
		// As reminders before changeCancelSettlesTheSend ran it.
		return activities.NotifyResult{}, err
	case err == nil && !f.IsReady() && !proofOnly &&
		r.version(ctx, changeCancelStopsSend) == 1:
		// The activity heartbeats, so an attempt in flight hears of it
		// before it calls the provider; one that already called finishes
		// and reports the send (then compensated).
		stopSend()
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var sent activities.NotifyResult
	err = f.Get(dctx, &sent)
	return sent, err
}

// sent ends the reminder as its delivery came out.
func (r *run) sent(ctx workflow.Context, sent activities.NotifyResult, err error) error {
	r.sending = false
	var canceled *temporal.CanceledError
	cancelled := r.cancel != nil || ctx.Err() != nil
	switch {
	case err == nil:
	case errorType(err) == activities.ErrTypeReminderFinished:
		return r.endAsTheMirrorSays(ctx, err)
	case errorType(err) == activities.ErrTypeReminderMoved:
		// Nothing was claimed or sent: a cancel that came meanwhile is
		// a plain one, which the wait for the new due time hears.
		return r.followTheMirror(ctx, err)
	case cancelled && r.settlesTheSend(ctx):
		return r.endCancelledDuringSend(ctx, err)
	case errors.As(err, &canceled) && r.cancel != nil:
		return r.endCancelled(ctx)
	default:
		reason := failureReason(err)
		workflow.GetLogger(ctx).Warn("delivery failed for good", "reminder_id", r.in.ReminderID, "error", reason)
		r.setState(ctx, reminder.Failed, "failed", map[string]any{"reason": reason})
		if r.state == reminder.Failed {
			r.escalate(ctx, "delivery_failed", reason)
		}
		return r.finish(ctx)
	}
	r.deliveryKey, r.providerID, r.notifyStartedAt = sent.DeliveryKey, sent.ProviderMessageID, sent.StartedAt
	// The activity wrote "sent" to the mirror with the delivery.
	r.state = reminder.Sent
	r.note(ctx, "sent", "")
	if ctx.Err() != nil {
		// The workflow was cancelled while the send went out:
		// cancelledFromOutside compensates it.
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		if err := upsertState(dctx, reminder.Sent); err != nil {
			return err
		}
		return ctx.Err()
	}
	if err := upsertState(ctx, reminder.Sent); err != nil {
		return err
	}
	return r.finish(ctx)
}

// endCancelledDuringSend ends a reminder cancelled while its send ran, when
// the send did not report one (it was stopped, failed, or its outcome is
// unknown): that is not taken for "nothing was sent". A proof of a send
// only the workflow holds is recorded first; then the cancel is recorded,
// and the cancellation notice goes out if the mirror holds a delivery that
// may have reached the provider (sent, unconfirmed, or a claim its attempt
// left without a word). Without one it is a plain cancel. Never failed,
// never silent.
func (r *run) endCancelledDuringSend(ctx workflow.Context, cause error) error {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if r.cancel == nil {
		r.cancel = &CancelRequest{By: "temporal", Reason: "the workflow was cancelled"}
	}
	if proof := sentAs(cause); proof != "" {
		in := activities.NotifyInput{ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID, DueAt: r.due,
			Fallback: true, SentAs: proof}
		if _, err := r.sendAsActivity(dctx, in, notifyRetryBudget); err != nil {
			workflow.GetLogger(ctx).Error("the proof of a send could not be recorded", "reminder_id", r.in.ReminderID, "error", err)
		}
	}
	if err := workflow.Await(dctx, func() bool { return r.busy == 0 }); err != nil {
		return err
	}
	r.abandonApprovalEscalation()
	r.cancelOutcome = r.compensateDuringSend(dctx)
	if ctx.Err() != nil {
		// A cancel of the workflow itself: it shows as cancelled.
		return ctx.Err()
	}
	return r.finish(ctx)
}

// endAsTheMirrorSays ends a reminder whose mirror row was finished by
// another path: the notify activity refused to send for it. The mirror has
// the state and its event already.
func (r *run) endAsTheMirrorSays(ctx workflow.Context, err error) error {
	state := reminder.Cancelled
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.HasDetails() {
		_ = appErr.Details(&state)
	}
	workflow.GetLogger(ctx).Info("mirror row already finished; nothing sent", "reminder_id", r.in.ReminderID, "state", string(state))
	r.state, r.endedByMirror = state, true
	r.note(ctx, "ended_as_mirror", string(state))
	if err := upsertState(ctx, state); err != nil {
		return err
	}
	return r.finish(ctx)
}

// followTheMirror takes the due time and key of a mirror row that moved
// while the workflow did not hear (a window move that found no workflow
// for a row never marked started, as this one started and its mark
// failed): the claim refused the old key, which names the old due time,
// and nothing was claimed or sent. The reminder upserts DueAt and sleeps
// again to the row's due time, to send under its key (errFollowed); it is
// never sent at the old time, nor lost. A refusal it cannot follow (no
// move it can read, or one to its own due time) ends it as the mirror
// says, in the pending state, as reminders before
// changeFollowsTheMirrorsMove end; reconcile --verify starts those again.
func (r *run) followTheMirror(ctx workflow.Context, refusal error) error {
	if r.version(ctx, changeFollowsTheMirrorsMove) == workflow.DefaultVersion {
		return r.endAsTheMirrorSays(ctx, refusal)
	}
	to, ok := movedTo(refusal)
	if !ok || to.DueAt.Equal(r.due) || to.DeliveryKey != reminder.DeliveryKey(r.in.ReminderID, r.in.SubscriberID, to.DueAt) {
		workflow.GetLogger(ctx).Error("the mirror refused the send under another key the reminder cannot follow",
			"reminder_id", r.in.ReminderID, "due_at", to.DueAt)
		return r.endAsTheMirrorSays(ctx, refusal)
	}
	if ctx.Err() != nil {
		// The workflow itself was cancelled: nothing was sent, and
		// cancelledFromOutside records the cancel.
		return ctx.Err()
	}
	from := r.due
	r.due, r.deliveryKey = to.DueAt, to.DeliveryKey
	r.note(ctx, "moved_by_the_mirror", from.UTC().Format(time.RFC3339)+" → "+to.DueAt.UTC().Format(time.RFC3339))
	workflow.GetLogger(ctx).Info("the mirror moved the reminder; it sleeps to the new due time",
		"reminder_id", r.in.ReminderID, "from", from, "to", to.DueAt)
	if err := workflow.UpsertTypedSearchAttributes(ctx, DueAtKey.ValueSet(to.DueAt)); err != nil {
		return err
	}
	return errFollowed
}

// movedTo reads where a refusal under a moved key says the row moved to
// (its details: the row's state, then activities.MovedTo).
func movedTo(err error) (activities.MovedTo, bool) {
	var appErr *temporal.ApplicationError
	var state reminder.State
	var to activities.MovedTo
	if !errors.As(err, &appErr) || !appErr.HasDetails() || appErr.Details(&state, &to) != nil || to.DueAt.IsZero() {
		return to, false
	}
	return to, true
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

// cancelledOutcome is a cancel's answer once the reminder is in state: a
// cancel, or the final state another path had reached first.
func cancelledOutcome(state reminder.State) string {
	if state == reminder.Cancelled {
		return OutcomeCancelled
	}
	return "already_" + string(state)
}

// endCancelled ends a reminder cancelled before it was sent: nothing is sent.
func (r *run) endCancelled(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return r.busy == 0 }); err != nil {
		return err
	}
	r.setState(ctx, reminder.Cancelled, "cancelled", map[string]any{"by": r.cancel.By, "key": r.cancel.Key, "reason": r.cancel.Reason})
	r.abandonApprovalEscalation()
	r.cancelOutcome = cancelledOutcome(r.state)
	return r.finish(ctx)
}

// cancelledFromOutside records a cancel of the workflow itself, which no
// cancel update announced, as the cancel update would have: a pending
// reminder ends cancelled in the mirror, a sent one is compensated. It runs
// on a disconnected context (the workflow's own is cancelled) and returns
// the cancellation, so the workflow shows as cancelled.
func (r *run) cancelledFromOutside(ctx workflow.Context, cause error) error {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if r.cancel == nil {
		r.cancel = &CancelRequest{By: "temporal", Reason: "the workflow was cancelled"}
	}
	switch {
	case r.state == reminder.Sent && r.cancelOutcome == "":
		r.cancelOutcome = r.compensate(dctx)
	case !r.state.Terminal():
		r.setState(dctx, reminder.Cancelled, "cancelled",
			map[string]any{"by": r.cancel.By, "key": r.cancel.Key, "reason": r.cancel.Reason, "via": "workflow cancellation"})
		r.cancelOutcome = cancelledOutcome(r.state)
		r.showDone(dctx)
	}
	return cause
}

// compensate tells a subscriber already reminded that the shipment was
// cancelled, under the notice's own delivery key, and says how that went.
func (r *run) compensate(ctx workflow.Context) (outcome string) {
	showCompensation(ctx, "")
	defer func() { showCompensation(ctx, outcome) }()
	recordTransition(ctx, r.in.ReminderID, reminder.Cancelled, "cancelled",
		map[string]any{"by": r.cancel.By, "key": r.cancel.Key, "reason": r.cancel.Reason, "after": "sent"})
	var res activities.NotifyResult
	err := workflow.ExecuteActivity(r.notifyOptions(ctx), a.Notify, activities.NotifyInput{
		Purpose: reminder.PurposeCancellation, ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID, DueAt: r.due,
	}).Get(ctx, &res)
	switch {
	case err != nil:
		r.note(ctx, "cancellation_failed", failureReason(err))
		return OutcomeCompensationFailed
	case res.Skipped:
		r.note(ctx, "cancellation_skipped", res.SkipReason)
		return OutcomeCompensationSkipped
	}
	r.compensated = true
	r.note(ctx, "cancellation_sent", "")
	return OutcomeCompensated
}

// compensateDuringSend records a cancel that met a send which did not
// report one, then sends the cancellation notice, which goes out only if the
// mirror holds a delivery of the reminder that may have reached the
// provider, and says which it came to. The reminder takes the state the
// mirror gives it: cancelled, sent (a maybe-sent send is a send), or the
// one it already ended in; the answer tells the same story as the row.
func (r *run) compensateDuringSend(ctx workflow.Context) (outcome string) {
	state := reminder.Cancelled
	err := workflow.ExecuteLocalActivity(mirrorWriteOptions(ctx), a.RecordCancel, activities.TransitionInput{
		ReminderID: r.in.ReminderID, To: reminder.Cancelled, Event: "cancelled",
		Detail: map[string]any{"by": r.cancel.By, "key": r.cancel.Key, "reason": r.cancel.Reason, "during": "send"},
	}).Get(ctx, &state)
	if err != nil {
		workflow.GetLogger(ctx).Error("mirror write failed", "reminder_id", r.in.ReminderID, "event", "cancelled", "error", err)
	}
	r.state = state
	r.note(ctx, "cancelled", "during the send")
	if err := upsertState(ctx, state); err != nil {
		workflow.GetLogger(ctx).Error("search attribute upsert failed", "error", err)
	}
	showCompensation(ctx, "")
	var res activities.NotifyResult
	err = workflow.ExecuteActivity(r.notifyOptions(ctx), a.Notify, activities.NotifyInput{
		Purpose: reminder.PurposeCancellation, ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID, DueAt: r.due,
	}).Get(ctx, &res)
	switch {
	case err != nil:
		r.note(ctx, "cancellation_failed", failureReason(err))
		showCompensation(ctx, OutcomeCompensationFailed)
		return OutcomeCompensationFailed
	case res.Skipped && state.Handed():
		// The mirror holds it sent (it may have reached the provider), and
		// the notice did not go (the address opted out since, say): as
		// compensate answers, never "nothing was sent". Only the update's
		// answer differs from a plain cancel's, not a command.
		r.note(ctx, "cancellation_skipped", res.SkipReason)
		showCompensation(ctx, OutcomeCompensationSkipped)
		return OutcomeCompensationSkipped
	case res.Skipped:
		// Nothing of it can have reached the provider: a plain cancel.
		r.note(ctx, "cancellation_skipped", res.SkipReason)
		r.showDone(ctx)
		return OutcomeCancelled
	}
	r.compensated = true
	r.note(ctx, "cancellation_sent", "")
	showCompensation(ctx, OutcomeCompensated)
	return OutcomeCompensated
}

// escalate tells the update's escalation contact, once per reason (the
// notice's delivery key makes a repeat a no-op). The notice runs beside the
// reminder: one that keeps failing holds neither an expiry nor a cancel
// behind it; finish waits for it.
func (r *run) escalate(ctx workflow.Context, reason, detail string) {
	in := activities.NotifyInput{
		Purpose: reminder.PurposeEscalation, ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID,
		DueAt: r.due, Reason: reason, Detail: detail,
	}
	if r.version(ctx, changeEscalationBeside) == workflow.DefaultVersion {
		var res activities.NotifyResult
		err := workflow.ExecuteActivity(r.notifyOptions(ctx), a.Notify, in).Get(ctx, &res)
		r.noteEscalation(ctx, reason, res, err)
		return
	}
	ectx, stop := workflow.WithCancel(ctx)
	if reason == "approval_timeout" {
		r.stopApprovalEscalation = stop
	}
	r.escalations++
	f := workflow.ExecuteActivity(r.notifyOptions(ectx), a.Notify, in)
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { r.escalations-- }()
		var res activities.NotifyResult
		r.noteEscalation(ctx, reason, res, f.Get(ctx, &res))
	})
}

// abandonApprovalEscalation stops an overdue-approval notice still
// retrying once the reminder no longer awaits approval.
func (r *run) abandonApprovalEscalation() {
	if r.stopApprovalEscalation != nil {
		r.stopApprovalEscalation()
		r.stopApprovalEscalation = nil
	}
}

func (r *run) noteEscalation(ctx workflow.Context, reason string, res activities.NotifyResult, err error) {
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &canceled):
		r.note(ctx, "escalation_abandoned", reason)
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

// notifyPermanentErrors are the notify's refusals no retry changes: the
// activity does not retry them, nor does a failed local first attempt
// hand them to the activity.
var notifyPermanentErrors = []string{
	activities.ErrTypePermanentDelivery,
	activities.ErrTypeReminderNotFound,
	activities.ErrTypeReminderFinished,
	activities.ErrTypeReminderMoved,
}

// notifyOptionsWithin are the notify activity's options, its retry policy
// waiting at most ceiling between attempts.
func notifyOptionsWithin(ctx workflow.Context, ceiling time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    notifyAttemptTimeout,
		ScheduleToCloseTimeout: notifyRetryBudget,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        activities.NotifyInitialInterval,
			BackoffCoefficient:     2,
			MaximumInterval:        ceiling,
			NonRetryableErrorTypes: notifyPermanentErrors,
		},
	})
}

// notifyOptions are the notify's options for this run: its retry policy's
// ceiling is notifyPolicyCeiling from changeTimeoutRetryCeiling on, the
// activity's NotifyMaximumInterval before.
func (r *run) notifyOptions(ctx workflow.Context) workflow.Context {
	if r.retryCeiling == 0 {
		vctx, _ := workflow.NewDisconnectedContext(ctx)
		r.retryCeiling = activities.NotifyMaximumInterval
		if r.version(vctx, changeTimeoutRetryCeiling) == 1 {
			r.retryCeiling = notifyPolicyCeiling
		}
	}
	return notifyOptionsWithin(ctx, r.retryCeiling)
}

// noticeOptions are the notify's options for the notice workflows serve
// and the starter start (a cancellation after the reminder finished, a
// provider's bounce): they have no start level, and keep the policy's old
// ceiling rather than record a version marker in every one.
func noticeOptions(ctx workflow.Context) workflow.Context {
	return notifyOptionsWithin(ctx, activities.NotifyMaximumInterval)
}

// sendOptions are notifyOptions for the reminder's own send, which a cancel
// may stop: the workflow waits for the activity to say whether it sent.
func (r *run) sendOptions(ctx workflow.Context) workflow.Context {
	ctx = r.notifyOptions(ctx)
	o := workflow.GetActivityOptions(ctx)
	o.WaitForCancellation = true
	return workflow.WithActivityOptions(ctx, o)
}

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
