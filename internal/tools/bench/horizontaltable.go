package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteHorizontalTable prints the runs, the kills, the scaling rows, the
// comparisons and the reading, for people.
func WriteHorizontalTable(w io.Writer, rep HorizontalReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tworkers\tkill\tround\tn\tsched/s\tslack\tdrain/s\tdrain p50\tp99\tdelivered\tlost\ttwice\tbeyond window\t"+
		"status events\treached\trepeated\tbeyond claims\tprovider events\tkept\tCPU s: server\tpostgres\tworkers\tserves\t"+
		"ms/reminder\twindow cores: server\tpostgres\tmirror\tworkers\tserves\tharness\tothers\tbusy\tquiet after\tcompared\t")
	for _, r := range rep.Runs {
		round, compared := fmt.Sprint(r.Round), "yes"
		switch {
		case r.Round == 0:
			round, compared = "warm-up", "-"
		case r.Invalid != "":
			compared = "no"
		}
		kill := "-"
		if r.Kill != nil {
			kill = "yes"
		}
		var d Drain
		if r.Drain != nil {
			d = *r.Drain
		}
		c := RunCheck{}
		if r.Check != nil {
			c = *r.Check
		}
		perReminder := 0.0
		for _, p := range cpuParts {
			v, _ := cpuPerReminder(r, p)
			perReminder += v
		}
		core := func(p string) string {
			if v, ok := r.Cores[p]; ok {
				return fmt.Sprintf("%.2f", v)
			}
			return "-"
		}
		busyText, othersText := "-", "-"
		if len(r.Cores) > 0 && rep.CPUs > 0 {
			busyText = fmt.Sprintf("%.0f%%", 100*machineBusy(r.Cores)/float64(rep.CPUs))
		}
		if _, ok := r.Cores[PartMachine]; ok {
			othersText = fmt.Sprintf("%.2f", others(r.Cores))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Workload, r.Workers, kill, round, r.N, r.ScheduleRate, ms(r.Slack), rate(r.DrainRate), ms(d.P50), ms(d.P99),
			r.Delivered, r.Lost, c.Twice, c.BeyondWindow, c.StatusEvents, c.Reached, c.Repeated, c.RepeatedUnclaimed,
			c.ProviderEvents, c.Applied, seconds(r.CPU.Server), seconds(r.CPU.Postgres), seconds(r.CPU.Worker), seconds(r.CPU.Serve),
			perReminder, core(PartServer), core(PartPostgres), core(PartMirror), core(PartWorkers), core(PartServes), core(PartHarness),
			othersText, busyText, ms(r.Quiet), compared)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Runs {
		if r.Round > 0 && r.Invalid != "" {
			fmt.Fprintf(w, "  left out: %s: %s\n", r.label(), r.Invalid)
		}
	}
	for _, r := range rep.Runs {
		if r.Kill == nil {
			continue
		}
		k, c := r.Kill, RunCheck{}
		if r.Check != nil {
			c = *r.Check
		}
		fmt.Fprintf(w, "\nkill, %s: worker %d (pid %d) and serve %d (pid %d) SIGKILLed with %d of %d mails accepted and %d in flight; "+
			"%d claims held (the window), %d status events claimed by the killed serve; both started again after %s.\n"+
			"  lost %d; keys taken twice %d (%d in the window, %d beyond); status events %d, %d reached the tracker, %d more than once "+
			"(%d claimed by the killed serve, %d not); provider events %d posted (%d more than once), %d kept, %d on the trail.\n",
			r.label(), k.Worker, k.WorkerPID, k.Serve, k.ServePID, k.Accepted, r.N, k.InFlight, len(k.HeldClaims), len(k.ServeClaims),
			k.After, c.Lost, c.Twice, c.InWindow, c.BeyondWindow, c.StatusEvents, c.Reached, c.Repeated, c.RepeatedClaimed,
			c.RepeatedUnclaimed, c.ProviderEvents, c.Reposted, c.Applied, c.Trail)
		if k.Error != "" {
			fmt.Fprintf(w, "  the kill: %s\n", k.Error)
		}
	}
	if len(rep.Scaling) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "medians\tworkers\tkill\truns\tdrain/s\tdrain p50\tp99\tms/reminder: server\tpostgres\tworkers\tserves\t"+
			"window cores: server\tpostgres\tmirror\tworkers\tserves\tharness\tothers\tbusy\t")
		for _, s := range rep.Scaling {
			kill := "-"
			if s.Kill {
				kill = "yes"
			}
			num := func(m map[string]float64, p, format string) string {
				if v, ok := m[p]; ok {
					return fmt.Sprintf(format, v)
				}
				return "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.1f\t%.1fs\t%.1fs\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.0f%%\t\n",
				s.Workload, s.Workers, kill, s.Runs, s.DrainRate, s.DrainP50, s.DrainP99,
				num(s.CPUms, PartServer, "%.1f"), num(s.CPUms, PartPostgres, "%.1f"), num(s.CPUms, PartWorkers, "%.1f"), num(s.CPUms, PartServes, "%.1f"),
				num(s.Cores, PartServer, "%.2f"), num(s.Cores, PartPostgres, "%.2f"), num(s.Cores, PartMirror, "%.2f"),
				num(s.Cores, PartWorkers, "%.2f"), num(s.Cores, PartServes, "%.2f"), num(s.Cores, PartHarness, "%.2f"), s.Others, 100*s.Busy)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Comparisons) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tcompared (per round)\tper-round ratios\tmedian\tinterval\tleft out\t")
		for _, c := range rep.Comparisons {
			ratios := make([]string, len(c.Ratios))
			for i, v := range c.Ratios {
				ratios[i] = fmt.Sprintf("%.2f", v)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t\n", c.Workload, c.label(), strings.Join(ratios, " "), ratio(c.N, c.Median),
				interval(c.N, c.Low, c.High), len(c.Excluded))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Stops) > 0 {
		fmt.Fprintln(w, "\nwhere it stops")
		for _, s := range rep.Stops {
			fmt.Fprintln(w, "  "+s)
		}
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintf(w, "\n%d problem(s):\n", len(rep.Errors))
		for _, e := range rep.Errors {
			fmt.Fprintln(w, "  "+e)
		}
	}
	return nil
}
