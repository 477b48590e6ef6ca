// Package bench measures shipnotify against the engine's own speed: the
// same workloads run through two baseline workflows (naive: a timer, then
// one no-op activity; lean: a timer, then one no-op local activity) and
// through the full reminder path (starter, mirror, notify activity with the
// real SendGrid client against a local sink, audit events), on the same
// server with the same worker settings, in alternating pairs, and the
// report sets them side by side with confidence intervals.
package bench

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Workflow types of the two baselines.
const (
	NaiveWorkflowName = "NaiveReminderWorkflow"
	LeanWorkflowName  = "LeanReminderWorkflow"
)

// BareInput is a baseline's input: when it is due.
type BareInput struct {
	DueAt time.Time
}

// BareResult is what a baseline reminder reports: when its no-op began (the
// worker's StartedTime, the instant the full path reports as
// NotifyStartedAt) and how many times the no-op has run for this workflow in
// this worker process (above 1: a duplicate).
type BareResult struct {
	StartedAt  time.Time
	Executions int
}

// noopTimeout bounds one no-op attempt, regular or local.
const noopTimeout = 30 * time.Second

var noop *Noop

// NaiveWorkflow is the engine's floor as a reminder is usually first
// written: a durable timer until the due time, then one regular activity
// (an activity task and a third workflow task).
func NaiveWorkflow(ctx workflow.Context, in BareInput) (BareResult, error) {
	if err := sleepUntil(ctx, in.DueAt); err != nil {
		return BareResult{}, err
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: noopTimeout})
	var res BareResult
	err := workflow.ExecuteActivity(ctx, noop.Run).Get(ctx, &res)
	return res, err
}

// LeanWorkflow is the floor for "sleep, then do one thing": the no-op runs
// as a local activity in the workflow task the timer's firing starts, so
// the history gets no activity task and no third workflow task.
func LeanWorkflow(ctx workflow.Context, in BareInput) (BareResult, error) {
	if err := sleepUntil(ctx, in.DueAt); err != nil {
		return BareResult{}, err
	}
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: noopTimeout})
	var res BareResult
	err := workflow.ExecuteLocalActivity(ctx, noop.Run).Get(ctx, &res)
	return res, err
}

func sleepUntil(ctx workflow.Context, due time.Time) error {
	if wait := due.Sub(workflow.Now(ctx)); wait > 0 {
		return workflow.Sleep(ctx, wait)
	}
	return nil
}

// Noop is the baselines' activity: it does nothing but say when it started
// and count its runs per workflow, so the baselines report duplicates as
// the full path's mail sink does.
type Noop struct {
	mu   sync.Mutex
	runs map[string]int
}

// NewNoop returns a Noop with no runs counted.
func NewNoop() *Noop {
	return &Noop{runs: map[string]int{}}
}

// Run is the no-op, regular or local.
func (n *Noop) Run(ctx context.Context) (BareResult, error) {
	info := activity.GetInfo(ctx)
	return BareResult{StartedAt: info.StartedTime, Executions: n.count(info.WorkflowExecution.ID)}, nil
}

// count adds a run of workflowID's no-op and returns its runs so far.
func (n *Noop) count(workflowID string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.runs[workflowID]++
	return n.runs[workflowID]
}

// RegisterBare registers both baselines and their no-op on a worker.
func RegisterBare(w sdkworker.Registry, n *Noop) {
	w.RegisterWorkflowWithOptions(NaiveWorkflow, workflow.RegisterOptions{Name: NaiveWorkflowName})
	w.RegisterWorkflowWithOptions(LeanWorkflow, workflow.RegisterOptions{Name: LeanWorkflowName})
	w.RegisterActivity(n)
}
