package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Latency is a timed query's spread.
type Latency struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// timeEach runs fn n times, one after another, and times each.
func timeEach(n int, fn func() error) (Latency, error) {
	took := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if err := fn(); err != nil {
			return Latency{}, err
		}
		took = append(took, time.Since(t))
	}
	return latencyOf(took), nil
}

// latencyOf is the spread of took, by nearest rank.
func latencyOf(took []time.Duration) Latency {
	if len(took) == 0 {
		return Latency{}
	}
	s := slices.Sorted(slices.Values(took))
	rank := func(p int) time.Duration { return s[min(len(s)-1, (len(s)*p+99)/100-1)] }
	return Latency{N: len(s), P50: rank(50), P90: rank(90), P99: rank(99), Max: s[len(s)-1]}
}

// Bar is one of the targets for the mirror, against what was
// measured.
type Bar struct {
	Measure  string `json:"measure"`
	Bar      string `json:"bar"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// The mirror's bars (issue 12), and what "flat memory" is taken to mean:
// an export of every row grows the heap by less than this, however many.
const (
	BarDueBetweenP99    = 20 * time.Millisecond
	BarByShipmentP99    = 5 * time.Millisecond
	BarOldestOverdueP99 = 10 * time.Millisecond
	BarMetricsP99       = 50 * time.Millisecond
	BarExportRate       = 100_000
	FlatHeapGrowth      = 32 << 20
)

func mirrorBars(r MirrorResult) []Bar {
	p99 := func(measure string, l Latency, bar time.Duration) Bar {
		b := Bar{Measure: measure, Bar: "p99 ≤ " + bar.String(), Measured: "not measured (see failures)"}
		if l.N > 0 {
			b.Measured, b.Met = "p99 "+millis(l.P99), l.P99 <= bar
		}
		return b
	}
	bars := []Bar{
		p99("due between, random one-hour windows", r.DueBetween, BarDueBetweenP99),
		p99("list --shipment", r.ByShipment, BarByShipmentP99),
		p99("oldest overdue", r.OldestOverdue, BarOldestOverdueP99),
		p99("/metrics scrape with the gauges' refresh", r.MetricsFull, BarMetricsP99),
	}
	if e := r.Export; e == nil {
		bars = append(bars, Bar{Measure: "export of every row", Bar: fmt.Sprintf("≥ %d rows/s, flat heap", BarExportRate), Measured: "not measured"})
	} else {
		growth := int64(e.HeapPeak) - int64(e.HeapBefore)
		bars = append(bars, Bar{
			Measure:  fmt.Sprintf("export of all %d rows", e.Rows),
			Bar:      fmt.Sprintf("≥ %d rows/s, heap grows < %d MB", BarExportRate, FlatHeapGrowth>>20),
			Measured: fmt.Sprintf("%.0f rows/s, heap +%.1f MB, RSS +%.1f MB", e.RowsPerSecond, float64(growth)/(1<<20), float64(e.RSSPeak-e.RSSBefore)/(1<<20)),
			Met:      e.RowsPerSecond >= BarExportRate && growth < FlatHeapGrowth,
		})
	}
	return bars
}

func millis(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// WriteMirrorTable prints a mirror result for people: the bars, then every
// timing.
func WriteMirrorTable(w io.Writer, r MirrorResult) error {
	fmt.Fprintf(w, "mirror: %d reminders (%d shipments, %d updates) loaded at %.0f/s; reminders take %d MB\n\n",
		r.Loaded.Reminders, r.Loaded.Shipments, r.Loaded.Updates, r.LoadRate, r.Sizes["reminders"]>>20)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tbar\tmeasured\tmet")
	for _, b := range r.Bars {
		met := "MISSED"
		if b.Met {
			met = "met"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", b.Measure, b.Bar, b.Measured, met)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range r.Failures {
		fmt.Fprintln(w, "failed: "+f)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\tn\tp50\tp90\tp99\tmax\t")
	for _, q := range []struct {
		name string
		l    Latency
	}{
		{"due between", r.DueBetween}, {"by shipment", r.ByShipment}, {"oldest overdue", r.OldestOverdue},
		{"pending before (verify)", r.PendingBefore}, {"list --state pending", r.PendingList},
		{"gauges refresh", r.GaugesRefresh}, {"GET /metrics", r.Scrape}, {"refresh + scrape", r.MetricsFull},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", q.name, q.l.N, millis(q.l.P50), millis(q.l.P90), millis(q.l.P99), millis(q.l.Max))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p := r.Prune; p != nil {
		fmt.Fprintf(w, "\nprune: %d reminders, %d rows in %s: %.0f reminders/s, %.0f rows/s; batch p50 %s, p99 %s\n",
			p.Stats.Reminders, p.Stats.Rows(), p.Stats.Elapsed.Round(time.Millisecond), p.RemindersPerSecond, p.RowsPerSecond,
			millis(p.Batch.P50), millis(p.Batch.P99))
	}
	return nil
}
