package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/reminder"
)

// The due time: the reminder sleeps on a durable timer until it, and a
// reschedule (handlers.go) may move it.

// dueState is the run's due time and its moves.
type dueState struct {
	due         time.Time
	reschedules int
	// wake tells the main loop to look again (the due time moved).
	wake bool
	// goesOut is when the reminder goes out at goesOutFor, the due time it
	// was worked out for (a send window's opening; the due time itself
	// without one).
	goesOut, goesOutFor time.Time
}

// goesOutAt is when the reminder goes out at its current due time: the due
// time, or the opening of its send window that the due time takes, at its
// digest's next boundary. The window's arithmetic reads the zone database,
// which a later release may hold newer, so it runs as a side effect, once
// per due time: its answer is in the history, and a replay reads it there.
// A reminder with no window records nothing.
func (r *run) goesOutAt(ctx workflow.Context) time.Time {
	if r.in.Window == nil {
		// A digest's boundary alone is arithmetic on the instant, the
		// same in every release: no side effect, no marker.
		return reminder.DigestAt(r.due, r.in.Digest)
	}
	if !r.goesOutFor.IsZero() && r.goesOutFor.Equal(r.due) {
		return r.goesOut
	}
	due, window, digest := r.due, r.in.Window, r.in.Digest
	var at time.Time
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		return reminder.GoesOutAt(due, window, digest)
	}).Get(&at)
	if err != nil || at.IsZero() {
		at = due
	}
	r.goesOut, r.goesOutFor = at, due
	return at
}

// knownGoesOut is when the reminder goes out at its current due time, if
// that is known without a side effect (for the status query, which may
// not record one): a digest's boundary, or a window's opening worked out
// for this due time already. ok is false for a reminder with neither.
func (r *run) knownGoesOut() (at time.Time, ok bool) {
	switch {
	case r.in.Window == nil && r.in.Digest > 0:
		return reminder.DigestAt(r.due, r.in.Digest), true
	case r.in.Window != nil && r.goesOutFor.Equal(r.due):
		return r.goesOut, true
	}
	return time.Time{}, false
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
		goesOut := r.goesOutAt(ctx)
		wait := goesOut.Sub(workflow.Now(ctx))
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
		summary := "until due " + timerTime(r.due)
		if !goesOut.Equal(r.due) {
			summary = "until it goes out " + timerTime(goesOut) + " in its send window (due " + timerTime(r.due) + ")"
		}
		_, err := workflow.AwaitWithOptions(ctx, awaitFor(wait, summary), func() bool {
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
