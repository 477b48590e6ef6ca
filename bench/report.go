package bench

import (
	"fmt"
	"io"
	"slices"
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

// Ratios pairs each workload's full results with its bare ones, comparing
// medians when a workload was repeated (runs on one shared machine vary).
func Ratios(results []Result) []Ratio {
	type key struct {
		workload string
		kind     Kind
	}
	groups := map[key][]Result{}
	var order []string
	for _, r := range results {
		k := key{r.Workload, r.Kind}
		if _, seen := groups[k]; !seen && r.Kind == Full {
			order = append(order, r.Workload)
		}
		groups[k] = append(groups[k], r)
	}
	var out []Ratio
	for _, w := range order {
		full, bare := groups[key{w, Full}], groups[key{w, Bare}]
		if len(bare) == 0 {
			continue
		}
		ratio := Ratio{Workload: w}
		fd, bd := median(full, func(r Result) float64 { return r.DrainRate }), median(bare, func(r Result) float64 { return r.DrainRate })
		switch {
		case fd > 0 && bd > 0:
			ratio.Rate = fd / bd
		default:
			ratio.Rate = median(full, func(r Result) float64 { return r.ScheduleRate }) /
				median(bare, func(r Result) float64 { return r.ScheduleRate })
		}
		if bp := median(bare, func(r Result) float64 { return float64(r.LagP99) }); bp > 0 {
			ratio.P99 = median(full, func(r Result) float64 { return float64(r.LagP99) }) / bp
		}
		out = append(out, ratio)
	}
	return out
}

// APIRatio compares scheduling through the tracker API with scheduling
// through the starter in process, on one workload of one run.
type APIRatio struct {
	Workload string `json:"workload"`
	// APIRate and StarterRate are the median schedule rates (reminders a
	// second) of the api and full paths; Rate is APIRate/StarterRate.
	APIRate     float64 `json:"api_schedule_rate"`
	StarterRate float64 `json:"starter_schedule_rate"`
	Rate        float64 `json:"api_starter_rate_ratio"`
}

// APIRatios pairs each workload's api results with its full ones, comparing
// median schedule rates.
func APIRatios(results []Result) []APIRatio {
	var out []APIRatio
	var order []string
	byKind := map[string]map[Kind][]Result{}
	for _, r := range results {
		if byKind[r.Workload] == nil {
			byKind[r.Workload] = map[Kind][]Result{}
			order = append(order, r.Workload)
		}
		byKind[r.Workload][r.Kind] = append(byKind[r.Workload][r.Kind], r)
	}
	for _, w := range order {
		api, full := byKind[w][API], byKind[w][Full]
		if len(api) == 0 || len(full) == 0 {
			continue
		}
		rate := func(r Result) float64 { return r.ScheduleRate }
		a := APIRatio{Workload: w, APIRate: median(api, rate), StarterRate: median(full, rate)}
		if a.StarterRate > 0 {
			a.Rate = a.APIRate / a.StarterRate
		}
		out = append(out, a)
	}
	return out
}

func median(rs []Result, f func(Result) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
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
	fmt.Fprintln(tw, "workload\tfull/bare rate (median)\tfull/bare p99 lag (median)\t")
	for _, r := range ratios {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t\n", r.Workload, r.Rate, r.P99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	apiRatios := APIRatios(results)
	if len(apiRatios) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tAPI sched/s (median)\tstarter sched/s (median)\tAPI/starter\t")
	for _, r := range apiRatios {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t\n", r.Workload, r.APIRate, r.StarterRate, r.Rate)
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
