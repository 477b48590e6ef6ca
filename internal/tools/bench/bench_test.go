package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

// The API path sends each update as the document the parser reads back to
// the very update the starter path schedules.
func TestUpdateDocumentParsesBackToTheUpdate(t *testing.T) {
	t.Parallel()
	r := &Runner{Fanout: 3}
	due := time.Now().Add(time.Hour)
	b := &batch{shipment: "BENCH-x-1", planned: []time.Time{
		reminder.NormalizeTime(due), reminder.NormalizeTime(due.Add(1500 * time.Nanosecond)), reminder.NormalizeTime(due),
		reminder.NormalizeTime(due.Add(time.Minute)),
	}}
	updates := []reminder.Update{r.update(b, 0, 3), r.update(b, 3, 4)}
	require.Len(t, updates[0].Subscribers, 3)
	for _, u := range updates {
		doc, err := json.Marshal(updateDocument(u))
		require.NoError(t, err)
		got, err := reminder.ParseUpdate(bytes.NewReader(doc))
		require.NoError(t, err)
		require.Equal(t, u, got)
	}
}

// Every path cuts its reminders into the same batches, with the same
// number in flight: Concurrency/Fanout.
func TestInBatchesCutsByFanoutWithTheSameConcurrency(t *testing.T) {
	t.Parallel()
	r := &Runner{Fanout: 10, Concurrency: 30}
	var cur, peak atomic.Int64
	var mu sync.Mutex
	var sizes []int
	started, gate := make(chan struct{}, 10), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- r.inBatches(t.Context(), 95, func(_ context.Context, first, end int) error {
			n := cur.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			started <- struct{}{}
			<-gate
			cur.Add(-1) // before returning, so the next batch starts after it
			mu.Lock()
			sizes = append(sizes, end-first)
			mu.Unlock()
			return nil
		})
	}()
	for range 3 {
		<-started
	}
	for range 10 {
		gate <- struct{}{}
	}
	require.NoError(t, <-done)
	require.Equal(t, int64(3), peak.Load())
	require.ElementsMatch(t, []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 5}, sizes)
}

func TestLeadFollowsTheMeasuredStartRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		rate float64
		want time.Duration
	}{
		{1000, 250, 3*time.Second + 6666666666}, // 1000 / (250·0.6) s, plus the floor
		{1000, 100, 3*time.Second + 16666666666},
		{0, 250, 3 * time.Second},
	} {
		require.Equal(t, tc.want, leadFor(tc.n, tc.rate), "n=%d rate=%g", tc.n, tc.rate)
	}
	r := &Runner{}
	require.Equal(t, leadFor(600, assumedStartRate), r.lead(Full, 600), "unmeasured: the assumed rate")
	r.startRates = map[Kind]float64{Full: 300}
	require.Equal(t, leadFor(600, 300), r.lead(Full, 600))

	// The rate learnt is of the starts' work: 600 done 4 s after
	// scheduling began is 150/s; not done by a due time 5 s after it, at
	// most 120/s, and the next lead grows.
	b := &batch{started: t0}
	r.learnStartRate(Full, 600, b, t0.Add(4*time.Second), t0.Add(9*time.Second))
	require.Equal(t, leadFor(600, 150), r.lead(Full, 600))
	r.learnStartRate(Full, 600, b, time.Time{}, t0.Add(5*time.Second))
	require.Equal(t, leadFor(600, 120), r.lead(Full, 600))
	require.Greater(t, r.lead(Full, 600), 5*time.Second)
}

func TestOrderAlternatesAfterOneWarmUpEach(t *testing.T) {
	t.Parallel()
	got := Order([]Kind{Naive, Lean, Full}, 3)
	want := []Step{
		{Naive, 0}, {Lean, 0}, {Full, 0},
		{Naive, 1}, {Lean, 1}, {Full, 1},
		{Full, 2}, {Lean, 2}, {Naive, 2},
		{Naive, 3}, {Lean, 3}, {Full, 3},
	}
	require.Equal(t, want, got)
}

func TestInvalidReason(t *testing.T) {
	t.Parallel()
	ok := Result{N: 10, Delivered: 10, Lead: 10 * time.Second, Slack: 5 * time.Second}
	for _, tc := range []struct {
		name      string
		res       Result
		unsettled string
		want      string
	}{
		{"valid", ok, "", ""},
		{"errored", Result{Error: "boom", N: 10, Delivered: 10}, "", "error: boom"},
		{"partly drained", Result{N: 10, Delivered: 7, Lost: 3}, "", "partly drained: 7 of 10 delivered"},
		{"little slack", Result{N: 10, Delivered: 10, Lead: 5 * time.Second, Slack: 500 * time.Millisecond}, "",
			"the starts' work was done 500ms before the first due time (less than 2s)"},
		{"no slack", Result{N: 10, Delivered: 10, Lead: 5 * time.Second}, "",
			"the starts' work (scheduling, each reminder's first workflow task) was not done by the first due time"},
		{"catch-up has no lead", Result{N: 10, Delivered: 10}, "", ""},
		{"started on a tail", ok, "the queues had not settled", "the queues had not settled"},
	} {
		require.Equal(t, tc.want, invalidReason(tc.res, tc.unsettled, 2*time.Second), tc.name)
	}
}

func TestSampleIndices(t *testing.T) {
	t.Parallel()
	require.Equal(t, []int{0, 1, 2, 3}, sampleIndices(4, 8), "fewer than the sample: all")
	require.Equal(t, []int{0, 25, 50, 75, 96, 97, 98, 99}, sampleIndices(100, 4))
	require.Empty(t, sampleIndices(0, 8))
}

func TestSlack(t *testing.T) {
	t.Parallel()
	due := t0.Add(10 * time.Second)
	require.Equal(t, 4*time.Second, slack(t0.Add(6*time.Second), due))
	require.Zero(t, slack(time.Time{}, due), "not done by the due time")
	require.Zero(t, slack(due.Add(time.Second), due))
}
