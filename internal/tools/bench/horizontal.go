package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

// The horizontal workload (issue 24): the product's own processes, N
// workers and two serve replicas, on one Temporal server and its
// PostgreSQL, against a burst and a catch-up; how the drain grows from one
// worker to N on this machine and where it stops, and what a worker and a
// serve replica SIGKILLed mid-run cost in drain and in promises.

// HorizontalWorkloads are the workloads each step runs, in order.
var HorizontalWorkloads = []string{"burst", "catchup"}

// HorizontalOptions configure the horizontal workload. The caller has
// made the mirror's schema and the starter; the benchmark starts
// everything else.
type HorizontalOptions struct {
	// Bin is the product binary the workers and serve replicas run.
	Bin string
	// Env is their environment: the Temporal frontend, the namespace, the
	// payload keys, DATABASE_URL of the benchmark's schema and the task
	// queue, without the worker's tuning variables (its defaults run).
	Env       []string
	Temporal  client.Client
	Namespace string
	// Starter schedules onto TaskQueue in the benchmark's schema, over
	// Mirror.
	Starter   *starter.Starter
	Mirror    *mirror.Store
	TaskQueue string
	// Workers are the worker counts measured, in order (the even rounds
	// reversed); Serves the serve replicas.
	Workers []int
	Serves  int
	// N reminders a run; Rounds of every step; Warmup runs a burst first,
	// not compared, so every compared run's lead is learned.
	N      int
	Rounds int
	Warmup bool
	// Workloads are of HorizontalWorkloads.
	Workloads []string
	// Kill adds, to every round, each workload once more at the largest
	// worker count with one worker and one serve replica SIGKILLed once
	// KillAt of the reminders' mail is accepted and mail is in flight,
	// each started again RestartAfter later.
	Kill         bool
	KillAt       float64
	RestartAfter time.Duration
	// Provider is how the mail sink answers.
	Provider            sink.Profile
	Fanout, Concurrency int
	IdleGap, MinSlack   time.Duration
	// QuietWithin bounds the wait, after a run, for its provider events
	// to be applied and its status events delivered.
	QuietWithin time.Duration
	// ServerCPU and PostgresCPU read the engine's processes (nil: not
	// reported).
	ServerCPU, PostgresCPU func() (float64, error)
	// ServerMetrics is the Temporal server's /metrics URL, for its shard
	// writes ("": not reported).
	ServerMetrics string
	// SampleEvery is the CPU sampler's period.
	SampleEvery time.Duration
	Progress    io.Writer
}

// HorizontalRun is one run: a workload at a worker count, perhaps with
// the kill, and what the check from outside found.
type HorizontalRun struct {
	Result
	Workers int `json:"workers"`
	Serves  int `json:"serves"`
	// Kill is what was killed, when, and the windows it left open.
	Kill  *KillRecord `json:"kill,omitempty"`
	Check *RunCheck   `json:"check,omitempty"`
	// Quiet is how long after the run its provider events were all applied
	// and its status events all delivered.
	Quiet time.Duration `json:"quiet_after_ns"`
	// WindowFrom and WindowTo are the drain's middle as the provider saw
	// it (10th to 90th percentile of first acceptances), and Cores what
	// each part kept busy over it.
	WindowFrom time.Time          `json:"window_from"`
	WindowTo   time.Time          `json:"window_to"`
	Cores      map[string]float64 `json:"window_cores,omitempty"`
	// Engine is the server's own account of the run (its shard writes);
	// SlotSeconds how long a send held its claim, on average.
	Engine      *EngineMetrics `json:"engine,omitempty"`
	SlotSeconds float64        `json:"slot_seconds_mean"`
}

// Horizontal runs the horizontal workload and returns its report; an
// error is returned only when it could not run at all (a run's failure is
// in the report).
func Horizontal(ctx context.Context, o HorizontalOptions) (HorizontalReport, error) {
	rep := HorizontalReport{At: time.Now().UTC(), CPUs: runtime.NumCPU()}
	h, err := startHorizontal(o)
	if err != nil {
		return rep, err
	}
	defer h.close()
	sampler := &cpuSampler{every: o.SampleEvery, sources: map[string]func() (float64, error){
		PartWorkers: func() (float64, error) { return h.fleet.all.cpu(), nil },
		PartServes:  func() (float64, error) { return h.serves.cpu(), nil },
		PartMirror:  databaseCPU(o.Mirror.Pool(), "/proc"),
		PartHarness: func() (float64, error) {
			own, _, err := ProcessCPU("/proc", os.Getpid())
			return own, err
		},
		PartMachine: func() (float64, error) { return MachineCPU("/proc") },
	}}
	if o.ServerCPU != nil {
		sampler.sources[PartServer] = o.ServerCPU
	}
	if o.PostgresCPU != nil {
		sampler.sources[PartPostgres] = o.PostgresCPU
	}
	h.sampler = sampler
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); sampler.run(sctx) }()
	defer func() { stopSampling(); <-sampled }()

	base := shortID()
	r := &Runner{
		Temporal: o.Temporal, Namespace: o.Namespace, Starter: o.Starter, Mirror: o.Mirror, Mail: h.mail,
		Queues: map[Kind]string{Full: o.TaskQueue}, Workers: h.fleet, Fanout: o.Fanout, Concurrency: o.Concurrency,
		Progress: o.Progress, IdleGap: o.IdleGap, MinSlack: o.MinSlack,
		ServerCPU: o.ServerCPU, PostgresCPU: o.PostgresCPU, ServeCPU: func() (float64, error) { return h.serves.cpu(), nil },
	}
	r.UseProvider(o.Provider)
	if err := r.Settle(ctx, 2*time.Minute); err != nil {
		return rep, err
	}
	for _, s := range HorizontalOrder(o.Workers, o.Rounds, o.Warmup, o.Kill) {
		if ctx.Err() != nil {
			break
		}
		if err := h.fleet.resize(s.Workers); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			break
		}
		workloads := o.Workloads
		if s.Round == 0 {
			workloads = workloads[:1]
		}
		for _, w := range workloads {
			if ctx.Err() != nil {
				break
			}
			r.RunID = horizontalRunID(base, s, w)
			run := h.run(ctx, r, s, w)
			rep.Runs = append(rep.Runs, run)
			rep.Errors = append(rep.Errors, run.problems()...)
			h.logf("%s", run.line())
		}
	}
	stopSampling()
	<-sampled
	rep.Samples = sampler.series()
	if fp, err := mirrorFootprint(ctx, o.Mirror); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	} else {
		rep.Mirror = &fp
	}
	rep.judge()
	return rep, nil
}

// HorizontalStep is one step of the order: a worker count, with or without
// the kill, in a round (0: the warm-up).
type HorizontalStep struct {
	Workers int
	Kill    bool
	Round   int
}

// Kind labels a step's runs, so the comparisons pair them by round.
func (s HorizontalStep) Kind() Kind { return horizontalKind(s.Workers, s.Kill) }

func horizontalKind(workers int, kill bool) Kind {
	k := Kind("workers-" + strconv.Itoa(workers))
	if kill {
		k += "+kill"
	}
	return k
}

// horizontalRunID names a run's shipments (BENCH-<id>-<seq>), so its
// check finds its reminders, and no other run's, by the prefix
// BENCH-<id>-: no id is another's followed by a dash.
func horizontalRunID(base string, s HorizontalStep, workload string) string {
	kill := ""
	if s.Kill {
		kill = "k"
	}
	return fmt.Sprintf("%s-r%d-w%d%s-%s", base, s.Round, s.Workers, kill, workload)
}

// runPrefix is what the shipment ids of the run with id start with.
func runPrefix(id string) string { return "BENCH-" + id + "-" }

// HorizontalOrder is the steps: the warm-up (a burst at the first count),
// then each round's worker counts, and the kill at the largest count
// last, alternately in order and reversed, so a drift over the session
// favours no count.
func HorizontalOrder(workers []int, rounds int, warmup, kill bool) []HorizontalStep {
	var out []HorizontalStep
	if warmup && len(workers) > 0 {
		out = append(out, HorizontalStep{Workers: workers[0]})
	}
	for round := 1; round <= rounds; round++ {
		var steps []HorizontalStep
		for _, w := range workers {
			steps = append(steps, HorizontalStep{Workers: w, Round: round})
		}
		if kill && len(workers) > 0 {
			steps = append(steps, HorizontalStep{Workers: slices.Max(workers), Kill: true, Round: round})
		}
		if round%2 == 0 {
			slices.Reverse(steps)
		}
		out = append(out, steps...)
	}
	return out
}

// run runs one workload of a step, the kill beside it when the step has
// one, then waits for the run to be quiet and checks it from outside.
func (h *horizontalEnv) run(ctx context.Context, r *Runner, s HorizontalStep, workload string) HorizontalRun {
	run := HorizontalRun{Workers: s.Workers, Serves: len(h.serves)}
	var killed <-chan *KillRecord
	kctx, stopKill := context.WithCancel(ctx)
	defer stopKill()
	if s.Kill {
		killed = h.killMidRun(kctx, h.accepted.Load(), h.o.N)
	}
	var before engineCounters
	var engineErr error
	if h.o.ServerMetrics != "" {
		before, engineErr = scrapeEngine(ctx, h.o.ServerMetrics)
	}
	switch workload {
	case "catchup":
		run.Result = r.Catchup(ctx, Full, h.o.N)
	default:
		run.Result = r.Burst(ctx, Full, h.o.N)
	}
	run.Workload, run.Kind, run.Round = workload, s.Kind(), s.Round
	if killed != nil {
		stopKill()
		run.Kill = <-killed
		if run.Kill.Error != "" && run.Invalid == "" {
			run.Invalid = "the kill: " + run.Kill.Error
		}
	}
	prefix := runPrefix(r.RunID)
	quiet := time.Now()
	if err := waitQuiet(ctx, h.o.Mirror, prefix, h.o.QuietWithin); err != nil {
		h.logf("%s: %v; the check says which", run.label(), err)
	}
	run.Quiet = time.Since(quiet)
	if h.o.ServerMetrics != "" && engineErr == nil {
		var after engineCounters
		if after, engineErr = scrapeEngine(ctx, h.o.ServerMetrics); engineErr == nil {
			m := after.since(before, h.o.N)
			run.Engine = &m
		}
	}
	if engineErr != nil {
		h.logf("%s: %v", run.label(), engineErr)
	}
	if slot, err := slotSeconds(ctx, h.o.Mirror, prefix); err != nil {
		h.logf("%s: %v", run.label(), err)
	} else {
		run.SlotSeconds = slot
	}
	snap, err := readSnapshot(ctx, h.o.Mirror, h.ids, prefix, h.mail, h.tracker, run.Kill)
	if err != nil {
		run.Error = errors.Join(errorOf(run.Error), err).Error()
		return run
	}
	c := checkRun(snap)
	run.Check = &c
	if from, to, ok := acceptedWindow(snap.FirstAccepted); ok {
		run.WindowFrom, run.WindowTo = from, to
		// The sampler reads every second: wait for the reading after the
		// window's end.
		run.Cores = CoresBetween(h.samplesAfter(ctx, to), from, to)
	}
	return run
}

// samplesAfter is the sampler's series once it holds a sample after t, or
// what it holds when none comes within a few of its periods.
func (h *horizontalEnv) samplesAfter(ctx context.Context, t time.Time) []CPUSample {
	deadline := time.Now().Add(3 * h.sampler.every)
	for {
		got := h.sampler.series()
		if n := len(got); (n > 0 && got[n-1].At.After(t)) || time.Now().After(deadline) {
			return got
		}
		select {
		case <-ctx.Done():
			return got
		case <-time.After(h.sampler.every / 4):
		}
	}
}

// shortID keeps one invocation's shipments apart from another's.
func shortID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// errorOf is s as an error, nil for "".
func errorOf(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}
