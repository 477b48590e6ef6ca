package engine

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"golang.org/x/sync/errgroup"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

const (
	updates     = 100
	subscribers = 4 // two by email, two by webhook
)

// engineStack is a stack on the engine make test-engine started. It fails
// the test when the variables are missing or the server is not that engine:
// the run must not pass by skipping, nor on the dev server.
func engineStack(t *testing.T) *testenv.Stack {
	t.Helper()
	if os.Getenv("SHIPNOTIFY_ENGINE_TEST") != "1" {
		t.Skip("runs on the Temporal server users deploy: make test-engine")
	}
	for _, k := range []string{"TEMPORAL_ADDRESS", "TEST_DATABASE_URL"} {
		if os.Getenv(k) == "" {
			t.Fatalf("SHIPNOTIFY_ENGINE_TEST=1 but %s is not set: run it with `make test-engine`", k)
		}
	}
	want, err := os.ReadFile("../../../deploy/temporal/VERSION")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := testenv.TemporalAt(t, os.Getenv("TEMPORAL_ADDRESS"))
	info, err := c.WorkflowService().GetClusterInfo(ctx, &workflowservice.GetClusterInfoRequest{})
	require.NoError(t, err)
	require.Equal(t, "postgres12", info.GetPersistenceStore(), "the engine keeps its state in PostgreSQL, as compose runs it")
	require.Equal(t, "postgres12", info.GetVisibilityStore(), "the engine answers list queries from SQL visibility")
	require.Equal(t, strings.TrimSpace(string(want)), info.GetServerVersion(), "the engine is the version compose pins")
	return testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true, RuntimeRole: true})
}

// Two worker processes share the task queue on the real engine. 100 updates
// of four subscribers each (email and webhook) are scheduled twice; one
// worker is SIGKILLed while deliveries are in flight and started again.
// Every delivery key is delivered once; a key may go out twice only if its
// claim was held, unrecorded, when the worker died (the documented window),
// and every one that did is reported.
func TestEngineTwoWorkersOneKilled(t *testing.T) {
	s := engineStack(t)
	s.Mail.SetLatency(300 * time.Millisecond) // some calls are in flight at any moment
	bin := testenv.Binary(t)
	killed := testenv.StartProcess(t, s.Env(), bin, "worker")
	testenv.StartProcess(t, s.Env(), bin, "worker")
	ctx := context.Background()

	// Due over 30 s, from after scheduling is done.
	first := time.Now().Add(20 * time.Second)
	var batch []reminder.Update
	for i := range updates {
		batch = append(batch, s.Update(t, first.Add(time.Duration(i)*300*time.Millisecond),
			reminder.Email, reminder.Email, reminder.Webhook, reminder.Webhook))
	}
	began := time.Now()
	results := scheduleAll(t, s, batch)
	require.Len(t, results, updates*subscribers)
	for _, r := range results {
		require.Equal(t, starter.Scheduled, r.Status, r.ReminderID)
	}
	scheduled := time.Since(began)
	again := scheduleAll(t, s, batch)
	for i, r := range again {
		require.Equal(t, starter.AlreadyScheduled, r.Status, "scheduling again starts nothing: %s", r.ReminderID)
		require.Equal(t, results[i].DeliveryKey, r.DeliveryKey, r.ReminderID)
	}

	// Kill one worker once a quarter is delivered and mail is in flight.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	_, err := s.Mail.Wait(wctx, func(m []sink.Mail) bool {
		return len(m)+len(s.Hooks.Hooks()) >= len(results)/4 && s.Mail.InFlight() > 0
	})
	require.NoError(t, err, "deliveries under way\n%s", killed.Log())
	killed.Kill()
	deliveredAtKill := len(s.Mail.Mails()) + len(s.Hooks.Hooks())
	mailInFlight := s.Mail.InFlight()
	// The window: keys claimed and not recorded as the worker died. The dead
	// worker's claims stay held until its attempts time out, so this read
	// holds all of them (and the live worker's, which it goes on to record).
	window := heldClaims(t, s)
	killed.Start()

	for _, r := range results {
		var res workflows.ReminderResult
		require.NoError(t, s.Temporal.GetWorkflow(wctx, r.WorkflowID, "").Get(wctx, &res), r.ReminderID)
		require.Equal(t, reminder.Sent, res.State, r.ReminderID)
	}
	took := time.Since(began)

	delivered := map[string]int{}
	for _, m := range s.Mail.Mails() {
		delivered[m.CustomArgs["delivery_key"]]++
	}
	for _, h := range s.Hooks.Hooks() {
		delivered[h.ID]++
	}
	require.Len(t, delivered, len(results), "every key delivered, and nothing else")
	var twice []string
	for _, r := range results {
		require.GreaterOrEqual(t, delivered[r.DeliveryKey], 1, "lost: %s", r.ReminderID)
		if delivered[r.DeliveryKey] > 1 {
			twice = append(twice, r.DeliveryKey)
			require.True(t, window[r.DeliveryKey], "%s was delivered %d times but its claim was not held at the kill",
				r.ReminderID, delivered[r.DeliveryKey])
		}
	}
	require.Zero(t, s.Hooks.Rejected(), "every webhook verified with the official library")
	var sent, remindersSent int
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status = 'sent'`).Scan(&sent))
	// An email stays sent (no Event Webhook here); a webhook's 2xx is its delivery.
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `
SELECT count(*) FROM reminders
 WHERE (channel = 'email' AND state = 'sent') OR (channel = 'webhook' AND state = 'delivered')`).Scan(&remindersSent))
	require.Equal(t, len(results), sent, "the mirror records every delivery once")
	require.Equal(t, len(results), remindersSent)

	// SQL visibility answers our search attributes.
	query := `ShipmentId = "` + batch[0].ShipmentID + `" AND ReminderState = "sent"`
	require.Eventually(t, func() bool {
		resp, err := s.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query})
		return err == nil && len(resp.GetExecutions()) == subscribers
	}, 30*time.Second, 200*time.Millisecond, "visibility lists the update's reminders by search attribute")

	t.Logf("engine: %d reminders on two workers in %s (scheduled in %s); one SIGKILLed with %d delivered and %d mails in flight; "+
		"%d claims held at the kill; %d keys delivered twice %v",
		len(results), took.Round(time.Second), scheduled.Round(time.Second), deliveredAtKill, mailInFlight, len(window), len(twice), twice)
}

// scheduleAll schedules the updates, eight at a time, and returns their
// results in order.
func scheduleAll(t *testing.T, s *testenv.Stack, batch []reminder.Update) []starter.Result {
	t.Helper()
	out := make([][]starter.Result, len(batch))
	var g errgroup.Group
	g.SetLimit(8)
	for i, u := range batch {
		g.Go(func() error {
			var err error
			out[i], err = s.Starter.Schedule(context.Background(), u)
			return err
		})
	}
	require.NoError(t, g.Wait())
	var all []starter.Result
	for _, rs := range out {
		all = append(all, rs...)
	}
	return all
}

// heldClaims are the delivery keys claimed and not yet recorded.
func heldClaims(t *testing.T, s *testenv.Stack) map[string]bool {
	t.Helper()
	rows, err := s.DB.Pool.Query(context.Background(), `SELECT delivery_key FROM deliveries WHERE status = 'sending'`)
	require.NoError(t, err)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	held := map[string]bool{}
	for _, k := range keys {
		held[k] = true
	}
	return held
}
