package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// emailUpdate is an update of n email subscribers all due at due.
func emailUpdate(shipment, update string, n int, due time.Time) map[string]any {
	var subs []any
	for i := range n {
		id := fmt.Sprintf("s%02d", i)
		subs = append(subs, map[string]any{"id": id, "channel": "email", "email": id + "@customer.example", "due_at": due.Format(time.RFC3339Nano)})
	}
	return map[string]any{
		"shipment_id": shipment, "update_id": update, "kind": "eta_changed",
		"message": map[string]any{"subject": "New ETA", "text": "Your shipment arrives later."}, "subscribers": subs,
	}
}

// walk pages through GET /v1/reminders with query, returning every row and
// the number of pages; between pages it runs between(page).
func (e *testEnv) walk(t *testing.T, query url.Values, between func(page int)) ([]api.Reminder, int) {
	t.Helper()
	var rows []api.Reminder
	for page := 1; ; page++ {
		resp := e.do(t, "GET", "/v1/reminders?"+query.Encode(), "reader", nil)
		require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
		var p api.Page
		resp.decode(t, &p)
		rows = append(rows, p.Reminders...)
		if p.NextCursor == "" {
			return rows, page
		}
		require.Len(t, p.Reminders, mustAtoi(t, query.Get("limit")), "only the last page is short")
		query.Set("cursor", p.NextCursor)
		if between != nil {
			between(page)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	var n int
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return n
}

func ids(rows []api.Reminder) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// Keyset pagination: pages in (due_at, id) order, reminders due at one
// instant split across pages in id order, no row twice or missed, and rows
// added before the cursor meanwhile neither repeat nor shift a page (an
// offset would). Filters by shipment, update, state and due window.
func TestListRemindersPageByPage(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	shipment, other := testenv.ID(t, "SHP"), testenv.ID(t, "SHQ")
	t0 := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	awaiting := emailUpdate(other, "burst", 2, t0)
	awaiting["approval"] = map[string]any{"required": true}
	awaiting["escalation"] = map[string]any{"email": "lead@shipper.example"}
	for _, u := range []map[string]any{
		emailUpdate(shipment, "burst", 5, t0),
		emailUpdate(shipment, "later", 4, t0.Add(time.Hour)),
		emailUpdate(shipment, "earlier", 3, t0.Add(-time.Hour)),
		awaiting,
	} {
		require.Equal(t, http.StatusCreated, e.do(t, "POST", "/v1/updates", "tracker", u).status)
	}
	want, err := e.Mirror.List(t.Context(), mirror.Filter{ShipmentID: shipment})
	require.NoError(t, err)
	require.Len(t, want, 12)

	got, pages := e.walk(t, url.Values{"shipment": {shipment}, "limit": {"5"}}, func(page int) {
		if page == 1 {
			// Due before the cursor: a new first row, which must not
			// push a row already seen onto the next page.
			require.Equal(t, http.StatusCreated, e.do(t, "POST", "/v1/updates", "tracker",
				emailUpdate(shipment, "backfill", 1, t0.Add(-2*time.Hour))).status)
		}
	})
	require.Equal(t, 3, pages)
	require.Equal(t, ids(api.RemindersOf(want, opaque.Development())), ids(got), "every row once, in (due_at, id) order")

	// The burst's five reminders share a due time: two at a time, by id.
	got, pages = e.walk(t, url.Values{"shipment": {shipment}, "update": {"burst"}, "limit": {"2"}}, nil)
	require.Equal(t, 3, pages)
	require.Equal(t, []string{"s00", "s01", "s02", "s03", "s04"}, subscriberIDs(got))

	// Due between two times (half-open), over both shipments.
	got, _ = e.walk(t, url.Values{"due_from": {t0.Format(time.RFC3339)}, "due_to": {t0.Add(time.Hour).Format(time.RFC3339)}, "limit": {"3"}}, nil)
	require.Len(t, got, 7)
	for _, r := range got {
		require.True(t, r.DueAt.Equal(t0))
	}

	// By state: the other shipment's reminders await approval; pending
	// takes both waiting states.
	got, _ = e.walk(t, url.Values{"state": {string(reminder.AwaitingApproval)}, "limit": {"10"}}, nil)
	require.Equal(t, []string{reminder.ID("", other, "burst", "s00"), reminder.ID("", other, "burst", "s01")}, ids(got))
	got, _ = e.walk(t, url.Values{"state": {string(reminder.Scheduled)}, "shipment": {other}, "limit": {"10"}}, nil)
	require.Empty(t, got)
	got, _ = e.walk(t, url.Values{"state": {"pending"}, "limit": {"100"}}, nil)
	require.Len(t, got, 15)

	// Bad parameters: 400 naming the parameter.
	for _, tc := range []struct {
		query string
		field string
		want  expectation
	}{
		{"limit=0", "limit", violating},
		{"limit=1001", "limit", violating},
		{"limit=ten", "limit", violating},
		{"state=lost", "state", violating},
		{"shipment=a%2Fb", "shipment", violating},
		{"cursor=bm90IGEgY3Vyc29y", "cursor", conforming},
		{"cursor=%%%", "", malformed},
		{"due_from=next+tuesday", "due_from", conforming},
		{"due_from=2027-01-02&due_to=2027-01-01", "due_to", conforming},
		{"shipment_id=" + shipment, "shipment_id", violating},
		{"shipment=a&shipment=b", "shipment", malformed},
	} {
		resp := e.send(t, request{method: "GET", path: "/v1/reminders?" + tc.query, key: "reader", expect: tc.want})
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", tc.query, resp.body)
		p := resp.problem(t)
		if tc.field != "" {
			require.Equal(t, tc.field, p.Field, tc.query)
			require.Equal(t, api.TypeInvalidParameter, p.Type, tc.query)
		}
	}
}

func subscriberIDs(rows []api.Reminder) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.SubscriberID
	}
	return out
}

// One reminder: its row, its audit trail, its workflow's status and the
// running workflow's own account; in its start delay, before any worker
// ran it, the account its start recorded, saying it waits; without a
// worker to answer, the mirror's account still comes, saying why the live
// one does not; after the workflow ends, its final status.
func TestGetReminder(t *testing.T) {
	t.Parallel()
	e := setup(t, withDelayedStart)
	shipment := testenv.ID(t, "SHP")
	due := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	require.Equal(t, http.StatusCreated, e.do(t, "POST", "/v1/updates", "tracker", emailUpdate(shipment, "eta-1", 1, due)).status)
	path := "/v1/shipments/" + shipment + "/updates/eta-1/reminders/s00"

	var v api.ReminderView
	e.do(t, "GET", path, "reader", nil).decode(t, &v)
	require.Equal(t, reminder.ID("", shipment, "eta-1", "s00"), v.Reminder.ID)
	require.True(t, due.Equal(v.Reminder.DueAt))
	require.Equal(t, []string{"scheduled"}, eventTypes(v.Events))
	require.Equal(t, "running", v.Workflow.Status)
	require.NotEmpty(t, v.Workflow.RunID)
	require.NotNil(t, v.Live, v.LiveError)
	require.Equal(t, reminder.Scheduled, v.Live.State)
	require.True(t, due.Equal(v.Live.DueAt))
	require.Equal(t, v.Reminder.DeliveryKey, v.Live.DeliveryKey)
	require.NotNil(t, v.Live.WaitingUntil, "in its start delay: the engine runs it at its due time")
	require.WithinDuration(t, due, *v.Live.WaitingUntil, time.Second)
	require.Equal(t, 1, v.Live.TransitionCount)
	require.Equal(t, "scheduled", v.Live.Transitions[0].Event)

	resp := e.do(t, "GET", "/v1/shipments/"+shipment+"/updates/eta-1/reminders/nobody", "reader", nil)
	require.Equal(t, http.StatusNotFound, resp.status)
	resp.problem(t)

	// A reschedule wakes it: from then on the workflow answers for itself.
	moved := due.Add(time.Hour)
	outs := outcomes(t, e.do(t, "POST", path+"/reschedule", "operator", map[string]any{"due_at": moved.Format(time.RFC3339)}))
	require.Equal(t, starter.StatusRescheduled, outs[0].Status, outs[0].Error)
	v = api.ReminderView{}
	e.do(t, "GET", path, "reader", nil).decode(t, &v)
	require.NotNil(t, v.Live, v.LiveError)
	require.Nil(t, v.Live.WaitingUntil, "a worker has run it")
	require.True(t, moved.Equal(v.Live.DueAt))
	require.Equal(t, 1, v.Live.Reschedules)

	// No worker: the status query goes unanswered; the rest still comes.
	e.Worker.Stop()
	v = api.ReminderView{}
	e.do(t, "GET", path, "reader", nil).decode(t, &v)
	require.Equal(t, "running", v.Workflow.Status)
	require.Nil(t, v.Live)
	require.Contains(t, v.LiveError, "is a worker running?")

	require.NoError(t, e.Temporal.TerminateWorkflow(t.Context(), v.Reminder.WorkflowID, "", "test"))
	v = api.ReminderView{}
	e.do(t, "GET", path, "reader", nil).decode(t, &v)
	require.Equal(t, "terminated", v.Workflow.Status)
	require.NotNil(t, v.Workflow.CloseTime)
	require.Nil(t, v.Live)
	require.Empty(t, v.LiveError)
}

func eventTypes(events []api.Event) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.Type)
	}
	return slices.Clip(out)
}

// What the mail provider reported after it accepted a reminder reaches the
// reads: the list by the states it leads to, and one reminder with its
// outcome, delivered time and the provider's events on its trail. The
// contract transport checks every answer against openapi.json.
func TestReadsCarryTheProviderOutcome(t *testing.T) {
	t.Parallel()
	e := setup(t)
	shipment := testenv.ID(t, "SHP")
	require.Equal(t, http.StatusCreated, e.do(t, "POST", "/v1/updates", "tracker",
		emailUpdate(shipment, "eta-1", 3, time.Now().Add(time.Second))).status)
	rows, err := e.Mirror.List(t.Context(), mirror.Filter{ShipmentID: shipment})
	require.NoError(t, err)
	require.Len(t, rows, 3)
	for _, r := range rows {
		require.NoError(t, e.Temporal.GetWorkflow(t.Context(), r.WorkflowID, "").Get(t.Context(), nil))
	}
	at := time.Now().UTC().Truncate(time.Second)
	_, err = e.Mirror.ApplyProviderEvents(t.Context(), []mirror.ProviderEvent{
		{ID: shipment + "-1", DeliveryKey: rows[0].DeliveryKey, Outcome: reminder.OutcomeDelivered, At: at},
		{ID: shipment + "-2", DeliveryKey: rows[1].DeliveryKey, Outcome: reminder.OutcomeBounce, At: at, Reason: "550 5.1.1"},
	}, time.Hour)
	require.NoError(t, err)

	byState := func(state reminder.State) []api.Reminder {
		got, _ := e.walk(t, url.Values{"shipment": {shipment}, "state": {string(state)}, "limit": {"10"}}, nil)
		return got
	}
	got := byState(reminder.Delivered)
	require.Equal(t, []string{"s00"}, subscriberIDs(got))
	require.Equal(t, reminder.OutcomeDelivered, got[0].ProviderOutcome)
	require.True(t, at.Equal(*got[0].ProviderOutcomeAt))
	require.True(t, at.Equal(*got[0].DeliveredAt))
	got = byState(reminder.Undeliverable)
	require.Equal(t, []string{"s01"}, subscriberIDs(got))
	require.Equal(t, reminder.OutcomeBounce, got[0].ProviderOutcome)
	require.Nil(t, got[0].DeliveredAt)
	got = byState(reminder.Sent)
	require.Equal(t, []string{"s02"}, subscriberIDs(got))
	require.Empty(t, got[0].ProviderOutcome, "nothing reported yet")
	require.Nil(t, got[0].ProviderOutcomeAt)

	var v api.ReminderView
	e.do(t, "GET", "/v1/shipments/"+shipment+"/updates/eta-1/reminders/s01", "reader", nil).decode(t, &v)
	require.Equal(t, reminder.Undeliverable, v.Reminder.State)
	require.Equal(t, reminder.OutcomeBounce, v.Reminder.ProviderOutcome)
	require.Equal(t, []string{"scheduled", "sent", "provider_bounce"}, eventTypes(v.Events))
	require.Equal(t, "550 5.1.1", v.Events[2].Detail["reason"])
	require.Equal(t, "undeliverable", v.Events[2].Detail["state"])
}

// A path id outside the ids' charset (invalid UTF-8, a NUL, too long)
// names nothing: every route answers 400 naming the parameter, as a bad
// query parameter is, without asking the mirror, and nothing is logged as
// an error. (They reached PostgreSQL, and came back as 500 and 503 with an
// ERROR in the log.)
func TestAPathIDThatIsNoIDNamesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	before := e.mirrorCount(t)
	for field, rq := range map[string]request{
		"subscriber": {method: http.MethodGet, path: "/v1/shipments/S/updates/U/reminders/%ff", key: "reader"},
		"shipment":   {method: http.MethodPost, path: "/v1/shipments/x%00/cancel", key: "operator", body: map[string]any{"reason": "r"}},
		"update":     {method: http.MethodPost, path: "/v1/shipments/S/updates/%00/approve", key: "approver", body: map[string]any{}},
	} {
		rq.expect = violating
		resp := e.send(t, rq)
		require.Equal(t, http.StatusBadRequest, resp.status, "%s %s: %s", rq.method, rq.path, resp.body)
		p := resp.problem(t)
		require.Equal(t, field, p.Field, rq.path)
		require.Contains(t, p.Detail, "not an id", rq.path)
	}
	require.Equal(t, before, e.mirrorCount(t), "nothing written")
	require.NotContains(t, e.logs.String(), `"level":"ERROR"`)
}
