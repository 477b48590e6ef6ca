// Package faults holds shipnotify's fault-injection tests: real processes
// (the worker binary, a file-backed Temporal dev server, PostgreSQL) killed
// or stopped mid-run and started again. Each compares what the mail sink
// received with the mirror: nothing lost, nothing sent twice except in the
// one window that cannot be closed, which is counted and reported.
package faults

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
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
// mirror row sent under the delivered key. It returns the keys delivered
// more than once.
func audit(t *testing.T, s *testenv.Stack, results []starter.Result) (twice []string) {
	t.Helper()
	ctx := context.Background()
	delivered := map[string]int{}
	for _, m := range s.Mail.Mails() {
		delivered[m.CustomArgs["delivery_key"]]++
	}
	for _, r := range results {
		require.GreaterOrEqual(t, delivered[r.DeliveryKey], 1, "lost: %s", r.ReminderID)
		if delivered[r.DeliveryKey] > 1 {
			twice = append(twice, r.DeliveryKey)
		}
		row, err := s.Mirror.Get(ctx, r.ReminderID)
		require.NoError(t, err)
		// Delivered once the provider's events reached serve.
		require.Contains(t, []reminder.State{reminder.Sent, reminder.Delivered}, row.State, r.ReminderID)
		var status string
		require.NoError(t, s.DB.Pool.QueryRow(ctx, `SELECT status FROM deliveries WHERE delivery_key = $1`, r.DeliveryKey).Scan(&status))
		require.Equal(t, "sent", status, r.ReminderID)
	}
	require.Len(t, delivered, len(results), "nothing but the scheduled reminders was sent")
	return twice
}

// recordedKeys are the delivery keys the mirror records as sent.
func recordedKeys(t *testing.T, s *testenv.Stack) map[string]bool {
	t.Helper()
	rows, err := s.DB.Pool.Query(context.Background(), `SELECT delivery_key FROM deliveries WHERE status = 'sent'`)
	require.NoError(t, err)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	recorded := map[string]bool{}
	for _, k := range keys {
		recorded[k] = true
	}
	return recorded
}

// The worker is killed (SIGKILL) while notifications are in flight, then
// restarted: every reminder is delivered. A call in flight at the kill may
// have reached the provider, so its key is never sent again on a guess.
//   - With SendGrid's Event Webhook (serve's handler, fed by the mail sink),
//     the provider's event for each key the dead worker had sent settles
//     it as sent: nothing is sent twice.
//   - Without it (SHIPNOTIFY_UNCONFIRMED_SEND_WAIT=0s, as operators without
//     the Event Webhook set it), a key the provider accepted and the dead
//     worker had not recorded is sent again under the same key: the
//     window, counted at the kill, that a receiver deduplicates on.
func TestWorkerKilledMidFlight(t *testing.T) {
	t.Parallel()
	for _, events := range []bool{true, false} {
		t.Run(map[bool]string{true: "event webhook on", false: "event webhook off"}[events], func(t *testing.T) {
			t.Parallel()
			s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true, Events: events})
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
			// No call arrives after the kill. The provider goes on to accept
			// what it was answering, as a real one would; once it has, its
			// accepted keys and the mirror's recorded ones are final until the
			// restart.
			atKill, inFlight := s.Mail.DeliveryKeys()
			_, err = s.Mail.Wait(ctx, func([]sink.Mail) bool { return s.Mail.InFlight() == 0 })
			require.NoError(t, err)
			accepted, stillInFlight := s.Mail.DeliveryKeys()
			require.Empty(t, stillInFlight)
			for k := range inFlight {
				require.Contains(t, accepted, k, "a call in flight at the kill is accepted")
			}
			recorded := recordedKeys(t, s)
			// Keys the provider accepted whose delivery the dead worker had
			// not recorded.
			window := map[string]bool{}
			for k := range accepted {
				if !recorded[k] {
					window[k] = true
				}
			}
			worker.Start()

			// In-flight activities are retried once their 30 s attempt
			// times out, and their claims' leases lapse.
			waitAll(t, s, results, 3*time.Minute)
			twice := audit(t, s, results)
			t.Logf("worker SIGKILL, event webhook %v: %d keys accepted and %d in flight at the kill, %d recorded; window %d keys; %d keys sent twice",
				events, len(atKill), len(inFlight), len(recorded), len(window), len(twice))
			if events {
				require.Empty(t, twice, "the provider's events settled every key the dead worker had sent")
				require.Positive(t, len(window), "the kill fell between sends and their records")
				return
			}
			for _, k := range twice {
				require.True(t, window[k], "key %s was sent twice but was not in the window at the kill (recorded: %v)", k, recorded[k])
			}
		})
	}
}

// Reminders come due while no worker runs, and are sent once, when a
// worker returns: both the seed article's backfill (due before any worker
// ran) and a timer that a worker had started and that fired while every
// worker was gone.
func TestWorkerDownWhileRemindersComeDue(t *testing.T) {
	t.Parallel()
	t.Run("due before any worker ran", func(t *testing.T) {
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
		require.Empty(t, audit(t, s, results), worker.Log())
	})
	t.Run("timer started, then every worker gone", func(t *testing.T) {
		t.Parallel()
		s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
		worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
		due := time.Now().Add(10 * time.Second)
		results, err := s.Starter.Schedule(context.Background(), emailUpdate(t, 10, due, 0))
		require.NoError(t, err)
		// The worker ran each workflow to its durable timer.
		for _, r := range results {
			require.Eventually(t, func() bool { return hasEvent(s, r.WorkflowID, enums.EVENT_TYPE_TIMER_STARTED) },
				time.Until(due), 50*time.Millisecond, "%s sleeps on a timer\n%s", r.ReminderID, worker.Log())
		}
		worker.Kill()
		require.True(t, time.Now().Before(due), "every worker is gone before the reminders are due")
		// The timers fire on the server while no worker runs.
		for _, r := range results {
			require.Eventually(t, func() bool { return hasEvent(s, r.WorkflowID, enums.EVENT_TYPE_TIMER_FIRED) },
				time.Until(due)+30*time.Second, 100*time.Millisecond, "%s: timer fired", r.ReminderID)
		}
		require.Zero(t, s.Mail.Requests(), "nothing is sent while no worker runs")

		worker.Start()
		waitAll(t, s, results, time.Minute)
		require.Empty(t, audit(t, s, results), worker.Log())
	})
}

// hasEvent reports whether the workflow's history holds an event of type
// e (false when the history cannot be read).
func hasEvent(s *testenv.Stack, workflowID string, e enums.EventType) bool {
	iter := s.Temporal.GetWorkflowHistory(context.Background(), workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return false
		}
		if ev.GetEventType() == e {
			return true
		}
	}
	return false
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
	twice := audit(t, s, results)
	t.Logf("dev server SIGKILL: %d delivered before the kill, %d keys sent twice", before, len(twice))
	require.Empty(t, twice, "the claim makes a retried activity find its key sent")
}

// PostgreSQL is stopped while sends are in flight and more reminders come
// due: a send the provider accepted is recorded, not repeated, when it
// returns; nothing is sent without a claim; every reminder is delivered
// once.
func TestPostgresStoppedMidRun(t *testing.T) {
	t.Parallel()
	pg := testenv.StartCluster(t)
	s := testenv.NewStackWith(t, testenv.StackOptions{DatabaseURL: pg.URL})
	s.Mail.SetLatency(time.Second)
	u := emailUpdate(t, 20, time.Now().Add(time.Second), 150*time.Millisecond)
	results, err := s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err = s.Mail.Wait(ctx, func(m []sink.Mail) bool { return len(m) >= 3 && s.Mail.InFlight() >= 2 })
	require.NoError(t, err)
	accepted, inFlight := s.Mail.DeliveryKeys()
	pg.Stop()

	// While it is down, the calls in flight are accepted and cannot be
	// recorded; once they are, what the provider holds is all that was
	// claimed before the stop.
	_, err = s.Mail.Wait(ctx, func([]sink.Mail) bool { return s.Mail.InFlight() == 0 })
	require.NoError(t, err)
	claimed, _ := s.Mail.DeliveryKeys()
	// Every reminder not delivered fails its notify attempt against the
	// stopped database (a send in flight at the stop, after its attempt's
	// record retries): each workflow has ended or is retrying its activity.
	require.Eventually(t, func() bool {
		for _, r := range results {
			if !endedOrRetrying(ctx, s, r.WorkflowID) {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "every reminder tried against the stopped database")
	sent, _ := s.Mail.DeliveryKeys()
	require.Equal(t, claimed, sent, "nothing is sent without a claim")
	require.Less(t, len(sent), len(results), "some reminders wait for the database")
	restarted := time.Now()
	pg.Start()

	waitAll(t, s, results, 2*time.Minute)
	require.Empty(t, audit(t, s, results))
	for _, r := range results {
		events, err := s.Mirror.Events(context.Background(), r.ReminderID)
		require.NoError(t, err)
		require.Len(t, events, 2, "scheduled and sent, once each")
	}
	// The stop fell between a send and its record: a key in flight at the
	// stop was recorded only once PostgreSQL was back.
	var late int
	for k := range inFlight {
		var finished time.Time
		require.NoError(t, s.DB.Pool.QueryRow(ctx, `SELECT finished_at FROM deliveries WHERE delivery_key = $1`, k).Scan(&finished))
		if finished.After(restarted) {
			late++
		}
	}
	require.Positive(t, late, "no send in flight at the stop was recorded after it")
	t.Logf("PostgreSQL stopped with %d keys accepted and %d in flight (%d of them recorded after the restart); %d of %d keys sent when it returned",
		len(accepted), len(inFlight), late, len(sent), len(results))
}

// endedOrRetrying reports whether a reminder's workflow has ended, or its
// activity has failed at least once and waits for a retry.
func endedOrRetrying(ctx context.Context, s *testenv.Stack, workflowID string) bool {
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return false
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return true
	}
	for _, a := range desc.GetPendingActivities() {
		if a.GetAttempt() > 1 {
			return true
		}
	}
	return false
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
	require.Empty(t, audit(t, s, results))
	require.Equal(t, len(results)+5, s.Mail.Requests(), "five refused calls were retried")
}

// A worker of the releases that made the notify's first attempt a local
// activity is SIGKILLed while that attempt waits on the provider, which then
// accepts the call the dead worker made; today's worker takes the reminder
// over, as after a deploy. The workflow task of the local attempt was lost
// with the worker, so today's takes it again and sends with the regular
// activity; the dead attempt's claim lapses with no record, which is a
// maybe-sent, and the provider's event for the key settles it: sent once.
// (Without the Event Webhook it would be sent again under the same key, the
// window TestWorkerKilledMidFlight counts.)
func TestWorkerKilledDuringTheLocalAttempt(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true, Events: true})
	// Started as that release's starter did, so the worker's pin decides.
	s.Starter.Unleveled = true
	old := testenv.StartProcess(t, s.Env(fastPathWorkerEnv+"=1"), os.Args[0], "-test.run=^$")
	release := s.Mail.Hold()
	defer release()
	results, err := s.Starter.Schedule(context.Background(), emailUpdate(t, 1, time.Now().Add(time.Second), 0))
	require.NoError(t, err)
	r := results[0]

	require.Eventually(t, func() bool { return s.Mail.Held() == 1 }, 30*time.Second, 20*time.Millisecond, old.Log())
	require.False(t, hasEvent(s, r.WorkflowID, enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
		"the call waiting at the provider is the local attempt's")
	old.Kill()
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = s.Mail.Wait(ctx, func(m []sink.Mail) bool { return len(m) == 1 && s.Mail.InFlight() == 0 })
	require.NoError(t, err)
	require.False(t, recordedKeys(t, s)[r.DeliveryKey], "the dead worker never recorded the send it made")

	restarted := time.Now()
	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	waitAll(t, s, results, 2*time.Minute)
	accepted, _ := s.Mail.DeliveryKeys()
	require.Equal(t, 1, accepted[r.DeliveryKey], "sent once: the provider's event settled the dead attempt's send\n%s", worker.Log())
	require.Empty(t, audit(t, s, results))
	require.True(t, hasEvent(s, r.WorkflowID, enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
		"today's notify activity took over from the lost local attempt")
	events, err := s.Mirror.Events(ctx, r.ReminderID)
	require.NoError(t, err)
	var settled bool
	for _, e := range events {
		settled = settled || e.Type == "sent" && e.Detail["settled_by"] != nil
	}
	require.True(t, settled, "recorded from the provider's evidence: %v", events)
	t.Logf("worker SIGKILL during the local attempt: the key was sent %d time(s); settled %s after the restart",
		accepted[r.DeliveryKey], time.Since(restarted).Round(time.Second))
}
