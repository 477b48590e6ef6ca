package workflows_test

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/worker"
	"github.com/shipnotify/shipnotify/workflows"
)

var updateHistories = flag.Bool("update-histories", false, "rewrite testdata/histories from fresh runs on the dev server")

// ReminderHistoryEvents pins a delivered reminder's history length: a bare
// "timer then one activity" workflow takes 16 events; ours adds one, the
// search-attribute upsert that marks it sent. Every event costs the engine
// throughput, so growing this number must be a decision.
const ReminderHistoryEvents = 17

func history(t *testing.T, s *testenv.Stack, workflowID string) *historypb.History {
	t.Helper()
	ctx := context.Background()
	iter := s.Temporal.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	return h
}

func eventTypes(h *historypb.History) []string {
	var out []string
	for _, ev := range h.GetEvents() {
		out = append(out, ev.GetEventType().String())
	}
	return out
}

// runReminder schedules one email reminder due a second from now (so it
// sleeps on a timer), waits for its workflow and returns its history.
func runReminder(t *testing.T, s *testenv.Stack) (*historypb.History, workflows.ReminderResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := s.Update(t, time.Now().Add(time.Second), reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, results[0].WorkflowID, "").Get(ctx, &res))
	return history(t, s, results[0].WorkflowID), res
}

func saveHistory(t *testing.T, name string, h *historypb.History) {
	t.Helper()
	if !*updateHistories {
		return
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("testdata", "histories", name), b, 0o644))
}

func TestDeliveredReminderHistoryIsLean(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	h, res := runReminder(t, s)
	require.Equal(t, reminder.Sent, res.State)
	require.Equal(t, ReminderHistoryEvents, len(h.GetEvents()), "history events: %v", eventTypes(h))
	saveHistory(t, "sent.json", h)
}

func TestFailedReminderHistory(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	s.Mail.Fail(sink.Answer{Status: 400})
	h, res := runReminder(t, s)
	require.Equal(t, reminder.Failed, res.State)
	saveHistory(t, "failed.json", h)
}

// Recorded histories of every path replay against today's workflow code; a
// nondeterministic change to it fails here.
func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories; run the tests with -update-histories")
	logger := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			replayer := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(replayer)
			require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(logger, f))
		})
	}
}
