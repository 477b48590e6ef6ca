package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/mirror"
)

// Lead arithmetic: the first due time is put far enough ahead that the
// starts' work (scheduling, and each reminder's first workflow task), at
// leadMargin of the path's last measured rate of it, finishes leadFloor
// before it. A path not yet measured is assumed to do assumedStartRate
// starts a second (only its warm-up runs so).
const (
	leadMargin       = 0.6
	leadFloor        = 3 * time.Second
	assumedStartRate = 100.0
)

// A cold burst's lead has room for its worker's restart as well: the
// path's last measured restart times restartMargin, assumedRestart before
// one was measured.
const (
	restartMargin  = 2.0
	assumedRestart = 10 * time.Second
)

// ColdBurstWorkload names the cold burst: a burst whose worker restarted
// between scheduling and the due instant.
const ColdBurstWorkload = "coldburst"

// How long a run may take before what is missing counts as lost, and how
// long the queues may take to settle after it.
const (
	resultsGrace = 5 * time.Minute
	drainWithin  = 10 * time.Minute
	settleWithin = 2 * time.Minute
	// outageTail is how long a catch-up's worker stays down after the last
	// reminder came due.
	outageTail = 3 * time.Second
)

// slack is what was left before the first due time when the starts' work
// was done (0: not done by then).
func slack(done, due time.Time) time.Duration {
	if done.IsZero() || done.After(due) {
		return 0
	}
	return due.Sub(done)
}

// leadFor is the lead for n starts at rate a second.
func leadFor(n int, rate float64) time.Duration {
	return time.Duration(float64(n)/(rate*leadMargin)*float64(time.Second)) + leadFloor
}

// learnStartRate keeps the rate of a run's starts' work for its path's
// next lead: n over the time from the start of scheduling until that work
// was done, or, when it was not done by the due time, until then (a rate
// it did not reach, so the next lead grows).
func (r *Runner) learnStartRate(kind Kind, n int, b *batch, done, due time.Time) {
	end := done
	if end.IsZero() {
		end = due
	}
	if took := end.Sub(b.started); took > 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.startRates == nil {
			r.startRates = map[Kind]float64{}
		}
		r.startRates[kind] = float64(n) / took.Seconds()
	}
}

// learnRestart keeps how long kind's worker took to restart, for the lead
// of its next cold burst.
func (r *Runner) learnRestart(kind Kind, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.restarts == nil {
		r.restarts = map[Kind]time.Duration{}
	}
	r.restarts[kind] = took
}

// restartLead is the room a cold burst's lead leaves for kind's restart.
func (r *Runner) restartLead(kind Kind) time.Duration {
	r.mu.Lock()
	took := r.restarts[kind]
	r.mu.Unlock()
	if took <= 0 {
		return assumedRestart
	}
	return time.Duration(restartMargin * float64(took))
}

func (r *Runner) lead(kind Kind, n int) time.Duration {
	r.mu.Lock()
	rate := r.startRates[kind]
	r.mu.Unlock()
	if rate <= 0 {
		rate = assumedStartRate
	}
	return leadFor(n, rate)
}

// Step is one run in a workload's order.
type Step struct {
	Kind  Kind
	Round int
}

// Order is a workload's runs: each path's warm-up (round 0, discarded),
// then rounds 1..pairs alternately in the given order and reversed, so any
// two paths meet as A B, B A, A B, ...: a server that speeds up or slows
// down over the workload favours neither.
func Order(kinds []Kind, pairs int) []Step {
	var out []Step
	for round := 0; round <= pairs; round++ {
		ks := slices.Clone(kinds)
		if round%2 == 0 && round > 0 {
			slices.Reverse(ks)
		}
		for _, k := range ks {
			out = append(out, Step{Kind: k, Round: round})
		}
	}
	return out
}

// run measures one run: body does the work; run adds the CPU each process
// used, waits for the queues to settle (inside the run, so its tail is
// its own), and decides whether the run may be compared.
func (r *Runner) run(ctx context.Context, res *Result, body func() error) Result {
	r.mu.Lock()
	unsettled := r.unsettled
	r.unsettled = ""
	r.mu.Unlock()
	before := r.cpuNow(res.Kind)
	begin := time.Now()
	if err := body(); err != nil {
		res.Error = err.Error()
	}
	if err := r.Settle(ctx, settleWithin); err != nil {
		r.logf("%v; the next run is left out of the comparisons", err)
		r.mu.Lock()
		r.unsettled = "the queues had not settled after the run before: " + err.Error()
		r.mu.Unlock()
	}
	res.CPU = r.cpuNow(res.Kind).since(before)
	res.Elapsed = time.Since(begin)
	res.Invalid = invalidReason(*res, unsettled, r.MinSlack)
	return *res
}

// invalidReason says why a run cannot be compared, or "".
func invalidReason(res Result, unsettled string, minSlack time.Duration) string {
	switch {
	case res.Error != "":
		return "error: " + res.Error
	case res.Lost > 0:
		return fmt.Sprintf("partly drained: %d of %d delivered", res.Delivered, res.N)
	case res.Lead > 0 && res.Slack <= 0 && res.Restart > 0:
		return "the starts' work and the worker's restart were not done by the due time"
	case res.Lead > 0 && res.Slack <= 0:
		return "the starts' work (scheduling, each reminder's first workflow task) was not done by the first due time"
	case res.Lead > 0 && res.Slack < minSlack && res.Restart > 0:
		return fmt.Sprintf("the starts' work and the worker's restart were done %s before the due time (less than %s)", res.Slack.Round(time.Millisecond), minSlack)
	case res.Lead > 0 && res.Slack < minSlack:
		return fmt.Sprintf("the starts' work was done %s before the first due time (less than %s)", res.Slack.Round(time.Millisecond), minSlack)
	case unsettled != "":
		return unsettled
	}
	return ""
}

// Steady runs n reminders due at rate per second.
func (r *Runner) Steady(ctx context.Context, kind Kind, n int, rate float64) Result {
	res := Result{Workload: "steady", Kind: kind, Rate: rate}
	return r.run(ctx, &res, func() error {
		step := time.Duration(float64(time.Second) / rate)
		b, first, err := r.scheduleAhead(ctx, &res, n, func(i int) time.Duration { return time.Duration(i) * step }, 0)
		if err != nil {
			return err
		}
		outs, err := r.results(ctx, b, time.Until(first)+time.Duration(n)*step+resultsGrace)
		// Each reminder drains from its own due time: its lag.
		r.measure(ctx, &res, b, outs, time.Time{})
		return err
	})
}

// Burst runs n reminders due at one instant: the morning peak.
func (r *Runner) Burst(ctx context.Context, kind Kind, n int) Result {
	res := Result{Workload: "burst", Kind: kind}
	return r.run(ctx, &res, func() error {
		b, due, err := r.scheduleAhead(ctx, &res, n, func(int) time.Duration { return 0 }, 0)
		if err != nil {
			return err
		}
		return r.drain(ctx, &res, b, time.Until(due)+drainWithin, due)
	})
}

// ColdBurst is a burst whose path's worker is stopped and started again
// between scheduling and the due instant, so no worker holds the reminders
// in its workflow cache (or polls the sticky queue their next task was
// bound for) when they come due: production's shape, where reminders are
// scheduled days ahead and workers come and go in between. Burst, whose
// worker stays up, is the warm reference. The drain is timed from the due
// instant, as burst's.
func (r *Runner) ColdBurst(ctx context.Context, kind Kind, n int) Result {
	res := Result{Workload: ColdBurstWorkload, Kind: kind}
	return r.run(ctx, &res, func() error {
		b, due, err := r.scheduleAhead(ctx, &res, n, func(int) time.Duration { return 0 }, r.restartLead(kind.Worker()))
		if err != nil {
			return err
		}
		began := time.Now()
		r.Workers.Stop(kind.Worker())
		if _, err := r.Workers.Start(kind.Worker()); err != nil {
			return err
		}
		res.Restart = time.Since(began)
		r.learnRestart(kind.Worker(), res.Restart)
		if res.Slack > 0 {
			res.Slack = slack(time.Now(), due)
		}
		return r.drain(ctx, &res, b, time.Until(due)+drainWithin, due)
	})
}

// scheduleAhead schedules n reminders of res's path, the i-th due at the
// first due time plus offset(i), the first due time a lead ahead (and
// extra besides); it waits for the starts' work, learns its rate and
// records the lead, the schedule rate and the slack.
func (r *Runner) scheduleAhead(ctx context.Context, res *Result, n int, offset func(i int) time.Duration, extra time.Duration) (*batch, time.Time, error) {
	res.Lead = r.lead(res.Kind, n) + extra
	first := time.Now().Add(res.Lead)
	provider, sends := r.providerFor(first)
	res.Provider = provider
	b, schedRate, err := r.schedule(ctx, res.Kind, n, func(i int) time.Time { return first.Add(offset(i)) }, sends)
	res.ScheduleRate = schedRate
	if err != nil {
		return b, first, err
	}
	done := r.firstTasksDone(ctx, b, first)
	r.learnStartRate(res.Kind, n, b, done, first)
	res.Slack = slack(done, first)
	return b, first, nil
}

// Catchup stops the worker while n reminders come due, then starts it:
// the seed article's rehearsal, in production's shape. The reminders are
// scheduled while the worker runs, so each has run its first workflow task
// (a sleeping reminder holds its timer; a delayed start is held by the
// engine) before the worker stops; everything then comes due while no
// worker runs. The drain is timed from the restarted worker's first poll.
// (Before issue 37 the worker was already down when they were scheduled,
// so the timer path's first task ran late, recorded no timer, and catch-up
// could not tell it from the delayed start.)
func (r *Runner) Catchup(ctx context.Context, kind Kind, n int) Result {
	res := Result{Workload: "catchup", Kind: kind}
	return r.run(ctx, &res, func() (err error) {
		b, due, err := r.scheduleAhead(ctx, &res, n, func(i int) time.Duration { return time.Duration(i) * time.Millisecond }, 0)
		if err != nil {
			return err
		}
		r.Workers.Stop(kind.Worker())
		restarted := false
		defer func() {
			if !restarted {
				if _, serr := r.Workers.Start(kind.Worker()); serr != nil && err == nil {
					err = serr
				}
			}
		}()
		// The outage: everything comes due while no worker runs.
		end := b.planned[len(b.planned)-1]
		if end.Before(due) {
			end = due
		}
		select {
		case <-time.After(time.Until(end.Add(outageTail))):
		case <-ctx.Done():
			return ctx.Err()
		}
		restarted = true
		// The provider's 429 windows count from the worker's return.
		r.providerFor(time.Now())
		firstPoll, err := r.Workers.Start(kind.Worker())
		if err != nil {
			return err
		}
		return r.drain(ctx, &res, b, drainWithin, firstPoll)
	})
}

// drain waits for a batch's results and fills in its figures, the drain
// timed from ref.
func (r *Runner) drain(ctx context.Context, res *Result, b *batch, within time.Duration, ref time.Time) error {
	outs, err := r.results(ctx, b, within)
	starts := r.measure(ctx, res, b, outs, ref)
	res.DrainRate = DrainRate(starts)
	d := TimeToDrain(starts, ref)
	res.Drain = &d
	return err
}

// Hold schedules n reminders far in the future, then reads the worker's
// memory and times the mirror's "due between" query.
func (r *Runner) Hold(ctx context.Context, n int, queries int) Result {
	res := Result{Workload: "hold", Kind: Full, N: n, Round: 1}
	return r.run(ctx, &res, func() error {
		from := time.Now().Add(24 * time.Hour)
		span := 30 * 24 * time.Hour
		b, schedRate, err := r.schedule(ctx, Full, n, func(i int) time.Time {
			return from.Add(time.Duration(float64(span) * float64(i) / float64(n)))
		}, false)
		res.ScheduleRate = schedRate
		if err != nil {
			return err
		}
		// Let the worker take every reminder's first workflow task.
		if err := r.Settle(ctx, 45*time.Minute); err != nil {
			return err
		}
		res.WorkerRSS = r.Workers.RSS(Full)
		lat := make([]time.Duration, 0, queries)
		for range queries {
			t := from.Add(time.Duration(rand.Int64N(int64(span))))
			q := time.Now()
			if _, err := r.Mirror.List(ctx, mirror.Filter{DueFrom: t, DueTo: t.Add(time.Hour), Limit: 1000}); err != nil {
				return err
			}
			lat = append(lat, time.Since(q))
		}
		slices.Sort(lat)
		res.QueryP99 = quantile(lat, 0.99)
		res.HistoryEvents, res.WorkflowTasks, res.Actions, err = r.history(ctx, b.ids[0])
		return err
	})
}

// measure fills a finished batch's figures from its outcomes and returns
// the notify starts. ref is what Accepted is timed from; zero: each
// reminder's due time, and then Drain is each reminder's lag too (steady).
func (r *Runner) measure(ctx context.Context, res *Result, b *batch, outs []outcome, ref time.Time) []time.Time {
	res.N = len(b.planned)
	var starts []time.Time
	var lags []time.Duration
	delivered := -1
	for i, o := range outs {
		if o.start.IsZero() {
			continue
		}
		starts = append(starts, o.start)
		lags = append(lags, o.start.Sub(b.dueAt[i]))
		if o.executions > 1 {
			res.Duplicates++
		}
		if delivered < 0 && o.err == nil {
			delivered = i
		}
	}
	res.Lag = LagPercentiles(lags)
	if ref.IsZero() && len(lags) > 0 {
		d := DurationsDrain(lags)
		res.Drain = &d
	}
	res.Delivered = len(starts)
	if b.kind.runsReminders() || b.sends {
		// What the provider accepted: distinct keys, and keys accepted
		// twice; for the baselines too while they send, so every path's
		// duplicates are counted where the full path's are.
		j := readJournal(r.Mail.Mails(), b.keys)
		res.Delivered, res.Duplicates = len(j.first), j.duplicates()
		if d, ok := j.accepted(b.keys, ref); ok {
			res.Accepted = &d
		}
	}
	res.Lost = res.N - res.Delivered
	res.WorkerRSS = r.Workers.RSS(b.kind.Worker())
	if delivered >= 0 {
		var err error
		if res.HistoryEvents, res.WorkflowTasks, res.Actions, err = r.history(ctx, b.ids[delivered]); err != nil {
			r.logf("%v", err)
		}
	}
	res.Tasks, res.Cost = r.taskStats(ctx, b.ids)
	return starts
}

// taskSample is how many of a run's histories its task stats read: evenly
// spread over the batch, so a stall's tail is in it.
const taskSample = 60

// taskStats reads where a sample of the run's reminders waited for their
// tasks, and what the delivered ones among them cost (nil if none could be
// read).
func (r *Runner) taskStats(ctx context.Context, ids []string) (*TaskStats, *ReminderCost) {
	step := max(len(ids)/taskSample, 1)
	var histories [][]*historypb.HistoryEvent
	for i := 0; i < len(ids); i += step {
		events, err := r.events(ctx, ids[i])
		if err != nil {
			r.logf("%v", err)
			continue
		}
		histories = append(histories, events)
	}
	if len(histories) == 0 {
		return nil, nil
	}
	st := ReadTaskStats(histories)
	return &st, ReadReminderCost(histories)
}

// journal is what the mail sink accepted under a batch's keys: when each
// key's first mail came, and how many came under it.
type journal struct {
	first  map[string]time.Time
	counts map[string]int
}

// readJournal reads the mails accepted under keys.
func readJournal(mails []sink.Mail, keys map[string]time.Time) journal {
	j := journal{first: map[string]time.Time{}, counts: map[string]int{}}
	for _, m := range mails {
		k := m.CustomArgs["delivery_key"]
		if _, ok := keys[k]; !ok {
			continue
		}
		if j.counts[k]++; j.counts[k] == 1 || m.Received.Before(j.first[k]) {
			j.first[k] = m.Received
		}
	}
	return j
}

// duplicates counts the keys accepted more than once.
func (j journal) duplicates() int {
	n := 0
	for _, c := range j.counts {
		if c > 1 {
			n++
		}
	}
	return n
}

// accepted is how long after ref (zero: each key's due time) each key's
// first mail was accepted; ok is false when none was.
func (j journal) accepted(due map[string]time.Time, ref time.Time) (Drain, bool) {
	if len(j.first) == 0 {
		return Drain{}, false
	}
	waits := make([]time.Duration, 0, len(j.first))
	for k, at := range j.first {
		from := ref
		if from.IsZero() {
			from = due[k]
		}
		waits = append(waits, at.Sub(from))
	}
	return DurationsDrain(waits), true
}

// history reads a finished workflow's history: its length, its workflow
// tasks and its billable actions.
func (r *Runner) history(ctx context.Context, workflowID string) (events, tasks int, actions *Actions, err error) {
	h, err := r.events(ctx, workflowID)
	if err != nil {
		return 0, 0, nil, err
	}
	a := CountActions(h)
	return len(h), WorkflowTasks(h), &a, nil
}

// events reads a workflow's whole history.
func (r *Runner) events(ctx context.Context, workflowID string) ([]*historypb.HistoryEvent, error) {
	it := r.Temporal.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("error reading the history of %s: %w", workflowID, err)
		}
		events = append(events, ev)
	}
	return events, nil
}
