package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// verifyRunning takes the reverse direction: the running reminder workflows
// of the task queue that visibility shows pending, against their rows.
// Pending rows were checked by the forward pass and are skipped.
func (s *Starter) verifyRunning(ctx context.Context, cutoff time.Time, repair bool) ([]Divergence, error) {
	pending := make([]string, len(reminder.PendingStates))
	for i, st := range reminder.PendingStates {
		pending[i] = quote(string(st))
	}
	query := fmt.Sprintf("WorkflowType = %s AND ExecutionStatus = 'Running' AND TaskQueue = %s AND %s IN (%s)",
		quote(workflows.ReminderWorkflowName), quote(s.TaskQueue), workflows.ReminderStateKey.GetName(),
		strings.Join(pending, ", "))
	var out []Divergence
	var token []byte
	for {
		resp, err := s.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: query, PageSize: verifyBatch, NextPageToken: token,
		})
		if err != nil {
			return out, fmt.Errorf("error listing running reminders: %w", err)
		}
		ids := make([]string, len(resp.GetExecutions()))
		for i, e := range resp.GetExecutions() {
			ids[i] = e.GetExecution().GetWorkflowId()
		}
		rows, err := s.Mirror.ByWorkflowIDs(ctx, ids)
		if err != nil {
			return out, err
		}
		// Only what may diverge: no row, or a finished row older than the grace.
		var suspects []string
		for _, id := range ids {
			row, ok := rows[id]
			if !ok || (row.State.Terminal() && row.UpdatedAt.Before(cutoff)) {
				suspects = append(suspects, id)
			}
		}
		found, errs := parallel(ctx, s.concurrency(), suspects, func(ctx context.Context, id string) (*Divergence, error) {
			row, ok := rows[id]
			return s.verifyRunningOne(ctx, id, row, ok, repair)
		})
		for i, d := range found {
			if d != nil {
				out = append(out, *d)
			}
			if errs[i] != nil {
				errs[i] = fmt.Errorf("error verifying workflow %s: %w", suspects[i], errs[i])
			}
		}
		if err := errors.Join(errs...); err != nil {
			return out, err
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// verifyRunningOne checks a running workflow whose row is missing or
// finished, once Temporal confirms it still runs (visibility lags).
func (s *Starter) verifyRunningOne(ctx context.Context, workflowID string, row mirror.Row, hasRow, repair bool) (*Divergence, error) {
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	if workflowGone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error describing workflow: %w", err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, nil
	}
	engine := "running"
	if state, due, err := reminderAttributes(info.GetSearchAttributes()); err == nil {
		if state.Terminal() {
			return nil, nil // it moved on since it was listed
		}
		engine += ", " + describe(state, due, "")
	}
	if !hasRow {
		return &Divergence{
			Kind: DivergenceRowMissing, ReminderID: strings.TrimPrefix(workflowID, "reminder/"), WorkflowID: workflowID,
			Mirror: "no row", Engine: engine,
			Error: "no repair: the recipient and message live only in the mirror; terminate the workflow or restore the row",
		}, nil
	}
	d := s.diverge(DivergenceFinishedButRunning, row, engine)
	if row.State != reminder.Cancelled {
		d.Error = "no repair: the row says finished and the workflow may still send; decide which is right"
		return &d, nil
	}
	d.Kind = DivergenceCancelledButRunning
	if repair {
		out, err := s.cancelWorkflow(ctx, row.ID, workflowID, Actor{By: reconciler, Reason: "the mirror says cancelled"})
		if err != nil {
			d.Repair, d.Error = "cancel its workflow", err.Error()
		} else {
			d.Repair = "cancelled its workflow (" + out.Status + ")"
		}
	}
	return &d, nil
}

// reminderAttributes reads a reminder workflow's ReminderState and DueAt
// search attributes (plain JSON payloads: the codec leaves them alone).
func reminderAttributes(sa *commonpb.SearchAttributes) (reminder.State, time.Time, error) {
	fields := sa.GetIndexedFields()
	var state string
	var due time.Time
	dc := converter.GetDefaultDataConverter()
	if p, ok := fields[workflows.ReminderStateKey.GetName()]; !ok {
		return "", due, errors.New("no ReminderState search attribute")
	} else if err := dc.FromPayload(p, &state); err != nil {
		return "", due, fmt.Errorf("error decoding ReminderState: %w", err)
	}
	if p, ok := fields[workflows.DueAtKey.GetName()]; !ok {
		return "", due, errors.New("no DueAt search attribute")
	} else if err := dc.FromPayload(p, &due); err != nil {
		return "", due, fmt.Errorf("error decoding DueAt: %w", err)
	}
	return reminder.State(state), due, nil
}

// quote is a string literal of Temporal's list query language.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
