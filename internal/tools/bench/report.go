package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable prints the runs, the comparisons and the targets for people.
func WriteTable(w io.Writer, results []Result, comps []Comparison, targets []Target) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tpath\tprovider\tround\tn\tsched/s\tslack\tdrain/s\tdrain p50\tp90\tp99\taccepted p99\tlag p50\tp99\tmax\t"+
		"delivered\tdup\tlost\tevents\tWFTs\tactions\tCPU s: server\tworker\tpostgres\tworker RSS\tquery p99\tcompared\t")
	var left []string
	for _, r := range results {
		round, compared := fmt.Sprint(r.Round), "yes"
		if r.Round == 0 {
			round, compared = "warm-up", "-"
		}
		if r.Invalid != "" {
			compared = "no"
			left = append(left, fmt.Sprintf("%s %s round %d: %s", r.Workload, r.Kind, r.Round, r.Invalid))
		}
		var d Drain
		if r.Drain != nil {
			d = *r.Drain
		}
		acts := "-"
		if r.Actions != nil {
			acts = fmt.Sprint(r.Actions.Total)
		}
		accepted := "-"
		if r.Accepted != nil {
			accepted = ms(r.Accepted.P99)
		}
		provider := r.Provider
		if provider == "" {
			provider = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Workload, r.Kind, provider, round, r.N, r.ScheduleRate, ms(r.Slack), rate(r.DrainRate),
			ms(d.P50), ms(d.P90), ms(d.P99), accepted, ms(r.Lag.P50), ms(r.Lag.P99), ms(r.Lag.Max),
			r.Delivered, r.Duplicates, r.Lost, count(r.HistoryEvents), count(r.WorkflowTasks), acts,
			seconds(r.CPU.Server), seconds(r.CPU.Worker), seconds(r.CPU.Postgres), mb(r.WorkerRSS), ms(r.QueryP99), compared)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range left {
		fmt.Fprintln(w, "  left out: "+l)
	}
	if err := writeCosts(w, results); err != nil {
		return err
	}
	if err := writeTasks(w, results); err != nil {
		return err
	}
	if err := writeStalls(w, results); err != nil {
		return err
	}
	if err := writeOutage(w, results); err != nil {
		return err
	}
	if len(comps) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "workload\tcompared (per round)\tpairs\tmedian\t%.0f%% interval\tleft out\t\n", Confidence*100)
		for _, c := range comps {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t\n", c.Workload, c.label(), c.N, ratio(c.N, c.Median),
				interval(c.N, c.Low, c.High), len(c.Excluded))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(targets) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "target\tbar\tmeasured: median [interval] (n)\tverdict\tnote")
		for _, t := range targets {
			bar, verdict := t.Bar, string(t.Verdict)
			if t.Stretch != "" {
				bar += " (stretch " + t.Stretch + ")"
				if t.Verdict != NotMeasured {
					verdict += "; stretch " + string(t.StretchVerdict)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, bar, t.Measured, verdict, t.Note)
		}
		return tw.Flush()
	}
	return nil
}

func ratio(n int, v float64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func interval(n int, low, high float64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("[%.2f, %.2f]", low, high)
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond && d > -10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Second && d > -10*time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func rate(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", r)
}

func count(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func seconds(s *float64) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *s)
}

func mb(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MB", float64(b)/(1<<20))
}

// writeStalls lists the runs in stall mode and counts them per path.
func writeStalls(w io.Writer, results []Result) error {
	stalls := Stalls(results)
	counts := stallCounts(results, stalls)
	if counts == "" {
		return nil
	}
	fmt.Fprintf(w, "\nstall mode (drain rate below %.0f%% of its path's median in its workload): %d run(s); per path: %s\n",
		StallShare*100, len(stalls), counts)
	for _, s := range stalls {
		fmt.Fprintf(w, "  stall: %s round %d %s: drain %.1f/s (path median %.1f/s), time-to-drain p99 %s%s\n",
			s.Workload, s.Round, s.Kind, s.DrainRate, s.PathMedian, ms(s.P99), taskLine(s.Tasks))
	}
	return nil
}

// taskLine says where a run's tasks waited, for a stall's line.
func taskLine(t *TaskStats) string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf("; in %d histories: %d sticky schedule-to-start timeouts, %d start-to-close, %d heartbeat tasks, failed %v, workflow-task wait p99 %s",
		t.Histories, t.StickyTimeouts, t.StartTimeouts, t.Heartbeats, t.Failed, ms(t.WorkflowTaskWait.P99))
}

// Costs are, per workload and path in the results' order, what a
// delivered reminder cost the engine: the means of the runs' sampled
// delivered histories, weighted by how many each had (warm-ups and
// left-out runs included: a cost is paid whether or not a run is
// compared).
func Costs(results []Result) []WorkloadCost {
	var out []WorkloadCost
	at := map[[2]string]int{}
	for _, r := range results {
		c := r.Cost
		if c == nil || c.Histories == 0 {
			continue
		}
		k := [2]string{r.Workload, string(r.Kind)}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, WorkloadCost{Workload: r.Workload, Kind: r.Kind})
		}
		w, n := &out[i], float64(c.Histories)
		w.Runs++
		w.Histories += c.Histories
		w.Events += c.Events * n
		w.WorkflowTasks += c.WorkflowTasks * n
		w.Actions += c.Actions * n
	}
	for i := range out {
		n := float64(out[i].Histories)
		out[i].Events, out[i].WorkflowTasks, out[i].Actions = out[i].Events/n, out[i].WorkflowTasks/n, out[i].Actions/n
	}
	return out
}

// WorkloadCost is ReminderCost over a path's runs of a workload.
type WorkloadCost struct {
	Workload string `json:"workload"`
	Kind     Kind   `json:"kind"`
	Runs     int    `json:"runs"`
	ReminderCost
}

// writeCosts prints Costs: history events, workflow tasks and billable
// actions per delivered reminder, per workload and path.
func writeCosts(w io.Writer, results []Result) error {
	costs := Costs(results)
	if len(costs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nper delivered reminder (sampled histories, all runs)")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tpath\truns\thistories\tevents\tworkflow tasks\tactions\t")
	for _, c := range costs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t\n", c.Workload, c.Kind, c.Runs, c.Histories, c.Events, c.WorkflowTasks, c.Actions)
	}
	return tw.Flush()
}

// writeTasks sums, per workload and path, where the sampled reminders
// waited for their tasks: the evidence of what a slow drain waited on.
func writeTasks(w io.Writer, results []Result) error {
	type key struct {
		workload string
		kind     Kind
	}
	var order []key
	sums := map[key]*TaskStats{}
	waits := map[key][]float64{}
	for _, r := range results {
		if r.Tasks == nil {
			continue
		}
		k := key{r.Workload, r.Kind}
		if sums[k] == nil {
			order = append(order, k)
			sums[k] = &TaskStats{}
		}
		t := sums[k]
		t.Histories += r.Tasks.Histories
		t.StickyTimeouts += r.Tasks.StickyTimeouts
		t.StartTimeouts += r.Tasks.StartTimeouts
		t.Heartbeats += r.Tasks.Heartbeats
		for c, n := range r.Tasks.Failed {
			if t.Failed == nil {
				t.Failed = map[string]int{}
			}
			t.Failed[c] += n
		}
		waits[k] = append(waits[k], r.Tasks.WorkflowTaskWait.P99.Seconds())
	}
	if len(order) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nwhere the tasks waited (sampled histories, all runs)\nworkload\tpath\thistories\tsticky timeouts\tstart timeouts\theartbeat tasks\tfailed\tworkflow-task wait p99, median of runs")
	for _, k := range order {
		t := sums[k]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%v\t%.3fs\n", k.workload, k.kind, t.Histories, t.StickyTimeouts, t.StartTimeouts,
			t.Heartbeats, t.Failed, Median(waits[k]))
	}
	return tw.Flush()
}

// writeOutage prints the outage workload's own figures, a row a variant
// and round.
func writeOutage(w io.Writer, results []Result) error {
	var rows []Result
	for _, r := range results {
		if r.Outage != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "outage\tretries\tround\tn\tdown for\tcap/s\tafter recovery p50\tp99\tmax\tbefore end\tpeak/s\t"+
		"histories\tattempts mean\tp99\tmax\tactions mean\tp99\tmax\tdup\tlost\t")
	for _, r := range rows {
		o := r.Outage
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%.0f\t%s\t%s\t%s\t%d\t%.1f\t%d\t%.2f\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%d\t%d\t\n",
			r.Workload, r.Kind, r.Round, r.N, o.Outage, o.RateCap, ms(o.AfterRecovery.P50), ms(o.AfterRecovery.P99),
			ms(o.AfterRecovery.Max), o.BeforeEnd, o.PeakRate, o.Histories, o.Attempts.Mean, o.Attempts.P99, o.Attempts.Max,
			o.Actions.Mean, o.Actions.P99, o.Actions.Max, r.Duplicates, r.Lost)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if c := r.Outage.LateCauses; len(c) > 0 {
			fmt.Fprintf(w, "%s round %d: last attempts begun over %s after recovery, by what the attempt before failed with: %v\n",
				r.Kind, r.Round, outageLateAfter, c)
		}
	}
	return nil
}
