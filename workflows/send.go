package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
)

// The send: the notify activity, a local first attempt before it, and
// how the reminder ends as the send came out (sent, failed, or as its
// mirror row says).

// sendState is the run's send and what came of it.
type sendState struct {
	deliveryKey string
	providerID  string
	// notifyStartedAt: when the attempt that sent began.
	notifyStartedAt time.Time
	sending         bool
	// endedByMirror: another path had finished the reminder's mirror row.
	endedByMirror bool
	// settles caches changeCancelSettlesTheSend's version once asked.
	settles *workflow.Version
	// retryCeiling is the notify retry policy's longest wait, as the
	// run's version of changeTimeoutRetryCeiling says (0: not asked yet).
	retryCeiling time.Duration
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
	in := activities.NotifyInput{ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID, DueAt: r.due, FollowsMoves: true,
		Digest: r.in.Digest > 0}
	if at, ok := r.knownGoesOut(); ok {
		in.GoesOutAt = at
	}
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

// errFollowed is deliver's word that the reminder took the due time and
// key its mirror row moved to, and waits for them: live goes round again.
var errFollowed = errors.New("the reminder follows its mirror row's move")

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
