package bench

import (
	"fmt"
	"strings"
	"time"
)

// StallShare is the share of its path's median drain rate below which a
// run is in stall mode: the bursts that drained at 4/s where the same path
// drained at 40/s, with a minute-long tail, that the medians and their
// intervals only hint at.
const StallShare = 0.25

// Stall is one run in stall mode.
type Stall struct {
	Workload  string  `json:"workload"`
	Kind      Kind    `json:"kind"`
	Round     int     `json:"round"`
	DrainRate float64 `json:"drain_rate"`
	// PathMedian is the median drain rate of the path's runs of the
	// workload, this one included.
	PathMedian float64 `json:"path_median_drain_rate"`
	// P99 is the run's time-to-drain p99.
	P99 time.Duration `json:"time_to_drain_p99_ns"`
	// Tasks is where the run's sample of reminders waited for their tasks.
	Tasks *TaskStats `json:"tasks,omitempty"`
}

// drained reports whether a run counts for stall mode: it has a drain
// rate and did not fail.
func drained(r Result) bool { return r.Error == "" && r.DrainRate > 0 }

// Stalls are the runs in stall mode, in the results' order: per workload
// and path, each run with a drain rate below StallShare of the median of
// that path's runs (warm-ups included: a warm-up that stalls stalled).
func Stalls(results []Result) []Stall {
	type key struct {
		workload string
		kind     Kind
	}
	rates := map[key][]float64{}
	for _, r := range results {
		if drained(r) {
			k := key{r.Workload, r.Kind}
			rates[k] = append(rates[k], r.DrainRate)
		}
	}
	var out []Stall
	for _, r := range results {
		if !drained(r) {
			continue
		}
		median := Median(rates[key{r.Workload, r.Kind}])
		if r.DrainRate < StallShare*median {
			s := Stall{Workload: r.Workload, Kind: r.Kind, Round: r.Round, DrainRate: r.DrainRate, PathMedian: median, Tasks: r.Tasks}
			if r.Drain != nil {
				s.P99 = r.Drain.P99
			}
			out = append(out, s)
		}
	}
	return out
}

// stallCounts says how many runs of each path that has a drain rate are
// in stall mode, in the order the paths first appear: "naive 0, lean 1".
func stallCounts(results []Result, stalls []Stall) string {
	var order []Kind
	counts := map[Kind]int{}
	for _, r := range results {
		if _, seen := counts[r.Kind]; drained(r) && !seen {
			order = append(order, r.Kind)
			counts[r.Kind] = 0
		}
	}
	for _, s := range stalls {
		counts[s.Kind]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// stallTarget: no run of any path in any workload is in stall mode.
func stallTarget(results []Result) Target {
	t := Target{Name: "no run in stall mode (drain below a quarter of its path's median)", Bar: "0 runs"}
	stalls := Stalls(results)
	counts := stallCounts(results, stalls)
	switch {
	case counts == "":
		t.Measured, t.Verdict = "-", NotMeasured
	case len(stalls) == 0:
		t.Measured, t.Verdict = "0 runs", Met
	default:
		t.Measured, t.Verdict = fmt.Sprintf("%d run(s)", len(stalls)), Missed
	}
	if counts != "" {
		t.Note = "per path: " + counts
	}
	return t
}
