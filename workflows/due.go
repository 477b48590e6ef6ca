package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// The due time: the reminder sleeps on a durable timer until it, and a
// reschedule (handlers.go) may move it.

// dueState is the run's due time and its moves.
type dueState struct {
	due         time.Time
	reschedules int
	// wake tells the main loop to look again (the due time moved).
	wake bool
}

// awaitDue sleeps until the due time, which a reschedule may move. done is
// true when the reminder ended before it (cancelled, or continued as new).
func (r *run) awaitDue(ctx workflow.Context) (done bool, err error) {
	for {
		if r.cancel != nil {
			return true, r.endCancelled(ctx)
		}
		if r.continueAsNewDue(ctx) {
			return true, r.continueAsNew(ctx)
		}
		wait := r.due.Sub(workflow.Now(ctx))
		if wait <= 0 {
			if r.busy == 0 {
				return false, nil
			}
			// A reschedule is still writing the mirror; it may move the due time.
			if err := workflow.Await(ctx, func() bool { return r.busy == 0 }); err != nil {
				return true, err
			}
			continue
		}
		r.wake = false
		r.showSleeping(ctx)
		_, err := workflow.AwaitWithOptions(ctx, awaitFor(wait, "until due "+timerTime(r.due)), func() bool {
			return r.wake || r.cancel != nil || r.continueAsNewDue(ctx)
		})
		if err != nil {
			return true, err
		}
	}
}

// awaitFor is an await of at most timeout whose timer the Web UI names by
// summary (else it shows as "AwaitWithTimeout"). A summary is the timer's
// metadata, not part of the command a replay matches.
func awaitFor(timeout time.Duration, summary string) workflow.AwaitOptions {
	return workflow.AwaitOptions{Timeout: timeout, TimerOptions: workflow.TimerOptions{Summary: summary}}
}

// timerTime is a time as a timer's summary gives it: UTC, to the minute.
func timerTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04Z") }
