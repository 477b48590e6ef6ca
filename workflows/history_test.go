package workflows_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/worker"
	"github.com/shipnotify/shipnotify/workflows"
)

// ReminderHistoryEvents pins a delivered reminder's history length: a bare
// "timer then one activity" workflow takes 16 events; ours adds one, the
// search-attribute upsert that marks it sent. Every event costs the engine
// throughput, so growing this number must be a decision.
const ReminderHistoryEvents = 17

func eventTypes(h *historypb.History) []string {
	var out []string
	for _, ev := range h.GetEvents() {
		out = append(out, ev.GetEventType().String())
	}
	return out
}

// runReminder schedules one email reminder due a second from now (so it
// sleeps on a timer), waits for its workflow and returns its history.
func runReminder(t *testing.T, s *testenv.Stack) (*historypb.History, workflows.ReminderResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := s.Update(t, time.Now().Add(time.Second), reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, results[0].WorkflowID, "").Get(ctx, &res))
	return testenv.History(t, s.Temporal, results[0].WorkflowID), res, results[0].WorkflowID
}

func TestDeliveredReminderHistoryIsLean(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	h, res, id := runReminder(t, s)
	require.Equal(t, reminder.Sent, res.State)
	require.Equal(t, ReminderHistoryEvents, len(h.GetEvents()), "history events: %v", eventTypes(h))
	testenv.RecordHistory(t, s.Temporal, id, "sent")
}

func TestFailedReminderHistory(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	s.Mail.Fail(sink.Answer{Status: 400})
	_, res, id := runReminder(t, s)
	require.Equal(t, reminder.Failed, res.State)
	testenv.RecordHistory(t, s.Temporal, id, "failed-escalation-beside")
}

// Recorded histories of every path replay against today's workflow code; a
// nondeterministic change to it fails here.
func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories; run the tests with SHIPNOTIFY_RECORD_HISTORIES=1")
	logger := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			replayer, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
				DataConverter:    testenv.Codec(t).DataConverter(),
				FailureConverter: testenv.Codec(t).FailureConverter(),
			})
			require.NoError(t, err)
			worker.RegisterWorkflows(replayer)
			require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(logger, f))
		})
	}
}
