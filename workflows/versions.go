package workflows

import (
	"maps"

	"go.temporal.io/sdk/workflow"
)

// How ReminderWorkflow changes while reminders sleep across releases: every
// change to the commands it emits has a change id and a latest version
// here; the workflow asks workflow.GetVersion for it where the change
// applies, so a reminder that started before the change replays the old
// way. A reminder started at a level (ReminderInput.Level) knows the
// versions of every change made up to that level and asks for none of them:
// no version marker, no TemporalChangeVersion upsert, two history events
// and an action fewer each. Recorded histories of every path
// (testdata/histories, append-only) replay in TestReplayRecordedHistories.
//
// To change the commands: add a change id with its latest version, branch
// on r.version where it applies, record the new path's history under a new
// name, and raise CurrentLevel with the new change in its versions.

// Change ids for workflow.GetVersion. These stay as long as any reminder
// that started before them can still be running.
const (
	// changeEscalationBeside: an escalation runs beside the reminder, so
	// one that keeps failing holds neither an expiry nor a cancel behind it.
	changeEscalationBeside = "escalation-beside-the-reminder"
	// changeRescheduleWritesFirst: a reschedule writes the mirror first and
	// moves the timer only once the write is taken.
	changeRescheduleWritesFirst = "operator-change-writes-mirror-first"
	// changeCancelStopsSend: a cancel stops a send that is still retrying.
	changeCancelStopsSend = "cancel-stops-a-retrying-send"
	// changeLocalFirstAttempt: at version 1 the notify's first attempt ran
	// as a local activity in the timer's workflow task, the activity its
	// fallback. Version 2 retires it: a local activity passes by the task
	// queue's rate limit, cannot hear a cancel, and holds the workflow task
	// open while the provider answers. Reminders at version 1 replay it.
	changeLocalFirstAttempt = "notify-first-attempt-local"
	// changeCancelSettlesTheSend: a cancel during the send (the cancel
	// update, or a cancel of the workflow itself) waits for the send's own
	// outcome and ends cancelled, with the notice when the provider may
	// have the reminder; a proof of a send only the workflow holds is
	// recorded first. Before it, a workflow cancel during the send ended
	// failed, and a stopped send counted as nothing sent.
	changeCancelSettlesTheSend = "cancel-settles-the-send"
	// changeTimeoutRetryCeiling: the notify's retry policy waits at most
	// notifyPolicyCeiling between attempts, not activities'
	// NotifyMaximumInterval. Every failure the activity reports names its
	// own wait (the provider's pace, or the reminder's own backoff up to
	// the old ceiling), so the policy's ceiling bounds only what it cannot
	// report: an attempt that timed out or whose worker stopped. Before it,
	// such an attempt late in a provider outage waited the attempt count's
	// next 5 to 10 minutes, long after the provider answered again.
	changeTimeoutRetryCeiling = "notify-timeout-retry-ceiling"
	// changeAcceptedFirst: an operator's change (a reschedule, a decision)
	// is in the history before the mirror hears of it. The handler ends the
	// workflow task that accepts it (acceptedFirst), then writes the mirror
	// in the next, retried until the mirror takes or refuses it. Before it,
	// a local activity wrote the mirror inside the accepting task, whose
	// acceptance is durable only once the task completes: a worker stalled
	// past the task's timeout left the mirror moved and the change lost (or,
	// running a stale task after the stall, moved the mirror for a change the
	// workflow refused). A run that took an operator change before this
	// release resolved the change id then, and keeps the old path for the
	// rest of that run.
	changeAcceptedFirst = "operator-change-accepted-first"
	// changeFollowsTheMirrorsMove: a send refused because the mirror row
	// moved to another due time and key while the workflow did not hear (a
	// window move that found no workflow for a row never marked started,
	// as the workflow started and its mark failed) takes the row's due
	// time and key, upserts DueAt, and sleeps again to it. Before it, the
	// workflow ended "as the mirror says" in a pending state: it closed,
	// the row stayed pending, and the reminder was never sent. Asked only
	// when such a refusal comes (the activity reports it only to a workflow
	// that follows moves: activities.NotifyInput.FollowsMoves), so no other
	// reminder carries a marker for it.
	changeFollowsTheMirrorsMove = "send-follows-the-mirrors-move"
)

// The versions of changeLocalFirstAttempt.
const (
	localFirstAttempt   workflow.Version = 1
	firstAttemptRetired workflow.Version = 2
)

// latest is each change's latest version: what a reminder that asks
// GetVersion for the first time records.
var latest = map[string]workflow.Version{
	changeEscalationBeside:      1,
	changeRescheduleWritesFirst: 1,
	changeCancelStopsSend:       1,
	changeLocalFirstAttempt:     firstAttemptRetired,
	changeCancelSettlesTheSend:  1,
	changeTimeoutRetryCeiling:   1,
	changeAcceptedFirst:         1,
	changeFollowsTheMirrorsMove: 1,
}

// CurrentLevel is the level the starter starts reminders at.
const CurrentLevel = 3

// levels are the versions a reminder started at each level runs, with no
// GetVersion. A level is frozen once released: a change added later goes
// into latest and a new level (the last one with it), never into an old
// one, since a reminder started at level 1 must replay as level 1 did.
var levels = map[int]map[string]workflow.Version{
	1: level1,
	2: level2,
	3: level3,
}

// level3 is level2 with an operator's change accepted first and a send
// that follows the mirror's move. (changeFollowsTheMirrorsMove joined
// level 3 before level 3 was released: no reminder started at level 3
// ran without it, and the recorded level-3 histories replay with it, none
// of them holding the refusal it changes.)
var level3 = with(with(level2, changeAcceptedFirst, 1), changeFollowsTheMirrorsMove, 1)

// level2 is level1 with the notify's retry ceiling.
var level2 = with(level1, changeTimeoutRetryCeiling, 1)

// level1 is the first level: every change made before levels.
var level1 = map[string]workflow.Version{
	changeEscalationBeside:      1,
	changeRescheduleWritesFirst: 1,
	changeCancelStopsSend:       1,
	changeLocalFirstAttempt:     firstAttemptRetired,
	changeCancelSettlesTheSend:  1,
}

// with is level plus one change at version v: the next level.
func with(level map[string]workflow.Version, changeID string, v workflow.Version) map[string]workflow.Version {
	next := maps.Clone(level)
	next[changeID] = v
	return next
}

// version is the version of changeID this run takes: fixed by its start
// level, or asked of workflow.GetVersion (recorded the first time, replayed
// after) for a reminder started before the level knew it.
func (r *run) version(ctx workflow.Context, changeID string) workflow.Version {
	if v, ok := levels[r.in.Level][changeID]; ok {
		return v
	}
	return workflow.GetVersion(ctx, changeID, workflow.DefaultVersion, latest[changeID])
}
