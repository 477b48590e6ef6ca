// Package faults holds shipnotify's fault-injection tests: real processes
// (the worker binary, a file-backed Temporal dev server, PostgreSQL) killed
// or stopped mid-run and started again. Each compares what the mail sink
// received with the mirror: nothing lost, nothing sent twice except in the
// one window that cannot be closed, which is counted and reported.
package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// emailUpdate is one update with n email subscribers, the i-th due at
// first + i*step.
func emailUpdate(t *testing.T, n int, first time.Time, step time.Duration) reminder.Update {
	u := reminder.Update{
		ShipmentID: testenv.ID(t, "SHP"), UpdateID: "window-1", Kind: "delivery_window",
		Message: reminder.Message{Subject: "Delivery window opens soon", Text: "Dock 4."},
	}
	for i := range n {
		id := fmt.Sprintf("sub-%03d", i)
		u.Subscribers = append(u.Subscribers, reminder.Subscriber{
			ID: id, Channel: reminder.Email, Email: id + "@customer.example", DueAt: first.Add(time.Duration(i) * step),
		})
	}
	return u
}

// waitAll waits for every reminder's workflow and requires it sent.
func waitAll(t *testing.T, s *testenv.Stack, results []starter.Result, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for _, r := range results {
		var res workflows.ReminderResult
		require.NoError(t, s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &res), r.ReminderID)
		require.Equal(t, reminder.Sent, res.State, r.ReminderID)
	}
}

// audit compares the sink with the mirror: every reminder delivered, its
// mirror row sent under the delivered key. It returns how many keys were
// delivered more than once.
func audit(t *testing.T, s *testenv.Stack, results []starter.Result) (duplicates int) {
	t.Helper()
	ctx := context.Background()
	delivered := map[string]int{}
	for _, m := range s.Mail.Mails() {
		delivered[m.CustomArgs["delivery_key"]]++
	}
	for _, r := range results {
		require.GreaterOrEqual(t, delivered[r.DeliveryKey], 1, "lost: %s", r.ReminderID)
		if delivered[r.DeliveryKey] > 1 {
			duplicates++
		}
		row, err := s.Mirror.Get(ctx, r.ReminderID)
		require.NoError(t, err)
		require.Equal(t, reminder.Sent, row.State, r.ReminderID)
		var status string
		require.NoError(t, s.DB.Pool.QueryRow(ctx, `SELECT status FROM deliveries WHERE delivery_key = $1`, r.DeliveryKey).Scan(&status))
		require.Equal(t, "sent", status, r.ReminderID)
	}
	require.Len(t, delivered, len(results), "nothing but the scheduled reminders was sent")
	return duplicates
}

// The worker is killed (SIGKILL) while notifications are in flight, then
// restarted: every reminder is delivered; a key is sent twice only when the
// provider had accepted it as the worker died.
func TestWorkerKilledMidFlight(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	s.Mail.SetLatency(400 * time.Millisecond)
	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	u := emailUpdate(t, 30, time.Now().Add(time.Second), 100*time.Millisecond)
	results, err := s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = s.Mail.Wait(ctx, func(m []sink.Mail) bool { return len(m) >= 5 && s.Mail.InFlight() > 0 })
	require.NoError(t, err, worker.Log())
	worker.Kill()
	// The window that cannot be closed: calls the provider accepted (or is
	// still answering, and will accept) whose delivery the dead worker had
	// not yet recorded.
	inFlight, accepted := s.Mail.InFlight(), len(s.Mail.Mails())
	var recorded int
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status = 'sent'`).Scan(&recorded))
	window := accepted + inFlight - recorded
	worker.Start()

	// In-flight activities are retried once their 30 s attempt times out.
	waitAll(t, s, results, 2*time.Minute)
	dups := audit(t, s, results)
	t.Logf("worker SIGKILL: %d accepted and %d in flight at the kill, %d recorded; window %d; %d keys sent twice",
		accepted, inFlight, recorded, window, dups)
	require.LessOrEqual(t, dups, window, "only deliveries in the window may be sent twice")
}

// The worker is down while reminders come due; when it starts it sends
// them all, once: the seed article's backfill.
func TestWorkerDownWhileRemindersComeDue(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	last := time.Now().Add(time.Second)
	u := emailUpdate(t, 40, last.Add(-time.Second), 25*time.Millisecond)
	results, err := s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	// Every reminder is due before any worker runs.
	require.Eventually(t, func() bool { return time.Now().After(last.Add(time.Second)) }, 10*time.Second, 50*time.Millisecond)
	require.Zero(t, s.Mail.Requests())

	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	waitAll(t, s, results, time.Minute)
	require.Zero(t, audit(t, s, results), worker.Log())
}

// The file-backed Temporal dev server is killed and restarted mid-run: no
// reminder is lost.
func TestTemporalServerKilledMidRun(t *testing.T) {
	t.Parallel()
	server := testenv.StartDevServer(t)
	s := testenv.NewStackWith(t, testenv.StackOptions{TemporalAddress: server.Address})
	u := emailUpdate(t, 20, time.Now().Add(time.Second), 200*time.Millisecond)
	results, err := s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = s.Mail.Wait(ctx, func(m []sink.Mail) bool { return len(m) >= 3 })
	require.NoError(t, err)
	server.Kill()
	before := len(s.Mail.Mails())
	server.Start()
	server.WaitHealthy(t)

	waitAll(t, s, results, 2*time.Minute)
	dups := audit(t, s, results)
	t.Logf("dev server SIGKILL: %d delivered before the kill, %d keys sent twice", before, dups)
	require.Zero(t, dups, "the claim makes a retried activity find its key sent")
}

// PostgreSQL is stopped while reminders come due: the activities fail and
// retry, and when it returns every reminder is delivered once.
func TestPostgresStoppedMidRun(t *testing.T) {
	t.Parallel()
	pg := testenv.StartCluster(t)
	s := testenv.NewStackWith(t, testenv.StackOptions{DatabaseURL: pg.URL})
	u := emailUpdate(t, 15, time.Now().Add(time.Second), 50*time.Millisecond)
	results, err := s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	pg.Stop()

	// Wait until the notify activities have failed against the stopped database.
	require.Eventually(t, func() bool {
		return strings.Count(s.Logs.String(), `"Activity error."`) >= len(results)
	}, time.Minute, 100*time.Millisecond)
	require.Zero(t, s.Mail.Requests(), "nothing is sent without the claim")
	pg.Start()

	waitAll(t, s, results, 2*time.Minute)
	require.Zero(t, audit(t, s, results))
	for _, r := range results {
		events, err := s.Mirror.Events(context.Background(), r.ReminderID)
		require.NoError(t, err)
		require.Len(t, events, 2, "scheduled and sent, once each")
	}
}

// The mail API answers 429 and 5xx for a while: the notifications are
// retried (after SendGrid's reset time) and delivered once.
func TestMailAPIFailingForAWhile(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	reset := fmt.Sprint(time.Now().Add(time.Second).Unix())
	s.Mail.Fail(
		sink.Answer{Status: 429, Headers: map[string]string{"X-RateLimit-Reset": reset}},
		sink.Answer{Status: 500}, sink.Answer{Status: 503}, sink.Answer{Status: 500},
		sink.Answer{Status: 429, Headers: map[string]string{"Retry-After": "1"}},
	)
	results, err := s.Starter.Schedule(context.Background(), emailUpdate(t, 5, time.Now(), 0))
	require.NoError(t, err)
	waitAll(t, s, results, time.Minute)
	require.Zero(t, audit(t, s, results))
	require.Equal(t, len(results)+5, s.Mail.Requests(), "five refused calls were retried")
}
