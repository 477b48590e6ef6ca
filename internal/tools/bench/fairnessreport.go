package bench

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// FairnessReport is the fairness workload's report: what the quiet tenant
// saw alone and beside the noisy one, their ratio, and the engine's health
// under the noisy tenant's burst.
type FairnessReport struct {
	At      time.Time      `json:"at"`
	Machine string         `json:"machine"`
	Engine  string         `json:"engine"`
	CPUs    int            `json:"cpus"`
	Options map[string]any `json:"options"`
	// NoisyStart is when the noisy tenant began posting, NoisyDone when
	// its last reminder was sent (or the wait for it ended).
	NoisyStart time.Time    `json:"noisy_start"`
	NoisyDone  time.Time    `json:"noisy_done"`
	Noisy      NoisyFigures `json:"noisy"`
	// Phases are the quiet tenant's figures: alone, beside the noisy
	// tenant, and after it (reminders posted beside it, due after).
	Phases []FairnessPhase `json:"quiet_phases"`
	// Ratios are the quiet tenant's figures beside the noisy tenant over
	// the same alone.
	Ratios []FairnessRatio `json:"ratios"`
	// Unstarted are reminders of either tenant never sent whose workflow
	// the mirror does not know started (a start that failed, or a
	// schedule cut short before it marked its starts).
	Unstarted int `json:"unstarted"`
	// Tenants are each tenant's reminders and the check from outside.
	Tenants map[string]FairnessTenant `json:"tenants"`
	// Quiet is every request of the quiet tenant.
	Quiet  []QuietSample `json:"quiet_requests"`
	Errors []string      `json:"errors,omitempty"`
}

// NoisyFigures are what the noisy tenant met.
type NoisyFigures struct {
	Updates  int `json:"updates"`
	Accepted int `json:"reminders_accepted"`
	// Failed are updates given up on (an answer other than 429, 503 or
	// 504, or too many of those).
	Failed int `json:"updates_failed"`
	// Statuses counts every answer, retries included.
	Statuses map[int]int `json:"statuses"`
	// AcceptedIn is from the first post to the last update accepted, and
	// Rate the reminders accepted a second over it.
	AcceptedIn time.Duration `json:"accepted_in_ns"`
	Rate       float64       `json:"accepted_per_second"`
	// Post is each update's time until accepted, retries included.
	Post Drain `json:"post"`
	// MovedAt is when its window moves went out, together; Move their
	// answer times and MoveOutcomes their first reminder's outcome.
	MovedAt      time.Time      `json:"moved_at"`
	Moves        int            `json:"moves"`
	Move         Drain          `json:"move"`
	MoveOutcomes map[string]int `json:"move_outcomes"`
	// Lateness is sent minus due of its reminders sent, and Drain how
	// long after the last due of them the last was sent.
	Lateness Drain         `json:"lateness"`
	Drain    time.Duration `json:"drain_after_last_due_ns"`
	Errors   []string      `json:"errors,omitempty"`
}

// FairnessPhase is the quiet tenant's figures over one phase: its
// requests by when they were sent, its reminders by when they were due.
type FairnessPhase struct {
	Name      string `json:"name"`
	Schedules int    `json:"schedules"`
	Schedule  Drain  `json:"schedule"`
	Moves     int    `json:"moves"`
	Move      Drain  `json:"move"`
	// Retried are requests that met a 429, 503 or 504 first.
	Retried   int   `json:"retried"`
	Reminders int   `json:"reminders"`
	Lateness  Drain `json:"lateness"`
	Unsent    int   `json:"unsent"`
}

// FairnessRatio is one figure of the quiet tenant beside the noisy tenant
// over the same alone (0 when either is missing).
type FairnessRatio struct {
	Figure string  `json:"figure"`
	P50    float64 `json:"p50"`
	P99    float64 `json:"p99"`
}

// FairnessTenant is one tenant's reminders and what the check from
// outside found.
type FairnessTenant struct {
	Reminders []ReminderTimes `json:"-"`
	Check     *RunCheck       `json:"check,omitempty"`
}

// The quiet tenant's phases.
const (
	PhaseBaseline = "alone"
	PhaseNoisy    = "beside noisy"
	PhaseAfter    = "after noisy"
)

// phaseOf is the phase an instant falls in.
func (rep *FairnessReport) phaseOf(t time.Time) string {
	switch {
	case t.Before(rep.NoisyStart):
		return PhaseBaseline
	case rep.NoisyDone.IsZero() || t.Before(rep.NoisyDone):
		return PhaseNoisy
	}
	return PhaseAfter
}

// summarise fills the phases, the ratios, the noisy tenant's lateness and
// drain, and the unstarted count from the samples and the reminders.
func (rep *FairnessReport) summarise() {
	type acc struct {
		schedules, moves, lateness []time.Duration
		retried, unsent            int
	}
	by := map[string]*acc{PhaseBaseline: {}, PhaseNoisy: {}, PhaseAfter: {}}
	for _, s := range rep.Quiet {
		a := by[rep.phaseOf(s.At)]
		if len(s.Statuses) > 1 {
			a.retried++
		}
		switch s.Op {
		case OpSchedule:
			a.schedules = append(a.schedules, s.Took)
		case OpMove:
			a.moves = append(a.moves, s.Took)
		}
	}
	rep.Unstarted = 0
	for _, r := range rep.Tenants[QuietTenant].Reminders {
		a := by[rep.phaseOf(r.Due)]
		if r.Sent.IsZero() {
			a.unsent++
		} else {
			a.lateness = append(a.lateness, r.Sent.Sub(r.Due))
		}
	}
	var late []time.Duration
	var lastDue, lastSent time.Time
	for _, name := range []string{NoisyTenant, QuietTenant} {
		for _, r := range rep.Tenants[name].Reminders {
			if !r.Started && r.Sent.IsZero() {
				rep.Unstarted++
			}
			if name != NoisyTenant {
				continue
			}
			if !r.Sent.IsZero() {
				late = append(late, r.Sent.Sub(r.Due))
				if r.Due.After(lastDue) {
					lastDue = r.Due
				}
				if r.Sent.After(lastSent) {
					lastSent = r.Sent
				}
			}
		}
	}
	rep.Noisy.Lateness = DurationsDrain(late)
	if !lastSent.IsZero() {
		rep.Noisy.Drain = lastSent.Sub(lastDue)
	}
	rep.Phases = nil
	for _, name := range []string{PhaseBaseline, PhaseNoisy, PhaseAfter} {
		a := by[name]
		rep.Phases = append(rep.Phases, FairnessPhase{
			Name: name, Schedules: len(a.schedules), Schedule: DurationsDrain(a.schedules), Moves: len(a.moves),
			Move: DurationsDrain(a.moves), Retried: a.retried, Reminders: len(a.lateness) + a.unsent,
			Lateness: DurationsDrain(a.lateness), Unsent: a.unsent,
		})
	}
	alone, beside := rep.Phases[0], rep.Phases[1]
	rep.Ratios = []FairnessRatio{
		{Figure: "schedule", P50: durationRatio(beside.Schedule.P50, alone.Schedule.P50), P99: durationRatio(beside.Schedule.P99, alone.Schedule.P99)},
		{Figure: "move", P50: durationRatio(beside.Move.P50, alone.Move.P50), P99: durationRatio(beside.Move.P99, alone.Move.P99)},
		{Figure: "lateness", P50: durationRatio(beside.Lateness.P50, alone.Lateness.P50), P99: durationRatio(beside.Lateness.P99, alone.Lateness.P99)},
	}
}

// durationRatio is a over b, 0 when either is not positive.
func durationRatio(a, b time.Duration) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// WriteFairnessTable prints the quiet tenant's phases and ratios, the
// noisy tenant's figures and the checks, for people.
func WriteFairnessTable(w io.Writer, rep FairnessReport) error {
	fmt.Fprintf(w, "the quiet tenant (%s): API answer times by when sent, lateness (sent minus due) by when due\n", QuietTenant)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tschedules\tp50\tp95\tp99\tmax\tmoves\tp50\tp95\tp99\tmax\tretried\treminders\tlate p50\tp95\tp99\tmax\tunsent\t")
	for _, p := range rep.Phases {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t\n", p.Name,
			p.Schedules, ms(p.Schedule.P50), ms(p.Schedule.P95), ms(p.Schedule.P99), ms(p.Schedule.Max),
			p.Moves, ms(p.Move.P50), ms(p.Move.P95), ms(p.Move.P99), ms(p.Move.Max), p.Retried,
			p.Reminders, ms(p.Lateness.P50), ms(p.Lateness.P95), ms(p.Lateness.P99), ms(p.Lateness.Max), p.Unsent)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var ratios []string
	for _, r := range rep.Ratios {
		ratios = append(ratios, fmt.Sprintf("%s p50 %s, p99 %s", r.Figure, ratioText(r.P50), ratioText(r.P99)))
	}
	fmt.Fprintf(w, "beside the noisy tenant over alone: %s\n\n", strings.Join(ratios, "; "))

	n := rep.Noisy
	fmt.Fprintf(w, "the noisy tenant (%s): %d reminders accepted of %d updates in %s (%s/s), %d updates failed; answers: %s\n",
		NoisyTenant, n.Accepted, n.Updates, ms(n.AcceptedIn), rate(n.Rate), n.Failed, statusCounts(n.Statuses))
	fmt.Fprintf(w, "  each update until accepted: p50 %s, p99 %s, max %s\n", ms(n.Post.P50), ms(n.Post.P99), ms(n.Post.Max))
	if n.Moves > 0 {
		fmt.Fprintf(w, "  %d windows moved at once, %s after it began: p50 %s, max %s; outcomes %s\n", n.Moves,
			ms(n.MovedAt.Sub(rep.NoisyStart)), ms(n.Move.P50), ms(n.Move.Max), outcomeCounts(n.MoveOutcomes))
	}
	fmt.Fprintf(w, "  lateness p50 %s, p99 %s, max %s; the last sent %s after the last due\n",
		ms(n.Lateness.P50), ms(n.Lateness.P99), ms(n.Lateness.Max), ms(n.Drain))
	fmt.Fprintf(w, "engine: %d reminder(s) of either tenant never sent nor known started; %d answers 503, %d answers 504 to the noisy tenant\n",
		rep.Unstarted, n.Statuses[http.StatusServiceUnavailable], n.Statuses[http.StatusGatewayTimeout])
	for _, name := range []string{NoisyTenant, QuietTenant} {
		c := rep.Tenants[name].Check
		if c == nil {
			fmt.Fprintf(w, "check, %s: not made\n", name)
			continue
		}
		fmt.Fprintf(w, "check, %s: %d reminders, %d delivered, %d lost, %d keys taken twice, %d provider events, %d kept\n",
			name, c.Reminders, c.Delivered, c.Lost, c.Twice, c.ProviderEvents, c.Applied)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "problem: %s\n", e)
	}
	return nil
}

func ratioText(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", r)
}

// statusCounts is "201×40 429×3", by status.
func statusCounts(m map[int]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d×%d", s, m[s]))
	}
	return strings.Join(parts, " ")
}

func outcomeCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s×%d", s, m[s]))
	}
	return strings.Join(parts, " ")
}
