package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// statusEvent is a status event as the tracker's receiver took it.
type statusEvent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		ReminderID string `json:"reminder_id"`
		Sequence   int    `json:"sequence"`
		State      string `json:"state"`
	} `json:"data"`
}

// endpointsFile writes a status endpoints file naming one endpoint.
func endpointsFile(t *testing.T, line string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "status-endpoints")
	require.NoError(t, os.WriteFile(path, []byte("# the tracker\n"+line+"\n"), 0o600))
	return path
}

// Two replicas of the real binary's serve, as the runtime role, relay the
// status events of reminders a worker sends (an email SendGrid reports
// delivered, a webhook its receiver took) to the tracker's endpoint: each
// event arrives once, signed so the official library verifies it, and
// each reminder's in order: scheduled, sent, delivered.
func TestServeRelaysStatusEventsOnceFromTwoReplicas(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{Events: true, RuntimeRole: true})
	secret := webhook.NewSecret()
	tracker, err := sink.StartWebhook("", secret)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tracker.Close() })
	file := endpointsFile(t, "tracker "+tracker.URL()+"/status "+secret+" events=scheduled,sent,delivered,undeliverable")
	_, key, err := api.NewKey("tracker", []api.Scope{api.ScopeRead})
	require.NoError(t, err)
	var serves []*testenv.Process
	for range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		serves = append(serves, testenv.StartProcess(t, s.Env("SHIPNOTIFY_API_ADDR="+addr, "SHIPNOTIFY_API_KEYS="+key.Line(),
			"SHIPNOTIFY_STATUS_ENDPOINTS_FILE="+file), testenv.Binary(t), "serve"))
	}
	// An endpoint gets the events written once serve has registered it.
	for _, serve := range serves {
		require.Eventually(t, func() bool { return strings.Contains(serve.Log(), `"msg":"relaying status events"`) },
			time.Minute, 20*time.Millisecond, "serve registers the endpoint: %s", serve.Log())
	}

	u := s.Update(t, time.Now(), reminder.Email, reminder.Email, reminder.Webhook)
	results, err := s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	require.Len(t, results, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hooks, err := tracker.Wait(ctx, func(hs []sink.Hook) bool { return len(hs) >= 9 })
	if err != nil {
		var got []string
		for _, h := range tracker.Hooks() {
			got = append(got, string(h.Body))
		}
		t.Fatalf("the tracker got %d of 9 events:\n%s\nserve's logs:\n%s\n%s", len(got), strings.Join(got, "\n"), serves[0].Log(), serves[1].Log())
	}
	byReminder := map[string][]string{}
	seen := map[string]bool{}
	for _, h := range hooks {
		var ev statusEvent
		require.NoError(t, json.Unmarshal(h.Body, &ev))
		require.False(t, seen[ev.ID], "event %s arrived twice", ev.ID)
		seen[ev.ID] = true
		require.Equal(t, len(byReminder[ev.Data.ReminderID])+1, ev.Data.Sequence, "in order")
		byReminder[ev.Data.ReminderID] = append(byReminder[ev.Data.ReminderID], ev.Type)
	}
	require.Len(t, byReminder, 3)
	for id, types := range byReminder {
		require.Equal(t, []string{"reminder.scheduled", "reminder.sent", "reminder.delivered"}, types, id)
	}
	require.Zero(t, tracker.Rejected(), "every signature verified")
	for _, serve := range serves {
		require.NotContains(t, serve.Log(), secret)
		serve.Stop()
	}
	require.Len(t, tracker.Hooks(), 9, "nothing more")
}

// `shipnotify outbox list` shows the endpoints and the events owed, and
// `outbox retry` puts an event given up back (with its id) and enables an
// endpoint a 410 disabled; what it is given wrong is a usage error.
func TestOutboxListAndRetry(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	ctx := context.Background()
	require.NoError(t, s.Mirror.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{
		{Name: "tracker", Events: reminder.StatusTypes, URL: "https://tracker.example/status"}}))
	u := s.Update(t, time.Now().Add(time.Hour), reminder.Email, reminder.Email)
	rems, err := u.Plan(reminder.PlanOptions{Now: time.Now()})
	require.NoError(t, err)
	_, err = s.Mirror.ScheduleUpdate(ctx, u, []mirror.NewReminder{
		{Reminder: rems[0], WorkflowID: "reminder/" + rems[0].ID}, {Reminder: rems[1], WorkflowID: "reminder/" + rems[1].ID}})
	require.NoError(t, err)
	var givenUp int64
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `
UPDATE status_outbox SET status = 'given_up', attempts = 9, last_error = 'the receiver answered 503'
 WHERE reminder_id = $1 RETURNING id`, rems[0].ID).Scan(&givenUp))
	_, err = s.DB.Pool.Exec(ctx, `UPDATE status_endpoints SET disabled_at = now(), disabled_reason = 'answered 410 Gone'`)
	require.NoError(t, err)

	c := stackCLI(s)
	code, out, errOut := c.run(t, "", "outbox", "list")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "tracker")
	require.Contains(t, out, "disabled: answered 410 Gone")
	require.Contains(t, out, "given_up")
	require.Contains(t, out, "the receiver answered 503")
	require.Contains(t, out, rems[1].ID, "pending too")

	code, out, errOut = c.run(t, "", "outbox", "list", "--status", "given_up", "--json")
	require.Equal(t, 0, code, errOut)
	var listed struct {
		Endpoints []mirror.StatusEndpointState `json:"endpoints"`
		Events    []mirror.OutboxRow           `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed.Events, 1)
	require.Equal(t, givenUp, listed.Events[0].ID)
	require.Equal(t, rems[0].ID, listed.Events[0].ReminderID)
	require.EqualValues(t, 1, listed.Endpoints[0].Pending)
	require.EqualValues(t, 1, listed.Endpoints[0].GivenUp)

	code, out, errOut = c.run(t, "", "outbox", "retry", "--id", fmt.Sprint(givenUp))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "1 given up put back")
	rows, err := s.Mirror.OutboxRows(ctx, mirror.OutboxFilter{ReminderID: rems[0].ID})
	require.NoError(t, err)
	require.Equal(t, "pending", rows[0].Status)
	require.Equal(t, listed.Events[0].EventID, rows[0].EventID, "the same event, the same id")

	code, out, errOut = c.run(t, "", "outbox", "retry", "--endpoint", "tracker")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "endpoint tracker enabled again")
	eps, err := s.Mirror.StatusEndpoints(ctx)
	require.NoError(t, err)
	require.Nil(t, eps[0].DisabledAt)

	for _, args := range [][]string{
		{"outbox"}, {"outbox", "frob"}, {"outbox", "retry"}, {"outbox", "retry", "--id", "1", "--endpoint", "tracker"},
		{"outbox", "retry", "--id", "x"}, {"outbox", "retry", "--endpoint", "nobody"}, {"outbox", "list", "--status", "lost"},
	} {
		code, _, errOut := c.run(t, "", args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.NotEmpty(t, strings.TrimSpace(errOut), args)
	}
}
