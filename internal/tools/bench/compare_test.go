package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func run(workload string, kind Kind, round int, drain float64) Result {
	return Result{Workload: workload, Kind: kind, Round: round, N: 100, Delivered: 100, DrainRate: drain, ScheduleRate: 200}
}

func TestCompareRatiosPerRoundLeavingOutWarmUpsAndInvalidRuns(t *testing.T) {
	t.Parallel()
	bad := run("burst", Naive, 2, 40)
	bad.Invalid = "partly drained: 90 of 100 delivered"
	results := []Result{
		run("burst", Naive, 0, 10), run("burst", Full, 0, 90), // warm-ups: never compared
		run("burst", Naive, 1, 40), run("burst", Full, 1, 80),
		run("burst", Full, 2, 60), bad,
		run("burst", Full, 3, 60), run("burst", Naive, 3, 40),
		run("burst", Full, 4, 0), run("burst", Naive, 4, 40), // no drain rate: no silent fallback
	}
	c := Compare("burst", results, MetricDrainRate, Full, Naive)
	require.Equal(t, []float64{2, 1.5}, c.Ratios)
	require.InDelta(t, 1.75, c.Median, 1e-12)
	require.Equal(t, 2, c.N)
	require.Equal(t, []string{
		"burst round 2: naive: partly drained: 90 of 100 delivered",
		"burst round 4: full: no drain_rate",
	}, c.Excluded)

	c = Compare("burst", results, MetricDrainRate, Full, Lean)
	require.Zero(t, c.N)
	require.Len(t, c.Excluded, 4)
	require.Contains(t, c.Excluded[0], "no lean run")
}

func TestComparisonsNameTheirMetric(t *testing.T) {
	t.Parallel()
	var results []Result
	for round := 1; round <= 2; round++ {
		for _, k := range []Kind{Naive, Lean, Full} {
			b := run("burst", k, round, 50)
			b.Drain = &Drain{P99: 20 * time.Second}
			results = append(results, b)
			s := run("steady", k, round, 0)
			s.Lag.P99 = 300 * time.Millisecond
			results = append(results, s)
		}
	}
	got := map[string]Metric{}
	for _, c := range Comparisons(results) {
		got[c.Workload+" "+string(c.Of)+"/"+string(c.Over)+" "+string(c.Metric)] = c.Metric
		want := 2
		if c.Workload == PooledWorkloads {
			want = 4 // both workloads' rounds
		}
		require.Equal(t, want, c.N, c.label())
	}
	for _, want := range []string{
		"burst full/naive drain_rate", "burst full/lean drain_rate", "burst lean/naive drain_rate",
		"burst full/naive time_to_drain_p99", "burst full/lean time_to_drain_p99",
		"burst full/naive schedule_rate", "steady full/naive lag_p99", "steady full/lean lag_p99",
		"all full/naive schedule_rate",
	} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, "steady full/naive drain_rate")
	require.NotContains(t, got, "burst api/full schedule_rate", "no API runs, no comparison")
}

// A target is met only when the interval's lower bound clears the bar: a
// median that clears it on noisy pairs is not enough.
func TestTargetsJudgeByTheInterval(t *testing.T) {
	t.Parallel()
	comps := func(ratios ...float64) []Comparison {
		return []Comparison{{Workload: "burst", Metric: MetricDrainRate, Of: Full, Over: Naive, Ratios: ratios, Estimate: estimate(ratios)}}
	}
	verdict := func(ts []Target, name string) Target {
		for _, tg := range ts {
			if tg.Name == name {
				return tg
			}
		}
		t.Fatalf("no target %q in %v", name, ts)
		return Target{}
	}
	const fullNaive = "burst drain or time-to-drain p99, full/naive"
	steady := verdict(Targets(nil, comps(1.4, 1.4, 1.5, 1.4, 1.45)), fullNaive)
	require.Equal(t, Met, steady.Verdict)
	noisy := verdict(Targets(nil, comps(1.0, 1.2, 1.4, 1.6, 1.8)), fullNaive)
	require.Equal(t, Missed, noisy.Verdict, "median 1.4 clears 1.3, the interval's lower bound 1.0 does not")
	require.Equal(t, "drain 1.40 [1.00, 1.80] (n=5)", noisy.Measured)
	require.Equal(t, NotMeasured, verdict(Targets(nil, comps()), fullNaive).Verdict)

	// A bar to stay under: the interval's upper bound must.
	var results []Result
	for i, p99 := range []time.Duration{500, 600, 700, 800, 1200} {
		r := Result{Workload: "steady", Kind: Full, Round: i + 1, N: 10, Delivered: 10, Rate: 40}
		r.Lag.P99 = p99 * time.Millisecond
		results = append(results, r)
	}
	require.Equal(t, Missed, verdict(Targets(results, nil), "steady p99 lag, full (s)").Verdict)
	results[4].Lag.P99 = 900 * time.Millisecond
	require.Equal(t, Met, verdict(Targets(results, nil), "steady p99 lag, full (s)").Verdict)
}

func TestHistoryAndLossTargets(t *testing.T) {
	t.Parallel()
	full := run("burst", Full, 1, 50)
	full.HistoryEvents, full.Actions = 17, &Actions{Total: 4}
	naive := run("burst", Naive, 1, 50)
	naive.HistoryEvents, naive.Actions = 16, &Actions{Total: 3}
	warm := run("catchup", Lean, 0, 50)
	warm.Duplicates = 1 // a warm-up's duplicate counts: nothing may be sent twice
	ts := Targets([]Result{full, naive, warm}, nil)
	byName := map[string]Target{}
	for _, tg := range ts {
		byName[tg.Name] = tg
	}
	require.Equal(t, Missed, byName["history events per delivered reminder, full"].Verdict, "17 > 12")
	require.Contains(t, byName["history events per delivered reminder, full"].Note, "naive 16")
	require.Equal(t, Met, byName["actions per delivered reminder, full"].Verdict, "4 ≤ today's 4")
	require.Equal(t, Met, byName["lost and duplicates, burst"].Verdict)
	require.Equal(t, Missed, byName["lost and duplicates, catchup"].Verdict)
	require.Equal(t, "0 and 1", byName["lost and duplicates, catchup"].Measured)
}

// Steady's prune pairs compare the full path's p99 lag with prune beside
// it over the full path alone, round by round, and judge the lag while
// prune runs against the steady bar; they stay out of the scheduling pool.
func TestPrunePairsCompareTheLag(t *testing.T) {
	t.Parallel()
	var results []Result
	for round, p99 := range [][2]time.Duration{{400, 440}, {500, 450}, {420, 504}} {
		for i, k := range []Kind{Full, Pruning} {
			r := run(SteadyPruneWorkload, k, round+1, 0)
			r.Lag.P99 = p99[i] * time.Millisecond
			results = append(results, r)
		}
	}
	comps := Comparisons(results)
	c, ok := find(comps, SteadyPruneWorkload, MetricLagP99, Pruning, Full)
	require.True(t, ok, "%v", comps)
	require.InDeltaSlice(t, []float64{1.1, 0.9, 1.2}, c.Ratios, 1e-9)
	require.InDelta(t, 1.1, c.Median, 1e-9)
	_, pooled := find(comps, PooledWorkloads, MetricScheduleRate, Full, Naive)
	require.False(t, pooled)
	var lag Target
	for _, tg := range Targets(results, comps) {
		if tg.Name == "steady p99 lag while prune runs (s)" {
			lag = tg
		}
	}
	require.Equal(t, Met, lag.Verdict)
	require.Contains(t, lag.Note, "median 1.10")
}

// The full path clears its bar against the naive baseline with either a
// faster drain or a sooner end of it: a p99 whose interval stays under 0.8
// of the naive one's is met even when the drain rate's is not; each bar is
// judged by its own interval.
func TestFullOverNaiveIsMetByEitherBar(t *testing.T) {
	t.Parallel()
	comp := func(metric Metric, ratios ...float64) Comparison {
		return Comparison{Workload: "catchup", Metric: metric, Of: Full, Over: Naive, Ratios: ratios, Estimate: estimate(ratios)}
	}
	target := func(cs ...Comparison) Target {
		for _, tg := range Targets(nil, cs) {
			if tg.Name == "catchup drain or time-to-drain p99, full/naive" {
				return tg
			}
		}
		t.Fatalf("no full/naive target for catchup")
		return Target{}
	}
	slowDrain := comp(MetricDrainRate, 1.1, 1.2, 1.25)
	tg := target(slowDrain, comp(MetricDrainP99, 0.6, 0.7, 0.75))
	require.Equal(t, Met, tg.Verdict)
	require.Len(t, tg.Either, 2)
	require.Equal(t, Missed, tg.Either[0].Verdict)
	require.Equal(t, Met, tg.Either[1].Verdict)
	require.Equal(t, "≥ 1.30 drain or ≤ 0.80 p99", tg.Bar)

	require.Equal(t, Missed, target(slowDrain, comp(MetricDrainP99, 0.6, 0.7, 0.9)).Verdict, "p99's upper bound 0.9 > 0.8")
	require.Equal(t, Met, target(comp(MetricDrainRate, 1.3, 1.4, 1.5), comp(MetricDrainP99, 1.1)).Verdict)
	require.Equal(t, NotMeasured, target(comp(MetricDrainRate), comp(MetricDrainP99)).Verdict)
}

// The drain workloads compare time-to-drain p99 beside the drain rate,
// with either provider; steady has its lag instead.
func TestDrainWorkloadsCompareTimeToDrainP99(t *testing.T) {
	t.Parallel()
	var results []Result
	for round := 1; round <= 2; round++ {
		for _, k := range []Kind{Naive, Lean, Full} {
			for _, w := range []string{"burst", "catchup-instant", "slow", "steady"} {
				r := run(w, k, round, 50)
				r.Drain = &Drain{P99: time.Duration(round) * time.Second}
				r.Lag.P99 = time.Second
				if w == "steady" {
					r.DrainRate = 0
				}
				results = append(results, r)
			}
		}
	}
	comps := Comparisons(results)
	for _, w := range []string{"burst", "catchup-instant", "slow"} {
		for _, over := range []Kind{Naive, Lean} {
			c, ok := find(comps, w, MetricDrainP99, Full, over)
			require.True(t, ok, "%s full/%s", w, over)
			require.Equal(t, []float64{1, 1}, c.Ratios)
		}
	}
	_, ok := find(comps, "steady", MetricDrainP99, Full, Naive)
	require.False(t, ok)
	pooled, ok := find(comps, PooledWorkloads, MetricScheduleRate, Full, Naive)
	require.True(t, ok)
	require.Equal(t, 6, pooled.N, "burst, catchup-instant and steady pool their scheduling; slow does not")
}

// A run draining below a quarter of its path's median in its workload is
// in stall mode, each path and workload judged apart, warm-ups included;
// one stall misses the target.
func TestStallsAreRunsFarBelowTheirPathsMedian(t *testing.T) {
	t.Parallel()
	stalled := run("burst", Full, 2, 3.7)
	stalled.Drain = &Drain{P99: 68 * time.Second}
	results := []Result{
		run("burst", Full, 0, 40), run("burst", Full, 1, 43), stalled, run("burst", Full, 3, 45),
		run("burst", Naive, 1, 25), run("burst", Naive, 2, 27), run("burst", Naive, 3, 8), // 8 > 25/4
		run("catchup", Full, 1, 60), run("catchup", Full, 2, 14), run("catchup", Full, 3, 61), // 14 < 60/4
		{Workload: "burst", Kind: Lean, Round: 1, Error: "boom", DrainRate: 1},
		run("burst", Lean, 2, 50),
	}
	got := Stalls(results)
	require.Equal(t, []Stall{
		{Workload: "burst", Kind: Full, Round: 2, DrainRate: 3.7, PathMedian: 41.5, P99: 68 * time.Second},
		{Workload: "catchup", Kind: Full, Round: 2, DrainRate: 14, PathMedian: 60},
	}, got)
	require.Equal(t, "full 2, naive 0, lean 0", stallCounts(results, got))
	tg := stallTarget(results)
	require.Equal(t, Missed, tg.Verdict)
	require.Equal(t, "2 run(s)", tg.Measured)
	require.Equal(t, Met, stallTarget(results[:2]).Verdict)
	require.Equal(t, NotMeasured, stallTarget([]Result{{Workload: "hold", Kind: Full, Round: 1}}).Verdict)
}

// The outage target: the provider-paced variant's p99 after recovery
// under a minute (its interval's upper bound), and its mean actions per
// reminder no more than the own backoff's, per round.
func TestOutageTargets(t *testing.T) {
	t.Parallel()
	variant := func(kind Kind, round int, p99 time.Duration, actions float64) Result {
		return Result{Workload: OutageWorkload, Kind: kind, Round: round, N: 100, Delivered: 100, Outage: &OutageFigures{
			RateCap: 50, PeakRate: 49.8, AfterRecovery: Drain{P99: p99}, Histories: 100, Actions: PerReminder{Mean: actions},
		}}
	}
	results := []Result{
		variant(Paced, 1, 45*time.Second, 5), variant(OwnBackoff, 1, 240*time.Second, 9),
		variant(Paced, 2, 50*time.Second, 5.5), variant(OwnBackoff, 2, 250*time.Second, 10),
	}
	comps := Comparisons(results)
	c, ok := find(comps, OutageWorkload, MetricActionsMean, Paced, OwnBackoff)
	require.True(t, ok)
	require.InDeltaSlice(t, []float64{5.0 / 9, 0.55}, c.Ratios, 1e-9)
	byName := map[string]Target{}
	for _, tg := range Targets(results, comps) {
		byName[tg.Name] = tg
	}
	p99 := byName["outage: delivery after recovery p99, provider-paced (s)"]
	require.Equal(t, Met, p99.Verdict)
	require.Contains(t, p99.Note, "own backoff 245.0 s")
	require.Contains(t, p99.Note, "cap 50/s")
	require.Equal(t, Met, byName["outage: actions per reminder (mean), provider-paced/own backoff"].Verdict)
	require.Equal(t, Met, byName["lost and duplicates, outage"].Verdict)

	results[2].Outage.AfterRecovery.P99 = 70 * time.Second
	results[2].Outage.Actions.Mean = 11
	comps = Comparisons(results)
	for _, tg := range Targets(results, comps) {
		if strings.HasPrefix(tg.Name, "outage:") {
			require.Equal(t, Missed, tg.Verdict, tg.Name)
		}
	}
}
