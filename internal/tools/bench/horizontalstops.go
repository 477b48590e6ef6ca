package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Thresholds of the reading: a count that adds less than stallGain to the
// drain of the count before adds nothing this machine can tell from
// noise, and a machine busier than saturated over the drain window has no
// CPU left to give a worker.
const (
	stallGain = 1.10
	saturated = 0.85
	// sharedMachine is the cores other processes may take in a drain
	// window before the reading says the machine was shared.
	sharedMachine = 0.2
)

// WhereItStops reads, per workload, how the drain grew with the workers
// (the median per-round ratio over the smallest count), where it stopped
// growing, and what kept the machine's cores busy there.
func WhereItStops(rows []ScalingRow, comps []Comparison, cpus int) []string {
	var out []string
	var workloads []string
	for _, r := range rows {
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
	}
	for _, w := range workloads {
		var counts []ScalingRow
		for _, r := range rows {
			if r.Workload == w && !r.Kill {
				counts = append(counts, r)
			}
		}
		if len(counts) == 0 {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s: ", w)
		// Each count's drain over the smallest's: the median of the
		// per-round ratios where there is one, else the medians' ratio.
		gain := map[int]float64{counts[0].Workers: 1}
		var said []string
		for _, r := range counts[1:] {
			g, how := 0.0, "per round"
			if c, ok := find(comps, w, MetricDrainRate, r.Kind, counts[0].Kind); ok && c.N > 0 {
				g = c.Median
			} else if counts[0].DrainRate > 0 {
				g, how = r.DrainRate/counts[0].DrainRate, "of the medians"
			}
			gain[r.Workers] = g
			said = append(said, fmt.Sprintf("%d workers drain %.2f× one's (%s)", r.Workers, g, how))
		}
		if len(said) > 0 {
			b.WriteString(strings.Join(said, ", ") + ". ")
		}
		stop := counts[len(counts)-1]
		for i := 1; i < len(counts); i++ {
			prev, cur := gain[counts[i-1].Workers], gain[counts[i].Workers]
			if prev > 0 && cur/prev < stallGain {
				stop = counts[i-1]
				break
			}
		}
		if stop.Workers == counts[len(counts)-1].Workers && len(counts) > 1 {
			fmt.Fprintf(&b, "It still grows at %d workers. ", stop.Workers)
		} else {
			fmt.Fprintf(&b, "It stops growing at %d worker(s). ", stop.Workers)
		}
		b.WriteString(busyReading(stop, cpus))
		out = append(out, b.String())
	}
	return out
}

// busyReading says what kept the cores busy in a row's drain window.
func busyReading(r ScalingRow, cpus int) string {
	if len(r.Cores) == 0 || cpus == 0 {
		return fmt.Sprintf("At %d worker(s) no CPU readings cover the drain window.", r.Workers)
	}
	var parts []string
	names := map[string]string{PartServer: "the Temporal server", PartPostgres: "PostgreSQL", PartWorkers: "the workers",
		PartServes: "the serve replicas", PartHarness: "the harness"}
	for _, p := range windowParts {
		if v, ok := r.Cores[p]; ok {
			s := fmt.Sprintf("%s %.2f", names[p], v)
			if m, ok := r.Cores[PartMirror]; ok && p == PartPostgres {
				s += fmt.Sprintf(" (the mirror's connections %.2f)", m)
			}
			parts = append(parts, s)
		}
	}
	var b strings.Builder
	machine := machineBusy(r.Cores)
	fmt.Fprintf(&b, "In its drain window at %d worker(s) the machine's %d cores were %.0f%% busy (%.2f): %s",
		r.Workers, cpus, 100*machine/float64(cpus), machine, strings.Join(parts, ", "))
	if o := others(r.Cores); o > 0.005 {
		fmt.Fprintf(&b, ", other processes %.2f", o)
	}
	b.WriteString(". ")
	largest := slices.MaxFunc([]string{PartServer, PartPostgres, PartWorkers, PartServes}, func(a, b string) int {
		switch {
		case r.Cores[a] < r.Cores[b]:
			return -1
		case r.Cores[a] > r.Cores[b]:
			return 1
		}
		return 0
	})
	if machine >= saturated*float64(cpus) {
		engine := r.Cores[PartServer] + r.Cores[PartPostgres]
		fmt.Fprintf(&b, "The CPU is saturated, %s the largest share; the engine (its server and PostgreSQL) takes %.2f of the %d cores, the workers %.2f.",
			names[largest], engine, cpus, r.Cores[PartWorkers])
	} else {
		fmt.Fprintf(&b, "The CPU is not saturated (%s the busiest): the drain waits on something other than CPU.", names[largest])
	}
	if o := others(r.Cores); o >= sharedMachine {
		fmt.Fprintf(&b, " Other processes took %.2f cores: the machine was shared, and these figures are low.", o)
	}
	return b.String()
}
