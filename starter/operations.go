package starter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// ErrUnknownShipment is returned when the mirror holds no reminder of a shipment.
var ErrUnknownShipment = errors.New("the mirror has no reminders for this shipment")

// What an operation did to one reminder.
const (
	StatusCancelled           = "cancelled"
	StatusCompensated         = "compensated"
	StatusCompensationStarted = "compensation_started"
	StatusAlreadyCompensated  = "already_compensated"
	StatusAlreadyCancelled    = "already_cancelled"
	StatusNothingToCancel     = "nothing_to_cancel"
	StatusRescheduled         = "rescheduled"
	StatusApproved            = "approved"
	StatusRejected            = "rejected"
	// StatusRefused: the reminder refused the change; Error says why.
	StatusRefused = "refused"
)

// Outcome is what an operation did to one reminder.
type Outcome struct {
	ReminderID  string         `json:"reminder_id"`
	Status      string         `json:"status"`
	State       reminder.State `json:"state,omitempty"`
	DueAt       *time.Time     `json:"due_at,omitempty"`
	DeliveryKey string         `json:"delivery_key,omitempty"`
	Error       string         `json:"error,omitempty"`
}

// Actor is who asks for a change and why; both are recorded.
type Actor struct {
	By     string
	Reason string
}

// Cancel cancels every reminder of a shipment, found through the mirror. A
// pending reminder ends cancelled and sends nothing; a subscriber already
// reminded gets one cancellation notice (under its own delivery key).
// Cancelling twice is harmless; an unknown shipment is ErrUnknownShipment.
func (s *Starter) Cancel(ctx context.Context, shipmentID string, who Actor) ([]Outcome, error) {
	rows, err := s.Mirror.List(ctx, mirror.Filter{ShipmentID: shipmentID})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnknownShipment, shipmentID)
	}
	return s.each(ctx, rows, func(ctx context.Context, row mirror.Row) (Outcome, error) {
		return s.cancelOne(ctx, row, who)
	})
}

func (s *Starter) cancelOne(ctx context.Context, row mirror.Row, who Actor) (Outcome, error) {
	out := Outcome{ReminderID: row.ID, State: row.State}
	switch row.State {
	case reminder.Cancelled:
		out.Status = StatusAlreadyCancelled
		return out, nil
	case reminder.Failed, reminder.Expired:
		out.Status = StatusNothingToCancel
		return out, nil
	case reminder.Sent:
		return s.compensate(ctx, row, who)
	}
	var res workflows.CancelResult
	err := s.update(ctx, row.WorkflowID, workflows.UpdateCancel, workflows.CancelRequest{By: who.By, Reason: who.Reason}, &res)
	if err == nil {
		out.Status, out.State = res.Outcome, res.State
		return out, nil
	}
	if !workflowGone(err) {
		return out, err
	}
	// The workflow finished (or never started) since the mirror was read.
	fresh, err := s.Mirror.Get(ctx, row.ID)
	if err != nil {
		return out, err
	}
	switch fresh.State {
	case reminder.Sent:
		return s.compensate(ctx, fresh, who)
	case reminder.Scheduled, reminder.AwaitingApproval:
		// Its workflow was never started: cancel the row itself.
		if _, err := s.Mirror.Transition(ctx, row.ID, reminder.Cancelled, "cancelled",
			map[string]any{"by": who.By, "reason": who.Reason, "workflow": "never started"}); err != nil {
			return out, err
		}
		out.Status, out.State = StatusCancelled, reminder.Cancelled
	default:
		out.State = fresh.State
		out.Status = StatusNothingToCancel
		if fresh.State == reminder.Cancelled {
			out.Status = StatusAlreadyCancelled
		}
	}
	return out, nil
}

// compensate starts the one CancellationNoticeWorkflow of a reminder that
// was sent; a second start is refused by its id, so the notice goes once.
func (s *Starter) compensate(ctx context.Context, row mirror.Row, who Actor) (Outcome, error) {
	out := Outcome{ReminderID: row.ID, State: row.State}
	_, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       workflows.CancellationNoticeWorkflowID(row.ID),
		TaskQueue:                                s.TaskQueue,
		WorkflowIDReusePolicy:                    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.ShipmentIDKey.ValueSet(row.ShipmentID), workflows.UpdateIDKey.ValueSet(row.UpdateID)),
		StaticSummary: "Cancellation notice for " + row.ID,
	}, workflows.CancellationNoticeWorkflowName, workflows.CancellationNoticeInput{
		ReminderID: row.ID, ShipmentID: row.ShipmentID, UpdateID: row.UpdateID, SubscriberID: row.SubscriberID,
		By: who.By, Reason: who.Reason,
	})
	var exists *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &exists):
		out.Status = StatusAlreadyCompensated
	case err != nil:
		return out, fmt.Errorf("error starting the cancellation notice: %w", err)
	default:
		out.Status = StatusCompensationStarted
	}
	return out, nil
}

// RescheduleUpdate moves an update's delivery window: every pending reminder
// of it moves by as much as the window did. Reminders that are finished are
// reported as refused and left alone.
func (s *Starter) RescheduleUpdate(ctx context.Context, shipmentID, updateID string, windowStart time.Time, who Actor) ([]Outcome, error) {
	old, err := s.Mirror.WindowStart(ctx, shipmentID, updateID)
	if err != nil {
		return nil, err
	}
	if old.IsZero() {
		return nil, fmt.Errorf("update %s/%s has no window_start; reschedule its reminders one by one", shipmentID, updateID)
	}
	shift := windowStart.Sub(old)
	rows, err := s.Mirror.List(ctx, mirror.Filter{ShipmentID: shipmentID, UpdateID: updateID})
	if err != nil {
		return nil, err
	}
	outs, err := s.each(ctx, rows, func(ctx context.Context, row mirror.Row) (Outcome, error) {
		return s.rescheduleOne(ctx, row, row.DueAt.Add(shift), who)
	})
	if err != nil {
		return outs, err
	}
	return outs, s.Mirror.SetWindowStart(ctx, shipmentID, updateID, windowStart)
}

// RescheduleReminder moves one reminder's due time. A refusal (finished
// reminder, absurd time) is an Outcome with StatusRefused and the reason.
func (s *Starter) RescheduleReminder(ctx context.Context, reminderID string, due time.Time, who Actor) (Outcome, error) {
	row, err := s.Mirror.Get(ctx, reminderID)
	if err != nil {
		return Outcome{}, err
	}
	return s.rescheduleOne(ctx, row, due, who)
}

func (s *Starter) rescheduleOne(ctx context.Context, row mirror.Row, due time.Time, who Actor) (Outcome, error) {
	out := Outcome{ReminderID: row.ID, State: row.State}
	var res workflows.RescheduleResult
	err := s.update(ctx, row.WorkflowID, workflows.UpdateReschedule,
		workflows.RescheduleRequest{DueAt: due, By: who.By, Reason: who.Reason}, &res)
	if refused(err, &out) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.Status, out.DueAt, out.DeliveryKey = StatusRescheduled, &res.DueAt, res.DeliveryKey
	return out, nil
}

// Decide approves or rejects the reminders awaiting approval: one reminder,
// or every one of an update (empty reminderID).
func (s *Starter) Decide(ctx context.Context, sel Selection, approve bool, who Actor) ([]Outcome, error) {
	rows, err := s.selectRows(ctx, sel, reminder.AwaitingApproval)
	if err != nil {
		return nil, err
	}
	name, status := workflows.UpdateReject, StatusRejected
	if approve {
		name, status = workflows.UpdateApprove, StatusApproved
	}
	return s.each(ctx, rows, func(ctx context.Context, row mirror.Row) (Outcome, error) {
		out := Outcome{ReminderID: row.ID, State: row.State}
		var res workflows.DecisionResult
		err := s.update(ctx, row.WorkflowID, name, workflows.Decision{By: who.By, Reason: who.Reason}, &res)
		if refused(err, &out) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out.Status, out.State = status, res.State
		return out, nil
	})
}

// Selection names reminders: one by id, or all of an update.
type Selection struct {
	ReminderID string
	ShipmentID string
	UpdateID   string
}

// selectRows resolves a selection through the mirror; for an update, only
// the reminders in state are chosen.
func (s *Starter) selectRows(ctx context.Context, sel Selection, state reminder.State) ([]mirror.Row, error) {
	if sel.ReminderID != "" {
		row, err := s.Mirror.Get(ctx, sel.ReminderID)
		if err != nil {
			return nil, err
		}
		return []mirror.Row{row}, nil
	}
	rows, err := s.Mirror.List(ctx, mirror.Filter{ShipmentID: sel.ShipmentID, UpdateID: sel.UpdateID, State: state})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no reminder of %s/%s is %s", sel.ShipmentID, sel.UpdateID, state)
	}
	return rows, nil
}

// update sends a workflow update and waits for its result.
func (s *Starter) update(ctx context.Context, workflowID, name string, arg, result any) error {
	h, err := s.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateName: name, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, result)
}

// workflowGone reports whether an update failed because the workflow is
// not running (finished, or never started).
func workflowGone(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// refused turns a reminder's refusal of an update (its validator's answer,
// or a workflow that is gone) into a StatusRefused outcome.
func refused(err error, out *Outcome) bool {
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		return false
	case errors.As(err, &appErr):
		out.Status, out.Error = StatusRefused, appErr.Message()
	case workflowGone(err):
		out.Status, out.Error = StatusRefused, "reminder is no longer running (state "+string(out.State)+")"
	default:
		return false
	}
	return true
}

// each runs fn for every row with bounded concurrency; outcomes keep the
// rows' order.
func (s *Starter) each(ctx context.Context, rows []mirror.Row, fn func(context.Context, mirror.Row) (Outcome, error)) ([]Outcome, error) {
	outs, errs := parallel(ctx, s.concurrency(), rows, fn)
	for i, err := range errs {
		if err != nil {
			errs[i] = fmt.Errorf("reminder %s: %w", rows[i].ID, err)
		}
	}
	return outs, errors.Join(errs...)
}

func (s *Starter) concurrency() int {
	if s.Concurrency <= 0 {
		return 16
	}
	return s.Concurrency
}
