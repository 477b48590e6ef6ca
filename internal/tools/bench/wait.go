package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"golang.org/x/sync/errgroup"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// resultPolls is how many result long-polls are open at once, on every path.
const resultPolls = 64

// settlePoll is how often settle looks at the queues.
const settlePoll = 500 * time.Millisecond

// outcome is what one reminder's workflow reported.
type outcome struct {
	// start is when its notify (or no-op) began, by the worker's clock:
	// activity.GetInfo(ctx).StartedTime on every path. Zero: none reported.
	start time.Time
	// executions is the baselines' no-op count.
	executions int
	err        error
}

// results waits for every workflow of the batch to close and reads its
// result, the same way on every path: one long poll per workflow, at most
// resultPolls at once. No path stops before its workflows close.
func (r *Runner) results(ctx context.Context, b *batch, within time.Duration) ([]outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	out := make([]outcome, len(b.ids))
	var g errgroup.Group
	g.SetLimit(resultPolls)
	for i, id := range b.ids {
		g.Go(func() error {
			run := r.Temporal.GetWorkflow(ctx, id, "")
			if b.kind == Naive || b.kind == Lean {
				var res BareResult
				err := run.Get(ctx, &res)
				out[i] = outcome{start: res.StartedAt, executions: res.Executions, err: err}
				return nil
			}
			var res workflows.ReminderResult
			err := run.Get(ctx, &res)
			if err == nil && res.State != reminder.Sent {
				err = fmt.Errorf("%s ended %s", id, res.State)
			}
			out[i] = outcome{start: res.NotifyStartedAt, err: err}
			return nil
		})
	}
	_ = g.Wait() // each goroutine keeps its error in out
	failed := 0
	var first error
	for _, o := range out {
		if o.err != nil {
			failed++
			if first == nil {
				first = o.err
			}
		}
	}
	if first != nil {
		return out, fmt.Errorf("%d of %d workflows did not deliver: %w", failed, len(out), first)
	}
	return out, nil
}

// Settle waits until the workflow and activity backlogs of every bench
// queue are empty and have stayed so for IdleGap, so a run never starts on
// the tail of the one before it. The server caches these counts for 5 s
// (matching.TaskQueueInfoByBuildIdTTL): a gap of at least that makes the
// last reading a fresh one.
func (r *Runner) Settle(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var idleSince time.Time
	for {
		tasks, err := r.backlog(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("the task queues were not idle for %s within %s", r.IdleGap, within)
		case err != nil:
			return err
		case tasks > 0:
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		case time.Since(idleSince) >= r.IdleGap:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the task queues were not idle for %s within %s (%d tasks waiting)", r.IdleGap, within, tasks)
		case <-time.After(settlePoll):
		}
	}
}

// backlog is the tasks waiting on the bench's queues, workflow and activity.
func (r *Runner) backlog(ctx context.Context) (int64, error) {
	seen := map[string]bool{}
	var total int64
	for _, q := range r.Queues {
		if seen[q] {
			continue
		}
		seen[q] = true
		for _, typ := range []enums.TaskQueueType{enums.TASK_QUEUE_TYPE_WORKFLOW, enums.TASK_QUEUE_TYPE_ACTIVITY} {
			resp, err := r.Temporal.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
				Namespace:     r.Namespace,
				TaskQueue:     &taskqueuepb.TaskQueue{Name: q, Kind: enums.TASK_QUEUE_KIND_NORMAL},
				TaskQueueType: typ,
				ReportStats:   true,
			})
			if err != nil {
				return 0, fmt.Errorf("error describing task queue %s: %w", q, err)
			}
			total += resp.GetStats().GetApproximateBacklogCount()
		}
	}
	return total, nil
}

// firstTaskSample is how many of a batch's workflows firstTasksDone looks
// at: the last ones started, and as many spread over the batch.
const firstTaskSample = 8

// firstTaskPoll is how often firstTasksDone looks.
const firstTaskPoll = 250 * time.Millisecond

// sampleIndices picks, of n workflows in start order, the last k and k
// spread evenly over the rest, in ascending order without repeats.
func sampleIndices(n, k int) []int {
	seen := map[int]bool{}
	var out []int
	add := func(i int) {
		if i >= 0 && i < n && !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	for i := 0; i < k && n > 0; i++ {
		add(i * n / k)
	}
	for i := max(0, n-k); i < n; i++ {
		add(i)
	}
	slices.Sort(out)
	return out
}

// firstTasksDone waits until the batch's workflows have run their first
// workflow task (each has set its timer and waits on nothing else), or are
// held by a start delay whose first task is not due yet (full-delayed's:
// the engine has nothing more to do for them until then), or until
// deadline, and returns when; zero if the deadline came first. It
// asks the engine about a sample: tasks are dispatched about in the order
// they were added, so the workflows started last are the last to be
// done. Until then the engine is still doing the starts' work, which must
// not spill into what a run measures.
func (r *Runner) firstTasksDone(ctx context.Context, b *batch, deadline time.Time) time.Time {
	pending := map[string]bool{}
	for _, i := range sampleIndices(len(b.ids), firstTaskSample) {
		pending[b.ids[i]] = true
	}
	for {
		var mu sync.Mutex
		var g errgroup.Group
		for _, id := range slices.Collect(maps.Keys(pending)) {
			g.Go(func() error {
				desc, err := r.Temporal.DescribeWorkflowExecution(ctx, id, "")
				if err == nil && desc.GetPendingWorkflowTask() == nil && startsWorkDone(desc.GetWorkflowExecutionInfo(), time.Now()) {
					mu.Lock()
					delete(pending, id)
					mu.Unlock()
				}
				return nil
			})
		}
		_ = g.Wait()
		if len(pending) == 0 {
			return time.Now()
		}
		if !time.Now().Before(deadline) {
			return time.Time{}
		}
		select {
		case <-ctx.Done():
			return time.Time{}
		case <-time.After(min(firstTaskPoll, time.Until(deadline))):
		}
	}
}

// startsWorkDone says whether the engine is done with a workflow's start:
// its first workflow task has run (more than the started and scheduled
// events), or a start delay holds that task until after now.
func startsWorkDone(info *workflowpb.WorkflowExecutionInfo, now time.Time) bool {
	if info.GetHistoryLength() > 2 {
		return true
	}
	return info.GetExecutionTime() != nil && info.GetExecutionTime().AsTime().After(now)
}
