package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
)

// DeliveryEscalationWorkflow tells the update's escalation contact, once,
// that the mail provider bounced or dropped a reminder it had accepted, or
// has deferred it too long. The reminder's own workflow finished when the
// provider accepted it; serve starts this one from the mirror's outbox
// (outcome.Escalator). Its id derives from the reminder and the reason
// (DeliveryEscalationWorkflowID) and the notice has its own delivery key,
// so a repeated provider event, or a second server, escalates once.
func DeliveryEscalationWorkflow(ctx workflow.Context, in DeliveryEscalationInput) (activities.NotifyResult, error) {
	show(ctx, "Telling the escalation contact of reminder %s: %s", in.ReminderID, in.Reason)
	var res activities.NotifyResult
	err := workflow.ExecuteActivity(noticeOptions(ctx), a.Notify, activities.NotifyInput{
		Purpose: reminder.PurposeEscalation, ReminderID: in.ReminderID, SubscriberID: in.SubscriberID,
		Reason: in.Reason, Detail: in.Detail,
	}).Get(ctx, &res)
	switch {
	case err != nil:
		// The notice's retry budget is spent: say so on the trail; the
		// reminder's state already says what the provider reported.
		recordTransition(ctx, in.ReminderID, "", "escalation_failed", map[string]any{"reason": in.Reason, "error": failureReason(err)})
		show(ctx, "Done: the escalation could not be sent (%s)", failureReason(err))
		return res, err
	case res.Skipped:
		recordTransition(ctx, in.ReminderID, "", "escalation_skipped", map[string]any{"reason": in.Reason, "why": res.SkipReason})
		show(ctx, "Done: nothing to send (%s)", res.SkipReason)
	default:
		show(ctx, "Done: the escalation contact was told")
	}
	return res, nil
}
