package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A delivered plain reminder: full's starts, sleeps on a timer, and takes
// a third workflow task for the notify's completion; started with a delay,
// its first task runs at the due time and records no timer.
var (
	fullDelivered = history(started, wtSched, wtStarted, wtDone, timer, fired, wtSched, wtStarted, wtDone,
		actSched, actStart, actDone, wtSched, wtStarted, wtDone, upsert, completed)
	delayedDelivered = history(started, wtSched, wtStarted, wtDone, actSched, actStart, actDone,
		wtSched, wtStarted, wtDone, upsert, completed)
)

const wtTimedOut = enums.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT

func TestWorkflowTasksCountEveryTaskTheEngineDispatched(t *testing.T) {
	t.Parallel()
	require.Equal(t, 3, WorkflowTasks(fullDelivered))
	require.Equal(t, 2, WorkflowTasks(delayedDelivered))
	require.Len(t, delayedDelivered, 12)
	require.Equal(t, 3, CountActions(delayedDelivered).Total, "the start, the notify, the upsert")
	// A cold worker's: the timer's task timed out on the dead worker's
	// sticky queue and was scheduled again on the normal one.
	cold := history(started, wtSched, wtStarted, wtDone, timer, fired, wtSched, wtTimedOut, wtSched, wtStarted, wtDone)
	require.Equal(t, 3, WorkflowTasks(cold))
}

// The cost per reminder is over the histories that completed, so a
// sample's unfinished ones do not lower it.
func TestReminderCostAveragesTheDeliveredHistories(t *testing.T) {
	t.Parallel()
	require.Nil(t, ReadReminderCost(nil))
	unfinished := history(started, wtSched, wtStarted, wtDone, timer)
	c := ReadReminderCost([][]*historypb.HistoryEvent{fullDelivered, delayedDelivered, unfinished})
	require.Equal(t, &ReminderCost{Histories: 2, Events: 14.5, WorkflowTasks: 2.5, Actions: 3.5}, c)
}

// Costs weigh each run's means by its histories, per workload and path in
// the results' order.
func TestCostsPerWorkloadAndPath(t *testing.T) {
	t.Parallel()
	withCost := func(workload string, kind Kind, round int, c *ReminderCost) Result {
		r := run(workload, kind, round, 40)
		r.Cost = c
		return r
	}
	got := Costs([]Result{
		withCost(ColdBurstWorkload, Full, 1, &ReminderCost{Histories: 30, Events: 17, WorkflowTasks: 3, Actions: 4}),
		withCost(ColdBurstWorkload, FullDelayed, 1, &ReminderCost{Histories: 60, Events: 12, WorkflowTasks: 2, Actions: 3}),
		withCost(ColdBurstWorkload, Full, 2, &ReminderCost{Histories: 10, Events: 21, WorkflowTasks: 5, Actions: 4}),
		withCost("burst", Naive, 1, nil),
	})
	require.Equal(t, []WorkloadCost{
		{Workload: ColdBurstWorkload, Kind: Full, Runs: 2, ReminderCost: ReminderCost{Histories: 40, Events: 18, WorkflowTasks: 3.5, Actions: 4}},
		{Workload: ColdBurstWorkload, Kind: FullDelayed, Runs: 1, ReminderCost: ReminderCost{Histories: 60, Events: 12, WorkflowTasks: 2, Actions: 3}},
	}, got)
}

// A delayed start leaves the engine nothing to do until its due time: the
// starts' work is done once the execution is held, not only once its first
// task ran.
func TestStartsWorkIsDoneWhenTheFirstTaskRanOrIsHeld(t *testing.T) {
	t.Parallel()
	now := t0
	info := func(length int64, execution time.Time) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{HistoryLength: length, StartTime: timestamppb.New(now.Add(-time.Second)),
			ExecutionTime: timestamppb.New(execution)}
	}
	require.True(t, startsWorkDone(info(4, now.Add(-time.Second)), now), "its first task ran")
	require.False(t, startsWorkDone(info(2, now.Add(-time.Second)), now), "its first task waits for a worker")
	require.True(t, startsWorkDone(info(1, now.Add(time.Minute)), now), "held by its start delay")
	require.False(t, startsWorkDone(info(1, now.Add(-time.Millisecond)), now), "its delay is over: its task is due")
}

// A cold burst's lead leaves room for its worker's restart: an assumed
// one first, then twice the last measured.
func TestRestartLeadFollowsTheMeasuredRestart(t *testing.T) {
	t.Parallel()
	var r Runner
	require.Equal(t, assumedRestart, r.restartLead(FullDelayed))
	r.learnRestart(FullDelayed, 3*time.Second)
	require.Equal(t, 6*time.Second, r.restartLead(FullDelayed))
	require.Equal(t, assumedRestart, r.restartLead(Full), "each path its own")
}

func TestInvalidReasonNamesTheRestart(t *testing.T) {
	t.Parallel()
	late := Result{N: 10, Delivered: 10, Lead: 20 * time.Second, Restart: 4 * time.Second}
	require.Equal(t, "the starts' work and the worker's restart were not done by the due time", invalidReason(late, "", 2*time.Second))
	late.Slack = time.Second
	require.Equal(t, "the starts' work and the worker's restart were done 1s before the due time (less than 2s)",
		invalidReason(late, "", 2*time.Second))
}

// Issue 37's bars on the cold burst and the catch-up: at least naive's
// drain rate and at most its time-to-drain p99, each judged by its
// interval, with a stretch judged by the same interval; the full path is
// held to them too.
func TestDelayedTargetsJudgeTheBarAndTheStretch(t *testing.T) {
	t.Parallel()
	comp := func(w string, kind Kind, metric Metric, ratios ...float64) Comparison {
		return Comparison{Workload: w, Metric: metric, Of: kind, Over: Naive, Ratios: ratios, Estimate: estimate(ratios)}
	}
	byName := map[string]Target{}
	for _, tg := range Targets(nil, []Comparison{
		comp(ColdBurstWorkload, FullDelayed, MetricDrainRate, 1.35, 1.4, 1.5),
		comp(ColdBurstWorkload, FullDelayed, MetricDrainP99, 0.85, 0.9, 0.95),
		comp(ColdBurstWorkload, Full, MetricDrainRate, 0.7, 0.8, 1.1),
		comp("catchup", FullDelayed, MetricDrainRate),
	}) {
		byName[tg.Name] = tg
	}
	drain := byName["coldburst drain, full-delayed/naive"]
	require.Equal(t, Met, drain.Verdict)
	require.Equal(t, "≥ 1.00", drain.Bar)
	require.Equal(t, "≥ 1.30", drain.Stretch)
	require.Equal(t, Met, drain.StretchVerdict, "the lower bound 1.35 clears 1.3")
	p99 := byName["coldburst time-to-drain p99, full-delayed/naive"]
	require.Equal(t, Met, p99.Verdict)
	require.Equal(t, Missed, p99.StretchVerdict, "the upper bound 0.95 is over 0.8")
	require.Equal(t, Missed, byName["coldburst drain, full/naive"].Verdict)
	require.Equal(t, Missed, byName["coldburst drain, full/naive"].StretchVerdict)
	require.Equal(t, NotMeasured, byName["catchup drain, full-delayed/naive"].Verdict, "its pairs were all left out")
	require.Equal(t, NotMeasured, byName["catchup drain, full-delayed/naive"].StretchVerdict)
	require.NotContains(t, byName, "catchup time-to-drain p99, full/naive", "no comparison, no target")

	var out bytes.Buffer
	require.NoError(t, WriteTable(&out, nil, nil, []Target{drain, p99}))
	require.Contains(t, out.String(), "≥ 1.00 (stretch ≥ 1.30)")
	require.Contains(t, out.String(), "met; stretch missed")
}

// A delivered plain reminder started with a delay: at most 12 events, 2
// workflow tasks and 3 actions, over the valid runs of the bursts and the
// catch-up; the full path's are its note, for scale.
func TestDelayedHistoryTargets(t *testing.T) {
	t.Parallel()
	reminder := func(workload string, kind Kind, round, events, tasks, actions int) Result {
		r := run(workload, kind, round, 40)
		r.HistoryEvents, r.WorkflowTasks, r.Actions = events, tasks, &Actions{Total: actions}
		return r
	}
	byName := func(results []Result) map[string]Target {
		m := map[string]Target{}
		for _, tg := range Targets(results, nil) {
			m[tg.Name] = tg
		}
		return m
	}
	require.NotContains(t, byName([]Result{reminder("burst", Full, 1, 17, 3, 4)}), "actions per delivered reminder, full-delayed",
		"no delayed runs, no target")

	warmUp := reminder(ColdBurstWorkload, FullDelayed, 0, 14, 3, 3) // never judged
	got := byName([]Result{
		warmUp,
		reminder(ColdBurstWorkload, FullDelayed, 1, 12, 2, 3), reminder("catchup-instant", FullDelayed, 1, 12, 2, 3),
		reminder("burst", FullDelayed, 1, 12, 2, 3), reminder(ColdBurstWorkload, Full, 1, 17, 3, 4),
	})
	for _, name := range []string{"history events", "workflow tasks", "actions"} {
		tg := got[name+" per delivered reminder, full-delayed"]
		require.Equal(t, Met, tg.Verdict, name)
		require.Contains(t, tg.Measured, "(n=3)", name)
	}
	require.Equal(t, "≤ 3", got["actions per delivered reminder, full-delayed"].Bar)
	require.Contains(t, got["actions per delivered reminder, full-delayed"].Note, "full 4")

	got = byName([]Result{reminder(ColdBurstWorkload, FullDelayed, 1, 17, 3, 4)})
	require.Equal(t, Missed, got["workflow tasks per delivered reminder, full-delayed"].Verdict, "a timer crept back in")
}

// The cold burst compares full-delayed with the baselines and the full
// path, drain rate and time-to-drain p99, and pools its scheduling.
func TestColdBurstComparesTheDelayedPath(t *testing.T) {
	t.Parallel()
	var results []Result
	for round := 1; round <= 2; round++ {
		for _, k := range []Kind{Naive, Lean, Full, FullDelayed} {
			r := run(ColdBurstWorkload, k, round, 50)
			r.Drain = &Drain{P99: 10 * time.Second}
			results = append(results, r)
		}
	}
	comps := Comparisons(results)
	for _, c := range []struct {
		metric   Metric
		of, over Kind
	}{
		{MetricDrainRate, FullDelayed, Naive}, {MetricDrainRate, FullDelayed, Lean}, {MetricDrainRate, FullDelayed, Full},
		{MetricDrainP99, FullDelayed, Naive}, {MetricDrainP99, FullDelayed, Full}, {MetricDrainRate, Full, Naive},
	} {
		got, ok := find(comps, ColdBurstWorkload, c.metric, c.of, c.over)
		require.True(t, ok, "%s %s/%s", c.metric, c.of, c.over)
		require.Equal(t, 2, got.N)
	}
	pooled, ok := find(comps, PooledWorkloads, MetricScheduleRate, Full, Naive)
	require.True(t, ok)
	require.Equal(t, 2, pooled.N)
}
