package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Ratio compares the full path with the bare baseline on one workload.
type Ratio struct {
	Workload string `json:"workload"`
	// Rate is full/bare drain rate (burst, catchup) or schedule rate.
	Rate float64 `json:"rate_ratio"`
	// P99 is full/bare p99 lag.
	P99 float64 `json:"p99_lag_ratio"`
}

// Ratios pairs each workload's full result with its bare one.
func Ratios(results []Result) []Ratio {
	bare := map[string]Result{}
	for _, r := range results {
		if r.Kind == Bare {
			bare[r.Workload] = r
		}
	}
	var out []Ratio
	for _, r := range results {
		b, ok := bare[r.Workload]
		if r.Kind != Full || !ok {
			continue
		}
		ratio := Ratio{Workload: r.Workload}
		switch {
		case r.DrainRate > 0 && b.DrainRate > 0:
			ratio.Rate = r.DrainRate / b.DrainRate
		case b.ScheduleRate > 0:
			ratio.Rate = r.ScheduleRate / b.ScheduleRate
		}
		if b.LagP99 > 0 {
			ratio.P99 = float64(r.LagP99) / float64(b.LagP99)
		}
		out = append(out, ratio)
	}
	return out
}

// WriteTable prints the results and ratios for people.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tpath\tn\tsched/s\tdrain/s\tlag p50\tp90\tp99\tmax\tdelivered\tdup\tlost\tworker RSS\tevents\tquery p99\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t\n",
			r.Workload, r.Kind, r.N, r.ScheduleRate, rate(r.DrainRate),
			ms(r.LagP50), ms(r.LagP90), ms(r.LagP99), ms(r.LagMax),
			r.Delivered, r.Duplicates, r.Lost, mb(r.WorkerRSS), r.HistoryEvents, ms(r.QueryP99))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ratios := Ratios(results)
	if len(ratios) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tfull/bare rate\tfull/bare p99 lag\t")
	for _, r := range ratios {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t\n", r.Workload, r.Rate, r.P99)
	}
	return tw.Flush()
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}

func rate(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", r)
}

func mb(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MB", float64(b)/(1<<20))
}
