package workflows_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/worker"
	"github.com/shipnotify/shipnotify/workflows"
)

// ReminderHistoryEvents pins a delivered reminder's history length, as the
// product starts it by default: at once, to sleep on a timer. The start
// and its workflow task (4), the timer (2), the workflow task its firing
// brings (3), the notify activity (3), the workflow task its completion
// brings (3), the search-attribute upsert that marks it sent, and
// completion: 17, in three workflow tasks. Started at the current level, it
// asks GetVersion for no change (a reminder started before levels pays two
// more, a marker and the SDK's TemporalChangeVersion upsert). A bare "timer
// then one activity" workflow takes 16.
//
// DelayedReminderHistoryEvents is the same reminder started with a start
// delay to its due time (SHIPNOTIFY_DELAYED_START=true): the engine runs its
// first workflow task then, so it records no timer and no task for its
// firing: 12, in two workflow tasks. Every event costs the engine
// throughput, so growing either number must be a decision.
const (
	ReminderHistoryEvents        = 17
	DelayedReminderHistoryEvents = 12
)

func eventTypes(h *historypb.History) []string {
	var out []string
	for _, ev := range h.GetEvents() {
		out = append(out, ev.GetEventType().String())
	}
	return out
}

// runReminder schedules one email reminder due a second from now (so it
// sleeps on a timer, or waits in its start delay), waits for its workflow
// and returns its history.
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
	for _, tc := range []struct {
		name                 string
		delayed              bool
		events, tasks, timer int
		history              string
	}{
		{"timer", false, ReminderHistoryEvents, 3, 1, "sent"},
		{"start delay", true, DelayedReminderHistoryEvents, 2, 0, "sent-after-start-delay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := testenv.NewStackWith(t, testenv.StackOptions{DelayedStart: tc.delayed})
			h, res, id := runReminder(t, s)
			require.Equal(t, reminder.Sent, res.State)
			require.Equal(t, tc.events, len(h.GetEvents()), "history events: %v", eventTypes(h))
			testenv.RecordHistory(t, s.Temporal, id, testenv.AtCurrentLevel(tc.history))
			checkLean(t, h, tc.tasks, tc.timer)
		})
	}
}

// checkLean checks a delivered reminder's history: its workflow tasks and
// timers, one regular notify activity with the retry ceiling, and no
// marker.
func checkLean(t *testing.T, h *historypb.History, tasks, timers int) {
	t.Helper()
	var markers, activityTasks, workflowTasks, timersStarted int
	for _, ev := range h.GetEvents() {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_MARKER_RECORDED:
			markers++
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			activityTasks++
		case enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			workflowTasks++
		case enums.EVENT_TYPE_TIMER_STARTED:
			timersStarted++
		}
	}
	require.Equal(t, tasks, workflowTasks, "workflow tasks")
	require.Equal(t, timers, timersStarted, "timers")
	require.Equal(t, 1, activityTasks, "the send ran as the regular activity, on the rate-capped task queue")
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			// The server retries an attempt that timed out, or whose worker
			// stopped, by this; every failure the activity reports names its
			// own wait.
			require.Equal(t, 30*time.Second, a.GetRetryPolicy().GetMaximumInterval().AsDuration(),
				"a timed-out attempt waits at most 30 s, not its attempt count's next 10 minutes")
		}
	}
	require.Zero(t, markers, "no version marker, no local activity")
}

// The fast path's fallback, as reminders at its version take it: the local
// attempt meets a 503, and the notify activity delivers on its first
// attempt, once.
func TestLocalAttemptFailedReminderHistory(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{Versions: map[string]workflow.Version{workflows.ChangeLocalFirstAttempt: 1}})
	s.Mail.Fail(sink.Answer{Status: 503})
	h, res, id := runReminder(t, s)
	require.Equal(t, reminder.Sent, res.State)
	require.Len(t, s.Mail.Mails(), 1, "sent once")
	require.Equal(t, 2, s.Mail.Requests(), "the local attempt's call and the activity's")
	var started []int32
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			started = append(started, a.GetAttempt())
		}
	}
	require.Equal(t, []int32{1}, started, "the activity delivered on its first attempt")
	testenv.RecordHistory(t, s.Temporal, id, "sent-after-local-attempt-failed")
}

func TestFailedReminderHistory(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	s.Mail.Fail(sink.Answer{Status: 400})
	_, res, id := runReminder(t, s)
	require.Equal(t, reminder.Failed, res.State)
	testenv.RecordHistory(t, s.Temporal, id, testenv.AtCurrentLevel("failed"))
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

// A payload sent without the codec (plaintext, as a forger or `temporal
// workflow start` without --codec-endpoint would send it) is not acted on:
// a reminder workflow started with one never runs, though it names a real
// reminder due now (its workflow task fails and is retried, showing the
// cause, until an operator terminates it); an update with one is rejected
// before it reaches the workflow.
func TestWorkerRefusesPlaintextPayloads(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	real, err := s.Starter.Schedule(ctx, s.Update(t, time.Now().Add(time.Hour), reminder.Email))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Temporal.TerminateWorkflow(context.Background(), real[0].WorkflowID, "", "test over") })

	plain, err := client.Dial(client.Options{HostPort: s.TemporalAddress, Namespace: "default",
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	defer plain.Close()

	forgedID := real[0].WorkflowID + "-forged"
	_, err = plain.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: forgedID, TaskQueue: s.TaskQueue},
		workflows.ReminderWorkflowName, workflows.ReminderInput{ReminderID: real[0].ReminderID, DueAt: time.Now()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Temporal.TerminateWorkflow(context.Background(), forgedID, "", "test over") })
	// The first workflow task ends one way or the other.
	var outcome *historypb.HistoryEvent
	require.Eventually(t, func() bool {
		for _, ev := range testenv.History(t, s.Temporal, forgedID).GetEvents() {
			switch ev.GetEventType() {
			case enums.EVENT_TYPE_WORKFLOW_TASK_FAILED, enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				outcome = ev
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, enums.EVENT_TYPE_WORKFLOW_TASK_FAILED, outcome.GetEventType(), "the plaintext input is not run")
	cause := testenv.Codec(t).FailureConverter().FailureToError(outcome.GetWorkflowTaskFailedEventAttributes().GetFailure())
	require.ErrorContains(t, cause, "not encrypted", "the failure, itself encrypted, names the cause")
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, forgedID, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus(), "retried, not failed")

	update, err := plain.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: real[0].WorkflowID, UpdateName: workflows.UpdateReschedule, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{workflows.RescheduleRequest{DueAt: time.Now().Add(time.Second), By: "forger"}},
	})
	require.NoError(t, err)
	require.Error(t, update.Get(ctx, nil), "a plaintext update is rejected")
	for _, ev := range testenv.History(t, s.Temporal, real[0].WorkflowID).GetEvents() {
		require.NotEqual(t, enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, ev.GetEventType())
	}
	require.Empty(t, s.Mail.Mails())
}

// Turning encryption on does not lose the reminders already sleeping with
// plaintext histories. A worker that refuses unencrypted payloads cannot
// replay one: its workflow task fails and the reminder waits, still
// running, sending nothing. Once workers run with the allowance
// (SHIPNOTIFY_CODEC_ALLOW_UNSEALED=true) it carries on and is delivered,
// and what it records from then on is encrypted.
func TestPlaintextHistoriesWaitForTheAllowance(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	quiet := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	dial := func(dc converter.DataConverter, fc converter.FailureConverter) client.Client {
		c, err := client.Dial(client.Options{HostPort: s.TemporalAddress, Namespace: "default", Logger: quiet,
			DataConverter: dc, FailureConverter: fc})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	runWorker := func(c client.Client) (stop func()) {
		w := worker.New(c, s.TaskQueue, s.Activities, worker.Options{})
		require.NoError(t, w.Start())
		var once sync.Once
		stop = func() { once.Do(w.Stop) }
		t.Cleanup(stop)
		return stop
	}
	has := func(id string, want enums.EventType) func() bool {
		return func() bool {
			for _, ev := range testenv.History(t, s.Temporal, id).GetEvents() {
				if ev.GetEventType() == want {
					return true
				}
			}
			return false
		}
	}

	// Before encryption: a plaintext reminder goes to sleep.
	plain := dial(nil, nil)
	stopPlain := runWorker(plain)
	st := &starter.Starter{TaskQueue: s.TaskQueue, Mirror: s.Mirror, Temporal: plain, Webhooks: webhook.Guard{AllowLoopback: true}, Now: time.Now}
	results, err := st.Schedule(ctx, s.Update(t, time.Now().Add(3*time.Second), reminder.Email))
	require.NoError(t, err)
	id := results[0].WorkflowID
	t.Cleanup(func() { _ = s.Temporal.TerminateWorkflow(context.Background(), id, "", "test over") })
	require.Eventually(t, has(id, enums.EVENT_TYPE_TIMER_STARTED), 30*time.Second, 20*time.Millisecond)
	stopPlain()

	// Encryption on, unencrypted payloads refused: the reminder wakes, its
	// task fails, and it waits.
	strict := testenv.Codec(t)
	stopStrict := runWorker(dial(strict.DataConverter(), strict.FailureConverter()))
	require.Eventually(t, has(id, enums.EVENT_TYPE_WORKFLOW_TASK_FAILED), time.Minute, 50*time.Millisecond)
	stopStrict()
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())
	require.Empty(t, s.Mail.Mails())

	// With the allowance it is delivered.
	keys, err := codec.ParseKeys(strings.NewReader(testenv.CodecKeys))
	require.NoError(t, err)
	migrating, err := codec.New(keys, codec.Options{AllowUnsealed: true})
	require.NoError(t, err)
	mc := dial(migrating.DataConverter(), migrating.FailureConverter())
	runWorker(mc)
	var res workflows.ReminderResult
	require.NoError(t, mc.GetWorkflow(ctx, id, "").Get(ctx, &res))
	require.Equal(t, reminder.Sent, res.State)
	require.Len(t, s.Mail.Mails(), 1)
}

// The Web UI names a reminder's timer by what it waits for ("until due
// …"), not "AwaitWithTimeout".
func TestTheDueTimerIsNamedInTheWebUI(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	due := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	results, err := s.Starter.Schedule(ctx, s.Update(t, due, reminder.Email))
	require.NoError(t, err)
	id := results[0].WorkflowID
	t.Cleanup(func() { _ = s.Temporal.TerminateWorkflow(context.Background(), id, "", "test over") })
	var summary string
	require.Eventually(t, func() bool {
		for _, ev := range testenv.History(t, s.Temporal, id).GetEvents() {
			if ev.GetEventType() == enums.EVENT_TYPE_TIMER_STARTED {
				require.NoError(t, testenv.Codec(t).DataConverter().FromPayload(ev.GetUserMetadata().GetSummary(), &summary))
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "no timer started")
	require.Equal(t, "until due "+due.Format("2006-01-02 15:04Z"), summary)
}
