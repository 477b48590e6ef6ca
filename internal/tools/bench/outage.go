package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"golang.org/x/sync/errgroup"

	"github.com/shipnotify/shipnotify/internal/sink"
)

// OutageWorkload names the outage workload's results: the seed article's
// catch-up rehearsal meeting a provider outage instead of a worker's.
const OutageWorkload = "outage"

// How the outage workload waits and reads: the results may take the
// outage, then up to the old backoff's longest waits after it; histories
// are read a few at a time, all of them up to a cap, a seeded sample
// beyond; the send rate is judged over windows long enough that the
// sink's clock jitter does not move it.
const (
	outageDrainWithin  = 20 * time.Minute
	outageHistoryCap   = 1000
	outageHistoryPolls = 16
	outageHistorySeed  = 12
	peakRateWindow     = 5 * time.Second
	// outageLeadExtra lengthens the lead: the workload has no warm-up to
	// learn its start rate from, and seconds are nothing to its minutes.
	outageLeadExtra = 10 * time.Second
)

// notifyActivity is the activity type worker.Register gives
// activities.Activities.Notify (methods register under their names).
const notifyActivity = "Notify"

// OutageOptions shape one round of the outage workload.
type OutageOptions struct {
	// N reminders per variant come due uniformly over the outage.
	N int
	// Outage is how long the provider answers every call 503.
	Outage time.Duration
	// RateCap is the sends a second every variant's worker is held to
	// (worker.Options.SendsPerSecond and Activities.SendsPerSecond),
	// reported with the figures.
	RateCap float64
}

// OutageFigures are what the outage workload measures of one variant in
// one round.
type OutageFigures struct {
	Outage  time.Duration `json:"outage_ns"`
	RateCap float64       `json:"rate_cap"`
	// AfterRecovery is, per delivered reminder, the provider's acceptance
	// of its first mail (the sink's Received) minus the outage's end.
	AfterRecovery Drain `json:"after_recovery"`
	// BeforeEnd counts reminders accepted before the outage ended (0: the
	// sink accepted nothing while it was down).
	BeforeEnd int `json:"delivered_before_end"`
	// PeakRate is the most mails accepted in any peakRateWindow, a second.
	PeakRate float64 `json:"peak_send_rate"`
	// Histories is how many of the variant's histories Attempts and
	// Actions were read from.
	Histories int         `json:"histories_read"`
	Attempts  PerReminder `json:"notify_attempts"`
	Actions   PerReminder `json:"actions"`
	// LateCauses tallies, over the histories read whose last notify attempt
	// began more than outageLateAfter after recovery, what the attempt
	// before it failed with (LastRetryCause): where a late tail's wait
	// came from.
	LateCauses map[string]int `json:"late_causes,omitempty"`
}

// outageLateAfter is the recovery target (BarOutageRecoveryP99): a
// reminder whose last attempt began later than this after the outage
// missed it.
const outageLateAfter = time.Duration(BarOutageRecoveryP99 * float64(time.Second))

// PerReminder is the mean, p99 (nearest rank) and maximum of counts per
// reminder.
type PerReminder struct {
	Mean float64 `json:"mean"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// PerReminderOf gives the spread of counts; all zero for none.
func PerReminderOf(counts []int) PerReminder {
	if len(counts) == 0 {
		return PerReminder{}
	}
	s := slices.Clone(counts)
	slices.Sort(s)
	sum := 0
	for _, c := range s {
		sum += c
	}
	return PerReminder{Mean: float64(sum) / float64(len(s)), P99: float64(quantile(s, 0.99)), Max: float64(s[len(s)-1])}
}

// PeakRate is the most instants in any window starting at one of them,
// per second of the window: a rate cap spaces sends exactly, so a capped
// sender's peak is its cap.
func PeakRate(at []time.Time, window time.Duration) float64 {
	if len(at) == 0 || window <= 0 {
		return 0
	}
	s := sortedTimes(at)
	most, j := 0, 0
	for i := range s {
		for j < len(s) && s[j].Before(s[i].Add(window)) {
			j++
		}
		most = max(most, j-i)
	}
	return float64(most) / window.Seconds()
}

// NotifyAttempts counts a history's notify attempts: each notify
// activity's last attempt, from its started event (a retried activity's
// earlier attempts write no events of their own).
func NotifyAttempts(events []*historypb.HistoryEvent) int {
	n := 0
	for _, ev := range notifyStarts(events) {
		n += int(ev.GetActivityTaskStartedEventAttributes().GetAttempt())
	}
	return n
}

// notifyStarts are the started events of a history's notify activities,
// in the order they were scheduled: each one's last attempt.
func notifyStarts(events []*historypb.HistoryEvent) []*historypb.HistoryEvent {
	var scheduled []int64
	started := map[int64]*historypb.HistoryEvent{}
	for _, ev := range events {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == notifyActivity {
				scheduled = append(scheduled, ev.GetEventId())
			}
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = ev
		}
	}
	var out []*historypb.HistoryEvent
	for _, id := range scheduled {
		if ev, ok := started[id]; ok {
			out = append(out, ev)
		}
	}
	return out
}

// Outage runs one round of the outage workload: each kind (a full-path
// worker of its own: Paced, OwnBackoff) gets o.N reminders due uniformly
// over an outage of o.Outage during which the mail sink answers every
// call 503; it waits for them all, and measures each variant's delivery
// after recovery, its send rate, losses, duplicates, and its notify
// attempts and billable actions per reminder from their histories.
func (r *Runner) Outage(ctx context.Context, kinds []Kind, o OutageOptions) []Result {
	r.mu.Lock()
	unsettled := r.unsettled
	r.unsettled = ""
	r.mu.Unlock()
	results := make([]Result, len(kinds))
	before := make([]cpuMark, len(kinds))
	for i, k := range kinds {
		results[i] = Result{Workload: OutageWorkload, Kind: k, Provider: sink.OutageName}
		before[i] = r.cpuNow(k)
	}
	begin := time.Now()
	err := r.outage(ctx, kinds, o, results)
	if serr := r.Settle(ctx, settleWithin); serr != nil {
		r.logf("%v; the next run is left out of the comparisons", serr)
		r.mu.Lock()
		r.unsettled = "the queues had not settled after the run before: " + serr.Error()
		r.mu.Unlock()
	}
	for i, k := range kinds {
		res := &results[i]
		if err != nil && res.Error == "" {
			res.Error = err.Error()
		}
		res.CPU = r.cpuNow(k).since(before[i])
		res.Elapsed = time.Since(begin)
		res.Invalid = invalidReason(*res, unsettled, r.MinSlack)
	}
	return results
}

func (r *Runner) outage(ctx context.Context, kinds []Kind, o OutageOptions, results []Result) error {
	// The starts' work is both variants'; its rate is kept under one of
	// them whichever goes first.
	rateKey := slices.Min(kinds)
	lead := r.lead(rateKey, o.N*len(kinds)) + outageLeadExtra
	start := time.Now().Add(lead)
	end := start.Add(o.Outage)
	// Nothing calls the sink before the first reminder is due, at start.
	r.Mail.SetProfile(sink.Outage(start, end))
	defer r.Mail.SetProfile(sink.Instant())
	due := func(i int) time.Time { return start.Add(time.Duration(float64(o.Outage) * float64(i) / float64(o.N))) }
	batches := make([]*batch, len(kinds))
	began := time.Now()
	for i, k := range kinds {
		b, rate, err := r.schedule(ctx, k, o.N, due, false)
		results[i].Lead, results[i].ScheduleRate = lead, rate
		if err != nil {
			return err
		}
		batches[i] = b
	}
	var done time.Time
	for _, b := range batches {
		d := r.firstTasksDone(ctx, b, start)
		if d.IsZero() {
			done = time.Time{}
			break
		}
		done = d
	}
	r.learnStartRate(rateKey, o.N*len(kinds), &batch{started: began}, done, start)
	for i := range results {
		results[i].Slack = slack(done, start)
	}
	r.logf("outage: %d reminders a variant due over %s of 503s from %s", o.N, o.Outage, start.Format(time.TimeOnly))

	outs := make([][]outcome, len(kinds))
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Go(func() { outs[i], errs[i] = r.results(ctx, b, time.Until(end)+outageDrainWithin) })
	}
	wg.Wait()
	mails := r.Mail.Mails()
	for i, b := range batches {
		res := &results[i]
		res.N = o.N
		var lags []time.Duration
		for j, out := range outs[i] {
			if !out.start.IsZero() {
				lags = append(lags, out.start.Sub(b.dueAt[j]))
			}
		}
		res.Lag = LagPercentiles(lags)
		f, delivered, dups := outageFigures(mails, b.keys, end, o)
		res.Delivered, res.Duplicates, res.Lost = delivered, dups, o.N-delivered
		var err error
		f.Histories, f.Attempts, f.Actions, f.LateCauses, err = r.outageHistories(ctx, b.ids, end)
		if err != nil && errs[i] == nil {
			errs[i] = err
		}
		res.Outage = &f
		res.WorkerRSS = r.Workers.RSS(b.kind.Worker())
		if errs[i] != nil {
			res.Error = errs[i].Error()
		}
	}
	return nil
}

// outageFigures reads what the sink accepted under keys against the
// outage's end: when each key was first accepted after it, how many before
// it, the peak rate, and the delivered and duplicate counts.
func outageFigures(mails []sink.Mail, keys map[string]time.Time, end time.Time, o OutageOptions) (f OutageFigures, delivered, duplicates int) {
	f.Outage, f.RateCap = o.Outage, o.RateCap
	j := readJournal(mails, keys)
	var after []time.Duration
	for _, at := range j.first {
		if at.Before(end) {
			f.BeforeEnd++
		}
		after = append(after, at.Sub(end))
	}
	f.AfterRecovery = DurationsDrain(after)
	var all []time.Time
	for _, m := range mails {
		if _, ok := keys[m.CustomArgs["delivery_key"]]; ok {
			all = append(all, m.Received)
		}
	}
	f.PeakRate = PeakRate(all, peakRateWindow)
	return f, len(j.first), j.duplicates()
}

// outageHistories reads the histories of ids (all of them up to
// outageHistoryCap, a seeded sample beyond), spreads their notify attempts
// and billable actions, and tallies the late ones' causes.
func (r *Runner) outageHistories(ctx context.Context, ids []string, end time.Time) (read int, attempts, actions PerReminder, late map[string]int, err error) {
	pick := ids
	if len(ids) > outageHistoryCap {
		rng := rand.New(rand.NewPCG(outageHistorySeed, outageHistorySeed))
		pick = slices.Clone(ids)
		rng.Shuffle(len(pick), func(i, j int) { pick[i], pick[j] = pick[j], pick[i] })
		pick = pick[:outageHistoryCap]
	}
	att, act := make([]int, len(pick)), make([]int, len(pick))
	causes := make([]string, len(pick))
	var g errgroup.Group
	g.SetLimit(outageHistoryPolls)
	for i, id := range pick {
		g.Go(func() error {
			events, err := r.events(ctx, id)
			if err != nil {
				return err
			}
			att[i], act[i] = NotifyAttempts(events), CountActions(events).Total
			if cause, began := LastRetryCause(events); began.Sub(end) > outageLateAfter {
				causes[i] = cause
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, PerReminder{}, PerReminder{}, nil, fmt.Errorf("error reading the outage's histories: %w", err)
	}
	for _, c := range causes {
		if c != "" {
			if late == nil {
				late = map[string]int{}
			}
			late[c]++
		}
	}
	return len(pick), PerReminderOf(att), PerReminderOf(act), late, nil
}

// LastRetryCause reads a history's last notify attempt: when it began, and
// what the attempt before it failed with, as its started event records it
// ("first attempt" when there was none): the failure's type, or its
// timeout's, and for an error of no product type its message.
func LastRetryCause(events []*historypb.HistoryEvent) (cause string, began time.Time) {
	starts := notifyStarts(events)
	if len(starts) == 0 {
		return "", time.Time{}
	}
	last := starts[len(starts)-1]
	f := last.GetActivityTaskStartedEventAttributes().GetLastFailure()
	began = last.GetEventTime().AsTime()
	switch {
	case f == nil:
		return "first attempt", began
	case f.GetTimeoutFailureInfo() != nil:
		return "timeout " + f.GetTimeoutFailureInfo().GetTimeoutType().String(), began
	case f.GetApplicationFailureInfo().GetType() != "" && !strings.Contains(f.GetApplicationFailureInfo().GetType(), "."):
		return f.GetApplicationFailureInfo().GetType(), began
	}
	msg := f.GetMessage()
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return f.GetApplicationFailureInfo().GetType() + ": " + msg, began
}
