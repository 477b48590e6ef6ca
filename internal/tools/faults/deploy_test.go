package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// Deploys and hung databases do not turn sends into duplicates.

// The worker is stopped (SIGTERM, as a deploy does) while the provider is
// still answering sends it has already accepted. The worker lets them
// finish and records them before it exits, so the next worker sends none
// of them again.
func TestWorkerStoppedWhileTheProviderHoldsItsAnswer(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	s.Mail.SetLatency(3 * time.Second)
	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	results, err := s.Starter.Schedule(context.Background(), emailUpdate(t, 8, time.Now().Add(time.Second), 0))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Eventually(t, func() bool { return s.Mail.InFlight() >= 4 }, time.Minute, 10*time.Millisecond, worker.Log())
	worker.Stop()
	require.Zero(t, s.Mail.InFlight(), "the worker waited for the calls in flight")
	worker.Start()

	waitAll(t, s, results, 2*time.Minute)
	require.Zero(t, audit(t, s, results), "each key sent once\n%s", worker.Log())
	_, err = s.Mail.Wait(ctx, func(m []sink.Mail) bool { return len(m) == len(results) })
	require.NoError(t, err)
}

// The record of accepted sends is blocked (a lock holds the audit trail)
// when the worker is stopped. The record outlives the attempt's
// cancellation under its own timeout; the provider's message id was
// heartbeated the moment it was accepted (a local first attempt, which
// cannot heartbeat, gives its record up in time to hand the id over in its
// failure), so when the lock is gone the next worker records the sends
// instead of making them again.
func TestWorkerStoppedWhileARecordIsBlocked(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	ctx := context.Background()
	results, err := s.Starter.Schedule(ctx, emailUpdate(t, 5, time.Now().Add(2*time.Second), 0))
	require.NoError(t, err)

	tx, err := s.DB.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE reminder_events IN SHARE ROW EXCLUSIVE MODE`)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = s.Mail.Wait(wctx, func(m []sink.Mail) bool { return len(m) == len(results) })
	require.NoError(t, err, worker.Log())
	// Every record is waiting on the lock.
	require.Eventually(t, func() bool {
		waiting, err := s.DB.WaitersBehind(ctx, tx, "UPDATE deliveries")
		return err == nil && waiting == len(results)
	}, 30*time.Second, 50*time.Millisecond)

	worker.Stop()
	require.NoError(t, tx.Rollback(ctx))
	worker.Start()

	waitAll(t, s, results, 2*time.Minute)
	require.Zero(t, audit(t, s, results), "each key sent once\n%s", worker.Log())
	require.Len(t, s.Mail.Mails(), len(results))
}
