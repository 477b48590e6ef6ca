package bench

import (
	"fmt"
	"slices"
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
	// Either holds the bars of a target met when any of them is: each
	// judged by its own interval.
	Either []Target `json:"either,omitempty"`
	// Stretch is a further bar on the same estimate, and StretchVerdict
	// its verdict, judged by the same interval.
	Stretch        string  `json:"stretch,omitempty"`
	StretchVerdict Verdict `json:"stretch_verdict,omitempty"`
}

// Bars of the targets.
const (
	BarFullOverNaive = 1.3
	BarFullOverLean  = 0.9
	BarSteadyP99     = 1.0 // seconds, on the dev server
	BarScheduling    = 0.95
	BarAPIScheduling = 0.9
	BarHistoryEvents = 12
	// BarFullP99OverNaive is the time-to-drain p99 the full path must
	// reach against the naive baseline's when its drain rate does not
	// clear BarFullOverNaive: a drain that ends sooner is as good as a
	// faster middle.
	BarFullP99OverNaive = 0.8
	// BarOutageRecoveryP99 is the seconds after a provider's outage ends
	// by which the provider-paced retries deliver 99% of the reminders
	// that came due during it; BarOutageActions is their billable actions
	// per reminder over the old backoff's, at most.
	BarOutageRecoveryP99 = 60.0
	BarOutageActions     = 1.0
	// Issue 37's bars, for the cold burst and the catch-up, where no
	// worker holds the reminders when they come due: the delayed-start
	// path (and the full path) drain at least as fast as the naive
	// baseline and end no later, BarDelayedDrain and BarDelayedP99 of
	// naive's; the stretch is BarFullOverNaive and BarFullP99OverNaive.
	// A delivered plain reminder started with a delay records at most
	// BarDelayedEvents events, BarDelayedWorkflowTasks workflow tasks and
	// BarDelayedActions billable actions.
	BarDelayedDrain         = 1.0
	BarDelayedP99           = 1.0
	BarDelayedEvents        = 12
	BarDelayedWorkflowTasks = 2
	BarDelayedActions       = 3
)

// DelayedWorkloads are the workloads issue 37's ratio bars are judged on.
var DelayedWorkloads = []string{ColdBurstWorkload, "catchup"}

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

// stretch adds a further bar to a judged ratio target: above for a
// floor (atLeast), below for a ceiling.
func stretch(t Target, bar float64, floor bool, format string) Target {
	e := t.Estimate
	if floor {
		t.Stretch = "≥ " + fmt.Sprintf(format, bar)
	} else {
		t.Stretch = "≤ " + fmt.Sprintf(format, bar)
	}
	switch {
	case e == nil || e.N == 0:
		t.StretchVerdict = NotMeasured
	case floor && e.Low >= bar, !floor && e.High <= bar:
		t.StretchVerdict = Met
	default:
		t.StretchVerdict = Missed
	}
	return t
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

// either is met when any of its parts is, not measured when none is
// measured, and missed otherwise.
func either(name string, parts ...Target) Target {
	t := Target{Name: name, Either: parts, Verdict: NotMeasured}
	var bars, measured []string
	for _, p := range parts {
		bars = append(bars, p.Bar+" "+p.Name)
		measured = append(measured, p.Name+" "+p.Measured)
		switch {
		case p.Verdict == Met:
			t.Verdict = Met
		case p.Verdict == Missed && t.Verdict == NotMeasured:
			t.Verdict = Missed
		}
	}
	t.Bar, t.Measured = strings.Join(bars, " or "), strings.Join(measured, "; ")
	return t
}

// Targets judges every target the results allow.
func Targets(results []Result, comps []Comparison) []Target {
	var out []Target
	ratioTarget := func(name, workload string, metric Metric, of, over Kind, bar float64,
		judge func(string, Estimate, float64, string) Target) (Target, bool) {
		c, ok := find(comps, workload, metric, of, over)
		if !ok {
			return Target{}, false
		}
		t := judge(name, c.Estimate, bar, "%.2f")
		if len(c.Excluded) > 0 {
			t.Note = fmt.Sprintf("%d round(s) left out", len(c.Excluded))
		}
		return t, true
	}
	ratio := func(name, workload string, metric Metric, of, over Kind, bar float64) {
		if t, ok := ratioTarget(name, workload, metric, of, over, bar, atLeast); ok {
			out = append(out, t)
		}
	}
	// The realistic provider's runs: what a real mail API makes of them.
	for _, w := range []string{"burst", "catchup"} {
		drain, okDrain := ratioTarget("drain", w, MetricDrainRate, Full, Naive, BarFullOverNaive, atLeast)
		p99, okP99 := ratioTarget("p99", w, MetricDrainP99, Full, Naive, BarFullP99OverNaive, atMost)
		if okDrain || okP99 {
			var parts []Target
			if okDrain {
				parts = append(parts, drain)
			}
			if okP99 {
				parts = append(parts, p99)
			}
			out = append(out, either(w+" drain or time-to-drain p99, full/naive", parts...))
		}
		ratio(w+" drain, full/lean", w, MetricDrainRate, Full, Lean, BarFullOverLean)
	}
	if p99 := runValues(results, "steady", Full, lag99); len(p99) > 0 {
		t := atMost("steady p99 lag, full (s)", estimate(p99), BarSteadyP99, "%.3f")
		if rate, ok := MedianOf(results, "steady", Full, func(r Result) (float64, bool) { return r.Rate, r.Rate > 0 }); ok {
			t.Note = fmt.Sprintf("at %.1f reminders/s; the bar is for the dev server", rate)
		}
		if p := providerOf(results, "steady"); p != "" && p != "instant" {
			t.Note += fmt.Sprintf("; %s provider: a reminder caught in a 429 window starts its sending attempt after the window", p)
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
	for _, w := range DelayedWorkloads {
		for _, k := range []Kind{FullDelayed, Full} {
			label := fmt.Sprintf("%s/%s", k, Naive)
			if t, ok := ratioTarget(w+" drain, "+label, w, MetricDrainRate, k, Naive, BarDelayedDrain, atLeast); ok {
				out = append(out, stretch(t, BarFullOverNaive, true, "%.2f"))
			}
			if t, ok := ratioTarget(w+" time-to-drain p99, "+label, w, MetricDrainP99, k, Naive, BarDelayedP99, atMost); ok {
				out = append(out, stretch(t, BarFullP99OverNaive, false, "%.2f"))
			}
		}
	}
	ratio("scheduling, starter/bare starts", PooledWorkloads, MetricScheduleRate, Full, Naive, BarScheduling)
	ratio("scheduling, API/starter", "burst", MetricScheduleRate, API, Full, BarAPIScheduling)
	out = append(out, outageTargets(results, comps)...)
	out = append(out, historyTargets(results)...)
	out = append(out, delayedHistoryTargets(results)...)
	out = append(out, lossTargets(results)...)
	out = append(out, stallTarget(results))
	return out
}

// providerOf is the provider a workload's runs had ("" if none said).
func providerOf(results []Result, workload string) string {
	for _, r := range results {
		if r.Workload == workload && r.Provider != "" {
			return r.Provider
		}
	}
	return ""
}

func recoveryP99(r Result) (float64, bool) {
	if r.Outage == nil || r.Delivered == 0 {
		return 0, false
	}
	return r.Outage.AfterRecovery.P99.Seconds(), true
}

// outageTargets judge the outage workload against its issue's target:
// the provider-paced retries deliver 99% within a minute of recovery,
// within the rate cap, at no more actions per reminder than the old
// backoff.
func outageTargets(results []Result, comps []Comparison) []Target {
	ran := false
	for _, r := range results {
		ran = ran || r.Workload == OutageWorkload
	}
	if !ran {
		return nil
	}
	var out []Target
	{
		p99 := runValues(results, OutageWorkload, Paced, recoveryP99)
		t := atMost("outage: delivery after recovery p99, provider-paced (s)", estimate(p99), BarOutageRecoveryP99, "%.1f")
		var notes []string
		if own, ok := MedianOf(results, OutageWorkload, OwnBackoff, recoveryP99); ok {
			notes = append(notes, fmt.Sprintf("own backoff %.1f s", own))
		}
		peak, capped, before := 0.0, 0.0, 0
		for _, r := range results {
			if r.Workload == OutageWorkload && r.Outage != nil {
				peak, capped, before = max(peak, r.Outage.PeakRate), r.Outage.RateCap, before+r.Outage.BeforeEnd
			}
		}
		notes = append(notes, fmt.Sprintf("peak send rate %.1f/s over %s (cap %.0f/s)", peak, peakRateWindow, capped),
			fmt.Sprintf("%d delivered before the end", before))
		t.Note = strings.Join(notes, "; ")
		out = append(out, t)
	}
	if c, ok := find(comps, OutageWorkload, MetricActionsMean, Paced, OwnBackoff); ok {
		t := atMost("outage: actions per reminder (mean), provider-paced/own backoff", c.Estimate, BarOutageActions, "%.2f")
		paced, okPaced := MedianOf(results, OutageWorkload, Paced, actionsMean)
		own, okOwn := MedianOf(results, OutageWorkload, OwnBackoff, actionsMean)
		if okPaced && okOwn {
			t.Note = fmt.Sprintf("medians %.2f and %.2f", paced, own)
		}
		if len(c.Excluded) > 0 {
			t.Note = strings.TrimPrefix(t.Note+fmt.Sprintf("; %d round(s) left out", len(c.Excluded)), "; ")
		}
		out = append(out, t)
	}
	return out
}

func actionsMean(r Result) (float64, bool) {
	if r.Outage == nil {
		return 0, false
	}
	return r.Outage.Actions.Mean, r.Outage.Histories > 0
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

// delayedHistoryWorkloads are where a delayed-start reminder's history is
// read for its targets: the bursts, warm and cold (a delayed reminder's
// first task runs at its due time in either), and the catch-up.
var delayedHistoryWorkloads = []string{ColdBurstWorkload, "burst", "catchup"}

func workflowTasks(r Result) (float64, bool) {
	return float64(r.WorkflowTasks), r.WorkflowTasks > 0
}

// delayedHistoryTargets judge a delivered plain reminder started with a
// delay (one per valid run of the delayed-start path, pooled over
// delayedHistoryWorkloads with either provider) against issue 37's
// counts, and say what the full path's cost, for scale; none when the
// path did not run.
func delayedHistoryTargets(results []Result) []Target {
	pooled := func(kind Kind, f func(Result) (float64, bool)) []float64 {
		var out []float64
		for _, r := range results {
			if r.Kind == kind && r.Round >= 1 && r.Invalid == "" && slices.Contains(delayedHistoryWorkloads, BaseWorkload(r.Workload)) {
				if v, ok := f(r); ok {
					out = append(out, v)
				}
			}
		}
		return out
	}
	if len(pooled(FullDelayed, events)) == 0 {
		return nil
	}
	var out []Target
	for _, m := range []struct {
		name string
		f    func(Result) (float64, bool)
		bar  float64
	}{
		{"history events", events, BarDelayedEvents},
		{"workflow tasks", workflowTasks, BarDelayedWorkflowTasks},
		{"actions", actions, BarDelayedActions},
	} {
		t := atMost(m.name+" per delivered reminder, full-delayed", estimate(pooled(FullDelayed, m.f)), m.bar, "%.0f")
		t.Note = strings.Join(delayedHistoryWorkloads, ", ") + " reminders"
		if full := pooled(Full, m.f); len(full) > 0 {
			t.Note += fmt.Sprintf("; full %g", Median(full))
		}
		out = append(out, t)
	}
	return out
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
