package bench

import (
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// Actions are the Temporal Cloud billable actions one workflow history
// records, by kind, as https://docs.temporal.io/cloud/actions counts them:
// Cloud bills per action, so this is what a reminder costs there. Some
// actions never reach a history (queries, activity heartbeats, rejected
// updates); a reminder's delivered path has none of them.
type Actions struct {
	// WorkflowStarted: the start (search attributes given at start are
	// free).
	WorkflowStarted int `json:"workflow_started"`
	// Timers: every timer started, including AwaitWithTimeout's.
	Timers int `json:"timers"`
	// ActivityAttempts: each activity scheduled, plus its retries (an
	// attempt above 1 on its started event).
	ActivityAttempts int `json:"activity_attempts"`
	// MarkerTasks: workflow tasks that recorded markers. All the markers of
	// one workflow task (local activities, side effects, version markers)
	// count as one action, plus each local-activity attempt after the
	// first that the task's metering reports.
	MarkerTasks int `json:"marker_tasks"`
	// Upserts: search-attribute upserts, except those that only set
	// TemporalChangeVersion (versioning's own, exempt).
	Upserts int `json:"upserts"`
	// Updates: updates accepted (rejected ones are billed too but never
	// written to a history).
	Updates int `json:"updates"`
	// Signals: signals received.
	Signals int `json:"signals"`
	// Children: two per child workflow initiated (the intent and the start).
	Children int `json:"children"`
	// Other: options updates, Nexus operations scheduled or cancelled.
	Other int `json:"other"`
	// Total is the sum.
	Total int `json:"total"`
}

// changeVersionAttribute is the search attribute workflow.GetVersion may
// upsert; its upserts are not billed.
const changeVersionAttribute = "TemporalChangeVersion"

// CountActions classifies a history's events into billable actions.
func CountActions(events []*historypb.HistoryEvent) Actions {
	var a Actions
	markerTasks := map[int64]bool{}
	for _, ev := range events {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			a.WorkflowStarted++
		case enums.EVENT_TYPE_TIMER_STARTED:
			a.Timers++
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a.ActivityAttempts++
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if attempt := ev.GetActivityTaskStartedEventAttributes().GetAttempt(); attempt > 1 {
				a.ActivityAttempts += int(attempt) - 1
			}
		case enums.EVENT_TYPE_MARKER_RECORDED:
			markerTasks[ev.GetMarkerRecordedEventAttributes().GetWorkflowTaskCompletedEventId()] = true
		case enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			a.MarkerTasks += int(ev.GetWorkflowTaskCompletedEventAttributes().GetMeteringMetadata().GetNonfirstLocalActivityExecutionAttempts())
		case enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			fields := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, versioning := fields[changeVersionAttribute]; !versioning || len(fields) > 1 {
				a.Upserts++
			}
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			a.Updates++
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			a.Signals++
		case enums.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			a.Children += 2
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED,
			enums.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED, enums.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:
			a.Other++
		}
	}
	a.MarkerTasks += len(markerTasks)
	a.Total = a.WorkflowStarted + a.Timers + a.ActivityAttempts + a.MarkerTasks + a.Upserts + a.Updates +
		a.Signals + a.Children + a.Other
	return a
}

// TodaysActionsPerReminder is what a delivered reminder cost before the
// fast path, as CountActions reads its recorded history
// (workflows/testdata/histories/sent.json, checked by a test): the start,
// the timer, the notify activity and the upsert that marks it sent. The
// target is to cost no more.
const TodaysActionsPerReminder = 4
