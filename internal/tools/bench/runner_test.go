package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/worker"
)

// inProcess runs each kind's worker in the test process.
type inProcess struct {
	mu      sync.Mutex
	make    map[Kind]func() sdkworker.Worker
	running map[Kind]sdkworker.Worker
}

func (p *inProcess) Start(k Kind) (time.Time, error) {
	w := p.make[k]()
	if err := w.Start(); err != nil {
		return time.Time{}, err
	}
	p.mu.Lock()
	p.running[k] = w
	p.mu.Unlock()
	return time.Now(), nil
}

func (p *inProcess) Stop(k Kind) {
	p.mu.Lock()
	w := p.running[k]
	delete(p.running, k)
	p.mu.Unlock()
	if w != nil {
		w.Stop()
	}
}

func (p *inProcess) RSS(Kind) int64   { return 0 }
func (p *inProcess) CPU(Kind) float64 { return 0 }

// A few reminders of each path through the real runner on the dev server:
// every one delivered once, the lag timed from the worker's StartedTime,
// the histories read and classified; then a steady run, and a catch-up
// that restarts its worker.
func TestRunnerEndToEnd(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	queues := map[Kind]string{Naive: s.TaskQueue + "-naive", Lean: s.TaskQueue + "-lean", Full: s.TaskQueue}
	noop := NewSendingNoop(email.NewSender(email.Options{APIKey: testenv.MailAPIKey, BaseURL: s.Mail.URL(), FromEmail: "r@bench.example"}))
	bare := func(k Kind) func() sdkworker.Worker {
		return func() sdkworker.Worker {
			w := sdkworker.New(s.Temporal, queues[k], worker.SDKOptions(worker.Options{}))
			RegisterBare(w, noop)
			return w
		}
	}
	workers := &inProcess{running: map[Kind]sdkworker.Worker{}, make: map[Kind]func() sdkworker.Worker{
		Naive: bare(Naive), Lean: bare(Lean),
		Full: func() sdkworker.Worker { return worker.New(s.Temporal, s.TaskQueue, s.Activities, worker.Options{}) },
	}}
	for _, k := range []Kind{Naive, Lean, Full} {
		_, err := workers.Start(k)
		require.NoError(t, err)
		t.Cleanup(func() { workers.Stop(k) })
	}
	r := &Runner{
		Temporal: s.Temporal, Namespace: "default", Starter: s.Starter, Mirror: s.Mirror, Mail: s.Mail,
		Queues: queues, Workers: workers, RunID: testenv.ID(t, "r"), Fanout: 5, Concurrency: 10,
		IdleGap: 200 * time.Millisecond,
		// A shared test machine may be slow: a lead for 6 starts a second,
		// and any slack will do (this test is about the mechanics).
		startRates: map[Kind]float64{Naive: 6, Lean: 6, Full: 6},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 12
	for _, tc := range []struct {
		kind    Kind
		events  int
		actions int
	}{
		{Naive, 16, 3}, // start, timer, activity
		{Lean, 11, 3},  // start, timer, the local activity's marker
		{Full, 0, 0},   // whatever the reminder workflow records today
	} {
		res := r.Burst(ctx, tc.kind, n)
		require.Empty(t, res.Invalid, "%s: %+v", tc.kind, res)
		require.Equal(t, n, res.Delivered, tc.kind)
		require.Zero(t, res.Lost, tc.kind)
		require.Zero(t, res.Duplicates, tc.kind)
		require.Positive(t, res.ScheduleRate, tc.kind)
		require.Positive(t, res.Slack, tc.kind)
		require.NotNil(t, res.Drain, tc.kind)
		require.GreaterOrEqual(t, res.Lag.P50, time.Duration(0), "the notify starts at or after its due time (%s)", tc.kind)
		require.GreaterOrEqual(t, res.Drain.P99, res.Drain.P50, tc.kind)
		require.NotNil(t, res.Actions, tc.kind)
		require.NotNil(t, res.CPU.Worker, tc.kind)
		require.Nil(t, res.CPU.Server, "no server pid known: not reported (%s)", tc.kind)
		if tc.events > 0 {
			require.Equal(t, tc.events, res.HistoryEvents, tc.kind)
			require.Equal(t, tc.actions, res.Actions.Total, tc.kind)
		} else {
			require.Positive(t, res.HistoryEvents)
			require.GreaterOrEqual(t, res.Actions.Total, 3, "a start, a timer and a send at the least")
		}
	}

	res := r.Steady(ctx, Lean, n, 10)
	require.Empty(t, res.Invalid, "%+v", res)
	require.Equal(t, n, res.Delivered)
	require.Equal(t, 10.0, res.Rate)
	require.Positive(t, res.Lag.P99)
	require.NotNil(t, res.Drain, "a steady reminder drains from its own due time")
	require.Equal(t, res.Lag.P99, res.Drain.P99)
	require.Nil(t, res.Accepted, "the instant provider: the baselines send nothing")

	// With a provider, the baselines pay it too, and their deliveries and
	// duplicates are read from the sink's journal, as the full path's.
	r.UseProvider(sink.Profile{Name: "slowish", Median: 300 * time.Millisecond})
	res = r.Burst(ctx, Naive, n)
	require.Empty(t, res.Invalid, "%+v", res)
	require.Equal(t, "slowish", res.Provider)
	require.Equal(t, n, res.Delivered)
	require.Zero(t, res.Duplicates)
	require.NotNil(t, res.Accepted)
	require.GreaterOrEqual(t, res.Accepted.P50, 300*time.Millisecond, "accepted after the provider's latency")
	r.UseProvider(sink.Instant())

	res = r.Catchup(ctx, Naive, n)
	require.Empty(t, res.Invalid, "%+v", res)
	require.Equal(t, n, res.Delivered)
	require.NotNil(t, res.Drain)
	require.Positive(t, res.Drain.P50, "timed from the restarted worker's first poll")
	require.Equal(t, 16, res.HistoryEvents, "scheduled while the worker ran, as in production: its timer was set before the outage")
}
