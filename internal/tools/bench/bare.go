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
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/email"
)

// Workflow types of the two baselines.
const (
	NaiveWorkflowName = "NaiveReminderWorkflow"
	LeanWorkflowName  = "LeanReminderWorkflow"
)

// BareInput is a baseline's input: when it is due, and whether its no-op
// pays the provider the full path pays (the benchmark's provider profile
// is not Instant).
type BareInput struct {
	DueAt time.Time
	Send  bool `json:",omitempty"`
}

// NoopInput tells the no-op whether to send one mail through the worker's
// email.Sender, under the workflow id as its delivery key.
type NoopInput struct {
	Send bool `json:",omitempty"`
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
	err := workflow.ExecuteActivity(ctx, noop.Run, NoopInput{Send: in.Send}).Get(ctx, &res)
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
	err := workflow.ExecuteLocalActivity(ctx, noop.Run, NoopInput{Send: in.Send}).Get(ctx, &res)
	return res, err
}

func sleepUntil(ctx workflow.Context, due time.Time) error {
	if wait := due.Sub(workflow.Now(ctx)); wait > 0 {
		return workflow.Sleep(ctx, wait)
	}
	return nil
}

// Noop is the baselines' activity: it says when it started and counts its
// runs per workflow, so the baselines report duplicates as the full path's
// mail sink does. Asked to (NoopInput.Send), it first sends one mail
// through Email, the real client against the same sink the full path calls,
// so a slow or refusing provider costs every path the same.
type Noop struct {
	// Email is the provider a sending no-op calls; nil refuses to send.
	Email *email.Sender

	mu   sync.Mutex
	runs map[string]int
}

// NewNoop returns a Noop with no runs counted and no provider.
func NewNoop() *Noop {
	return &Noop{runs: map[string]int{}}
}

// NewSendingNoop returns a Noop that sends through e when asked to.
func NewSendingNoop(e *email.Sender) *Noop {
	n := NewNoop()
	n.Email = e
	return n
}

// errTypeNoopSendFailed marks a provider's refusal of a baseline's mail;
// the SDK's default retry policy retries it, after the wait the provider
// asked for when it asked.
const errTypeNoopSendFailed = "NoopSendFailed"

// Run is the no-op, regular or local. A send the provider refused fails
// the attempt (Temporal retries it: the baselines have no retry policy of
// their own); only an accepted one is counted, so Executions above 1 is a
// mail accepted twice for one workflow, as in the sink's journal.
func (n *Noop) Run(ctx context.Context, in NoopInput) (BareResult, error) {
	info := activity.GetInfo(ctx)
	if in.Send {
		if err := n.send(ctx, info.WorkflowExecution.ID); err != nil {
			return BareResult{}, err
		}
	}
	return BareResult{StartedAt: info.StartedTime, Executions: n.count(info.WorkflowExecution.ID)}, nil
}

// send mails one message keyed by the workflow id, and turns a refusal
// into the attempt's failure.
func (n *Noop) send(ctx context.Context, workflowID string) error {
	if n.Email == nil {
		return temporal.NewNonRetryableApplicationError("the no-op was asked to send, but its worker has no mail API (SENDGRID_API_KEY)",
			errTypeNoopSendFailed, nil)
	}
	_, err := n.Email.Send(ctx, email.Message{
		To: "noop@bench.example", Subject: "Delivery window opens in 3 days", Text: "Benchmark reminder.",
		DeliveryKey: workflowID,
	})
	var derr *delivery.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &derr) && derr.Permanent:
		return temporal.NewNonRetryableApplicationError(derr.Error(), errTypeNoopSendFailed, nil)
	case errors.As(err, &derr):
		return temporal.NewApplicationErrorWithOptions(derr.Error(), errTypeNoopSendFailed,
			temporal.ApplicationErrorOptions{NextRetryDelay: derr.RetryAfter})
	}
	return err
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
