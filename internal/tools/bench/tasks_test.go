package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A stalled reminder's history, as a burst's local sends left them: its
// workflow task waited past the sticky queue's 5 s and was timed out, taken
// again from the normal queue 40 s later, and held open by the local send
// until the SDK heartbeat it; a healthy one's tasks waited milliseconds.
func TestReadTaskStatsShowsWhereADrainWaited(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	ev := func(id int64, typ enums.EventType, d time.Duration) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventType: typ, EventTime: at(d)}
	}
	started := func(id, sched int64, d time.Duration) *historypb.HistoryEvent {
		e := ev(id, wtStarted, d)
		e.Attributes = &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{
			WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: sched}}
		return e
	}
	timedOut := func(id int64, typ enums.TimeoutType, d time.Duration) *historypb.HistoryEvent {
		e := ev(id, enums.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, d)
		e.Attributes = &historypb.HistoryEvent_WorkflowTaskTimedOutEventAttributes{
			WorkflowTaskTimedOutEventAttributes: &historypb.WorkflowTaskTimedOutEventAttributes{TimeoutType: typ}}
		return e
	}
	failed := ev(0, enums.EVENT_TYPE_WORKFLOW_TASK_FAILED, 0)
	failed.Attributes = &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{
		WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{Cause: enums.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND}}
	stalled := []*historypb.HistoryEvent{
		ev(1, started0, 0),
		ev(2, wtSched, 0), started(3, 2, 10*time.Millisecond), ev(4, wtDone, 20*time.Millisecond),
		ev(5, timer, 20*time.Millisecond), ev(6, fired, 60*time.Second),
		ev(7, wtSched, 60*time.Second), timedOut(8, enums.TIMEOUT_TYPE_SCHEDULE_TO_START, 65*time.Second),
		ev(9, wtSched, 65*time.Second), started(10, 9, 105*time.Second),
		ev(11, wtDone, 113*time.Second), ev(12, wtSched, 113*time.Second), started(13, 12, 113*time.Second),
		failed,
	}
	healthy := []*historypb.HistoryEvent{
		ev(1, started0, 0),
		ev(2, wtSched, 0), started(3, 2, 5*time.Millisecond), ev(4, wtDone, 10*time.Millisecond),
	}
	st := ReadTaskStats([][]*historypb.HistoryEvent{stalled, healthy})
	require.Equal(t, 2, st.Histories)
	require.Equal(t, 1, st.StickyTimeouts)
	require.Zero(t, st.StartTimeouts)
	require.Equal(t, 1, st.Heartbeats, "the task completed only to keep the local send going")
	require.Equal(t, map[string]int{"UnhandledCommand": 1}, st.Failed)
	require.Equal(t, 40*time.Second, st.WorkflowTaskWait.Max, "the rescheduled task waited 40 s for a poller")
	require.Equal(t, 5*time.Millisecond, st.WorkflowTaskWait.P50)
}

const started0 = enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
