package sendgridevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// Defaults of an Escalator.
const (
	// DefaultEscalateEvery bounds how long an escalation that fell due
	// waits when no batch nudged (a deferral's, another server's after a
	// crash, one whose start failed).
	DefaultEscalateEvery = 30 * time.Second
	escalateBatch        = budget.EscalationBatch
	startTimeout         = budget.EscalationStart
	// heldElsewhereWait is the shortest pause between passes.
	heldElsewhereWait = time.Second
)

// Escalator starts the escalations provider outcomes owe: it reads the
// mirror's outbox (written with the outcome, in its transaction) and starts
// one DeliveryEscalationWorkflow per row once due. A start that fails is
// tried again on the next pass, so a Temporal outage delays an escalation
// and never loses it; the workflow's id makes a second start a no-op.
type Escalator struct {
	Store     *mirror.Store
	Temporal  client.Client
	TaskQueue string
	// Every is the longest pause between passes (0: DefaultEscalateEvery).
	Every   time.Duration
	Metrics *metrics.ProviderEvents
	Logger  *slog.Logger

	nudge chan struct{}
}

// NewEscalator returns an escalator; Run starts it.
func NewEscalator(store *mirror.Store, tc client.Client, taskQueue string) *Escalator {
	return &Escalator{Store: store, Temporal: tc, TaskQueue: taskQueue, nudge: make(chan struct{}, 1)}
}

// Nudge asks for a pass now (a batch owed escalations); it never blocks.
func (e *Escalator) Nudge() {
	select {
	case e.nudge <- struct{}{}:
	default:
	}
}

// Run makes passes until ctx ends: at once, when nudged, when the next
// owed escalation falls due, and at least every Every.
func (e *Escalator) Run(ctx context.Context) {
	every := e.Every
	if every <= 0 {
		every = DefaultEscalateEvery
	}
	logger := e.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for {
		wait := every
		if err := e.Pass(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("error starting escalations; trying again", "error", err)
		} else if next, ok, err := e.Store.NextEscalationDue(ctx); err == nil && ok {
			// One already due was not ours to take: another server's pass
			// holds it. Look again in a while, not at once.
			wait = min(max(time.Until(next)+10*time.Millisecond, heldElsewhereWait), every)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-e.nudge:
			t.Stop()
		case <-t.C:
		}
	}
}

// Pass starts every escalation due now and returns the first error.
func (e *Escalator) Pass(ctx context.Context) error {
	for {
		n, err := e.Store.StartDueEscalations(ctx, escalateBatch, e.start)
		if err != nil || n < escalateBatch {
			return err
		}
	}
}

// start starts one escalation's workflow. Its id refuses a second run,
// whatever the first came to: a bounce escalates once.
func (e *Escalator) start(ctx context.Context, o mirror.OwedEscalation) error {
	// The pass holds the row while it asks; a Temporal that hangs must not
	// hold it for long.
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	in := workflows.DeliveryEscalationInput{
		ReminderID: o.ReminderID, ShipmentID: o.ShipmentID, UpdateID: o.UpdateID, SubscriberID: o.SubscriberID,
		Reason: o.Reason, Detail: o.Detail,
	}
	attrs := []temporal.SearchAttributeUpdate{workflows.ShipmentIDKey.ValueSet(o.ShipmentID), workflows.UpdateIDKey.ValueSet(o.UpdateID)}
	if o.Reason == string(reminder.Undeliverable) {
		// The reminder's own workflow ended at the send, "sent", and a
		// closed workflow's attributes cannot change: its escalation
		// carries the outcome, so the Web UI's ReminderState="undeliverable"
		// finds the bounce beside the reminder, under its ShipmentId.
		attrs = append(attrs, workflows.ReminderStateKey.ValueSet(string(reminder.Undeliverable)))
	}
	_, err := e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       workflows.DeliveryEscalationWorkflowID(o.ReminderID, o.Reason),
		TaskQueue:                                e.TaskQueue,
		WorkflowIDReusePolicy:                    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(attrs...),
		StaticSummary:                            workflows.DeliveryEscalationSummary(in),
		StaticDetails:                            workflows.DeliveryEscalationDetails(in),
	}, workflows.DeliveryEscalationWorkflowName, in)
	var exists *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &exists):
		return nil
	case err != nil:
		return fmt.Errorf("error starting the escalation of %s: %w", o.ReminderID, err)
	}
	e.Metrics.EscalationStarted(o.Reason)
	return nil
}
