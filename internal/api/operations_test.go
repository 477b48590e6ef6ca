package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// approvalUpdate is an update of four email subscribers that waits for
// approval, its window four days out.
func approvalUpdate(t *testing.T, shipment string, window time.Time) map[string]any {
	subs := []any{}
	for _, id := range []string{"a", "b", "c", "d"} {
		subs = append(subs, map[string]any{"id": id, "channel": "email", "email": id + "@customer.example", "remind_before": "72h"})
	}
	return map[string]any{
		"shipment_id": shipment, "update_id": "window-1", "kind": "delivery_window",
		"window_start": window.Format(time.RFC3339),
		"message":      map[string]any{"subject": "Delivery window opens in 3 days", "text": "Dock 4."},
		"approval":     map[string]any{"required": true},
		"escalation":   map[string]any{"email": "lead@shipper.example"},
		"subscribers":  subs,
	}
}

func outcomes(t *testing.T, r response) []api.Outcome {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var o api.Outcomes
	r.decode(t, &o)
	return o.Outcomes
}

// Approve, reject, reschedule and cancel over HTTP, each answering with the
// per-reminder outcomes the CLI prints, and their failures: unknown ids 404,
// nothing to decide or no window 409, bad bodies 422, a finished reminder
// refused. Who acted is the key's name, or the by given with it.
func TestOperations(t *testing.T) {
	t.Parallel()
	e := setup(t)
	shipment := testenv.ID(t, "SHP")
	window := time.Now().Add(96 * time.Hour).UTC().Truncate(time.Second)
	resp := e.do(t, "POST", "/v1/updates", "tracker", approvalUpdate(t, shipment, window))
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	base := "/v1/shipments/" + shipment + "/updates/window-1"
	id := func(sub string) string { return reminder.ID("", shipment, "window-1", sub) }

	// Approve one reminder, with a by: the trail records it and the key.
	outs := outcomes(t, e.do(t, "POST", base+"/reminders/a/approve", "approver",
		map[string]any{"by": "ops-lead", "reason": "customer confirmed"}))
	require.Equal(t, []api.Outcome{{ReminderID: id("a"), Status: starter.StatusApproved, State: reminder.Scheduled}}, outs)
	// Again (a retry whose answer was lost): already approved, and by whom.
	outs = outcomes(t, e.do(t, "POST", base+"/reminders/a/approve", "approver", nil))
	require.Equal(t, starter.StatusAlreadyApproved, outs[0].Status)
	require.Equal(t, "ops-lead", outs[0].DecidedBy)

	// Reject one, without a body: by is the key's name.
	outs = outcomes(t, e.do(t, "POST", base+"/reminders/b/reject", "approver", nil))
	require.Equal(t, []api.Outcome{{ReminderID: id("b"), Status: starter.StatusRejected, State: reminder.Cancelled}}, outs)
	// Approve the update: the rest are approved; a says it was already,
	// and b that it was rejected (by whom), so nothing changes for them.
	outs = outcomes(t, e.do(t, "POST", base+"/approve", "approver", map[string]any{"reason": "all clear"}))
	require.Len(t, outs, 4)
	want := map[string]string{id("a"): starter.StatusAlreadyApproved, id("b"): starter.StatusRefused,
		id("c"): starter.StatusApproved, id("d"): starter.StatusApproved}
	for _, o := range outs {
		require.Equal(t, want[o.ReminderID], o.Status, "%+v", o)
	}
	require.Equal(t, "approver", outs[1].DecidedBy)
	require.Contains(t, outs[1].Error, "rejected already")
	// Rejecting the update now: b is already rejected, the others refuse
	// (approved already), and nothing changes.
	outs = outcomes(t, e.do(t, "POST", base+"/reject", "approver", nil))
	require.Len(t, outs, 4)
	for _, o := range outs {
		want := starter.StatusRefused
		if o.ReminderID == id("b") {
			want = starter.StatusAlreadyRejected
		}
		require.Equal(t, want, o.Status, "%+v", o)
		require.NotEmpty(t, o.DecidedBy)
	}
	// An update none of whose reminders needed approval has nothing to decide.
	plain := approvalUpdate(t, shipment+"-P", window)
	plain["approval"] = map[string]any{"required": false}
	resp = e.do(t, "POST", "/v1/updates", "tracker", plain)
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	resp = e.do(t, "POST", "/v1/shipments/"+shipment+"-P/updates/window-1/reject", "approver", nil)
	require.Equal(t, http.StatusConflict, resp.status)
	require.Equal(t, api.TypeNothingToDecide, resp.problem(t).Type)
	for _, path := range []string{"/v1/shipments/" + shipment + "/updates/nope/approve", base + "/reminders/nope/reject"} {
		resp = e.do(t, "POST", path, "approver", nil)
		require.Equal(t, http.StatusNotFound, resp.status, path)
		resp.problem(t)
	}

	// Reschedule one reminder.
	due := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	outs = outcomes(t, e.do(t, "POST", base+"/reminders/a/reschedule", "operator",
		map[string]any{"due_at": due.Format(time.RFC3339), "reason": "dock moved"}))
	require.Equal(t, starter.StatusRescheduled, outs[0].Status, outs[0].Error)
	require.True(t, due.Equal(*outs[0].DueAt))
	require.Equal(t, reminder.DeliveryKey(id("a"), "a", due), outs[0].DeliveryKey)
	// A cancelled reminder refuses.
	outs = outcomes(t, e.do(t, "POST", base+"/reminders/b/reschedule", "operator", map[string]any{"due_at": due.Format(time.RFC3339)}))
	require.Equal(t, starter.StatusRefused, outs[0].Status)

	// Move the window by an hour: the pending reminders move from their
	// first-requested due time (a's own move is undone), the finished one
	// refuses.
	outs = outcomes(t, e.do(t, "POST", base+"/reschedule", "operator",
		map[string]any{"window_start": window.Add(time.Hour).Format(time.RFC3339)}))
	require.Len(t, outs, 4)
	for _, o := range outs {
		if o.ReminderID == id("b") {
			require.Equal(t, starter.StatusRefused, o.Status)
			continue
		}
		require.Equal(t, starter.StatusRescheduled, o.Status, o.Error)
		require.True(t, window.Add(time.Hour-72*time.Hour).Equal(*o.DueAt), "%s", o.DueAt)
	}

	// Bad bodies: 422 naming the field, and nothing changes.
	for _, tc := range []struct {
		path  string
		body  any
		field string
		want  expectation
	}{
		{base + "/reminders/a/reschedule", map[string]any{"due_at": "tomorrow"}, "due_at", malformed},
		{base + "/reminders/a/reschedule", nil, "", violating},
		{base + "/reminders/a/reschedule", `{"due_at":"2027-01-15T08:00:00Z","Reason":"x"}`, "Reason", violating},
		{base + "/reminders/a/reschedule", `{"due_at":"2027-01-15T08:00:00Z","due_at":"2027-01-16T08:00:00Z"}`, "due_at", malformed},
		{base + "/reminders/a/reschedule", `{"due_at":42}`, "due_at", violating},
		{base + "/reminders/a/reschedule", `{"due_at":`, "", malformed},
		{base + "/reschedule", map[string]any{}, "window_start", violating},
		// Out of range is bad input, as it is on schedule: never a 200 refused.
		{base + "/reminders/a/reschedule", map[string]any{"due_at": time.Now().AddDate(0, 0, 800).UTC().Format(time.RFC3339)}, "due_at", conforming},
		{base + "/reminders/a/reschedule", map[string]any{"due_at": time.Now().AddDate(0, 0, -40).UTC().Format(time.RFC3339)}, "due_at", conforming},
		{base + "/reschedule", map[string]any{"window_start": time.Now().AddDate(0, 0, 1200).UTC().Format(time.RFC3339)}, "window_start", conforming},
		{base + "/reminders/a/approve", map[string]any{"by": "mallory\u202e"}, "by", malformed},
		{"/v1/shipments/" + shipment + "/cancel", map[string]any{"reason": "x\x00y"}, "reason", malformed},
	} {
		before := e.mirrorCount(t)
		resp := e.send(t, request{method: "POST", path: tc.path, key: "admin", body: tc.body, expect: tc.want})
		require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%v: %s", tc.body, resp.body)
		p := resp.problem(t)
		require.Equal(t, api.TypeInvalidRequest, p.Type)
		require.Equal(t, tc.field, p.Field, "%v", tc.body)
		require.Equal(t, before, e.mirrorCount(t))
	}
	resp = e.do(t, "POST", base+"/reminders/nope/reschedule", "operator", map[string]any{"due_at": due.Format(time.RFC3339)})
	require.Equal(t, http.StatusNotFound, resp.status)
	resp = e.do(t, "POST", "/v1/shipments/"+shipment+"/updates/nope/reschedule", "operator", map[string]any{"window_start": due.Format(time.RFC3339)})
	require.Equal(t, http.StatusNotFound, resp.status)

	// An update without a window cannot move one.
	u := e.update(t)
	u["shipment_id"], u["update_id"] = shipment, "eta-1"
	u["subscribers"] = u["subscribers"].([]any)[2:]
	delete(u, "window_start")
	require.Equal(t, http.StatusCreated, e.do(t, "POST", "/v1/updates", "tracker", u).status)
	resp = e.do(t, "POST", "/v1/shipments/"+shipment+"/updates/eta-1/reschedule", "operator", map[string]any{"window_start": due.Format(time.RFC3339)})
	require.Equal(t, http.StatusConflict, resp.status)
	require.Equal(t, api.TypeNoWindow, resp.problem(t).Type)

	// Reject a whole update.
	second := approvalUpdate(t, shipment, window)
	second["update_id"], second["subscribers"] = "window-2", second["subscribers"].([]any)[:1]
	require.Equal(t, http.StatusCreated, e.do(t, "POST", "/v1/updates", "tracker", second).status)
	outs = outcomes(t, e.do(t, "POST", "/v1/shipments/"+shipment+"/updates/window-2/reject", "approver", map[string]any{"reason": "wrong consignee"}))
	require.Equal(t, []api.Outcome{{ReminderID: reminder.ID("", shipment, "window-2", "a"), Status: starter.StatusRejected, State: reminder.Cancelled}}, outs)

	// Cancel the shipment: the pending reminders end cancelled, the
	// rejected ones were already.
	outs = outcomes(t, e.do(t, "POST", "/v1/shipments/"+shipment+"/cancel", "operator", map[string]any{"reason": "order withdrawn"}))
	require.Len(t, outs, 6)
	got := map[string]string{}
	for _, o := range outs {
		got[o.ReminderID] = o.Status
	}
	require.Equal(t, map[string]string{
		id("a"): starter.StatusCancelled, id("b"): starter.StatusAlreadyCancelled,
		id("c"): starter.StatusCancelled, id("d"): starter.StatusCancelled,
		reminder.ID("", shipment, "eta-1", "consignee-hook"): starter.StatusCancelled,
		reminder.ID("", shipment, "window-2", "a"):           starter.StatusAlreadyCancelled,
	}, got)
	outs = outcomes(t, e.do(t, "POST", "/v1/shipments/"+shipment+"/cancel", "operator", nil))
	require.Equal(t, starter.StatusAlreadyCancelled, outs[0].Status, "cancelling twice is harmless")
	resp = e.do(t, "POST", "/v1/shipments/NOPE-"+shipment+"/cancel", "operator", nil)
	require.Equal(t, http.StatusNotFound, resp.status)

	// The audit trail names who acted: the by given, or the key's name,
	// and the key apart.
	var view api.ReminderView
	e.do(t, "GET", base+"/reminders/a", "reader", nil).decode(t, &view)
	by, key := map[string]any{}, map[string]any{}
	for _, ev := range view.Events {
		by[ev.Type], key[ev.Type] = ev.Detail["by"], ev.Detail["key"]
	}
	require.Equal(t, map[string]any{
		"scheduled": nil, "approved": "ops-lead", "rescheduled": "operator", "cancelled": "operator",
	}, by, fmt.Sprintf("%+v", view.Events))
	require.Equal(t, map[string]any{
		"scheduled": "tracker", "approved": "approver", "rescheduled": "operator", "cancelled": "operator",
	}, key, fmt.Sprintf("%+v", view.Events))
}

// A by that imitates a key ("alice (key admin)") is recorded as the words
// it is: every event the operations write through a real worker (a
// decision, a reschedule, a cancel) carries the acting key's name as key
// and the caller's words, exactly, as by; so does the live decision.
func TestAByThatImitatesAKeyStaysWords(t *testing.T) {
	t.Parallel()
	e := setup(t)
	shipment := testenv.ID(t, "SHP")
	window := time.Now().Add(96 * time.Hour).UTC().Truncate(time.Second)
	resp := e.do(t, "POST", "/v1/updates", "tracker", approvalUpdate(t, shipment, window))
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	base := "/v1/shipments/" + shipment + "/updates/window-1/reminders/a"
	const words = "alice (key admin)"

	outs := outcomes(t, e.do(t, "POST", base+"/approve", "approver", map[string]any{"by": words, "reason": "checked"}))
	require.Equal(t, starter.StatusApproved, outs[0].Status, outs[0].Error)
	var view api.ReminderView
	e.do(t, "GET", base, "reader", nil).decode(t, &view)
	require.NotNil(t, view.Live, "the workflow answers its status query")
	require.NotNil(t, view.Live.Approval.Decision)
	require.Equal(t, words, view.Live.Approval.Decision.By)
	require.Equal(t, "approver", view.Live.Approval.Decision.Key)

	due := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	outs = outcomes(t, e.do(t, "POST", base+"/reschedule", "operator", map[string]any{"due_at": due.Format(time.RFC3339), "by": words}))
	require.Equal(t, starter.StatusRescheduled, outs[0].Status, outs[0].Error)
	outs = outcomes(t, e.do(t, "POST", "/v1/shipments/"+shipment+"/cancel", "admin", map[string]any{"by": words}))
	require.Len(t, outs, 4)

	events, err := e.Mirror.Events(t.Context(), reminder.ID("", shipment, "window-1", "a"))
	require.NoError(t, err)
	got := map[string][2]any{}
	for _, ev := range events {
		got[ev.Type] = [2]any{ev.Detail["by"], ev.Detail["key"]}
	}
	require.Equal(t, map[string][2]any{
		"scheduled":   {nil, "tracker"}, // the key that scheduled it: approvers see who asked
		"approved":    {words, "approver"},
		"rescheduled": {words, "operator"},
		"cancelled":   {words, "admin"},
	}, got, fmt.Sprintf("%+v", events))
}

// With no worker on the task queue, a decision and a reschedule answer
// 504, each reminder's outcome no_answer (the document's status, which
// the contract check holds the answer to), and nothing changes.
func TestAChangeNoWorkflowAnswersIs504NoAnswer(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	e.Starter.UpdateWait = 2 * time.Second
	shipment := testenv.ID(t, "SHP")
	window := time.Now().Add(96 * time.Hour).UTC().Truncate(time.Second)
	resp := e.do(t, "POST", "/v1/updates", "tracker", approvalUpdate(t, shipment, window))
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	base := "/v1/shipments/" + shipment + "/updates/window-1"
	for _, tc := range []struct {
		path, key string
		body      any
	}{
		{base + "/reminders/a/approve", "approver", nil},
		{base + "/approve", "approver", nil},
		{base + "/reminders/a/reschedule", "operator", map[string]any{"due_at": window.Add(-48 * time.Hour).Format(time.RFC3339)}},
	} {
		resp := e.do(t, "POST", tc.path, tc.key, tc.body)
		require.Equal(t, http.StatusGatewayTimeout, resp.status, "%s: %s", tc.path, resp.body)
		p := resp.problem(t)
		require.NotEmpty(t, p.Outcomes, tc.path)
		for _, o := range p.Outcomes {
			require.Equal(t, starter.StatusNoAnswer, o.Status, "%s: %+v", tc.path, o)
		}
	}
	row, err := e.Mirror.Get(context.Background(), reminder.ID("", shipment, "window-1", "a"))
	require.NoError(t, err)
	require.Equal(t, reminder.AwaitingApproval, row.State, "nothing changed")
}

// A decision its workflow accepted and had not finished when the
// starter's wait ended (its mirror write held by a lock past the 60 s wait,
// as a stalled PostgreSQL would hold it) answers 504 unfinished, the
// reminder's outcome accepted: it has not moved yet, and it lands in the
// mirror and the workflow alike once the write goes through. A reminder
// the answer called accepted is never left unchanged.
func TestAnAcceptedChangeNotFinishedIs504Unfinished(t *testing.T) {
	t.Parallel()
	e := setup(t)
	shipment := testenv.ID(t, "SHP")
	window := time.Now().Add(96 * time.Hour).UTC().Truncate(time.Second)
	resp := e.do(t, "POST", "/v1/updates", "tracker", approvalUpdate(t, shipment, window))
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	id := reminder.ID("", shipment, "window-1", "a")

	ctx := context.Background()
	tx, err := e.DB.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE reminder_events IN SHARE ROW EXCLUSIVE MODE`)
	require.NoError(t, err)
	resp = e.do(t, "POST", "/v1/shipments/"+shipment+"/updates/window-1/reminders/a/approve", "approver", nil)
	require.Equal(t, http.StatusGatewayTimeout, resp.status, "%s", resp.body)
	p := resp.problem(t)
	require.Equal(t, api.TypeUnfinished, p.Type)
	require.Equal(t, []api.Outcome{{ReminderID: id, Status: starter.StatusAccepted, State: reminder.AwaitingApproval,
		Error: starter.ErrAccepted.Error()}}, p.Outcomes)
	row, err := e.Mirror.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, reminder.AwaitingApproval, row.State, "not moved yet")

	require.NoError(t, tx.Rollback(ctx))
	require.Eventually(t, func() bool {
		row, err := e.Mirror.Get(ctx, id)
		if err != nil || row.State != reminder.Scheduled {
			return false
		}
		v, err := e.Temporal.QueryWorkflow(ctx, row.WorkflowID, "", workflows.QueryStatus)
		var st workflows.Status
		return err == nil && v.Get(&st) == nil && st.State == reminder.Scheduled
	}, time.Minute, 100*time.Millisecond, "the accepted approval lands in the mirror and the workflow")
	outs := outcomes(t, e.do(t, "POST", "/v1/shipments/"+shipment+"/updates/window-1/reminders/a/approve", "approver", nil))
	require.Equal(t, starter.StatusAlreadyApproved, outs[0].Status)
}
