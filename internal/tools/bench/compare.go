package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Metric names what a comparison divides, so a ratio never changes kind
// silently (a drain rate is never replaced by a schedule rate).
type Metric string

const (
	MetricDrainRate    Metric = "drain_rate"
	MetricScheduleRate Metric = "schedule_rate"
	MetricLagP99       Metric = "lag_p99"
	// MetricDrainP99 is time to drain p99, in seconds: the last of the
	// drain, which a drain rate over its middle does not see.
	MetricDrainP99 Metric = "time_to_drain_p99"
	// MetricRecoveryP99 and MetricActionsMean are the outage workload's:
	// p99 of delivery after recovery, in seconds, and billable actions per
	// reminder, the mean over its histories.
	MetricRecoveryP99 Metric = "recovery_p99"
	MetricActionsMean Metric = "actions_mean"
)

// value is the metric of one run; ok is false when the run has none.
func (m Metric) value(r Result) (v float64, ok bool) {
	switch m {
	case MetricDrainRate:
		v = r.DrainRate
	case MetricScheduleRate:
		v = r.ScheduleRate
	case MetricLagP99:
		v = r.Lag.P99.Seconds()
	case MetricDrainP99:
		if r.Drain != nil {
			v = r.Drain.P99.Seconds()
		}
	case MetricRecoveryP99:
		if r.Outage != nil {
			v = r.Outage.AfterRecovery.P99.Seconds()
		}
	case MetricActionsMean:
		if r.Outage != nil {
			v = r.Outage.Actions.Mean
		}
	}
	return v, v > 0
}

// Estimate is a median with its bootstrap interval.
type Estimate struct {
	Median float64 `json:"median"`
	Low    float64 `json:"ci_low"`
	High   float64 `json:"ci_high"`
	// N is how many values it rests on: pairs, or runs.
	N int `json:"n"`
}

// estimate is the median of xs and its percentile-bootstrap interval at
// Confidence; all zero for no values (JSON has no NaN).
func estimate(xs []float64) Estimate {
	if len(xs) == 0 {
		return Estimate{}
	}
	low, high := BootstrapMedian(xs, Confidence, bootstrapResamples, bootstrapSeed)
	return Estimate{Median: Median(xs), Low: low, High: high, N: len(xs)}
}

// Comparison is one metric of two paths over the alternating rounds of a
// workload: Of/Over in each round where both runs are valid, and the median
// of those pair ratios with its interval.
type Comparison struct {
	Workload string    `json:"workload"`
	Metric   Metric    `json:"metric"`
	Of       Kind      `json:"of"`
	Over     Kind      `json:"over"`
	Ratios   []float64 `json:"pair_ratios"`
	Estimate
	// Excluded names the rounds left out and why.
	Excluded []string `json:"excluded,omitempty"`
}

// Compare pairs, round by round (warm-ups left out), the runs of of and
// over among results and compares metric; workload labels the comparison
// (results may span several workloads when pooled).
func Compare(workload string, results []Result, metric Metric, of, over Kind) Comparison {
	type key struct {
		workload string
		round    int
	}
	runs := map[key]map[Kind]Result{}
	var rounds []key
	for _, r := range results {
		if r.Round < 1 || (r.Kind != of && r.Kind != over) {
			continue
		}
		k := key{r.Workload, r.Round}
		if runs[k] == nil {
			runs[k] = map[Kind]Result{}
			rounds = append(rounds, k)
		}
		runs[k][r.Kind] = r
	}
	c := Comparison{Workload: workload, Metric: metric, Of: of, Over: over}
	var num, den []float64
	for _, k := range rounds {
		why := func(kind Kind) string {
			r, ok := runs[k][kind]
			switch {
			case !ok:
				return fmt.Sprintf("no %s run", kind)
			case r.Invalid != "":
				return fmt.Sprintf("%s: %s", kind, r.Invalid)
			}
			if _, ok := metric.value(r); !ok {
				return fmt.Sprintf("%s: no %s", kind, metric)
			}
			return ""
		}
		if reason := cmp(why(of), why(over)); reason != "" {
			c.Excluded = append(c.Excluded, fmt.Sprintf("%s round %d: %s", k.workload, k.round, reason))
			continue
		}
		n, _ := metric.value(runs[k][of])
		d, _ := metric.value(runs[k][over])
		num, den = append(num, n), append(den, d)
	}
	c.Ratios = PairRatios(num, den)
	c.Estimate = estimate(c.Ratios)
	return c
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Comparisons are the report's comparisons: per workload, the full path
// against each baseline, the delayed-start path against them and the full
// path (drain rate and time-to-drain p99 for burst, cold burst, catch-up
// and slow, p99 lag for steady), the baselines against each other,
// scheduling against the naive baseline's starts, the API against the
// starter; the outage's two retry paces (p99 after recovery, actions per
// reminder); and scheduling pooled over burst, cold burst, catch-up and
// steady with either provider, which the scheduling target reads.
func Comparisons(results []Result) []Comparison {
	var out []Comparison
	var workloads []string
	for _, r := range results {
		if r.Round >= 1 && !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
	}
	// A comparison is reported when both paths ran (its pairs may all be
	// left out, and then it says why).
	has := func(rs []Result, c Comparison) bool {
		ran := map[Kind]bool{}
		for _, r := range rs {
			if r.Round >= 1 {
				ran[r.Kind] = true
			}
		}
		return ran[c.Of] && ran[c.Over]
	}
	var scheduling []Result
	for _, w := range workloads {
		var rs []Result
		for _, r := range results {
			if r.Workload == w {
				rs = append(rs, r)
			}
		}
		base := BaseWorkload(w)
		if base == "burst" || base == ColdBurstWorkload || base == "catchup" || base == "steady" {
			scheduling = append(scheduling, rs...)
		}
		metric := MetricDrainRate
		if base == "steady" || w == SteadyPruneWorkload {
			metric = MetricLagP99
		}
		cs := []Comparison{
			Compare(w, rs, metric, Pruning, Full),
			Compare(w, rs, metric, Full, Naive),
			Compare(w, rs, metric, Full, Lean),
			Compare(w, rs, metric, Lean, Naive),
			// What retiring the local first attempt cost (or saved).
			Compare(w, rs, metric, Full, FullLocal),
			Compare(w, rs, metric, FullLocal, Naive),
			// What starting with a delay instead of a timer changes.
			Compare(w, rs, metric, FullDelayed, Naive),
			Compare(w, rs, metric, FullDelayed, Lean),
			Compare(w, rs, metric, FullDelayed, Full),
		}
		if metric == MetricDrainRate {
			cs = append(cs, Compare(w, rs, MetricDrainP99, Full, Naive), Compare(w, rs, MetricDrainP99, Full, Lean),
				Compare(w, rs, MetricDrainP99, Full, FullLocal), Compare(w, rs, MetricDrainP99, FullLocal, Naive),
				Compare(w, rs, MetricDrainP99, FullDelayed, Naive), Compare(w, rs, MetricDrainP99, FullDelayed, Full))
		}
		cs = append(cs,
			Compare(w, rs, MetricScheduleRate, Full, Naive),
			Compare(w, rs, MetricScheduleRate, API, Full),
			Compare(w, rs, MetricRecoveryP99, Paced, OwnBackoff),
			Compare(w, rs, MetricActionsMean, Paced, OwnBackoff),
		)
		for _, c := range cs {
			if has(rs, c) {
				out = append(out, c)
			}
		}
	}
	if c := Compare(PooledWorkloads, scheduling, MetricScheduleRate, Full, Naive); has(scheduling, c) {
		out = append(out, c)
	}
	return out
}

// InstantSuffix names a workload run with the Instant provider
// ("burst-instant"); the plain name is the realistic provider's.
const InstantSuffix = "-instant"

// BaseWorkload is the workload a name runs, whatever its provider.
func BaseWorkload(name string) string { return strings.TrimSuffix(name, InstantSuffix) }

// SteadyPruneWorkload is the steady workload's prune pairs: the full path
// alone, and with prune running beside it.
const SteadyPruneWorkload = "steady-prune"

// PooledWorkloads labels a comparison over every workload's rounds.
const PooledWorkloads = "all"

// find returns the comparison asked for.
func find(cs []Comparison, workload string, metric Metric, of, over Kind) (Comparison, bool) {
	for _, c := range cs {
		if c.Workload == workload && c.Metric == metric && c.Of == of && c.Over == over {
			return c, true
		}
	}
	return Comparison{}, false
}

// runValues gives metric f of kind's valid compared runs of a workload.
func runValues(results []Result, workload string, kind Kind, f func(Result) (float64, bool)) []float64 {
	var out []float64
	for _, r := range results {
		if r.Workload == workload && r.Kind == kind && r.Round >= 1 && r.Invalid == "" {
			if v, ok := f(r); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// MedianOf is the median of f over kind's valid compared runs of a
// workload; ok is false when there are none.
func MedianOf(results []Result, workload string, kind Kind, f func(Result) (float64, bool)) (float64, bool) {
	v := Median(runValues(results, workload, kind, f))
	return v, !math.IsNaN(v)
}

func (c Comparison) label() string {
	return fmt.Sprintf("%s %s/%s", strings.ReplaceAll(string(c.Metric), "_", " "), c.Of, c.Over)
}
