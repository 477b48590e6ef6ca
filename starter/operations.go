package starter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// ErrUnknownShipment is returned when the mirror holds no reminder of a shipment.
var ErrUnknownShipment = errors.New("the mirror has no reminders for this shipment")

// ErrNoWindow refuses to move the window of an update that was scheduled
// without window_start: its reminders have only their own due times, so
// they move one by one. A caller (the HTTP API) tells this apart from a
// failure with errors.Is.
var ErrNoWindow = errors.New("the update has no window_start; reschedule its reminders one by one")

// ErrNothingToDecide is returned when a decision names an update none of
// whose reminders awaits approval or had a decision.
var ErrNothingToDecide = errors.New("no reminder of the update awaits approval or was ever decided")

// What an operation did to one reminder.
const (
	StatusCancelled           = "cancelled"
	StatusCompensated         = "compensated"
	StatusCompensationStarted = "compensation_started"
	StatusAlreadyCompensated  = "already_compensated"
	StatusAlreadyCancelled    = "already_cancelled"
	StatusNothingToCancel     = "nothing_to_cancel"
	StatusCompensationFailed  = "compensation_failed"
	StatusCompensationSkipped = "compensation_skipped"
	// StatusCancelRequested: the cancel is recorded with Temporal and in the
	// mirror, and the reminder's workflow had not finished it when the
	// caller stopped waiting; nothing more is needed, it will.
	StatusCancelRequested = "cancel_requested"
	StatusRescheduled     = "rescheduled"
	// StatusUnchanged: the reminder was due at that time already.
	StatusUnchanged = "unchanged"
	// StatusFailed: the change did not reach the reminder, or the
	// reminder could not record it in time; nothing moved. Error says why;
	// try again.
	StatusFailed   = "failed"
	StatusApproved = "approved"
	StatusRejected = "rejected"
	// StatusRefused: the reminder refused the change; Error says why.
	StatusRefused = "refused"
	// StatusAlreadyApproved and StatusAlreadyRejected: the reminder was
	// decided so before (DecidedBy says by whom): a retried decision whose
	// answer was lost. Nothing changed.
	StatusAlreadyApproved = "already_approved"
	StatusAlreadyRejected = "already_rejected"
	// StatusNoAnswer: the reminder's workflow did not take the change in
	// time (no worker running, or one stalled or far behind); nothing was
	// changed, nor can it be later (the request's deadline has passed),
	// and repeating the operation is safe.
	StatusNoAnswer = "no_answer"
	// StatusAccepted: the reminder's workflow accepted the change and had
	// not finished it when the wait ended (a worker stalled, or the mirror
	// slow to take it). It lands, in the mirror and the workflow alike,
	// unless the reminder finishes first (then it is refused in both);
	// reading the reminder shows it. Repeating it is safe.
	StatusAccepted = "accepted"
)

// Outcome is what an operation did to one reminder.
type Outcome struct {
	ReminderID string         `json:"reminder_id"`
	Status     string         `json:"status"`
	State      reminder.State `json:"state,omitempty"`
	DueAt      *time.Time     `json:"due_at,omitempty"`
	// GoesOutAt is when a reminder with a send window goes out at DueAt.
	GoesOutAt   *time.Time `json:"goes_out_at,omitempty"`
	DeliveryKey string     `json:"delivery_key,omitempty"`
	Error       string     `json:"error,omitempty"`
	// DecidedBy and DecidedAt, on a decision, are the one taken before.
	DecidedBy string     `json:"decided_by,omitempty"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
}

// The longest who and why an operation takes, in characters: they go into
// the audit trail. Every interface (the API, the console) holds to them.
const (
	MaxByRunes     = 100
	MaxReasonRunes = 1000
)

// Actor is who asks for a change and why; all of it is recorded, each part
// in a field of its own.
type Actor struct {
	// By and Reason are the caller's words.
	By     string
	Reason string
	// Key is the credential the request came with: the API key's name, or
	// the console's approver (or escalation link) that decided; empty for
	// the CLI, whose By is the OS user. Recorded apart from By, so no words
	// in By can pass for a key.
	Key string
}

// Cancel cancels every reminder of a shipment, found through the mirror. A
// pending reminder ends cancelled and sends nothing; a subscriber already
// reminded gets one cancellation notice (under its own delivery key).
// Cancelling twice is harmless; an unknown shipment (another tenant's is
// unknown to this one) is ErrUnknownShipment.
func (s *Starter) Cancel(ctx context.Context, tenant, shipmentID string, who Actor) ([]Outcome, error) {
	rows, err := s.Mirror.List(ctx, mirror.Filter{Tenant: tenant, ShipmentID: shipmentID})
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
	case reminder.Failed, reminder.Expired, reminder.Suppressed:
		out.Status = StatusNothingToCancel
		return out, nil
	case reminder.Sent, reminder.Delivered, reminder.Undeliverable:
		return s.compensate(ctx, row, who)
	}
	if row.WorkflowStartedAt == nil {
		done, err := s.cancelUnstarted(ctx, row, who)
		if err != nil {
			return out, err
		}
		if done {
			out.Status, out.State = StatusCancelled, reminder.Cancelled
			return out, nil
		}
		// Marked started meanwhile: cancel it through its workflow.
	}
	return s.cancelWorkflow(ctx, row.ID, row.WorkflowID, who)
}

// cancelUnstarted cancels a pending row whose workflow never started (its
// start failed, or a schedule is starting it right now). The row update is
// ordered against MarkStarted: if the schedule marks the row after this, it
// sees it cancelled and cancels its new workflow; if before, this finds the
// row started and done is false. A workflow that exists unmarked (its start
// succeeded, its mark failed) is asked to cancel too; its notify refuses the
// cancelled row either way.
func (s *Starter) cancelUnstarted(ctx context.Context, row mirror.Row, who Actor) (done bool, err error) {
	done, err = s.Mirror.CancelUnstarted(ctx, row.ID,
		map[string]any{"by": who.By, "key": who.Key, "reason": who.Reason, "workflow": "never started"})
	if err != nil || !done {
		return done, err
	}
	if _, err := s.cancelWorkflow(ctx, row.ID, row.WorkflowID, who); err != nil && !workflowGone(err) {
		return true, err
	}
	return true, nil
}

// cancelWorkflow asks a reminder's workflow to cancel and waits for its
// answer at most CancelWait. Past that the answer is cancel_requested: the
// workflow holds the request (a cancel update it accepted, or, when no
// worker took the update in time, a cancellation of the workflow itself,
// which Temporal keeps durably and the workflow records when a worker
// returns), and the mirror notes it.
func (s *Starter) cancelWorkflow(ctx context.Context, reminderID, workflowID string, who Actor) (Outcome, error) {
	out := Outcome{ReminderID: reminderID}
	wctx, cancel := context.WithTimeout(ctx, s.cancelWait())
	defer cancel()
	accepted := false
	h, err := s.Temporal.UpdateWorkflow(wctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateName: workflows.UpdateCancel,
		Args:         []any{workflows.CancelRequest{By: who.By, Key: who.Key, Reason: who.Reason}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	if err == nil {
		accepted = true
		var res workflows.CancelResult
		if err = h.Get(wctx, &res); err == nil {
			out.Status, out.State = res.Outcome, res.State
			if res.Outcome == workflows.OutcomeCompensationFailed {
				out.Error = "the cancellation notice failed for good; the reminder's events say why"
			}
			return out, nil
		}
	}
	switch {
	case workflowGone(err):
		return s.cancelGone(ctx, reminderID, who)
	case !waitedOut(ctx, wctx, err):
		return out, err
	}
	if !accepted {
		if err := s.Temporal.CancelWorkflow(ctx, workflowID, ""); err != nil {
			if workflowGone(err) {
				return s.cancelGone(ctx, reminderID, who)
			}
			return out, fmt.Errorf("error requesting the workflow's cancellation: %w", err)
		}
	}
	if err := s.Mirror.RequestCancel(ctx, reminderID, map[string]any{"by": who.By, "key": who.Key, "reason": who.Reason}); err != nil {
		return out, err
	}
	out.Status, out.State = StatusCancelRequested, ""
	return out, nil
}

// cancelGone cancels a reminder whose workflow finished (or never started)
// since the mirror was read, by what the mirror says now.
func (s *Starter) cancelGone(ctx context.Context, reminderID string, who Actor) (Outcome, error) {
	out := Outcome{ReminderID: reminderID}
	fresh, err := s.Mirror.Get(ctx, reminderID)
	if err != nil {
		return out, err
	}
	out.State = fresh.State
	switch fresh.State {
	case reminder.Sent, reminder.Delivered, reminder.Undeliverable:
		return s.compensate(ctx, fresh, who)
	case reminder.Cancelled:
		out.Status = StatusAlreadyCancelled
	case reminder.Scheduled, reminder.AwaitingApproval:
		if fresh.WorkflowStartedAt != nil {
			// Started, pending in the mirror, gone from Temporal: a
			// divergence for `reconcile --verify`; cancel the row.
			if _, err := s.Mirror.Transition(ctx, reminderID, reminder.Cancelled, "cancelled",
				map[string]any{"by": who.By, "key": who.Key, "reason": who.Reason, "workflow": "not found"}); err != nil {
				return out, err
			}
			out.Status, out.State = StatusCancelled, reminder.Cancelled
			return out, nil
		}
		done, err := s.Mirror.CancelUnstarted(ctx, reminderID,
			map[string]any{"by": who.By, "key": who.Key, "reason": who.Reason, "workflow": "never started"})
		if err != nil {
			return out, err
		}
		if !done {
			return out, fmt.Errorf("reminder %s: its workflow started while it was being cancelled; cancel again", reminderID)
		}
		out.Status, out.State = StatusCancelled, reminder.Cancelled
	default:
		out.Status = StatusNothingToCancel
	}
	return out, nil
}

// compensate starts the one CancellationNoticeWorkflow of a reminder that
// was sent. Its id refuses a second start while one runs or after one
// completed, so the notice goes once; after one failed, it starts again.
func (s *Starter) compensate(ctx context.Context, row mirror.Row, who Actor) (Outcome, error) {
	out := Outcome{ReminderID: row.ID, State: row.State}
	id := workflows.CancellationNoticeWorkflowID(row.ID)
	in := workflows.CancellationNoticeInput{
		ReminderID: row.ID, ShipmentID: row.ShipmentID, UpdateID: row.UpdateID, SubscriberID: row.SubscriberID,
		By: who.By, Key: who.Key, Reason: who.Reason,
	}
	_, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                s.TaskQueue,
		WorkflowIDReusePolicy:                    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowIDConflictPolicy:                 enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.ShipmentIDKey.ValueSet(reminder.TenantShipment(row.Tenant, row.ShipmentID)), workflows.UpdateIDKey.ValueSet(row.UpdateID)),
		StaticSummary: workflows.CancellationNoticeSummary(in),
		StaticDetails: workflows.CancellationNoticeDetails(in),
	}, workflows.CancellationNoticeWorkflowName, in)
	var exists *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &exists):
		desc, err := s.Temporal.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return out, fmt.Errorf("error reading the cancellation notice: %w", err)
		}
		if desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
			out.Status = StatusAlreadyCompensated
			return out, nil
		}
	case err != nil:
		return out, fmt.Errorf("error starting the cancellation notice: %w", err)
	}
	return s.noticeOutcome(ctx, id, out)
}

// noticeOutcome waits for a cancellation notice's workflow as long as a
// cancel waits for a reminder's (CancelWait), so the caller hears how it
// went, as when the reminder's own workflow compensates: a reminder whose
// send was in flight when the cancel came may finish in that very workflow
// task and leave the notice to this path. A notice still retrying after
// that answers compensation_started.
func (s *Starter) noticeOutcome(ctx context.Context, id string, out Outcome) (Outcome, error) {
	wctx, cancel := context.WithTimeout(ctx, s.cancelWait())
	defer cancel()
	var res workflows.ReminderResult
	err := s.Temporal.GetWorkflow(wctx, id, "").Get(wctx, &res)
	switch {
	case err == nil && res.Compensated:
		out.Status = StatusCompensated
	case err == nil:
		out.Status = StatusCompensationSkipped
	case ctx.Err() != nil:
		return out, ctx.Err()
	case wctx.Err() != nil:
		out.Status = StatusCompensationStarted
	default:
		out.Status = StatusCompensationFailed
		out.Error = "the cancellation notice failed for good; the reminder's events say why"
	}
	return out, nil
}

// RescheduleUpdate moves an update's delivery window. Each pending
// reminder moves to its first-requested due time plus the window's shift
// from its first-requested start, so moving twice to the same window, or
// running again after a failure partway, shifts once; concurrent moves of
// one update are serialised. Reminders that are finished are reported as
// refused and left alone.
func (s *Starter) RescheduleUpdate(ctx context.Context, tenant, shipmentID, updateID string, windowStart time.Time, who Actor) ([]Outcome, error) {
	unlock, err := s.Mirror.LockUpdate(ctx, tenant, shipmentID, updateID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	requested, _, err := s.Mirror.Window(ctx, tenant, shipmentID, updateID)
	if err != nil {
		return nil, err
	}
	if requested.IsZero() {
		return nil, fmt.Errorf("update %s/%s: %w", shipmentID, updateID, ErrNoWindow)
	}
	shift := windowStart.Sub(requested)
	rows, err := s.Mirror.List(ctx, mirror.Filter{Tenant: tenant, ShipmentID: shipmentID, UpdateID: updateID})
	if err != nil {
		return nil, err
	}
	outs, err := s.each(ctx, rows, func(ctx context.Context, row mirror.Row) (Outcome, error) {
		due := reminder.NormalizeTime(row.RequestedDueAt.Add(shift))
		if row.WorkflowStartedAt == nil && row.State.Pending() {
			// Its workflow never started: the row moves, and the workflow
			// starts from it (or, started meanwhile, follows it). One that
			// started and whose mark failed is moved as a marked one is:
			// the row alone would leave it to its old due time, where the
			// claim refuses its old key.
			running, err := s.workflowRunning(ctx, row.WorkflowID)
			if err != nil {
				return Outcome{ReminderID: row.ID, State: row.State}, err
			}
			if !running {
				if out, ok, err := s.rescheduleUnstarted(ctx, row, due, who); ok || err != nil {
					return out, err
				}
			}
		}
		return s.rescheduleOne(ctx, row, due, who)
	})
	if err != nil {
		return outs, err
	}
	return outs, s.Mirror.SetWindowStart(ctx, tenant, shipmentID, updateID, windowStart)
}

// rescheduleUnstarted moves a reminder whose workflow never started in the
// mirror; ok is false when its workflow was marked started meanwhile.
func (s *Starter) rescheduleUnstarted(ctx context.Context, row mirror.Row, due time.Time, who Actor) (Outcome, bool, error) {
	out := Outcome{ReminderID: row.ID, State: row.State}
	if due.Equal(row.DueAt) {
		out.Status, out.DueAt, out.DeliveryKey = StatusUnchanged, &row.DueAt, row.DeliveryKey
		out.goesOut(row.Window, row.Digest)
		return out, true, nil
	}
	key := reminder.DeliveryKey(row.ID, row.SubscriberID, due)
	moved, err := s.Mirror.RescheduleUnstarted(ctx, row.ID, due, key,
		map[string]any{"from": row.DueAt, "to": due, "delivery_key": key, "by": who.By, "key": who.Key, "reason": who.Reason, "workflow": "not started"})
	if err != nil || !moved {
		return out, false, err
	}
	out.Status, out.DueAt, out.DeliveryKey = StatusRescheduled, &due, key
	out.goesOut(row.Window, row.Digest)
	return out, true, nil
}

// goesOut sets GoesOutAt for a reminder with send window w or a digest
// every digest at DueAt.
func (o *Outcome) goesOut(w *reminder.SendWindow, digest time.Duration) {
	if (w != nil || digest > 0) && o.DueAt != nil {
		o.GoesOutAt = new(reminder.GoesOutAt(*o.DueAt, w, digest))
	}
}

// workflowRunning reports whether a reminder's workflow runs, as Temporal
// says: a row not marked started may have one (its mark failed).
func (s *Starter) workflowRunning(ctx context.Context, workflowID string) (bool, error) {
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	switch {
	case workflowGone(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("error describing the reminder's workflow: %w", err)
	}
	return desc.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// RescheduleReminder moves one reminder's due time. A refusal (finished
// reminder, absurd time) is an Outcome with StatusRefused and the reason.
func (s *Starter) RescheduleReminder(ctx context.Context, tenant, reminderID string, due time.Time, who Actor) (Outcome, error) {
	row, err := s.Get(ctx, tenant, reminderID)
	if err != nil {
		return Outcome{}, err
	}
	out, err := s.rescheduleOne(ctx, row, due, who)
	return unanswered(out, err), err
}

func (s *Starter) rescheduleOne(ctx context.Context, row mirror.Row, due time.Time, who Actor) (Outcome, error) {
	out := Outcome{ReminderID: row.ID, State: row.State}
	var res workflows.RescheduleResult
	w := s.window(ctx)
	err := s.update(ctx, w, row.WorkflowID, workflows.UpdateReschedule, workflows.RescheduleRequest{
		DueAt: due, By: who.By, Key: who.Key, Reason: who.Reason, Deadline: w.deadline,
	}, &res)
	if refused(err, &out) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.Status, out.DueAt, out.DeliveryKey = StatusRescheduled, &res.DueAt, res.DeliveryKey
	out.goesOut(row.Window, row.Digest)
	if res.Unchanged {
		out.Status = StatusUnchanged
	}
	return out, nil
}

// Decide approves or rejects the reminders awaiting approval: one reminder,
// or every one of an update (empty reminderID). A reminder decided before
// answers what it was decided, and by whom (already_approved or
// already_rejected; refused if the other way), so a retry whose answer was
// lost reads as done, not as someone else's. An update none of whose
// reminders awaits or had a decision is ErrNothingToDecide.
func (s *Starter) Decide(ctx context.Context, sel Selection, approve bool, who Actor) ([]Outcome, error) {
	rows, err := s.selectRows(ctx, sel)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(rows))
	for i, row := range rows {
		ids[i] = row.ID
	}
	decided, err := s.Mirror.Decisions(ctx, ids)
	if err != nil {
		return nil, err
	}
	if sel.ReminderID == "" {
		rows = slices.DeleteFunc(rows, func(row mirror.Row) bool {
			_, ok := decided[row.ID]
			return row.State != reminder.AwaitingApproval && !ok
		})
		if len(rows) == 0 {
			return nil, fmt.Errorf("update %s/%s: %w", sel.ShipmentID, sel.UpdateID, ErrNothingToDecide)
		}
	}
	name, status := workflows.UpdateReject, StatusRejected
	if approve {
		name, status = workflows.UpdateApprove, StatusApproved
	}
	return s.each(ctx, rows, func(ctx context.Context, row mirror.Row) (Outcome, error) {
		out := Outcome{ReminderID: row.ID, State: row.State}
		if d, ok := decided[row.ID]; ok && row.State != reminder.AwaitingApproval {
			// The mirror's word is the answer; its workflow is made to
			// agree, should it not yet (what keeps it from it, reconcile
			// --verify reports and settles again).
			_ = s.settleApproval(ctx, row, d)
			return decidedBefore(out, d, approve), nil
		}
		var res workflows.DecisionResult
		w := s.window(ctx)
		err := s.update(ctx, w, row.WorkflowID, name,
			workflows.Decision{By: who.By, Key: who.Key, Reason: who.Reason, Deadline: w.deadline}, &res)
		if refused(err, &out) {
			// Decided by another since the mirror was read?
			if now, err := s.Mirror.Decisions(ctx, []string{row.ID}); err == nil {
				if d, ok := now[row.ID]; ok {
					out.Error = ""
					return decidedBefore(out, d, approve), nil
				}
			}
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out.Status, out.State = status, res.State
		return out, nil
	})
}

// settleApproval gives a reminder's running workflow the approval its
// mirror row records, when the workflow still awaits a decision (its
// ReminderState, which it upserts once it takes one, says so): the
// approval is in flight (the workflow accepted it and writes the mirror
// first; it then refuses this one), or it was lost by a release before
// changeAcceptedFirst, whose workflow task wrote the mirror and then timed
// out with a stalled worker. The workflow's write finds the row approved
// and writes nothing more. A workflow that refuses it holds a decision
// already (one in flight, or the same one taken meanwhile) or is being
// cancelled; the error says which. Nothing is done for a row not pending,
// nor for a decision the mirror does not record as an approval: a lost
// rejection leaves the row cancelled, and the workflow ends as the mirror
// says.
func (s *Starter) settleApproval(ctx context.Context, row mirror.Row, d mirror.Decision) error {
	if !d.Approved || !row.State.Pending() {
		return nil
	}
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, row.WorkflowID, "")
	if workflowGone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error describing workflow: %w", err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil
	}
	if state, _, err := reminderAttributes(info.GetSearchAttributes()); err != nil || state != reminder.AwaitingApproval {
		return err
	}
	by := d.By
	if by == "" {
		by = reconciler
	}
	w := s.window(ctx)
	var res workflows.DecisionResult
	return s.update(ctx, w, row.WorkflowID, workflows.UpdateApprove, workflows.Decision{
		By: by, Key: d.Key, Reason: "the approval the mirror records", Deadline: w.deadline,
	}, &res)
}

// decidedBefore is the outcome of a decision on a reminder decided d
// before: already so, or refused when d went the other way.
func decidedBefore(out Outcome, d mirror.Decision, approve bool) Outcome {
	out.DecidedBy, out.DecidedAt = d.By, &d.At
	switch {
	case d.Approved && approve:
		out.Status = StatusAlreadyApproved
	case !d.Approved && !approve:
		out.Status = StatusAlreadyRejected
	case d.Approved:
		out.Status, out.Error = StatusRefused, "approved already, by "+d.By+"; nothing was changed"
	default:
		out.Status, out.Error = StatusRefused, "rejected already, by "+d.By+"; nothing was changed"
	}
	return out
}

// Selection names reminders of a tenant: one by id, or all of an update.
type Selection struct {
	Tenant     string
	ReminderID string
	ShipmentID string
	UpdateID   string
}

// selectRows resolves a selection through the mirror: one reminder, or
// every one of an update (none is ErrNothingToDecide).
func (s *Starter) selectRows(ctx context.Context, sel Selection) ([]mirror.Row, error) {
	if sel.ReminderID != "" {
		row, err := s.Get(ctx, sel.Tenant, sel.ReminderID)
		if err != nil {
			return nil, err
		}
		return []mirror.Row{row}, nil
	}
	rows, err := s.Mirror.List(ctx, mirror.Filter{Tenant: sel.Tenant, ShipmentID: sel.ShipmentID, UpdateID: sel.UpdateID})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("update %s/%s: %w", sel.ShipmentID, sel.UpdateID, ErrNothingToDecide)
	}
	return rows, nil
}

// Get is one of tenant's reminders. Another tenant's is mirror.ErrNotFound,
// as one that does not exist: a reminder id names its tenant, but one
// tenant's caller may present another's.
func (s *Starter) Get(ctx context.Context, tenant, reminderID string) (mirror.Row, error) {
	row, err := s.Mirror.Get(ctx, reminderID)
	if err == nil && row.Tenant != tenant {
		return mirror.Row{}, fmt.Errorf("error reading reminder %s: %w", reminderID, mirror.ErrNotFound)
	}
	return row, err
}

// ErrNoAnswer is returned when a reminder's workflow did not take a change
// within its wait (no worker running, or one stalled or far behind). The
// request carried a deadline the workflow checks, and the wait outlasted
// it by more than a late acceptance takes (budget.LateAcceptance), so it
// cannot land later.
var ErrNoAnswer = errors.New("the reminder's workflow did not take the change in time (is a worker running?); nothing was changed, nor can it be later")

// ErrAccepted is returned when a reminder's workflow accepted a change and
// had not finished it when the wait ended: it lands, in the mirror and the
// workflow alike, unless the reminder finishes first.
var ErrAccepted = errors.New("the reminder's workflow accepted the change and had not finished it in time " +
	"(a worker stalled, or the mirror is slow); it will land, in the mirror and the workflow alike")

// updateWindow is one change's wait: the deadline its request carries,
// which the workflow checks, and how long the starter waits for it.
type updateWindow struct {
	deadline time.Time
	wait     time.Duration
}

// window is the wait of a change sent now: UpdateWait, or what is left of
// the caller's own deadline. The request's deadline leaves a late
// acceptance (budget.LateAcceptance) inside the wait, so a change not seen
// accepted by the end of the wait can no longer be: half the wait, or less
// when the caller's deadline is near (at worst in the past: the workflow
// then refuses it, and nothing moves).
func (s *Starter) window(ctx context.Context) updateWindow {
	wait := s.updateWait()
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d))
	}
	return updateWindow{deadline: s.now().Add(min(wait/2, wait-budget.LateAcceptance)), wait: wait}
}

// update sends a workflow update and waits for it within w. Until the
// workflow accepts it, the wait is w's alone (a caller that goes away does
// not cut it): its end then means the change can no longer land
// (ErrNoAnswer). Once accepted, the change lands whoever waits, and a wait
// that ends before its result is ErrAccepted.
func (s *Starter) update(ctx context.Context, w updateWindow, workflowID, name string, arg, result any) error {
	kept := context.WithoutCancel(ctx)
	wctx, cancel := context.WithTimeout(kept, w.wait)
	defer cancel()
	h, err := s.Temporal.UpdateWorkflow(wctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateName: name, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	if err != nil {
		if waitedOut(kept, wctx, err) {
			return ErrNoAnswer
		}
		return err
	}
	// Accepted: the wait for the result ends with w's, or with the caller.
	end, _ := wctx.Deadline()
	rctx, stop := context.WithDeadline(ctx, end)
	defer stop()
	err = h.Get(rctx, result)
	if err != nil && !updateOutcome(err) {
		return fmt.Errorf("%w: %w", ErrAccepted, err)
	}
	return err
}

// updateOutcome reports whether err is the update's own answer (the
// handler's refusal or failure), not the end of the wait for it.
func updateOutcome(err error) bool {
	var appErr *temporal.ApplicationError
	var canceled *temporal.CanceledError
	return errors.As(err, &appErr) || errors.As(err, &canceled)
}

// waitedOut reports whether err ended the wait wctx bounds, not the
// caller's ctx: wctx's deadline passed, or the server answered with that
// deadline a moment before the client's clock reached it (it counts the
// deadline from its own side of the call).
func waitedOut(ctx, wctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var deadline *serviceerror.DeadlineExceeded
	var timedOut *client.WorkflowUpdateServiceTimeoutOrCanceledError
	return wctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline) || errors.As(err, &timedOut)
}

func (s *Starter) updateWait() time.Duration {
	if s.UpdateWait <= 0 {
		return budget.UpdateWait
	}
	return s.UpdateWait
}

func (s *Starter) cancelWait() time.Duration {
	if s.CancelWait <= 0 {
		return budget.CancelWait
	}
	return s.CancelWait
}

// workflowGone reports whether an update failed because the workflow is
// not running (finished, or never started).
func workflowGone(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// refused turns a reminder's refusal of an update (its validator's answer,
// or a workflow that is gone) into a StatusRefused outcome, and a change the
// mirror did not take in time into StatusFailed.
func refused(err error, out *Outcome) bool {
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		return false
	case errors.As(err, &appErr) && appErr.Type() == workflows.ErrTypeMirrorUnavailable:
		out.Status, out.Error = StatusFailed, appErr.Message()
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
	outs, errs := parallel(ctx, s.concurrency(), rows, func(ctx context.Context, row mirror.Row) (Outcome, error) {
		release, err := s.Slots.Acquire(ctx, row.Tenant)
		if err != nil {
			return Outcome{ReminderID: row.ID, State: row.State}, err
		}
		defer release()
		return fn(ctx, row)
	})
	for i, err := range errs {
		if err == nil {
			continue
		}
		outs[i] = unanswered(outs[i], err)
		errs[i] = fmt.Errorf("reminder %s: %w", rows[i].ID, err)
	}
	return outs, errors.Join(errs...)
}

// unanswered is the outcome of a reminder an operation reached when err
// stopped it: accepted when its workflow took the change and had not
// finished it, no_answer when it did not take it in time, failed
// otherwise (nothing reached it). (The error's own text may name servers:
// the caller logs it; the outcome does not carry it.)
func unanswered(out Outcome, err error) Outcome {
	if err == nil || out.ReminderID == "" || out.Status != "" {
		return out
	}
	switch {
	case errors.Is(err, ErrNoAnswer):
		out.Status, out.Error = StatusNoAnswer, ErrNoAnswer.Error()
	case errors.Is(err, ErrAccepted):
		out.Status, out.Error = StatusAccepted, ErrAccepted.Error()
	default:
		out.Status, out.Error = StatusFailed, "the change did not reach the reminder's workflow; nothing changed, and repeating it is safe"
	}
	return out
}

func (s *Starter) concurrency() int {
	if s.Concurrency <= 0 {
		return 16
	}
	return s.Concurrency
}
