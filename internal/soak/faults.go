package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/testenv"
)

// Fault is one fault the soak injected.
type Fault struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail,omitempty"`
	// Until is when the part came back (or the answers went normal).
	Until time.Time `json:"until"`
}

// The faults, by kind.
const (
	FaultKillWorker  = "kill_worker"
	FaultKillWorkers = "kill_both_workers"
	FaultKillServer  = "kill_temporal"
	FaultStopPG      = "stop_postgres"
	FaultMailErrors  = "mail_errors"
	FaultHookErrors  = "webhook_errors"
	FaultMailSlow    = "mail_slow"
	FaultHookSlow    = "webhook_slow"
	FaultKillServe   = "kill_serve"
)

// Faults injects random faults into an Env. It must run on the test's own
// goroutine: starting parts again may fail the test.
type Faults struct {
	env *Env
	rng *rand.Rand
	log []Fault
}

// NewFaults returns the fault injector of seed.
func NewFaults(env *Env, seed uint64) *Faults {
	return &Faults{env: env, rng: rand.New(rand.NewPCG(seed^0xfa17, seed))}
}

// Log is the faults injected, in order.
func (f *Faults) Log() []Fault { return append([]Fault(nil), f.log...) }

// Run injects a fault every 4 to 12 s until ctx ends, each over before
// the next begins.
func (f *Faults) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(4000+f.rng.IntN(8000)) * time.Millisecond):
		}
		if ctx.Err() != nil {
			return
		}
		f.inject(f.pick())
	}
}

func (f *Faults) pick() string {
	kinds := []string{FaultKillWorker, FaultKillWorker, FaultKillWorkers, FaultKillServer, FaultStopPG,
		FaultMailErrors, FaultHookErrors, FaultMailSlow, FaultHookSlow, FaultKillServe}
	return kinds[f.rng.IntN(len(kinds))]
}

// between draws a duration in [lo, hi).
func (f *Faults) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(f.rng.Int64N(int64(hi-lo)))
}

// inject makes one fault and brings the part back.
func (f *Faults) inject(kind string) {
	e := f.env
	fl := Fault{At: time.Now(), Kind: kind}
	switch kind {
	case FaultKillWorker:
		fl.Detail = f.killOne("worker", e.Workers)
	case FaultKillWorkers:
		fl.Detail = "both workers SIGKILLed"
		for _, w := range e.Workers {
			w.Kill()
		}
		time.Sleep(f.between(2*time.Second, 8*time.Second))
		for _, w := range e.Workers {
			w.Start()
		}
	case FaultKillServer:
		fl.Detail = "the Temporal dev server SIGKILLed, restarted on its file"
		e.Server.Kill()
		e.Server.Start()
		e.Server.WaitHealthy(e.T)
	case FaultStopPG:
		down := f.between(3*time.Second, 15*time.Second)
		fl.Detail = fmt.Sprintf("PostgreSQL stopped -m immediate for %s", down.Round(100*time.Millisecond))
		e.PG.Crash()
		time.Sleep(down)
		e.PG.Start()
	case FaultMailErrors, FaultHookErrors:
		status := []int{500, 503, 429}[f.rng.IntN(3)]
		n := 3 + f.rng.IntN(20)
		answers := make([]sink.Answer, n)
		for i := range answers {
			answers[i] = sink.Answer{Status: status}
			if status == 429 {
				answers[i].Headers = map[string]string{"Retry-After": "2"}
			}
		}
		fl.Detail = fmt.Sprintf("the next %d answers are %d", n, status)
		if kind == FaultMailErrors {
			e.Stack.Mail.Fail(answers...)
		} else {
			e.Stack.Hooks.Fail(answers...)
		}
	case FaultMailSlow, FaultHookSlow:
		// Up to past the client's timeout: the call's outcome is then
		// unknown, and the provider has the message all the same.
		latency := f.between(time.Second, 25*time.Second)
		span := f.between(3*time.Second, 10*time.Second)
		fl.Detail = fmt.Sprintf("every answer takes %s, for %s", latency.Round(100*time.Millisecond), span.Round(100*time.Millisecond))
		if kind == FaultMailSlow {
			e.Stack.Mail.SetLatency(latency)
			time.Sleep(span)
			e.Stack.Mail.SetLatency(0)
		} else {
			e.Stack.Hooks.SetLatency(latency)
			time.Sleep(span)
			e.Stack.Hooks.SetLatency(0)
		}
	case FaultKillServe:
		fl.Detail = f.killOne("serve replica", e.Serves)
	}
	fl.Until = time.Now()
	f.log = append(f.log, fl)
}

// killOne SIGKILLs one of procs at random and starts it again 1 to 5 s
// later, as a crash and its supervisor's restart would; it says which.
func (f *Faults) killOne(what string, procs []*testenv.Process) string {
	i := f.rng.IntN(len(procs))
	procs[i].Kill()
	time.Sleep(f.between(time.Second, 5*time.Second))
	procs[i].Start()
	return fmt.Sprintf("%s %d SIGKILLed", what, i)
}

// Restore starts whatever part is down, as an operator would once the
// storm passed: a process started while PostgreSQL was down has exited.
func (f *Faults) Restore() {
	e := f.env
	e.Stack.Mail.SetLatency(0)
	e.Stack.Hooks.SetLatency(0)
	e.Stack.Mail.ClearFailures()
	e.Stack.Hooks.ClearFailures()
	for _, p := range append(append([]*testenv.Process(nil), e.Workers...), e.Serves...) {
		if !p.Alive() {
			p.Start()
		}
	}
}
