package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The order alternates the worker counts between rounds, the kill at the
// largest count beside them, after one warm-up: a drift over the session
// meets every count at both ends.
func TestHorizontalOrderAlternatesTheCountsAndTheKill(t *testing.T) {
	t.Parallel()
	got := HorizontalOrder([]int{1, 2, 3}, 2, true, true)
	require.Equal(t, []HorizontalStep{
		{Workers: 1, Round: 0},
		{Workers: 1, Round: 1}, {Workers: 2, Round: 1}, {Workers: 3, Round: 1}, {Workers: 3, Kill: true, Round: 1},
		{Workers: 3, Kill: true, Round: 2}, {Workers: 3, Round: 2}, {Workers: 2, Round: 2}, {Workers: 1, Round: 2},
	}, got)
	require.Equal(t, []HorizontalStep{{Workers: 2, Round: 1}, {Workers: 1, Round: 1}},
		HorizontalOrder([]int{2, 1}, 1, false, false), "no warm-up, no kill: the counts as given")
	require.Equal(t, Kind("workers-3+kill"), got[4].Kind())
	n, kill, ok := parseHorizontalKind(got[4].Kind())
	require.True(t, ok)
	require.Equal(t, 3, n)
	require.True(t, kill)
	_, _, ok = parseHorizontalKind(Full)
	require.False(t, ok, "a path is not a worker count")
}

// Each run's check finds its reminders by its shipments' prefix, and only
// its own: no run's prefix starts another run's shipment ids.
func TestEachRunsPrefixIsItsOwn(t *testing.T) {
	t.Parallel()
	var ids []string
	for _, s := range HorizontalOrder([]int{1, 2, 3, 10, 12}, 12, true, true) {
		for _, w := range HorizontalWorkloads {
			ids = append(ids, horizontalRunID("ab12cd34", s, w))
		}
	}
	shipments := map[string]string{}
	for _, id := range ids {
		// As Runner.schedule names a run's shipment (its counter goes on
		// across runs).
		shipments[id] = fmt.Sprintf("BENCH-%s-%d", id, 17)
	}
	for _, a := range ids {
		for _, b := range ids {
			if a != b {
				require.False(t, strings.HasPrefix(shipments[b], runPrefix(a)), "%s's prefix takes %s's shipment", a, b)
			}
		}
		require.True(t, strings.HasPrefix(shipments[a], runPrefix(a)))
	}
}

// The drain of each count and of the kill run is divided, within each
// round, by the one-worker run's (and the kill's by the largest count's
// too): a round's drift cancels, and a run left out leaves its round out.
func TestHorizontalComparisonsDivideWithinARound(t *testing.T) {
	t.Parallel()
	run := func(workload string, workers int, kill bool, round int, drain float64, invalid string) Result {
		return Result{Workload: workload, Kind: horizontalKind(workers, kill), Round: round, N: 100, Delivered: 100,
			DrainRate: drain, Drain: &Drain{P99: time.Duration(1000/drain) * time.Second}, Invalid: invalid}
	}
	results := []Result{
		run("burst", 1, false, 0, 5, ""), // the warm-up: never compared
		run("burst", 1, false, 1, 20, ""), run("burst", 2, false, 1, 30, ""), run("burst", 3, false, 1, 32, ""),
		run("burst", 3, true, 1, 24, ""),
		run("burst", 3, true, 2, 16, ""), run("burst", 3, false, 2, 20, ""), run("burst", 2, false, 2, 19, ""),
		run("burst", 1, false, 2, 10, ""),
		run("catchup", 1, false, 1, 10, ""), run("catchup", 2, false, 1, 12, "the kill: no worker was running"),
	}
	comps := HorizontalComparisons(results)
	get := func(workload string, m Metric, of, over Kind) Comparison {
		c, ok := find(comps, workload, m, of, over)
		require.True(t, ok, "%s %s %s/%s", workload, m, of, over)
		return c
	}
	c := get("burst", MetricDrainRate, "workers-2", "workers-1")
	require.Equal(t, []float64{1.5, 1.9}, c.Ratios, "per round, not over the medians (25/15)")
	require.InDelta(t, 1.7, c.Median, 1e-9)
	c = get("burst", MetricDrainRate, "workers-3+kill", "workers-1")
	require.Equal(t, []float64{1.2, 1.6}, c.Ratios)
	c = get("burst", MetricDrainRate, "workers-3+kill", "workers-3")
	require.Equal(t, []float64{0.75, 0.8}, c.Ratios)
	get("burst", MetricDrainP99, "workers-3", "workers-1")
	c = get("catchup", MetricDrainRate, "workers-2", "workers-1")
	require.Zero(t, c.N, "the only round's 2-worker run was left out")
	require.Len(t, c.Excluded, 1)
}

// What each part kept busy over a window is its CPU seconds across the
// window, read between samples, over the window's length.
func TestCoresBetweenInterpolatesTheSamples(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	samples := []CPUSample{
		{At: at(0), Seconds: map[string]float64{PartServer: 10, PartWorkers: 1}},
		{At: at(1), Seconds: map[string]float64{PartServer: 11, PartWorkers: 1.5}},
		{At: at(2), Seconds: map[string]float64{PartServer: 11.5, PartWorkers: 2}},
		{At: at(3), Seconds: map[string]float64{PartServer: 13.5, PartWorkers: 2.5}},
	}
	got := CoresBetween(samples, at(0.5), at(2.5))
	// server: 10.5 at 0.5 s, 12.5 at 2.5 s; workers: 1.25 and 2.25.
	require.InDelta(t, 1.0, got[PartServer], 1e-9)
	require.InDelta(t, 0.5, got[PartWorkers], 1e-9)
	got = CoresBetween(samples, at(-5), at(9))
	require.InDelta(t, 3.5/3, got[PartServer], 1e-9, "a window past the samples is cut to them")
	require.Empty(t, CoresBetween(samples[:1], at(0), at(1)), "one sample tells no rate")
	samples[2].Seconds = map[string]float64{PartServer: 11.5} // the workers not read then
	got = CoresBetween(samples, at(1.5), at(2.5))
	require.InDelta(t, 1.25, got[PartServer], 1e-9)
	require.InDelta(t, 0.5, got[PartWorkers], 1e-9, "read around the missing sample")
}

// A database's backends come and go with the pools: the running total
// adds each one's growth, all of one born since the last sample, and
// nothing of what came before the first.
func TestBackendCPUFollowsBackendsThatComeAndGo(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	var b backendCPU
	require.Zero(t, b.add([]backendReading{{pid: 1, started: t0.Add(-time.Hour), seconds: 50}}, t0), "the baseline")
	got := b.add([]backendReading{
		{pid: 1, started: t0.Add(-time.Hour), seconds: 50.5},            // grew 0.5
		{pid: 2, started: t0.Add(300 * time.Millisecond), seconds: 0.2}, // born since: all of it
		{pid: 3, started: t0.Add(-time.Minute), seconds: 9},             // old, first seen: a baseline
	}, t0.Add(time.Second))
	require.InDelta(t, 0.7, got, 1e-9)
	got = b.add([]backendReading{{pid: 2, started: t0.Add(300 * time.Millisecond), seconds: 0.5}, {pid: 3, started: t0.Add(-time.Minute), seconds: 9.1}},
		t0.Add(2*time.Second))
	require.InDelta(t, 1.1, got, 1e-9, "pid 1 gone: nothing taken back")
}

// A worker's or serve's readiness is read from its JSON log at its own
// time; a line that only mentions the words is not it.
func TestLogTailHearsTheReadyLine(t *testing.T) {
	t.Parallel()
	l := newLogTail()
	ready := l.expect(workerReadyMsg)
	_, _ = l.Write([]byte(`{"time":"2026-12-03T09:00:00Z","level":"INFO","msg":"delivery sent","note":"worker started"}` + "\n" + `{"time":"2026-12-03T09:00:01.5Z","lev`))
	select {
	case <-ready:
		t.Fatal("a line that only mentions it is not the ready line")
	default:
	}
	_, _ = l.Write([]byte(`el":"INFO","msg":"worker started","task_queue":"q"}` + "\n"))
	select {
	case at := <-ready:
		require.Equal(t, time.Date(2026, 12, 3, 9, 0, 1, 500_000_000, time.UTC), at)
	default:
		t.Fatal("the ready line was not heard")
	}
	for range 2 * logTailLines {
		_, _ = l.Write([]byte("noise\n"))
	}
	require.Len(t, strings.Split(l.String(), "\n"), logTailLines, "only the tail is kept")
}

// The middle of a drain as the provider saw it: the 10th to the 90th
// percentile of the keys' first acceptances.
func TestAcceptedWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	first := map[string]time.Time{}
	for i := range 10 {
		first[string(rune('a'+i))] = t0.Add(time.Duration(i) * time.Second)
	}
	from, to, ok := acceptedWindow(first)
	require.True(t, ok)
	require.Equal(t, t0, from)
	require.Equal(t, t0.Add(8*time.Second), to)
	_, _, ok = acceptedWindow(map[string]time.Time{"a": t0})
	require.False(t, ok)
}

// The reading says where adding workers stopped adding drain, and what
// kept the cores busy there: a saturated machine and the engine's share,
// or CPU to spare.
func TestWhereItStopsNamesTheCountAndWhatWasBusy(t *testing.T) {
	t.Parallel()
	row := func(workers int, drain float64, cores map[string]float64) ScalingRow {
		return ScalingRow{Workload: "burst", Kind: horizontalKind(workers, false), Workers: workers, Runs: 2, DrainRate: drain, Cores: cores}
	}
	saturatedCores := map[string]float64{PartServer: 0.9, PartPostgres: 0.7, PartMirror: 0.2, PartWorkers: 0.2, PartServes: 0.05, PartHarness: 0.05}
	rows := []ScalingRow{row(1, 20, saturatedCores), row(2, 21, saturatedCores), row(3, 21.5, saturatedCores),
		{Workload: "burst", Kind: horizontalKind(3, true), Workers: 3, Kill: true, DrainRate: 15}}
	comps := []Comparison{
		{Workload: "burst", Metric: MetricDrainRate, Of: "workers-2", Over: "workers-1", Estimate: Estimate{Median: 1.04, N: 2}},
		{Workload: "burst", Metric: MetricDrainRate, Of: "workers-3", Over: "workers-1", Estimate: Estimate{Median: 1.06, N: 2}},
	}
	got := WhereItStops(rows, comps, 2)
	require.Len(t, got, 1)
	require.Contains(t, got[0], "2 workers drain 1.04× one's (per round), 3 workers drain 1.06× one's (per round)")
	require.Contains(t, got[0], "It stops growing at 1 worker(s).")
	require.Contains(t, got[0], "95% busy (1.90)")
	require.Contains(t, got[0], "PostgreSQL 0.70 (the mirror's connections 0.20)")
	require.Contains(t, got[0], "The CPU is saturated, the Temporal server the largest share; the engine (its server and PostgreSQL) takes 1.60 of the 2 cores")

	idle := map[string]float64{PartServer: 0.3, PartPostgres: 0.2, PartWorkers: 0.3, PartServes: 0.05, PartHarness: 0.05}
	rows = []ScalingRow{row(1, 10, idle), row(2, 19, idle), row(3, 27, idle)}
	got = WhereItStops(rows, nil, 2)
	require.Contains(t, got[0], "2 workers drain 1.90× one's (of the medians), 3 workers drain 2.70× one's (of the medians)")
	require.Contains(t, got[0], "It still grows at 3 workers.")
	require.Contains(t, got[0], "The CPU is not saturated")
	require.NotContains(t, got[0], "shared")

	// The same parts while other processes kept the machine busy: it is
	// saturated, and the reading says by whom.
	shared := map[string]float64{PartServer: 0.3, PartPostgres: 0.2, PartWorkers: 0.3, PartServes: 0.05, PartHarness: 0.05, PartMachine: 1.9}
	got = WhereItStops([]ScalingRow{row(1, 10, shared)}, nil, 2)
	require.Contains(t, got[0], "95% busy (1.90)")
	require.Contains(t, got[0], "other processes 1.00")
	require.Contains(t, got[0], "The CPU is saturated")
	require.Contains(t, got[0], "Other processes took 1.00 cores: the machine was shared")
}

// The report says, for people and in JSON, each run with its check, each
// kill with its windows, the medians, the per-round ratios and the
// reading; a run's figures sit beside its own fields in the JSON.
func TestTheHorizontalReportSaysWhatTheRunsFound(t *testing.T) {
	t.Parallel()
	cpu := func(v float64) *float64 { return &v }
	run := func(workers int, kill bool, round int, drain float64) HorizontalRun {
		r := HorizontalRun{Workers: workers, Serves: 2, Result: Result{Workload: "burst", Kind: horizontalKind(workers, kill), Round: round,
			N: 100, Delivered: 100, DrainRate: drain, Drain: &Drain{P50: 2 * time.Second, P99: 5 * time.Second},
			CPU: CPU{Server: cpu(6), Postgres: cpu(4), Worker: cpu(1), Serve: cpu(0.5)}},
			Check: &RunCheck{Reminders: 100, Delivered: 100, StatusEvents: 300, Reached: 300, ProviderEvents: 200, Applied: 200, Trail: 200},
			Cores: map[string]float64{PartServer: 0.8, PartPostgres: 0.7, PartMirror: 0.1, PartWorkers: 0.3, PartServes: 0.05, PartHarness: 0.1, PartMachine: 1.99}}
		if kill {
			r.Kill = &KillRecord{Accepted: 25, InFlight: 7, WorkerPID: 41, ServePID: 42, HeldClaims: []string{"k1", "k2"},
				ServeClaims: []string{"evt_9"}, After: 5 * time.Second}
			r.Check.Twice, r.Check.InWindow, r.Check.Repeated, r.Check.RepeatedClaimed = 1, 1, 1, 1
		}
		return r
	}
	rep := HorizontalReport{CPUs: 2, Runs: []HorizontalRun{run(1, false, 1, 20), run(2, false, 1, 21), run(2, true, 1, 15)}}
	rep.judge()
	var b strings.Builder
	require.NoError(t, WriteHorizontalTable(&b, rep))
	out := b.String()
	require.Contains(t, out, "kill, burst round 1, 2 worker(s) with the kill: worker 0 (pid 41) and serve 0 (pid 42) SIGKILLed with 25 of 100 mails accepted and 7 in flight; 2 claims held (the window), 1 status events claimed by the killed serve")
	require.Contains(t, out, "keys taken twice 1 (1 in the window, 0 beyond)")
	require.Contains(t, out, "drain rate workers-2+kill/workers-1")
	require.Contains(t, out, "0.75")
	require.Contains(t, out, "115.0", "ms a reminder: (6 + 4 + 1 + 0.5) s over 100")
	require.Contains(t, out, "burst: 2 workers drain 1.05× one's (per round). It stops growing at 1 worker(s).")

	b.Reset()
	enc := json.NewEncoder(&b)
	require.NoError(t, enc.Encode(rep))
	var back struct {
		Runs []map[string]any `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(b.String()), &back))
	require.Equal(t, 20.0, back.Runs[0]["drain_rate"], "the run's figures are the run's own fields")
	require.Equal(t, 2.0, back.Runs[1]["workers"])
	require.Contains(t, back.Runs[2], "kill")
}
