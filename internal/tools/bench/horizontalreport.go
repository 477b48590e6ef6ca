package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HorizontalReport is what the horizontal workload writes: every run, the
// comparisons of drain between worker counts and against the kill, each
// count's medians and busy cores, and where the drain stops growing.
type HorizontalReport struct {
	Machine string          `json:"machine"`
	CPUs    int             `json:"cpus"`
	At      time.Time       `json:"at"`
	Engine  string          `json:"engine"`
	Options map[string]any  `json:"options"`
	Runs    []HorizontalRun `json:"runs"`
	// Comparisons divide drain rate and time to drain p99 within each
	// round: each worker count over the first, and the kill run over the
	// first and the largest count.
	Comparisons []Comparison `json:"comparisons"`
	Scaling     []ScalingRow `json:"scaling"`
	// Stops says, per workload, where the drain stopped growing and what
	// was busy there.
	Stops []string `json:"where_it_stops"`
	// Figures are what the fleet model takes from the runs (medians of the
	// compared runs without a kill), and Mirror what the mirror held per
	// reminder after them all.
	Figures *FleetFigures    `json:"fleet_figures,omitempty"`
	Mirror  *MirrorFootprint `json:"mirror,omitempty"`
	// Samples are every part's CPU seconds, every SampleEvery.
	Samples []CPUSample `json:"cpu_samples,omitempty"`
	Errors  []string    `json:"errors,omitempty"`
}

// ScalingRow is one workload at one worker count (or its kill), medians
// of its compared runs.
type ScalingRow struct {
	Workload string `json:"workload"`
	Kind     Kind   `json:"kind"`
	Workers  int    `json:"workers"`
	Kill     bool   `json:"kill,omitempty"`
	// Runs are the compared runs the medians rest on.
	Runs      int     `json:"runs"`
	DrainRate float64 `json:"drain_rate"`
	// DrainP50 and DrainP99 are time to drain, in seconds.
	DrainP50 float64 `json:"time_to_drain_p50"`
	DrainP99 float64 `json:"time_to_drain_p99"`
	// CPUms is each part's CPU a reminder, in milliseconds (the run's CPU
	// seconds, its settling included, over its reminders).
	CPUms map[string]float64 `json:"cpu_ms_per_reminder"`
	// Cores is what each part kept busy in the drain window (the machine
	// as a whole among them), Busy the machine's share of its cores busy
	// (the parts' sum where the machine was not read), and Others the
	// cores other processes took.
	Cores  map[string]float64 `json:"window_cores"`
	Busy   float64            `json:"window_busy"`
	Others float64            `json:"window_others"`
}

// cpuParts are the parts a run's CPU seconds are reported for.
var cpuParts = []string{PartServer, PartPostgres, PartWorkers, PartServes}

// windowParts are the parts the drain window's busy cores add up; the
// mirror is inside PostgreSQL, so it is shown, not added.
var windowParts = []string{PartServer, PartPostgres, PartWorkers, PartServes, PartHarness}

// label names a run for a line.
func (r HorizontalRun) label() string {
	kill := ""
	if r.Kill != nil {
		kill = " with the kill"
	}
	return fmt.Sprintf("%s round %d, %d worker(s)%s", r.Workload, r.Round, r.Workers, kill)
}

// compared reports whether the run is in the comparisons and medians.
func (r HorizontalRun) compared() bool { return r.Round > 0 && r.Invalid == "" }

// problems are the run's error and the violations its check found.
func (r HorizontalRun) problems() []string {
	var out []string
	if r.Error != "" {
		out = append(out, r.label()+": "+r.Error)
	}
	if r.Check != nil {
		for _, v := range r.Check.Violations {
			out = append(out, r.label()+": "+v)
		}
	}
	if r.Kill != nil && r.Kill.Error != "" {
		out = append(out, r.label()+": the kill: "+r.Kill.Error)
	}
	return out
}

// line is the run in one line, for the progress log.
func (r HorizontalRun) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: n=%d drain=%.1f/s", r.label(), r.N, r.DrainRate)
	if r.Drain != nil {
		fmt.Fprintf(&b, " drain-p50=%s p99=%s", r.Drain.P50.Round(time.Millisecond), r.Drain.P99.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, " sched=%.0f/s slack=%s delivered=%d dup=%d lost=%d", r.ScheduleRate, r.Slack.Round(time.Millisecond),
		r.Delivered, r.Duplicates, r.Lost)
	if c := r.Check; c != nil {
		fmt.Fprintf(&b, " | check: twice %d (in window %d), status events %d/%d reached, %d repeated (%d claimed by the killed serve), provider events %d posted, %d kept, %d reposted",
			c.Twice, c.InWindow, c.Reached, c.StatusEvents, c.Repeated, c.RepeatedClaimed, c.ProviderEvents, c.Applied, c.Reposted)
	}
	if len(r.Cores) > 0 {
		fmt.Fprintf(&b, " | window cores %s", coresText(r.Cores))
	}
	fmt.Fprintf(&b, " | in %s, quiet %s after", r.Elapsed.Round(time.Second), r.Quiet.Round(time.Second))
	if r.Round > 0 && r.Invalid != "" {
		fmt.Fprintf(&b, " [left out: %s]", r.Invalid)
	}
	return b.String()
}

// coresText is the busy cores of each part, in a fixed order.
func coresText(c map[string]float64) string {
	var parts []string
	for _, p := range append(slices.Clone(windowParts), PartMirror, PartMachine) {
		if v, ok := c[p]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", p, v))
		}
	}
	return strings.Join(parts, ", ")
}

// judge fills in the comparisons, the scaling rows and where it stops.
func (rep *HorizontalReport) judge() {
	results := make([]Result, 0, len(rep.Runs))
	for _, r := range rep.Runs {
		results = append(results, r.Result)
	}
	rep.Comparisons = HorizontalComparisons(results)
	rep.Scaling = ScalingRows(rep.Runs, rep.CPUs)
	rep.Stops = WhereItStops(rep.Scaling, rep.Comparisons, rep.CPUs)
	rep.Figures = fleetFigures(rep.Runs)
}

// FleetFigures are what `shipnotify capacity --fleet` takes from the
// horizontal runs: medians over the compared runs without a kill.
type FleetFigures struct {
	Runs int `json:"runs"`
	// ShardWrites are the engine's workflow writes per reminder,
	// WriteSeconds one's latency, ShardWaitSeconds a shard's lock wait
	// (the engine's own metrics; 0 where they were not read).
	ShardWrites      float64 `json:"shard_writes_per_reminder"`
	WriteSeconds     float64 `json:"shard_write_seconds"`
	ShardWaitSeconds float64 `json:"shard_wait_seconds"`
	// SlotSeconds is how long a send held its claim.
	SlotSeconds float64 `json:"slot_seconds"`
	// ProviderEvents are SendGrid's events per reminder serve took.
	ProviderEvents float64 `json:"provider_events_per_reminder"`
}

// fleetFigures takes the medians; nil when no run qualifies.
func fleetFigures(runs []HorizontalRun) *FleetFigures {
	var writes, latency, wait, slot, events []float64
	for _, r := range runs {
		if r.Round < 1 || r.Kill != nil || r.Invalid != "" || r.Error != "" || r.Check == nil || r.Check.Reminders == 0 {
			continue
		}
		if r.Engine != nil {
			writes = append(writes, r.Engine.ShardWrites)
			latency = append(latency, r.Engine.WriteSeconds)
			wait = append(wait, r.Engine.ShardWaitSeconds)
		}
		slot = append(slot, r.SlotSeconds)
		events = append(events, float64(r.Check.Applied)/float64(r.Check.Reminders))
	}
	if len(slot) == 0 {
		return nil
	}
	// Median of none is NaN, which JSON cannot hold: 0 says not read.
	med := func(xs []float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		return Median(xs)
	}
	return &FleetFigures{Runs: len(slot), ShardWrites: med(writes), WriteSeconds: med(latency),
		ShardWaitSeconds: med(wait), SlotSeconds: med(slot), ProviderEvents: med(events)}
}

// HorizontalComparisons divides, round by round, the drain rate and the
// time to drain p99 of every worker count over the smallest's, and the
// kill run's over the smallest and the largest count's.
func HorizontalComparisons(results []Result) []Comparison {
	var out []Comparison
	for _, w := range workloadsOf(results) {
		counts, kills := countsOf(results, w)
		if len(counts) == 0 {
			continue
		}
		one, top := horizontalKind(counts[0], false), horizontalKind(counts[len(counts)-1], false)
		type pair struct{ of, over Kind }
		var pairs []pair
		for _, c := range counts[1:] {
			pairs = append(pairs, pair{horizontalKind(c, false), one})
		}
		for _, k := range kills {
			pairs = append(pairs, pair{horizontalKind(k, true), one})
			if k == counts[len(counts)-1] && top != one {
				pairs = append(pairs, pair{horizontalKind(k, true), top})
			}
		}
		var own []Result
		for _, r := range results {
			if r.Workload == w {
				own = append(own, r)
			}
		}
		for _, m := range []Metric{MetricDrainRate, MetricDrainP99} {
			for _, p := range pairs {
				out = append(out, Compare(w, own, m, p.of, p.over))
			}
		}
	}
	return out
}

// workloadsOf is the workloads among results, in order of first run.
func workloadsOf(results []Result) []string {
	var out []string
	for _, r := range results {
		if !slices.Contains(out, r.Workload) {
			out = append(out, r.Workload)
		}
	}
	return out
}

// countsOf is a workload's worker counts without and with the kill, each
// sorted, read from its runs' kinds.
func countsOf(results []Result, workload string) (counts, kills []int) {
	for _, r := range results {
		n, kill, ok := parseHorizontalKind(r.Kind)
		if r.Workload != workload || !ok {
			continue
		}
		list := &counts
		if kill {
			list = &kills
		}
		if !slices.Contains(*list, n) {
			*list = append(*list, n)
		}
	}
	slices.Sort(counts)
	slices.Sort(kills)
	return counts, kills
}

// parseHorizontalKind reads a kind horizontalKind made.
func parseHorizontalKind(k Kind) (workers int, kill bool, ok bool) {
	rest, found := strings.CutPrefix(string(k), "workers-")
	if !found {
		return 0, false, false
	}
	rest, kill = strings.CutSuffix(rest, "+kill")
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return 0, false, false
	}
	return n, kill, true
}

// ScalingRows gathers each workload's compared runs by kind: medians of
// drain, time to drain, CPU a reminder and busy cores.
func ScalingRows(runs []HorizontalRun, cpus int) []ScalingRow {
	type key struct {
		workload string
		kind     Kind
	}
	var order []key
	groups := map[key][]HorizontalRun{}
	for _, r := range runs {
		if !r.compared() {
			continue
		}
		k := key{r.Workload, r.Kind}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []ScalingRow
	for _, k := range order {
		g := groups[k]
		row := ScalingRow{Workload: k.workload, Kind: k.kind, Workers: g[0].Workers, Kill: g[0].Kill != nil, Runs: len(g),
			CPUms: map[string]float64{}, Cores: map[string]float64{}}
		med := func(f func(HorizontalRun) (float64, bool)) (float64, bool) {
			var xs []float64
			for _, r := range g {
				if v, ok := f(r); ok {
					xs = append(xs, v)
				}
			}
			if len(xs) == 0 {
				return 0, false
			}
			return Median(xs), true
		}
		row.DrainRate, _ = med(func(r HorizontalRun) (float64, bool) { return r.DrainRate, r.DrainRate > 0 })
		row.DrainP50, _ = med(func(r HorizontalRun) (float64, bool) { return drainAt(r, 50) })
		row.DrainP99, _ = med(func(r HorizontalRun) (float64, bool) { return drainAt(r, 99) })
		for _, p := range cpuParts {
			if v, ok := med(func(r HorizontalRun) (float64, bool) { return cpuPerReminder(r, p) }); ok {
				row.CPUms[p] = v
			}
		}
		for _, p := range append(slices.Clone(windowParts), PartMirror, PartMachine) {
			if v, ok := med(func(r HorizontalRun) (float64, bool) { v, ok := r.Cores[p]; return v, ok }); ok {
				row.Cores[p] = v
			}
		}
		if cpus > 0 {
			row.Busy = machineBusy(row.Cores) / float64(cpus)
		}
		row.Others = others(row.Cores)
		out = append(out, row)
	}
	// A workload's rows together, in the order its runs came; within it
	// the counts in order, the kill last.
	first := map[string]int{}
	for i, k := range order {
		if _, ok := first[k.workload]; !ok {
			first[k.workload] = i
		}
	}
	slices.SortStableFunc(out, func(a, b ScalingRow) int {
		if a.Workload != b.Workload {
			return first[a.Workload] - first[b.Workload]
		}
		if a.Kill != b.Kill {
			if a.Kill {
				return 1
			}
			return -1
		}
		return a.Workers - b.Workers
	})
	return out
}

func drainAt(r HorizontalRun, p int) (float64, bool) {
	if r.Drain == nil {
		return 0, false
	}
	d := r.Drain.P50
	if p == 99 {
		d = r.Drain.P99
	}
	return d.Seconds(), d > 0
}

// cpuPerReminder is a part's CPU of the run over its reminders, in ms.
func cpuPerReminder(r HorizontalRun, part string) (float64, bool) {
	var v *float64
	switch part {
	case PartServer:
		v = r.CPU.Server
	case PartPostgres:
		v = r.CPU.Postgres
	case PartWorkers:
		v = r.CPU.Worker
	case PartServes:
		v = r.CPU.Serve
	}
	if v == nil || r.N == 0 {
		return 0, false
	}
	return *v * 1000 / float64(r.N), true
}

// busy is the cores the window's parts kept busy, together.
func busy(cores map[string]float64) float64 {
	total := 0.0
	for _, p := range windowParts {
		total += cores[p]
	}
	return total
}

// machineBusy is the cores the whole machine kept busy, or the parts'
// sum where it was not read.
func machineBusy(cores map[string]float64) float64 {
	if m, ok := cores[PartMachine]; ok {
		return m
	}
	return busy(cores)
}

// others is the cores processes other than the parts took (0 where the
// machine was not read).
func others(cores map[string]float64) float64 {
	m, ok := cores[PartMachine]
	if !ok {
		return 0
	}
	return max(0, m-busy(cores))
}
