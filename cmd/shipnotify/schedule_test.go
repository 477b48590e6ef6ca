package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/testenv"
	"github.com/shipnotify/shipnotify/starter"
)

// The same update again answers already_scheduled with the stored values;
// a changed one under the same ids is refused: exit status 1, a message
// naming what differs and what to do instead, and nothing written.
func TestScheduleAChangedUpdateIsRefused(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	c := stackCLI(s)
	u := testenv.ValidUpdate(time.Now())
	u["shipment_id"] = testenv.ID(t, "SHP")
	subs := u["subscribers"].([]any)
	hook := subs[2].(map[string]any)
	hook["url"], hook["secret"] = s.Hooks.URL()+"/in", s.HookSecret
	doc := updateJSON(t, u)

	code, out, errOut := c.run(t, doc, "schedule")
	require.Equal(t, 0, code, errOut)
	var first []starter.Result
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r starter.Result
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		first = append(first, r)
	}
	t.Cleanup(func() {
		for _, r := range first {
			_ = s.Temporal.TerminateWorkflow(t.Context(), r.WorkflowID, "", "test over")
		}
	})

	code, out, errOut = c.run(t, doc, "schedule")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, len(first), strings.Count(out, `"status":"already_scheduled"`))

	u["message"].(map[string]any)["text"] = "Dock 9, 13:00-17:00."
	subs[0].(map[string]any)["remind_before"] = "48h"
	var events int
	require.NoError(t, s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM reminder_events`).Scan(&events))
	code, out, errOut = c.run(t, updateJSON(t, u), "schedule")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "message.text")
	require.Contains(t, errOut, "subscribers[0].due_at")
	require.Contains(t, errOut, "shipnotify reschedule")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %s", errOut)
	var after int
	require.NoError(t, s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM reminder_events`).Scan(&after))
	require.Equal(t, events, after, "nothing written")
}

// --tenant: schedule for a tenant, and find, list and cancel its shipment
// only by naming it; a bad name is refused naming the flag, writing nothing.
func TestTheCLINamesTenants(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	c := stackCLI(s)
	u := testenv.ValidUpdate(time.Now())
	shipment := testenv.ID(t, "SHP")
	u["shipment_id"] = shipment
	u["subscribers"] = u["subscribers"].([]any)[:1]
	doc := updateJSON(t, u)

	code, _, errOut := c.run(t, doc, "schedule", "--tenant", "no good")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--tenant")
	var n int
	require.NoError(t, s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM reminders`).Scan(&n))
	require.Zero(t, n, "nothing written")

	code, out, errOut := c.run(t, doc, "schedule", "--tenant", "acme")
	require.Equal(t, 0, code, errOut)
	var r starter.Result
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &r))
	t.Cleanup(func() { _ = s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over") })
	require.True(t, strings.HasPrefix(r.ReminderID, "acme/"+shipment+"/"), r.ReminderID)

	code, out, errOut = c.run(t, "", "list", "--shipment", shipment, "--tenant", "default")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, r.ReminderID)
	code, out, errOut = c.run(t, "", "list", "--shipment", shipment, "--tenant", "acme")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, r.ReminderID)

	code, _, errOut = c.run(t, "", "cancel", "--shipment", shipment)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no reminders", "the default tenant has no such shipment")
	code, out, errOut = c.run(t, "", "cancel", "--shipment", shipment, "--tenant", "acme")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"status":"cancelled"`)
}
