package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// reconcile --verify, as cron runs it: a dry run reports and fails, a real
// run repairs and succeeds, and the next run finds nothing.
func TestReconcileVerify(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	c := stackCLI(s)
	ctx := context.Background()
	results, err := s.Starter.Schedule(ctx, s.Update(t, time.Now().Add(48*time.Hour), reminder.Email))
	require.NoError(t, err)
	r := results[0]
	require.NoError(t, s.Temporal.TerminateWorkflow(ctx, r.WorkflowID, "", "an operator, by hand"))
	state := func() reminder.State {
		row, err := s.Mirror.Get(ctx, r.ReminderID)
		require.NoError(t, err)
		return row.State
	}
	divergence := func(stdout string) starter.Divergence {
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Len(t, lines, 1, stdout)
		var d starter.Divergence
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &d))
		require.Equal(t, starter.DivergenceWorkflowTerminated, d.Kind)
		require.Equal(t, r.ReminderID, d.ReminderID)
		return d
	}

	code, stdout, stderr := c.run(t, "", "reconcile", "--verify", "--dry-run", "--grace", "0s")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "1 of 1 divergence left unrepaired")
	require.Empty(t, divergence(stdout).Repair)
	require.Equal(t, reminder.Scheduled, state(), "a dry run repairs nothing")

	code, stdout, stderr = c.run(t, "", "reconcile", "--verify", "--grace", "0s")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, divergence(stdout).Repair, "cancelled")
	require.Contains(t, stderr, `"msg":"verified"`)
	require.Equal(t, reminder.Cancelled, state())

	code, stdout, stderr = c.run(t, "", "reconcile", "--verify", "--grace", "0s")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stdout, "nothing left to find")

	code, _, stderr = c.run(t, "", "reconcile", "--dry-run")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--verify")
}
