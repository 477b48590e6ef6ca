package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// Fault is one fault the soak injected.
type Fault struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail,omitempty"`
	// Target names the part it hit ("worker 1", "serve 0", "PostgreSQL",
	// a tracker's endpoint), so the checker can tell what a repeat
	// happened beside.
	Target string `json:"target,omitempty"`
	// Until is when the part came back (or the answers went normal).
	Until time.Time `json:"until"`
}

// The faults, by kind. The product's parts: killed, stopped or frozen.
const (
	FaultKillWorker  = "kill_worker"
	FaultKillWorkers = "kill_both_workers"
	FaultKillServer  = "kill_temporal"
	FaultStopPG      = "stop_postgres"
	FaultKillServe   = "kill_serve"
	FaultStallWorker = "stall_worker"
	FaultStallServe  = "stall_serve"
	FaultStallPG     = "stall_postgres"
	// FaultRateCap is the rolling restart of the workers with the
	// provider's rate cap on, once, partway through the run.
	FaultRateCap = "rate_cap_on"
)

// The third parties' faults: the mail API, the subscribers' webhook
// receiver and the trackers' status endpoints failing or slow.
const (
	FaultMailErrors  = "mail_errors"
	FaultHookErrors  = "webhook_errors"
	FaultMailSlow    = "mail_slow"
	FaultHookSlow    = "webhook_slow"
	FaultMailLate    = "mail_late"
	FaultTrackerSlow = "tracker_slow"
)

// TargetPG is the Target of a fault of PostgreSQL.
const TargetPG = "PostgreSQL"

// Stalls last 5 to 40 s: a long GC pause, a frozen VM or node.
const (
	minStall = 5 * time.Second
	maxStall = 40 * time.Second
)

// A slow tracker answers each post in 2 to 8 s, and one in unansweredOneIn
// not at all: past the relay's 15 s webhook timeout.
const (
	trackerMin      = 2 * time.Second
	trackerMax      = 8 * time.Second
	unansweredOneIn = 12
)

// A late mail API takes the mail at once and answers in 6 to 8 s.
const (
	mailLateMin    = 6 * time.Second
	mailLateSpread = 2 * time.Second
)

// lane is a stream of faults, one over before the next begins, drawn from
// decks taken in turn, each shuffled by the lane's seed and dealt to its
// end before it is shuffled again: a short run still meets every kind of
// the first deck.
type lane struct {
	rng   *rand.Rand
	decks [][]string
	dealt [][]string
	turn  int
}

func newLane(seed, stream uint64, decks ...[]string) *lane {
	return &lane{rng: rand.New(rand.NewPCG(seed^stream, seed)), decks: decks, dealt: make([][]string, len(decks))}
}

func (l *lane) pick() string {
	i := l.turn % len(l.decks)
	l.turn++
	if len(l.dealt[i]) == 0 {
		l.dealt[i] = append([]string(nil), l.decks[i]...)
		l.rng.Shuffle(len(l.dealt[i]), func(a, b int) { l.dealt[i][a], l.dealt[i][b] = l.dealt[i][b], l.dealt[i][a] })
	}
	kind := l.dealt[i][0]
	l.dealt[i] = l.dealt[i][1:]
	return kind
}

// between draws a duration in [lo, hi).
func (l *lane) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(l.rng.Int64N(int64(hi-lo)))
}

// Faults injects random faults into an Env on four lanes at once, each
// with its own seeded stream, so their draws do not depend on one
// another's timing: kills (and the rate cap's deploy), stalls, the mail
// API and webhook receiver failing or slow, and a tracker down then slow.
// Faults of two lanes may overlap, as they do in production, but never on
// one part: a part killed is not frozen meanwhile. The kills' lane must
// run on the test's own goroutine: starting parts again may fail the test.
type Faults struct {
	env       *Env
	kills     *lane
	stalls    *lane
	providers *lane
	trackers  *lane
	// capAt is how far into the run the workers restart with the rate
	// cap on.
	capAt time.Duration
	// parts are the parts' locks, by Target: one fault at a time each.
	parts map[string]*sync.Mutex

	mu     sync.Mutex
	log    []Fault
	paused []*testenv.Process
}

// NewFaults returns the fault injector of seed for a run of duration.
func NewFaults(env *Env, seed uint64, duration time.Duration) *Faults {
	f := &Faults{
		env:    env,
		kills:  newLane(seed, 0xfa17, []string{FaultKillWorker, FaultKillWorker, FaultKillWorkers, FaultKillServer, FaultStopPG, FaultKillServe}),
		stalls: newLane(seed, 0x5a11, []string{FaultStallWorker, FaultStallServe, FaultStallPG}),
		providers: newLane(seed, 0x5105, []string{FaultMailLate, FaultMailLate},
			[]string{FaultMailErrors, FaultHookErrors, FaultMailSlow, FaultHookSlow}),
		trackers: newLane(seed, 0x7ac, []string{FaultTrackerSlow}),
		parts:    map[string]*sync.Mutex{TargetPG: {}, targetTemporal: {}},
	}
	for i := range env.Workers {
		f.parts[part("worker", i)] = &sync.Mutex{}
	}
	for i := range env.Serves {
		f.parts[part("serve", i)] = &sync.Mutex{}
	}
	// Between 30% and 50% of the run: a deploy that turns the cap on.
	f.capAt = time.Duration(float64(duration) * (0.3 + 0.2*rand.New(rand.NewPCG(seed, 0xca9)).Float64()))
	return f
}

// targetTemporal is the Target of a fault of the dev server.
const targetTemporal = "Temporal"

func part(what string, i int) string { return fmt.Sprintf("%s %d", what, i) }

// hold takes the parts' locks, in one order, and returns their release.
func (f *Faults) hold(targets ...string) (release func()) {
	targets = slices.Clone(targets)
	slices.Sort(targets)
	for _, t := range targets {
		f.parts[t].Lock()
	}
	return func() {
		for _, t := range targets {
			f.parts[t].Unlock()
		}
	}
}

// Log is the faults injected, in the order they began.
func (f *Faults) Log() []Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]Fault(nil), f.log...)
	slices.SortStableFunc(out, func(a, b Fault) int { return a.At.Compare(b.At) })
	return out
}

func (f *Faults) record(fl Fault) {
	fl.Until = time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fl)
}

// The pause before each lane's next fault: the third parties fail often
// and briefly; a kill or a stall every 6 to 18 s, a tracker's outage every
// 10 to 30 s, so the system is whole for part of the run.
var (
	shortGap   = [2]time.Duration{4 * time.Second, 12 * time.Second}
	partGap    = [2]time.Duration{6 * time.Second, 18 * time.Second}
	trackerGap = [2]time.Duration{10 * time.Second, 30 * time.Second}
)

// Run injects faults until ctx ends, on each lane one at a time, and
// restarts the workers with the rate cap on at capAt.
func (f *Faults) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { f.runLane(ctx, f.stalls, partGap, f.injectStall) })
	wg.Go(func() { f.runLane(ctx, f.providers, shortGap, f.injectProvider) })
	wg.Go(func() { f.runLane(ctx, f.trackers, trackerGap, f.injectTracker) })
	f.runKills(ctx)
	wg.Wait()
}

func (f *Faults) runLane(ctx context.Context, l *lane, gap [2]time.Duration, inject func(context.Context, string)) {
	for sleep(ctx, l.between(gap[0], gap[1])) {
		inject(ctx, l.pick())
	}
}

func (f *Faults) runKills(ctx context.Context) {
	began, capped := time.Now(), false
	for sleep(ctx, f.kills.between(partGap[0], partGap[1])) {
		if !capped && time.Since(began) >= f.capAt {
			capped = true
			release := f.hold(part("worker", 0), part("worker", 1))
			fl := Fault{At: time.Now(), Kind: FaultRateCap, Target: "workers",
				Detail: fmt.Sprintf("the workers restarted one at a time (SIGTERM) with SHIPNOTIFY_WORKER_SENDS_PER_SECOND=%g", RateCap)}
			f.env.RateCapOn()
			f.record(fl)
			release()
		}
		f.injectKill(ctx, f.kills.pick())
	}
}

// sleep waits d, or until ctx ends: false then.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// injectKill kills or stops a part, and brings it back. Every draw is
// made before any wait, so the draws do not depend on timing; a fault
// whose part was busy until the run ended is not made.
func (f *Faults) injectKill(ctx context.Context, kind string) {
	e, l := f.env, f.kills
	fl := Fault{Kind: kind}
	var i int
	var down time.Duration
	locks := []string{}
	switch kind {
	case FaultKillWorker:
		i, down = l.rng.IntN(len(e.Workers)), l.between(time.Second, 5*time.Second)
		fl.Target = part("worker", i)
		locks = append(locks, fl.Target)
	case FaultKillWorkers:
		down = l.between(2*time.Second, 8*time.Second)
		fl.Target = "workers"
		locks = append(locks, part("worker", 0), part("worker", 1))
	case FaultKillServer:
		fl.Target = targetTemporal
		locks = append(locks, targetTemporal)
	case FaultStopPG:
		down = l.between(3*time.Second, 15*time.Second)
		fl.Target = TargetPG
		locks = append(locks, TargetPG)
	case FaultKillServe:
		i, down = l.rng.IntN(len(e.Serves)), l.between(time.Second, 5*time.Second)
		fl.Target = part("serve", i)
		locks = append(locks, fl.Target)
	}
	defer f.hold(locks...)()
	if ctx.Err() != nil {
		return
	}
	fl.At = time.Now()
	switch kind {
	case FaultKillWorker:
		fl.Detail = fl.Target + " SIGKILLed"
		e.Workers[i].Kill()
		time.Sleep(down)
		e.Workers[i].Start()
	case FaultKillWorkers:
		fl.Detail = "both workers SIGKILLed"
		for _, w := range e.Workers {
			w.Kill()
		}
		time.Sleep(down)
		for _, w := range e.Workers {
			w.Start()
		}
	case FaultKillServer:
		fl.Detail = "the Temporal dev server SIGKILLed, restarted on its file"
		e.Server.Kill()
		e.Server.Start()
		e.Server.WaitHealthy(e.T)
	case FaultStopPG:
		fl.Detail = fmt.Sprintf("PostgreSQL stopped -m immediate for %s", down.Round(100*time.Millisecond))
		e.PG.Crash()
		sleep(ctx, down)
		e.PG.Start()
	case FaultKillServe:
		fl.Detail = fl.Target + " SIGKILLed"
		e.Serves[i].Kill()
		time.Sleep(down)
		e.Serves[i].Start()
	}
	f.record(fl)
}

// injectStall freezes a part with SIGSTOP for 5 to 40 s, then lets it run
// again: one worker, or (one time in three) both, as a node hosting both;
// a serve replica; every process of PostgreSQL. A freeze ends early when
// the run does. A part that is not running (a worker started while
// PostgreSQL was down exits) is left alone, and the fault says so.
func (f *Faults) injectStall(ctx context.Context, kind string) {
	e, l := f.env, f.stalls
	fl := Fault{At: time.Now(), Kind: kind}
	d := l.between(minStall, maxStall)
	var procs []*testenv.Process
	switch kind {
	case FaultStallWorker:
		i, both := l.rng.IntN(len(e.Workers)), l.rng.IntN(3) == 0
		fl.Target, procs = part("worker", i), []*testenv.Process{e.Workers[i]}
		if both {
			fl.Target, procs = "workers", e.Workers
		}
	case FaultStallServe:
		i := l.rng.IntN(len(e.Serves))
		fl.Target, procs = part("serve", i), []*testenv.Process{e.Serves[i]}
	case FaultStallPG:
		fl.Target = TargetPG
	}
	locks := []string{fl.Target}
	if fl.Target == "workers" {
		locks = []string{part("worker", 0), part("worker", 1)}
	}
	defer f.hold(locks...)()
	if ctx.Err() != nil {
		return // its part was busy until the run ended
	}
	fl.At = time.Now()
	if kind == FaultStallPG {
		if err := e.PG.Freeze(); err != nil {
			fl.Detail = fmt.Sprintf("PostgreSQL not frozen: %v", err)
			f.record(fl)
			return
		}
		sleep(ctx, d)
		e.PG.Thaw()
		fl.Detail = fmt.Sprintf("PostgreSQL frozen (SIGSTOP, every process) for %s", time.Since(fl.At).Round(100*time.Millisecond))
		f.record(fl)
		return
	}
	var frozen []*testenv.Process
	for _, p := range procs {
		if p.Pause() == nil {
			frozen = append(frozen, p)
			f.setPaused(p, true)
		}
	}
	if len(frozen) == 0 {
		fl.Detail = fl.Target + " not running: not frozen"
		f.record(fl)
		return
	}
	sleep(ctx, d)
	for _, p := range frozen {
		_ = p.Resume()
		f.setPaused(p, false)
	}
	fl.Detail = fmt.Sprintf("%s frozen (SIGSTOP) for %s", fl.Target, time.Since(fl.At).Round(100*time.Millisecond))
	if len(frozen) < len(procs) {
		fl.Detail += " (one was not running)"
	}
	f.record(fl)
}

func (f *Faults) setPaused(p *testenv.Process, paused bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if paused {
		f.paused = append(f.paused, p)
		return
	}
	for i, q := range f.paused {
		if q == p {
			f.paused = append(f.paused[:i], f.paused[i+1:]...)
			return
		}
	}
}

// injectProvider makes the mail API or the webhook receiver fail or slow
// for a while.
func (f *Faults) injectProvider(ctx context.Context, kind string) {
	e, l := f.env, f.providers
	fl := Fault{At: time.Now(), Kind: kind}
	switch kind {
	case FaultMailErrors, FaultHookErrors:
		status := []int{500, 503, 429}[l.rng.IntN(3)]
		n := 3 + l.rng.IntN(20)
		answers := make([]sink.Answer, n)
		for i := range answers {
			answers[i] = sink.Answer{Status: status}
			if status == 429 {
				answers[i].Headers = map[string]string{"Retry-After": "2"}
			}
		}
		fl.Detail = fmt.Sprintf("the next %d answers are %d", n, status)
		if kind == FaultMailErrors {
			fl.Target = "mail"
			e.Stack.Mail.Fail(answers...)
		} else {
			fl.Target = "webhook"
			e.Stack.Hooks.Fail(answers...)
		}
	case FaultMailSlow, FaultHookSlow:
		// Up to past the client's timeout: the call's outcome is then
		// unknown, and the provider has the message all the same.
		latency := l.between(time.Second, 25*time.Second)
		span := l.between(3*time.Second, 10*time.Second)
		fl.Detail = fmt.Sprintf("every answer takes %s, for %s", latency.Round(100*time.Millisecond), span.Round(100*time.Millisecond))
		if kind == FaultMailSlow {
			fl.Target = "mail"
			e.Stack.Mail.SetLatency(latency)
			sleep(ctx, span)
			e.Stack.Mail.SetProfile(sink.Instant())
		} else {
			fl.Target = "webhook"
			e.Stack.Hooks.SetLatency(latency)
			sleep(ctx, span)
			e.Stack.Hooks.SetLatency(0)
		}
	case FaultMailLate:
		span := l.between(10*time.Second, 40*time.Second)
		fl.Target = "mail"
		fl.Detail = fmt.Sprintf("the mail API takes each mail at once and answers in 6-8 s, for %s", span.Round(100*time.Millisecond))
		e.Stack.Mail.SetProfile(sink.Profile{Name: "late", Median: mailLateMin, Spread: mailLateSpread, AcceptFirst: true, Seed: l.rng.Uint64()})
		sleep(ctx, span)
		e.Stack.Mail.SetProfile(sink.Instant())
	}
	f.record(fl)
}

// injectTracker takes one tracker's endpoint down (503) for 20 to 40 s,
// then has it answer each post in 2 to 8 s, and one in unansweredOneIn
// not at all, for 50 to 90 s: a tracker catching up after an outage,
// while every reminder that changed meanwhile has an event waiting, so a
// relay's batch outlasts its lease while the tracker is still slow. From
// the second time on, the serve replicas and PostgreSQL are left alone
// while it is slow (their locks held): an event it took in time and takes
// again then has no cause but the relay's own. The first time comes in
// the storm, so a short run still meets every stall.
func (f *Faults) injectTracker(ctx context.Context, _ string) {
	l := f.trackers
	tr := f.env.Trackers[l.rng.IntN(len(f.env.Trackers))]
	down := l.between(20*time.Second, 40*time.Second)
	slow := l.between(50*time.Second, 90*time.Second)
	answers := slowTracker(l.rng.Uint64())
	quiet := l.turn > 1
	fl := Fault{At: time.Now(), Kind: FaultTrackerSlow, Target: tr.Name}
	tr.Sink.SetDown(true)
	sleep(ctx, down)
	if quiet {
		defer f.hold(part("serve", 0), part("serve", 1), TargetPG)()
	}
	slowFrom := time.Now()
	tr.Sink.AnswerAfter(answers)
	tr.Sink.SetDown(false)
	sleep(ctx, slow)
	tr.Sink.AnswerAfter(nil)
	fl.Detail = fmt.Sprintf("%s down (503) for %s, then answers each post in 2-8 s, one in %d never, for %s",
		tr.Name, slowFrom.Sub(fl.At).Round(100*time.Millisecond), unansweredOneIn, time.Since(slowFrom).Round(100*time.Millisecond))
	if quiet {
		fl.Detail += "; serve and PostgreSQL left alone meanwhile"
	}
	f.record(fl)
}

// slowTracker draws a slow tracker's answers from seed: 2 to 8 s, or
// never, one in unansweredOneIn.
func slowTracker(seed uint64) func() time.Duration {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x7ac))
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(unansweredOneIn) == 0 {
			return sink.NeverAnswered
		}
		return trackerMin + time.Duration(rng.Int64N(int64(trackerMax-trackerMin)))
	}
}

// Restore brings back whatever is down, frozen or failing, as an operator
// would once the storm passed: a process started while PostgreSQL was
// down has exited.
func (f *Faults) Restore() {
	e := f.env
	e.Stack.Mail.SetProfile(sink.Instant())
	e.Stack.Hooks.SetLatency(0)
	e.Stack.Mail.ClearFailures()
	e.Stack.Hooks.ClearFailures()
	for _, tr := range e.Trackers {
		tr.Sink.SetDown(false)
		tr.Sink.AnswerAfter(nil)
	}
	f.mu.Lock()
	paused := f.paused
	f.paused = nil
	f.mu.Unlock()
	for _, p := range paused {
		_ = p.Resume()
	}
	e.PG.Thaw()
	for _, p := range append(append([]*testenv.Process(nil), e.Workers...), e.Serves...) {
		if !p.Alive() {
			p.Start()
		}
	}
}
