// Package workflows holds ReminderWorkflow, the durable life of one reminder
// (one shipment update for one subscriber), and the contract the starter, the
// CLI and operators share with it: task queue, ids, search attributes.
package workflows

import (
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
)

// DefaultTaskQueue is the task queue workers poll unless configured otherwise.
const DefaultTaskQueue = "shipnotify"

// ReminderWorkflowName is the workflow type operators see in the Web UI.
const ReminderWorkflowName = "ReminderWorkflow"

// Search attributes set at start and upserted on every state change, so an
// operator can filter in the Web UI (ShipmentId="S-1" AND
// ReminderState="scheduled"). Opaque ids only: never an address or URL.
var (
	ShipmentIDKey    = temporal.NewSearchAttributeKeyKeyword("ShipmentId")
	UpdateIDKey      = temporal.NewSearchAttributeKeyKeyword("UpdateId")
	ReminderStateKey = temporal.NewSearchAttributeKeyKeyword("ReminderState")
	DueAtKey         = temporal.NewSearchAttributeKeyTime("DueAt")
)

// SearchAttributeTypes lists the custom search attributes a namespace needs,
// for `shipnotify setup` (scripts/dev.sh passes the same to the dev server).
var SearchAttributeTypes = map[string]enums.IndexedValueType{
	ShipmentIDKey.GetName():    enums.INDEXED_VALUE_TYPE_KEYWORD,
	UpdateIDKey.GetName():      enums.INDEXED_VALUE_TYPE_KEYWORD,
	ReminderStateKey.GetName(): enums.INDEXED_VALUE_TYPE_KEYWORD,
	DueAtKey.GetName():         enums.INDEXED_VALUE_TYPE_DATETIME,
}

// ReminderWorkflowID is the workflow id of a reminder: derived from opaque
// ids only, so scheduling the same update twice names the same workflow.
func ReminderWorkflowID(shipmentID, updateID, subscriberID string) string {
	return "reminder/" + reminder.ID(shipmentID, updateID, subscriberID)
}

// ReminderInput starts a reminder. It carries ids and the due time only; the
// recipient and the message stay in the mirror, out of the engine's history.
type ReminderInput struct {
	ReminderID   string
	ShipmentID   string
	UpdateID     string
	SubscriberID string
	DueAt        time.Time
}

// ReminderResult is how a reminder ended.
type ReminderResult struct {
	State             reminder.State
	DeliveryKey       string
	ProviderMessageID string
}

// StartSearchAttributes are a new reminder's search attributes.
func StartSearchAttributes(in ReminderInput) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		ShipmentIDKey.ValueSet(in.ShipmentID),
		UpdateIDKey.ValueSet(in.UpdateID),
		ReminderStateKey.ValueSet(string(reminder.Scheduled)),
		DueAtKey.ValueSet(in.DueAt),
	)
}

// Activity timeouts and retries. The notify activity's retry budget is about
// three days, as Stripe and Svix give webhooks; after that the reminder fails.
const (
	notifyAttemptTimeout = time.Minute
	notifyRetryBudget    = 72 * time.Hour
)

var a *activities.Activities

// ReminderWorkflow sleeps on a durable timer until the reminder is due (9
// seconds or 9 months away: there is no ceiling), then runs the idempotent
// notify activity. A timer that came due while no worker ran fires when one
// returns, which is the seed's backfill. The history is kept lean: a timer,
// one activity and one search-attribute upsert.
func ReminderWorkflow(ctx workflow.Context, in ReminderInput) (ReminderResult, error) {
	logger := workflow.GetLogger(ctx)
	if wait := in.DueAt.Sub(workflow.Now(ctx)); wait > 0 {
		if err := workflow.Sleep(ctx, wait); err != nil {
			return ReminderResult{}, err
		}
	}

	notifyCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
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
	var sent activities.NotifyResult
	err := workflow.ExecuteActivity(notifyCtx, a.Notify, activities.NotifyInput{
		ReminderID:   in.ReminderID,
		SubscriberID: in.SubscriberID,
		DueAt:        in.DueAt,
	}).Get(ctx, &sent)
	if err != nil {
		logger.Warn("delivery failed for good", "reminder_id", in.ReminderID, "error", err)
		if err := recordTransition(ctx, in.ReminderID, reminder.Failed, "failed", map[string]any{"reason": err.Error()}); err != nil {
			return ReminderResult{}, err
		}
		return ReminderResult{State: reminder.Failed}, nil
	}
	if err := upsertState(ctx, reminder.Sent); err != nil {
		return ReminderResult{}, err
	}
	return ReminderResult{State: reminder.Sent, DeliveryKey: sent.DeliveryKey, ProviderMessageID: sent.ProviderMessageID}, nil
}

// recordTransition mirrors a state change (a local activity: one marker
// event, no task round trip) and upserts the ReminderState search attribute.
func recordTransition(ctx workflow.Context, reminderID string, to reminder.State, event string, detail map[string]any) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
		},
	})
	err := workflow.ExecuteLocalActivity(lctx, a.RecordTransition, activities.TransitionInput{
		ReminderID: reminderID, To: to, Event: event, Detail: detail,
	}).Get(ctx, nil)
	if err != nil {
		return err
	}
	return upsertState(ctx, to)
}

func upsertState(ctx workflow.Context, s reminder.State) error {
	return workflow.UpsertTypedSearchAttributes(ctx, ReminderStateKey.ValueSet(string(s)))
}
