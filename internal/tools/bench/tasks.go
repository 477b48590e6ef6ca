package bench

import (
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// Where a drain's time goes on the engine's side, read from histories: how
// long workflow and activity tasks waited to be picked up, and how often a
// workflow task timed out or failed and was taken again. A burst that
// stalls shows it here: a workflow task its worker holds open (a local
// activity waiting on the provider) outlives the sticky queue's
// schedule-to-start timeout (5 s), is timed out, rescheduled on the normal
// queue and replayed from scratch by whichever poller finds it, while the
// server counts the timed-out one against the queue.

// TaskStats sums the task events of a sample of histories.
type TaskStats struct {
	// Histories is how many were read.
	Histories int `json:"histories"`
	// StickyTimeouts are workflow tasks that timed out waiting on a sticky
	// queue (schedule-to-start), and so went to the normal queue.
	StickyTimeouts int `json:"sticky_timeouts"`
	// StartTimeouts are workflow tasks started but not answered within
	// their timeout (a worker gone, or one holding the task too long).
	StartTimeouts int `json:"start_timeouts"`
	// Failed are workflow tasks that failed (UNHANDLED_COMMAND, a
	// nondeterminism, a panic...), by cause.
	Failed map[string]int `json:"failed,omitempty"`
	// Heartbeats are workflow tasks completed only to keep a long local
	// activity's task alive (no command, more work to come).
	Heartbeats int `json:"heartbeats"`
	// WorkflowTaskWait and ActivityTaskWait are schedule-to-start
	// percentiles of every workflow task and activity task read.
	WorkflowTaskWait Drain `json:"workflow_task_wait"`
	ActivityTaskWait Drain `json:"activity_task_wait"`
}

// ReadTaskStats reads the task events of histories.
func ReadTaskStats(histories [][]*historypb.HistoryEvent) TaskStats {
	st := TaskStats{Histories: len(histories), Failed: map[string]int{}}
	var wft, act []time.Duration
	for _, events := range histories {
		scheduled := map[int64]time.Time{}
		for _, ev := range events {
			at := ev.GetEventTime().AsTime()
			switch ev.GetEventType() {
			case enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				scheduled[ev.GetEventId()] = at
			case enums.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				if s, ok := scheduled[ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()]; ok {
					wft = append(wft, at.Sub(s))
				}
			case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				if s, ok := scheduled[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; ok {
					act = append(act, at.Sub(s))
				}
			case enums.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				switch ev.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType() {
				case enums.TIMEOUT_TYPE_SCHEDULE_TO_START:
					st.StickyTimeouts++
				default:
					st.StartTimeouts++
				}
			case enums.EVENT_TYPE_WORKFLOW_TASK_FAILED:
				st.Failed[ev.GetWorkflowTaskFailedEventAttributes().GetCause().String()]++
			}
		}
		st.Heartbeats += heartbeatTasks(events)
	}
	st.WorkflowTaskWait, st.ActivityTaskWait = DurationsDrain(wft), DurationsDrain(act)
	if len(st.Failed) == 0 {
		st.Failed = nil
	}
	return st
}

// heartbeatTasks counts workflow tasks completed with no event of their
// own before the next workflow task was scheduled: the SDK completing a
// task only to keep a local activity that outlives 80% of the task timeout
// going (ForceCreateNewWorkflowTask).
func heartbeatTasks(events []*historypb.HistoryEvent) int {
	n := 0
	for i, ev := range events {
		if ev.GetEventType() != enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED || i+1 >= len(events) {
			continue
		}
		if events[i+1].GetEventType() == enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED {
			n++
		}
	}
	return n
}

// WorkflowTasks counts the workflow tasks a history's engine dispatched:
// every task scheduled, so one timed out on a dead worker's sticky queue
// and scheduled again counts twice, as the engine did it twice. A
// delivered plain reminder has three on the full path (its start, the
// timer's firing, the notify's completion) and two with a delayed start.
func WorkflowTasks(events []*historypb.HistoryEvent) int {
	n := 0
	for _, ev := range events {
		if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED {
			n++
		}
	}
	return n
}

// ReminderCost is what a delivered reminder cost the engine, the mean over
// the delivered histories of a run's sample.
type ReminderCost struct {
	// Histories is how many delivered histories the means are over.
	Histories     int     `json:"histories"`
	Events        float64 `json:"events"`
	WorkflowTasks float64 `json:"workflow_tasks"`
	Actions       float64 `json:"actions"`
}

// ReadReminderCost averages the history length, workflow tasks and billable
// actions of the histories that completed (a delivered reminder's, or a
// baseline's); nil when none did.
func ReadReminderCost(histories [][]*historypb.HistoryEvent) *ReminderCost {
	var p ReminderCost
	for _, events := range histories {
		if len(events) == 0 || events[len(events)-1].GetEventType() != enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
			continue
		}
		p.Histories++
		p.Events += float64(len(events))
		p.WorkflowTasks += float64(WorkflowTasks(events))
		p.Actions += float64(CountActions(events).Total)
	}
	if p.Histories == 0 {
		return nil
	}
	n := float64(p.Histories)
	p.Events, p.WorkflowTasks, p.Actions = p.Events/n, p.WorkflowTasks/n, p.Actions/n
	return &p
}
