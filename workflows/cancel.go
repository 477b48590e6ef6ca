package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
)

// A cancel: before the send nothing is sent; during it the send's outcome
// decides; after it the subscriber gets the cancellation notice
// (compensation). The cancel update's handler is in handlers.go.

// cancelState is the run's cancel and how it was answered.
type cancelState struct {
	cancel        *CancelRequest
	cancelOutcome string
	compensated   bool
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

// cancelledOutcome is a cancel's answer once the reminder is in state: a
// cancel, or the final state another path had reached first.
func cancelledOutcome(state reminder.State) string {
	if state == reminder.Cancelled {
		return OutcomeCancelled
	}
	return "already_" + string(state)
}

// endCancelled ends a reminder cancelled before it was sent: nothing is
// sent. A digest member's is settled as a cancel during a send: another
// member's attempt may hold its key (or have sent it), so the mirror, not
// the workflow, knows whether it was sent.
func (r *run) endCancelled(ctx workflow.Context) error {
	if r.in.Digest > 0 {
		return r.endCancelledDuringSend(ctx, nil)
	}
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
	case !r.state.Terminal() && r.in.Digest > 0 && r.cancelOutcome == "":
		// Another member's attempt may hold its key, as endCancelled says.
		r.abandonApprovalEscalation()
		r.cancelOutcome = r.compensateDuringSend(dctx)
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
