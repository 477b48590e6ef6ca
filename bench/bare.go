// Package bench measures shipnotify against the engine's own speed: the
// same workloads run through a bare "sleep until due, then a no-op
// activity" workflow and through the full reminder path (starter, mirror,
// notify activity with the real SendGrid client against a local sink, audit
// events), on the same server, and the report sets them side by side.
package bench

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// BareWorkflowName is the baseline workflow's type.
const BareWorkflowName = "BareReminderWorkflow"

// BareInput is the baseline's input: when it is due.
type BareInput struct {
	DueAt time.Time
}

// BareWorkflow is the engine's floor for a reminder: a durable timer until
// the due time, then one activity that does nothing. It returns when that
// activity started, the baseline's "notify start".
func BareWorkflow(ctx workflow.Context, in BareInput) (time.Time, error) {
	if wait := in.DueAt.Sub(workflow.Now(ctx)); wait > 0 {
		if err := workflow.Sleep(ctx, wait); err != nil {
			return time.Time{}, err
		}
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var started time.Time
	err := workflow.ExecuteActivity(ctx, NoopActivity).Get(ctx, &started)
	return started, err
}

// NoopActivity does nothing but say when it started.
func NoopActivity(ctx context.Context) (time.Time, error) {
	return activity.GetInfo(ctx).StartedTime, nil
}

// RegisterBare registers the baseline on a worker.
func RegisterBare(w sdkworker.Registry) {
	w.RegisterWorkflowWithOptions(BareWorkflow, workflow.RegisterOptions{Name: BareWorkflowName})
	w.RegisterActivity(NoopActivity)
}
