package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

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

// Notify attempts are each notify activity's last attempt, from its
// started event; other activities do not count.
func TestNotifyAttempts(t *testing.T) {
	t.Parallel()
	scheduled := func(id int64, name string) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventType: enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: name}}}}
	}
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
