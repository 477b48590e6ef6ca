package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/starter"
)

// The product from outside, as an operator runs it: the shipnotify binary
// schedules an update (twice) and runs the worker, which is SIGKILLed
// between two waves of deliveries and started again. Every subscriber gets
// exactly one delivery under its own key, and every webhook verifies with
// the official Standard Webhooks library.
func TestEndToEndThroughTheBinary(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	bin := testenv.Binary(t)
	worker := testenv.StartProcess(t, s.Env(), bin, "worker")

	now := time.Now()
	var subs []any
	for i := range 12 {
		due := now.Add(2 * time.Second) // the first wave
		if i%2 == 1 {
			due = now.Add(12 * time.Second) // the second, after the kill
		}
		sub := map[string]any{"id": fmt.Sprintf("sub-%02d", i), "due_at": due.UTC().Format(time.RFC3339Nano)}
		if i%3 == 0 {
			sub["channel"], sub["url"], sub["secret"] = "webhook", s.Hooks.URL()+"/in", s.HookSecret
		} else {
			sub["channel"], sub["email"] = "email", fmt.Sprintf("sub-%02d@customer.example", i)
		}
		subs = append(subs, sub)
	}
	doc, err := json.Marshal(map[string]any{
		"shipment_id": testenv.ID(t, "SHP"), "update_id": "window-1", "kind": "delivery_window",
		"message":     map[string]any{"subject": "Delivery window opens soon", "text": "Dock 4."},
		"subscribers": subs,
	})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "update.json")
	require.NoError(t, os.WriteFile(file, doc, 0o600))

	schedule := func() []starter.Result {
		t.Helper()
		cmd := exec.Command(bin, "schedule", "-f", file)
		cmd.Env = s.Env()
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		require.NoError(t, cmd.Run(), errOut.String())
		var results []starter.Result
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var r starter.Result
			require.NoError(t, json.Unmarshal([]byte(line), &r))
			results = append(results, r)
		}
		return results
	}
	first := schedule()
	require.Len(t, first, len(subs))
	again := schedule()
	for i := range again {
		require.Equal(t, starter.Scheduled, first[i].Status)
		require.Equal(t, starter.AlreadyScheduled, again[i].Status)
		require.Equal(t, first[i].DeliveryKey, again[i].DeliveryKey)
	}

	// The first wave is delivered and recorded; nothing is in flight.
	ctx := context.Background()
	require.Eventually(t, func() bool {
		var sent int
		return s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE status = 'sent'`).Scan(&sent) == nil &&
			sent == len(subs)/2
	}, time.Minute, 20*time.Millisecond, worker.Log())
	worker.Kill()
	worker.Start()

	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	delivered := map[string]int{}
	for _, r := range first {
		var res struct{ State string }
		require.NoError(t, s.Temporal.GetWorkflow(wctx, r.WorkflowID, "").Get(wctx, &res), r.ReminderID)
		require.Equal(t, "sent", res.State, r.ReminderID)
	}
	for _, m := range s.Mail.Mails() {
		delivered[m.CustomArgs["delivery_key"]]++
	}
	for _, h := range s.Hooks.Hooks() {
		delivered[h.ID]++
	}
	require.Len(t, delivered, len(subs), "distinct keys equal subscribers")
	for _, r := range first {
		require.Equal(t, 1, delivered[r.DeliveryKey], "no duplicates: %s", r.ReminderID)
	}
	require.Zero(t, s.Hooks.Rejected(), "every webhook verified with the official library")
	require.Equal(t, len(s.Hooks.Hooks()), s.Hooks.Requests())
}
