package api_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// Two tenants schedule the same ids, and every route keeps them apart: each
// gets its own reminders, workflows and delivery keys (no 409 that would
// tell one what the other sent), sees only its own, and every read and
// operation on the other's answers 404, as if it did not exist. Only a key
// with admin crosses, by naming the tenant.
func TestEveryRouteKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	shipment := testenv.ID(t, "SHP")
	window := time.Now().Add(96 * time.Hour).UTC().Truncate(time.Second)
	base := "/v1/shipments/" + shipment + "/updates/window-1"

	scheduled := map[string][]api.Result{}
	for _, tenant := range []string{"acme", "globex"} {
		doc := approvalUpdate(t, shipment, window)
		if tenant == "globex" {
			// Another recipient under the same ids: globex's own update,
			// never compared with acme's (no 409 naming the field).
			doc["subscribers"].([]any)[0].(map[string]any)["email"] = "someone-else@customer.example"
		}
		resp := e.do(t, "POST", "/v1/updates", tenant, doc)
		require.Equal(t, http.StatusCreated, resp.status, "%s: %s", tenant, resp.body)
		var rs api.Results
		resp.decode(t, &rs)
		scheduled[tenant] = rs.Results
	}
	acme, globex := scheduled["acme"], scheduled["globex"]
	require.Len(t, acme, 4)
	for i := range acme {
		require.Equal(t, reminder.ID("acme", shipment, "window-1", acme[i].SubscriberID), acme[i].ReminderID)
		require.NotEqual(t, acme[i].ReminderID, globex[i].ReminderID)
		require.NotEqual(t, acme[i].WorkflowID, globex[i].WorkflowID)
		require.NotEqual(t, acme[i].DeliveryKey, globex[i].DeliveryKey)
	}
	// The engine's ShipmentId leads with the tenant, as the ids do.
	for tenant, rs := range scheduled {
		desc, err := e.Temporal.DescribeWorkflowExecution(t.Context(), rs[0].WorkflowID, "")
		require.NoError(t, err)
		var got string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(
			desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()["ShipmentId"], &got))
		require.Equal(t, tenant+"/"+shipment, got)
	}
	// A resubmission is still recognised within a tenant.
	again := e.do(t, "POST", "/v1/updates", "acme", approvalUpdate(t, shipment, window))
	require.Equal(t, http.StatusOK, again.status, "%s", again.body)

	list := func(key, query string) []api.Reminder {
		t.Helper()
		resp := e.do(t, "GET", "/v1/reminders?shipment="+shipment+query, key, nil)
		require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
		var page api.Page
		resp.decode(t, &page)
		return page.Reminders
	}
	ids := func(rows []api.Reminder) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	resultIDs := func(rs ...[]api.Result) []string {
		var out []string
		for _, r := range slices.Concat(rs...) {
			out = append(out, r.ReminderID)
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, resultIDs(acme), ids(list("acme", "")))
	require.Equal(t, resultIDs(globex), ids(list("globex", "")))
	require.Empty(t, list("reader", ""), "the default tenant scheduled nothing here")
	for _, r := range list("acme", "") {
		require.Equal(t, "acme", r.Tenant)
	}
	// An admin lists every tenant, or the one it names.
	require.Equal(t, resultIDs(acme, globex), ids(list("admin", "")))
	require.Equal(t, resultIDs(globex), ids(list("admin", "&tenant=globex")))

	// Reads and operations of another tenant's update: 404, and nothing moves.
	notFound := func(method, path, key string, body any) {
		t.Helper()
		resp := e.do(t, method, path, key, body)
		require.Equal(t, http.StatusNotFound, resp.status, "%s %s as %s: %s", method, path, key, resp.body)
	}
	later := window.Add(24 * time.Hour).Format(time.RFC3339)
	for _, key := range []string{"reader", "operator", "approver"} {
		switch key {
		case "reader":
			notFound("GET", base+"/reminders/a", key, nil)
		case "operator":
			notFound("POST", "/v1/shipments/"+shipment+"/cancel", key, map[string]any{})
			notFound("POST", base+"/reschedule", key, map[string]any{"window_start": later})
			notFound("POST", base+"/reminders/a/reschedule", key, map[string]any{"due_at": later})
		case "approver":
			notFound("POST", base+"/approve", key, map[string]any{})
			notFound("POST", base+"/reject", key, map[string]any{})
			notFound("POST", base+"/reminders/a/approve", key, map[string]any{})
			notFound("POST", base+"/reminders/a/reject", key, map[string]any{})
		}
	}
	// globex's own reads and operations reach globex's reminders only.
	var view api.ReminderView
	resp := e.do(t, "GET", base+"/reminders/a", "globex", nil)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	resp.decode(t, &view)
	require.Equal(t, globex[0].ReminderID, view.Reminder.ID)
	outs := outcomes(t, e.do(t, "POST", base+"/reminders/a/approve", "globex", map[string]any{}))
	require.Equal(t, []api.Outcome{{ReminderID: globex[0].ReminderID, Status: starter.StatusApproved, State: reminder.Scheduled}}, outs)
	outs = outcomes(t, e.do(t, "POST", base+"/reject", "globex", map[string]any{}))
	require.Len(t, outs, 4, "three rejected, and a saying it was approved")
	for _, o := range outs {
		require.Equal(t, "globex", reminder.TenantOf(o.ReminderID))
	}
	outs = outcomes(t, e.do(t, "POST", "/v1/shipments/"+shipment+"/cancel", "globex", map[string]any{}))
	require.Len(t, outs, 4)
	for _, o := range outs {
		require.Equal(t, "globex", reminder.TenantOf(o.ReminderID))
	}

	// acme's reminders never moved: all four still await approval, due as asked.
	rows := list("acme", "")
	require.Len(t, rows, 4)
	for i, r := range rows {
		require.Equal(t, reminder.AwaitingApproval, r.State, r.ID)
		require.True(t, r.DueAt.Equal(acme[i].DueAt), r.ID)
	}
	// A key without admin may not name another tenant; an admin reaches it.
	resp = e.do(t, "GET", base+"/reminders/a?tenant=acme", "globex", nil)
	require.Equal(t, http.StatusForbidden, resp.status, "%s", resp.body)
	require.Contains(t, resp.problem(t).Detail, "admin")
	resp = e.do(t, "GET", base+"/reminders/a?tenant=acme", "admin", nil)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	resp.decode(t, &view)
	require.Equal(t, acme[0].ReminderID, view.Reminder.ID)
	outs = outcomes(t, e.do(t, "POST", base+"/reminders/b/approve?tenant=acme", "admin", map[string]any{}))
	require.Equal(t, acme[1].ReminderID, outs[0].ReminderID)
}
