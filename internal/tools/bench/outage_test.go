package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/shipnotify/shipnotify/internal/sink"
)

// A capped sender's sends are spaced exactly, so its peak over any window
// is its cap; a burst shows as more.
func TestPeakRate(t *testing.T) {
	t.Parallel()
	var even []time.Time
	for i := range 1000 {
		even = append(even, t0.Add(time.Duration(i)*20*time.Millisecond)) // 50 a second for 20 s
	}
	require.InDelta(t, 50, PeakRate(even, 5*time.Second), 1e-9)
	burst := append(even, at(10*time.Second, 10*time.Second, 10*time.Second, 10*time.Second, 10*time.Second)...)
	require.InDelta(t, 51, PeakRate(burst, 5*time.Second), 1e-9)
	require.Zero(t, PeakRate(nil, 5*time.Second))
}

func TestPerReminderOf(t *testing.T) {
	t.Parallel()
	counts := make([]int, 100)
	for i := range counts {
		counts[i] = 4
	}
	counts[7], counts[50] = 12, 30
	require.Equal(t, PerReminder{Mean: 4.34, P99: 12, Max: 30}, PerReminderOf(counts))
	require.Equal(t, PerReminder{}, PerReminderOf(nil))
}

func scheduled(id int64, name string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventId: id, EventType: enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
		Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: name}}}}
}

// Notify attempts are each notify activity's last attempt, from its
// started event; other activities do not count.
func TestNotifyAttempts(t *testing.T) {
	t.Parallel()
	started := func(id, of int64, attempt int32) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventType: enums.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				ScheduledEventId: of, Attempt: attempt}}}
	}
	events := []*historypb.HistoryEvent{
		scheduled(5, notifyActivity), started(6, 5, 9),
		scheduled(9, "RecordState"), started(10, 9, 3),
		scheduled(12, notifyActivity), started(13, 12, 1),
	}
	require.Equal(t, 10, NotifyAttempts(events))
	require.Zero(t, NotifyAttempts(nil))
}

// What the sink accepted under a batch's keys: each key's first mail
// timed from the outage's end (or before it), the peak over all of them,
// duplicates, and other batches' mails left out.
func TestOutageFiguresReadTheJournal(t *testing.T) {
	t.Parallel()
	end := t0.Add(5 * time.Minute)
	mail := func(key string, at time.Time) sink.Mail {
		return sink.Mail{CustomArgs: map[string]string{"delivery_key": key}, Received: at}
	}
	keys := map[string]time.Time{"a": t0, "b": t0.Add(time.Minute), "c": t0.Add(2 * time.Minute), "d": t0}
	mails := []sink.Mail{
		mail("b", end.Add(40*time.Second)), mail("a", end.Add(10*time.Second)), mail("a", end.Add(50*time.Second)),
		mail("c", end.Add(-time.Second)), mail("other", end.Add(time.Second)),
	}
	f, delivered, dups := outageFigures(mails, keys, end, OutageOptions{Outage: 5 * time.Minute, RateCap: 50})
	require.Equal(t, 3, delivered, "d never came")
	require.Equal(t, 1, dups)
	require.Equal(t, 1, f.BeforeEnd)
	require.Equal(t, 40*time.Second, f.AfterRecovery.P99)
	require.Equal(t, 10*time.Second, f.AfterRecovery.P50)
	require.Equal(t, 5*time.Minute, f.Outage)
	require.InDelta(t, 0.2, f.PeakRate, 1e-9, "no two of the batch's mails within 5 s of each other")

	// Timed from each key's due time when there is no one reference.
	j := readJournal(mails, keys)
	d, ok := j.accepted(keys, time.Time{})
	require.True(t, ok)
	require.Equal(t, end.Add(40*time.Second).Sub(t0.Add(time.Minute)), d.P50)
	_, ok = readJournal(nil, keys).accepted(keys, end)
	require.False(t, ok)
}

// The last notify attempt's cause is the failure its started event
// carries: a product error by its type, a timeout by its kind, anything
// else with its message; other activities do not count.
func TestLastRetryCause(t *testing.T) {
	t.Parallel()
	started := func(id, of int64, at time.Time, f *failurepb.Failure) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventTime: timestamppb.New(at), EventType: enums.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				ScheduledEventId: of, LastFailure: f}}}
	}
	app := func(typ, msg string) *failurepb.Failure {
		return &failurepb.Failure{Message: msg, FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: typ}}}
	}
	timeout := &failurepb.Failure{FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: enums.TIMEOUT_TYPE_START_TO_CLOSE}}}
	for _, tc := range []struct {
		last *failurepb.Failure
		want string
	}{
		{nil, "first attempt"},
		{app("DeliveryFailed", "email provider answered 503"), "DeliveryFailed"},
		{app("*fmt.wrapError", "error taking a send slot: timeout"), "*fmt.wrapError: error taking a send slot: timeout"},
		{timeout, "timeout StartToClose"},
	} {
		events := []*historypb.HistoryEvent{
			scheduled(5, notifyActivity), started(6, 5, t0, app("DeliveryFailed", "earlier")),
			scheduled(9, notifyActivity), started(10, 9, t0.Add(time.Minute), tc.last),
			scheduled(12, "RecordState"), started(13, 12, t0.Add(2*time.Minute), timeout),
		}
		cause, began := LastRetryCause(events)
		require.Equal(t, tc.want, cause)
		require.Equal(t, t0.Add(time.Minute), began)
	}
	cause, began := LastRetryCause(nil)
	require.Empty(t, cause)
	require.True(t, began.IsZero())
}
