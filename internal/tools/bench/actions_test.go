package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// history builds events from types, numbering them from 1.
func history(types ...enums.EventType) []*historypb.HistoryEvent {
	out := make([]*historypb.HistoryEvent, len(types))
	for i, typ := range types {
		out[i] = &historypb.HistoryEvent{EventId: int64(i + 1), EventType: typ}
	}
	return out
}

const (
	started   = enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
	wtSched   = enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
	wtStarted = enums.EVENT_TYPE_WORKFLOW_TASK_STARTED
	wtDone    = enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
	timer     = enums.EVENT_TYPE_TIMER_STARTED
	fired     = enums.EVENT_TYPE_TIMER_FIRED
	actSched  = enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
	actStart  = enums.EVENT_TYPE_ACTIVITY_TASK_STARTED
	actDone   = enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
	marker    = enums.EVENT_TYPE_MARKER_RECORDED
	upsert    = enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
	completed = enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
)

func markerIn(task int64) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: marker, Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{
		MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: "LocalActivity", WorkflowTaskCompletedEventId: task},
	}}
}

func upsertOf(names ...string) *historypb.HistoryEvent {
	fields := map[string]*commonpb.Payload{}
	for _, n := range names {
		fields[n] = &commonpb.Payload{}
	}
	return &historypb.HistoryEvent{EventType: upsert, Attributes: &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
		UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields},
		},
	}}
}

func TestCountActions(t *testing.T) {
	t.Parallel()
	naive := history(started, wtSched, wtStarted, wtDone, timer, fired, wtSched, wtStarted, wtDone,
		actSched, actStart, actDone, wtSched, wtStarted, wtDone, completed)
	lean := append(history(started, wtSched, wtStarted, wtDone, timer, fired, wtSched, wtStarted, wtDone),
		markerIn(9), &historypb.HistoryEvent{EventType: completed})

	retried := history(started, actSched, actStart)
	retried[2].Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
		ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: 3},
	}

	// A version marker and a local activity recorded by the same workflow
	// task are one action; a second task's marker is another; the metering
	// of local-activity retries adds its count.
	metered := &historypb.HistoryEvent{EventType: wtDone, Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{
		WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
			MeteringMetadata: &commonpb.MeteringMetadata{NonfirstLocalActivityExecutionAttempts: 2},
		},
	}}
	markers := []*historypb.HistoryEvent{markerIn(4), markerIn(4), markerIn(9), metered}

	for _, tc := range []struct {
		name   string
		events []*historypb.HistoryEvent
		want   Actions
	}{
		{"naive: start, timer, activity", naive, Actions{WorkflowStarted: 1, Timers: 1, ActivityAttempts: 1, Total: 3}},
		{"lean: start, timer, one marker task", lean, Actions{WorkflowStarted: 1, Timers: 1, MarkerTasks: 1, Total: 3}},
		{"retries are attempts", retried, Actions{WorkflowStarted: 1, ActivityAttempts: 3, Total: 4}},
		{"markers count per workflow task", markers, Actions{MarkerTasks: 4, Total: 4}},
		{"versioning's own upsert is free", []*historypb.HistoryEvent{upsertOf(changeVersionAttribute), upsertOf("ReminderState"),
			upsertOf("ReminderState", changeVersionAttribute)}, Actions{Upserts: 2, Total: 2}},
		{"updates, signals, children", history(enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
			enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			enums.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED), Actions{Updates: 1, Signals: 1, Children: 2, Total: 4}},
	} {
		require.Equal(t, tc.want, CountActions(tc.events), tc.name)
	}
}

// The classifier on recorded histories of the real workflow: today's
// delivered reminder costs TodaysActionsPerReminder.
func TestCountActionsOnRecordedHistories(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file   string
		events int
		want   Actions
	}{
		{"sent.json", 17, Actions{WorkflowStarted: 1, Timers: 1, ActivityAttempts: 1, Upserts: 1, Total: TodaysActionsPerReminder}},
		// Today's, started at the current level: no version marker, so no
		// more than before the fast path.
		{"sent-at-level-1.json", 17, Actions{WorkflowStarted: 1, Timers: 1, ActivityAttempts: 1, Upserts: 1, Total: TodaysActionsPerReminder}},
		// Started before levels, on a release that retired the fast path:
		// the GetVersion marker's task is one more.
		{"sent-first-attempt-an-activity.json", 19, Actions{WorkflowStarted: 1, Timers: 1, ActivityAttempts: 1, MarkerTasks: 1, Upserts: 1, Total: 5}},
		// Approved while waiting: the approval's timer, the update, its
		// mirror write (a local activity) and upsert, then the due timer,
		// the send and the sent upsert.
		{"approved.json", 25, Actions{WorkflowStarted: 1, Timers: 2, ActivityAttempts: 1, MarkerTasks: 1, Upserts: 2, Updates: 1, Total: 8}},
	} {
		f, err := os.Open(filepath.Join("..", "..", "..", "workflows", "testdata", "histories", tc.file))
		require.NoError(t, err)
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		f.Close()
		require.NoError(t, err)
		require.Len(t, h.GetEvents(), tc.events, tc.file)
		require.Equal(t, tc.want, CountActions(h.GetEvents()), tc.file)
	}
}
