package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
)

// CancellationNoticeWorkflow compensates a reminder that was delivered and
// whose workflow had finished before its shipment was cancelled: it records
// who cancelled and why, then sends the one cancellation notice under the
// notice's own delivery key. Its workflow id is derived from the reminder
// (CancellationNoticeWorkflowID), so cancelling twice starts it once.
func CancellationNoticeWorkflow(ctx workflow.Context, in CancellationNoticeInput) (ReminderResult, error) {
	show(ctx, "Recording the cancellation of reminder %s in the mirror", in.ReminderID)
	recordTransition(ctx, in.ReminderID, reminder.Cancelled, "cancelled",
		map[string]any{"by": in.By, "key": in.Key, "reason": in.Reason, "after": "sent"})
	showCompensation(ctx, "")
	var res activities.NotifyResult
	err := workflow.ExecuteActivity(noticeOptions(ctx), a.Notify, activities.NotifyInput{
		Purpose: reminder.PurposeCancellation, ReminderID: in.ReminderID, SubscriberID: in.SubscriberID,
	}).Get(ctx, &res)
	if err != nil {
		showCompensation(ctx, OutcomeCompensationFailed)
		return ReminderResult{State: reminder.Sent}, err
	}
	if res.Skipped {
		showCompensation(ctx, OutcomeCompensationSkipped)
	} else {
		showCompensation(ctx, OutcomeCompensated)
	}
	return ReminderResult{State: reminder.Sent, DeliveryKey: res.DeliveryKey, ProviderMessageID: res.ProviderMessageID,
		Compensated: !res.Skipped}, nil
}
