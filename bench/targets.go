package bench

import (
	"fmt"
	"strings"
)

// Verdict is a target's outcome in one run of the benchmark.
type Verdict string

const (
	Met         Verdict = "met"
	Missed      Verdict = "missed"
	NotMeasured Verdict = "not measured"
)

// Target is one of issue 12's bars, judged from this run: a ratio target
// is met only if its interval's lower bound clears the bar (an upper bound,
// for a bar to stay under), so noise never passes for progress.
type Target struct {
	Name string `json:"name"`
	Bar  string `json:"bar"`
	// Estimate is what the verdict rests on (nil for counts).
	Estimate *Estimate `json:"estimate,omitempty"`
	Measured string    `json:"measured"`
	Verdict  Verdict   `json:"verdict"`
	Note     string    `json:"note,omitempty"`
}

// Bars of the targets.
const (
	BarFullOverNaive = 1.3
	BarFullOverLean  = 0.9
	BarSteadyP99     = 1.0 // seconds, on the dev server
	BarScheduling    = 0.95
	BarAPIScheduling = 0.9
	BarHistoryEvents = 12
)

// atLeast judges an estimate against a floor: met when its interval's
// lower bound is at or above it.
func atLeast(name string, e Estimate, bar float64, format string) Target {
	t := Target{Name: name, Bar: "≥ " + fmt.Sprintf(format, bar), Estimate: &e}
	return judge(t, e, format, e.N > 0 && e.Low >= bar)
}

// atMost judges an estimate against a ceiling: met when its interval's
// upper bound is at or below it.
func atMost(name string, e Estimate, bar float64, format string) Target {
	t := Target{Name: name, Bar: "≤ " + fmt.Sprintf(format, bar), Estimate: &e}
	return judge(t, e, format, e.N > 0 && e.High <= bar)
}

func judge(t Target, e Estimate, format string, met bool) Target {
	switch {
	case e.N == 0:
		t.Estimate, t.Measured, t.Verdict = nil, "-", NotMeasured
		return t
	case met:
		t.Verdict = Met
	default:
		t.Verdict = Missed
	}
	f := func(v float64) string { return fmt.Sprintf(format, v) }
	t.Measured = fmt.Sprintf("%s [%s, %s] (n=%d)", f(e.Median), f(e.Low), f(e.High), e.N)
	return t
}

// Targets judges every target the results allow.
func Targets(results []Result, comps []Comparison) []Target {
	var out []Target
	ratio := func(name, workload string, metric Metric, of, over Kind, bar float64) {
		c, ok := find(comps, workload, metric, of, over)
		if !ok {
			return
		}
		t := atLeast(name, c.Estimate, bar, "%.2f")
		if len(c.Excluded) > 0 {
			t.Note = fmt.Sprintf("%d round(s) left out", len(c.Excluded))
		}
		out = append(out, t)
	}
	for _, w := range []string{"burst", "catchup"} {
		ratio(w+" drain, full/naive", w, MetricDrainRate, Full, Naive, BarFullOverNaive)
		ratio(w+" drain, full/lean", w, MetricDrainRate, Full, Lean, BarFullOverLean)
	}
	if p99 := runValues(results, "steady", Full, lag99); len(p99) > 0 {
		t := atMost("steady p99 lag, full (s)", estimate(p99), BarSteadyP99, "%.3f")
		if rate, ok := MedianOf(results, "steady", Full, func(r Result) (float64, bool) { return r.Rate, r.Rate > 0 }); ok {
			t.Note = fmt.Sprintf("at %.1f reminders/s; the bar is for the dev server", rate)
		}
		out = append(out, t)
	}
	if p99 := runValues(results, SteadyPruneWorkload, Pruning, lag99); len(p99) > 0 {
		t := atMost("steady p99 lag while prune runs (s)", estimate(p99), BarSteadyP99, "%.3f")
		if c, ok := find(comps, SteadyPruneWorkload, MetricLagP99, Pruning, Full); ok && c.N > 0 {
			t.Note = fmt.Sprintf("p99 with prune / without, per pair: median %.2f [%.2f, %.2f]", c.Median, c.Low, c.High)
		}
		out = append(out, t)
	}
	ratio("scheduling, starter/bare starts", PooledWorkloads, MetricScheduleRate, Full, Naive, BarScheduling)
	ratio("scheduling, API/starter", "burst", MetricScheduleRate, API, Full, BarAPIScheduling)
	out = append(out, historyTargets(results)...)
	out = append(out, lossTargets(results)...)
	return out
}

func lag99(r Result) (float64, bool) { return r.Lag.P99.Seconds(), r.Delivered > 0 }

// reminderWorkload is where a delivered reminder's history is read for
// the history targets: a burst reminder sleeps on its timer, as a real
// one does (a catch-up one is already due at its first workflow task).
func reminderWorkload(results []Result) string {
	for _, w := range []string{"burst", "steady"} {
		if len(runValues(results, w, Full, events)) > 0 {
			return w
		}
	}
	return ""
}

func events(r Result) (float64, bool) { return float64(r.HistoryEvents), r.HistoryEvents > 0 }

func actions(r Result) (float64, bool) {
	if r.Actions == nil {
		return 0, false
	}
	return float64(r.Actions.Total), true
}

// historyTargets judges a delivered reminder's history length and
// billable actions, and says what the baselines' cost, for scale.
func historyTargets(results []Result) []Target {
	w := reminderWorkload(results)
	if w == "" {
		return []Target{
			{Name: "history events per delivered reminder, full", Bar: fmt.Sprintf("≤ %d", BarHistoryEvents), Measured: "-", Verdict: NotMeasured},
			{Name: "actions per delivered reminder, full", Bar: fmt.Sprintf("≤ %d (today's)", TodaysActionsPerReminder), Measured: "-", Verdict: NotMeasured},
		}
	}
	baselines := func(f func(Result) (float64, bool)) string {
		var parts []string
		for _, k := range []Kind{Naive, Lean} {
			if v, ok := MedianOf(results, w, k, f); ok {
				parts = append(parts, fmt.Sprintf("%s %g", k, v))
			}
		}
		return fmt.Sprintf("%s reminders; %s", w, strings.Join(parts, ", "))
	}
	ev := atMost("history events per delivered reminder, full", estimate(runValues(results, w, Full, events)), BarHistoryEvents, "%.0f")
	ev.Note = baselines(events)
	act := atMost("actions per delivered reminder, full", estimate(runValues(results, w, Full, actions)), TodaysActionsPerReminder, "%.0f")
	act.Bar += " (today's)"
	act.Note = baselines(actions)
	return []Target{ev, act}
}

// lossTargets: nothing lost, nothing sent twice, in any run of any
// workload (warm-ups and left-out runs count here).
func lossTargets(results []Result) []Target {
	var out []Target
	var order []string
	lost, dup := map[string]int{}, map[string]int{}
	for _, r := range results {
		if _, seen := lost[r.Workload]; !seen {
			order = append(order, r.Workload)
		}
		if r.Workload != "hold" {
			lost[r.Workload] += r.Lost
		}
		dup[r.Workload] += r.Duplicates
	}
	for _, w := range order {
		t := Target{Name: "lost and duplicates, " + w, Bar: "0 and 0", Measured: fmt.Sprintf("%d and %d", lost[w], dup[w]), Verdict: Met}
		if lost[w] != 0 || dup[w] != 0 {
			t.Verdict = Missed
		}
		out = append(out, t)
	}
	return out
}
