package starter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// LiveStatus is a running reminder's own account: its workflow's status
// query, which a worker answers. A workflow the engine still holds in its
// start delay (Starter.DelayedStart) has run no task, so no worker can
// answer it (the server says WorkflowNotReady); its account is then read
// from what the start recorded, the search attributes and the mirror's
// row, with WaitingUntil set to when the engine runs its first task. Any
// other failure (no worker answered in time) is returned as it is. info is
// what a describe of the workflow the caller made already read; nil
// describes it, only when the fallback needs it.
func LiveStatus(ctx context.Context, tc client.Client, row mirror.Row, info *workflowpb.WorkflowExecutionInfo) (workflows.Status, error) {
	var st workflows.Status
	v, err := tc.QueryWorkflow(ctx, row.WorkflowID, "", workflows.QueryStatus)
	var notReady *serviceerror.WorkflowNotReady
	switch {
	case errors.As(err, &notReady):
		return waitingStatus(ctx, tc, row, info)
	case err != nil:
		return st, err
	}
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("error reading the workflow's status: %w", err)
	}
	return st, nil
}

// waitingStatus is the account of a workflow in its start delay: the
// state and due time its start recorded as search attributes (nothing has
// changed them since: an operator's change wakes the workflow), the mirror's
// cancel request, and the one step it took, being scheduled.
func waitingStatus(ctx context.Context, tc client.Client, row mirror.Row, info *workflowpb.WorkflowExecutionInfo) (workflows.Status, error) {
	if info == nil {
		desc, err := tc.DescribeWorkflowExecution(ctx, row.WorkflowID, "")
		if err != nil {
			return workflows.Status{}, fmt.Errorf("error describing a workflow in its start delay: %w", err)
		}
		info = desc.GetWorkflowExecutionInfo()
	}
	state, due, err := reminderAttributes(info.GetSearchAttributes())
	if err != nil {
		state, due = row.State, row.DueAt
	}
	started := info.GetStartTime().AsTime()
	return workflows.Status{
		State: state, DueAt: due, DeliveryKey: reminder.DeliveryKey(row.ID, row.SubscriberID, due),
		CancelRequested: row.CancelRequestedAt != nil,
		Transitions:     []workflows.Transition{{At: started, Event: "scheduled", State: reminder.Scheduled}},
		TransitionCount: 1,
		WaitingUntil:    info.GetExecutionTime().AsTime(),
	}, nil
}

// Waiting says how a status in its start delay reads: "due at …, waiting".
func Waiting(st workflows.Status) string {
	return fmt.Sprintf("due at %s, waiting: the engine holds the workflow until %s and runs it then (no worker has run it yet)",
		st.DueAt.UTC().Format(time.RFC3339), st.WaitingUntil.UTC().Format(time.RFC3339))
}
