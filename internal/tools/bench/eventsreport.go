package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// EventsSummary is the runs of one mix at one concurrency, warm-up left
// out.
type EventsSummary struct {
	Mix         string `json:"mix"`
	Concurrency int    `json:"concurrency"`
	Runs        int    `json:"runs"`
	Events      int    `json:"events"`
	// EventsPerSecond is over the runs: median, least and most.
	EventsPerSecond Spread `json:"events_per_second"`
	// Batch and Apply are over every batch of the runs.
	Batch Latency `json:"batch"`
	Apply Latency `json:"apply"`
	// Statements are the handler's statements in these runs: where the
	// transaction's time goes.
	Statements []StatementTime `json:"statements"`
}

// Spread is a median with the least and the most value.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// StatementTime is one statement's share of a batch, round trip included.
type StatementTime struct {
	Statement string `json:"statement"`
	// PerBatch is its calls a batch, and Time its mean time a batch.
	PerBatch float64       `json:"calls_per_batch"`
	Time     time.Duration `json:"time_per_batch_ns"`
}

// EventsComparison is the per-round ratio of one run's events/s over
// another's, and the median of those ratios with its interval.
type EventsComparison struct {
	Of     string    `json:"of"`
	Over   string    `json:"over"`
	Ratios []float64 `json:"pair_ratios"`
	Estimate
}

func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	return Spread{Median: Median(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
}

func summarizeEvents(runs []EventsRun, statements map[string]map[string]statementSum) []EventsSummary {
	var out []EventsSummary
	for _, r := range runs {
		if r.Round == 0 {
			continue
		}
		i := slices.IndexFunc(out, func(s EventsSummary) bool { return s.Mix == r.Mix && s.Concurrency == r.Concurrency })
		if i < 0 {
			out = append(out, EventsSummary{Mix: r.Mix, Concurrency: r.Concurrency})
			i = len(out) - 1
		}
		out[i].Runs++
		out[i].Events += r.Events
	}
	for i := range out {
		s := &out[i]
		var rates []float64
		var batch, apply []time.Duration
		batches := 0
		for _, r := range runs {
			if r.Round > 0 && r.Mix == s.Mix && r.Concurrency == s.Concurrency {
				rates = append(rates, r.EventsPerSecond)
				batch, apply = append(batch, r.batchTook...), append(apply, r.applyTook...)
				batches += r.Batches
			}
		}
		s.EventsPerSecond, s.Batch, s.Apply = spreadOf(rates), latencyOf(batch), latencyOf(apply)
		step := eventsStep{round: 1, mix: s.Mix, concurrency: s.Concurrency}.key()
		for name, sum := range statements[step] {
			s.Statements = append(s.Statements, StatementTime{Statement: name,
				PerBatch: float64(sum.calls) / float64(batches), Time: sum.took / time.Duration(batches)})
		}
		slices.SortFunc(s.Statements, func(a, b StatementTime) int { return int(b.Time - a.Time) })
	}
	slices.SortFunc(out, func(a, b EventsSummary) int {
		if d := mixOrder(a.Mix) - mixOrder(b.Mix); d != 0 {
			return d
		}
		return a.Concurrency - b.Concurrency
	})
	return out
}

func mixOrder(mix string) int { return slices.Index([]string{MixDelivered, MixBounce, MixReplay}, mix) }

// compareEvents pairs the runs of each round: the bounce mix and the replay
// over the delivered mix at the first concurrency, and the delivered mix at
// every other concurrency over it.
func compareEvents(runs []EventsRun, concurrency []int) []EventsComparison {
	type side struct {
		mix string
		c   int
	}
	name := func(s side) string { return fmt.Sprintf("%s c=%d", s.mix, s.c) }
	base := side{MixDelivered, concurrency[0]}
	others := []side{{MixBounce, concurrency[0]}}
	for _, c := range concurrency[1:] {
		others = append(others, side{MixDelivered, c})
	}
	others = append(others, side{MixReplay, concurrency[0]})
	rate := map[side]map[int]float64{}
	for _, r := range runs {
		if r.Round == 0 || len(r.Failures) > 0 {
			continue
		}
		s := side{r.Mix, r.Concurrency}
		if rate[s] == nil {
			rate[s] = map[int]float64{}
		}
		rate[s][r.Round] = r.EventsPerSecond
	}
	var out []EventsComparison
	for _, o := range others {
		c := EventsComparison{Of: name(o), Over: name(base)}
		var rounds []int
		for round := range rate[o] {
			if rate[base][round] > 0 {
				rounds = append(rounds, round)
			}
		}
		slices.Sort(rounds)
		for _, round := range rounds {
			c.Ratios = append(c.Ratios, rate[o][round]/rate[base][round])
		}
		c.Estimate = estimate(c.Ratios)
		out = append(out, c)
	}
	return out
}

// eventsTarget judges issue 13's bar by the median events/s of the
// delivered mix one batch at a time; the other concurrencies are reported
// beside it. Nil when the batches are not of the target's size or no run
// posted one batch at a time.
func eventsTarget(summaries []EventsSummary, o EventsOptions) *Bar {
	if o.BatchSize != TargetBatchSize {
		return nil
	}
	judged := slices.IndexFunc(summaries, func(s EventsSummary) bool { return s.Mix == MixDelivered && s.Concurrency == 1 })
	if judged < 0 {
		return nil
	}
	s := summaries[judged]
	measured := fmt.Sprintf("c=1: median %.0f events/s [%.0f, %.0f] over %d runs", s.EventsPerSecond.Median,
		s.EventsPerSecond.Min, s.EventsPerSecond.Max, s.Runs)
	for _, o := range summaries {
		if o.Mix == MixDelivered && o.Concurrency != 1 {
			measured += fmt.Sprintf("; c=%d (not judged): median %.0f [%.0f, %.0f]", o.Concurrency,
				o.EventsPerSecond.Median, o.EventsPerSecond.Min, o.EventsPerSecond.Max)
		}
	}
	return &Bar{
		Measure:  fmt.Sprintf("signed batches of %d events (processed + delivered per reminder), one at a time", TargetBatchSize),
		Bar:      fmt.Sprintf("median ≥ %d events/s", TargetEventsPerSecond),
		Measured: measured,
		Met:      s.EventsPerSecond.Median >= TargetEventsPerSecond,
	}
}

// WriteEventsTable prints an events result for people: the target, each
// mix's rates and batch times, the ratios, where a batch's transaction
// spends its time, and what the check of the mirror found.
func WriteEventsTable(w io.Writer, r EventsResult) error {
	fmt.Fprintf(w, "events: %d sent reminders seeded; batches of %d events (%d KB), %d a run, %d runs a mix; handler pool %d\n\n",
		r.Seeded, r.BatchSize, r.BodyBytes>>10, r.Batches, r.Runs, r.PoolSize)
	if b := r.Target; b != nil {
		met := "MISSED"
		if b.Met {
			met = "met"
		}
		fmt.Fprintf(w, "target: %s: %s\n  measured %s: %s\n\n", b.Measure, b.Bar, b.Measured, met)
	} else {
		fmt.Fprintf(w, "target: not judged (it is stated for batches of %d events, posted one at a time)\n\n", TargetBatchSize)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mix\tc\truns\tevents/s median\t[min, max]\tbatch p50\tbatch p99\tapply p50\tapply p99\t")
	for _, s := range r.Summaries {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t[%.0f, %.0f]\t%s\t%s\t%s\t%s\t\n", s.Mix, s.Concurrency, s.Runs,
			s.EventsPerSecond.Median, s.EventsPerSecond.Min, s.EventsPerSecond.Max,
			millis(s.Batch.P50), millis(s.Batch.P99), millis(s.Apply.P50), millis(s.Apply.P99))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, c := range r.Comparisons {
		fmt.Fprintf(w, "events/s %s over %s: median ratio %.2f [%.2f, %.2f] over %d rounds\n", c.Of, c.Over, c.Median, c.Low, c.High, c.N)
	}
	for _, s := range r.Summaries {
		if s.Concurrency != r.Concurrency[0] || len(s.Statements) == 0 {
			continue
		}
		var parts []string
		var total time.Duration
		for _, st := range s.Statements {
			total += st.Time
			parts = append(parts, fmt.Sprintf("%s %s", st.Statement, millis(st.Time)))
		}
		fmt.Fprintf(w, "\n%s c=%d, the handler's statements a batch, %s in all (apply p50 %s): %s\n",
			s.Mix, s.Concurrency, millis(total), millis(s.Apply.P50), strings.Join(parts, ", "))
	}
	v := r.Verified
	fmt.Fprintf(w, "\nverified: %d reminders: %d delivered, %d undeliverable, %d other; %d provider_events rows for %d events posted (%d found); %d on the trails; %d escalations owed; tallies agree: %t\n",
		v.Reminders, v.Delivered, v.Undeliverable, v.Other, v.ProviderEvents, v.EventsPosted, v.PostedFound, v.TrailEvents, v.Escalations, v.TalliesAgree)
	for _, f := range r.Failures {
		fmt.Fprintln(w, "failed: "+f)
	}
	return nil
}
