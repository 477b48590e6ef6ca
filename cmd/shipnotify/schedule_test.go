package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
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

// On a namespace never set up, schedule refuses before writing: exit
// status 1, one line naming the namespace and `shipnotify setup`, and
// nothing in PostgreSQL or Temporal.
func TestScheduleOnANamespaceWithoutTheAttributesWritesNothing(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ns, tc := testenv.Namespace(t)
	queue := testenv.TaskQueue(t)
	c := cmdline{env: map[string]string{
		"TEMPORAL_ADDRESS":      testenv.TemporalAddress(t),
		"TEMPORAL_NAMESPACE":    ns,
		"DATABASE_URL":          db.URL,
		"SHIPNOTIFY_TASK_QUEUE": queue,
		"TEMPORAL_CONFIG_FILE":  "/nonexistent",
		"SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys,
	}}
	u := testenv.ValidUpdate(time.Now())
	u["subscribers"] = u["subscribers"].([]any)[:2] // the two emails: no webhook to look up
	code, stdout, stderr := c.run(t, updateJSON(t, u), "schedule")
	require.Equal(t, 1, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, `the Temporal namespace "`+ns+`" does not know shipnotify's search attribute`)
	require.Contains(t, stderr, "run `shipnotify setup` (it waits until the server accepts them)")
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)

	ctx := context.Background()
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM updates) + (SELECT count(*) FROM reminders) + (SELECT count(*) FROM reminder_events)`).Scan(&n))
	require.Zero(t, n, "nothing written to the mirror")

	// Nothing written to Temporal: the namespace, the test's own, holds
	// only the workflow started now, once visibility shows that one.
	probe := testenv.ID(t, "probe")
	_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: probe, TaskQueue: queue}, "VisibilityProbe")
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), probe, "", "test over") })
	var ids []string
	require.Eventually(t, func() bool {
		ids = nil
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns})
		require.NoError(t, err)
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		return slices.Contains(ids, probe)
	}, 30*time.Second, 100*time.Millisecond, "visibility never showed the probe")
	require.Equal(t, []string{probe}, ids, "no workflow started")
}

// A schedule whose starts the server refused for want of the attributes
// (rows written, setup run a moment before) says so once, with what
// became of the rows, and keeps every other failure.
func TestAStartRefusalIsToldOnce(t *testing.T) {
	t.Parallel()
	refusal := func(id string) error {
		return fmt.Errorf("error starting workflow for reminder %s: %w", id, &starter.SearchAttributesError{Namespace: "default", Attribute: "DueAt",
			Err: serviceerror.NewInvalidArgument("Namespace default has no mapping defined for search attribute DueAt")})
	}
	other := errors.New("error starting workflow for reminder r3: unavailable")
	err := startError(errors.Join(errors.Join(refusal("r1"), refusal("r2"), other), nil), "scheduling the same update again")
	require.ErrorIs(t, err, starter.ErrSearchAttributesUnknown)
	require.ErrorIs(t, err, other)
	require.Equal(t, 1, strings.Count(err.Error(), "run `shipnotify setup`"), err.Error())
	require.Contains(t, err.Error(), "scheduling the same update again starts them")
	require.NotContains(t, err.Error(), "r1", "the refusals are told once, not per reminder")

	require.Equal(t, other, startError(other, "again"))
}
