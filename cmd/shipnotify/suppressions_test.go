package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// An operator sees an address's suppression (its hash, never the address)
// and lifts it with `suppressions remove`: a reminder to it ends
// suppressed before, and is sent after. Lifting it again says it is not
// suppressed.
func TestSuppressionsListAndRemove(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	c := stackCLI(s)
	ctx := context.Background()
	const addr = "leaver@customer.example"
	send := func() reminder.State {
		u := s.Update(t, time.Now(), reminder.Email)
		u.Subscribers[0].Email = addr
		res, err := s.Starter.Schedule(ctx, u)
		require.NoError(t, err)
		return waitResult(t, s, res[0].WorkflowID).State
	}
	require.Equal(t, reminder.Sent, send())
	rows, err := s.Mirror.List(ctx, mirror.Filter{AnyTenant: true})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	// What serve's one-click link does.
	found, err := s.Mirror.SuppressAddressOf(ctx, rows[0].ID, "one_click")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, reminder.Suppressed, send())

	code, stdout, stderr := c.run(t, "", "suppressions", "list")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "one_click")
	require.Contains(t, stdout, rows[0].ID)
	require.NotContains(t, stdout, addr, "the list shows a hash, not the address")
	code, stdout, stderr = c.run(t, "", "suppressions", "list", "--json", "--address", strings.ToUpper(addr))
	require.Equal(t, 0, code, stderr)
	var got api.Suppression
	require.NoError(t, json.Unmarshal([]byte(stdout), &got))
	require.Equal(t, reminder.DefaultTenantName, got.Tenant)

	code, stdout, stderr = c.run(t, "", "suppressions", "remove", "--address", addr, "--by", "alice", "--reason", "asked to resubscribe")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"status":"lifted"`)
	require.Equal(t, reminder.Sent, send(), "lifted, the next reminder is sent")

	code, _, stderr = c.run(t, "", "suppressions", "remove", "--address", addr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--address: the address is not suppressed")
	code, stdout, _ = c.run(t, "", "suppressions", "list")
	require.Equal(t, 0, code)
	require.NotContains(t, stdout, "one_click", "a lifted suppression is not listed")
	code, stdout, _ = c.run(t, "", "suppressions", "list", "--lifted")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "by alice: asked to resubscribe")
}

// waitResult waits for a reminder's workflow to end and returns how.
func waitResult(t *testing.T, s *testenv.Stack, workflowID string) workflows.ReminderResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, workflowID, "").Get(ctx, &res), workflowID)
	return res
}
