package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/internal/tools/childproc"
	"github.com/shipnotify/shipnotify/worker"
	"github.com/shipnotify/shipnotify/workflows"
)

func init() {
	register("worker", "run one of the benchmark's workers (started by run)", runBenchWorker)
}

// workerSettings are the options every benchmark worker runs with, naive,
// lean and full alike, so the workflows are all that differ.
type workerSettings struct {
	activities, workflowTasks, localActivities, pollers, cache int
}

func (s *workerSettings) register(fs *flag.FlagSet) {
	fs.IntVar(&s.activities, "activity-slots", 200, "every worker: activities in flight (the product's default)")
	fs.IntVar(&s.workflowTasks, "workflow-task-slots", 1000, "every worker: workflow tasks in flight (the SDK's default)")
	fs.IntVar(&s.localActivities, "local-activity-slots", 1000, "every worker: local activities in flight (the SDK's default)")
	fs.IntVar(&s.pollers, "pollers", 0, "every worker: workflow-task pollers and activity-task pollers, each; 0 (the default): they scale themselves, as the product's worker's do; N ≥ 2 pins them")
	fs.IntVar(&s.cache, "cache-size", worker.DefaultCacheSize, "every worker: workflows kept in memory (the product's default)")
}

func (s workerSettings) check() error {
	if s.activities < 1 || s.workflowTasks < 2 || s.localActivities < 1 || s.pollers < 0 || s.pollers == 1 || s.cache < 1 {
		return cli.Usagef("--activity-slots, --local-activity-slots and --cache-size must be positive, --workflow-task-slots at least 2, " +
			"--pollers 0 (autoscaling) or at least 2 (the SDK's minimum)")
	}
	return nil
}

func (s workerSettings) args() []string {
	return []string{
		"--activity-slots", strconv.Itoa(s.activities), "--workflow-task-slots", strconv.Itoa(s.workflowTasks),
		"--local-activity-slots", strconv.Itoa(s.localActivities), "--pollers", strconv.Itoa(s.pollers),
		"--cache-size", strconv.Itoa(s.cache),
	}
}

// options are the settings as worker options; no rate limit on any path.
// Pollers 0 leave the pollers to the SDK's autoscaling (worker.SDKOptions).
func (s workerSettings) options() worker.Options {
	return worker.Options{
		MaxConcurrentActivities: s.activities, MaxConcurrentWorkflowTasks: s.workflowTasks,
		MaxConcurrentLocalActivities: s.localActivities,
		WorkflowTaskPollers:          s.pollers, ActivityTaskPollers: s.pollers,
	}
}

// readyLine starts the line a benchmark worker prints once its pollers
// run, followed by that instant.
const readyLine = "bench-worker polling since"

func runBenchWorker(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "worker", "worker --path naive|lean|full --task-queue Q [--rate-cap R] [--own-backoff] [worker settings]")
	path := fs.String("path", "", "naive, lean or full")
	queue := fs.String("task-queue", "", "the task queue to poll")
	rateCap := fs.Float64("rate-cap", 0, "full: sends a second, as SHIPNOTIFY_WORKER_SENDS_PER_SECOND sets the product's worker (the task queue's activity rate and the mirror's send slots); 0: no cap")
	localFirst := fs.Bool("local-first-attempt", false, "full: pin the retired fast path (workflows.ChangeLocalFirstAttempt at 1): the notify's first attempt runs as a local activity, as reminders of the releases before it was retired did")
	ownBackoff := fs.Bool("own-backoff", false, "full: retries after a provider's failure wait the retry policy's own backoff (1 s doubling to 10 min), not the provider's outage: the old behaviour, for the outage workload")
	var s workerSettings
	s.register(fs)
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if *queue == "" {
		return cli.Usagef("--task-queue is required")
	}
	if *rateCap < 0 {
		return cli.Usagef("--rate-cap must not be negative")
	}
	if err := s.check(); err != nil {
		return err
	}
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	worker.SetCacheSize(s.cache)
	ready := func() { fmt.Fprintf(e.Stdout, "%s %s\n", readyLine, time.Now().UTC().Format(time.RFC3339Nano)) }
	switch bench.Kind(*path) {
	case bench.Full:
		// The product's worker; its metrics served nowhere, as the baselines'.
		// A rate cap is set where the worker command reads it.
		d.Cfg.TaskQueue, d.Cfg.MetricsAddr, d.Cfg.WorkerSendsPerSecond = *queue, "", *rateCap
		o := s.options()
		o.SendsPerSecond = *rateCap
		if *localFirst {
			o.Versions = map[string]workflow.Version{workflows.ChangeLocalFirstAttempt: 1}
		}
		return cli.ServeWorker(ctx, d, o, ready, func(a *activities.Activities) { a.OwnBackoffOnly = *ownBackoff })
	case bench.Naive, bench.Lean:
		// The same SDK metrics handler as the full worker's.
		_, tc, closeMetrics, err := cli.OpsTemporal(ctx, d)
		if err != nil {
			return err
		}
		defer closeMetrics()
		w := sdkworker.New(tc, *queue, worker.SDKOptions(s.options()))
		noop := bench.NewNoop()
		if d.Cfg.SendGridAPIKey != "" {
			// The mail API the full path's worker sends to, through the
			// same client, for runs whose provider is not instant.
			noop = bench.NewSendingNoop(email.NewSender(email.Options{
				APIKey: d.Cfg.SendGridAPIKey, BaseURL: d.Cfg.SendGridBaseURL,
				FromEmail: d.Cfg.FromEmail, FromName: d.Cfg.FromName, Now: time.Now,
			}))
		}
		bench.RegisterBare(w, noop)
		if err := w.Start(); err != nil {
			return fmt.Errorf("error starting the %s worker: %w", *path, err)
		}
		ready()
		<-ctx.Done()
		w.Stop()
		return nil
	}
	return cli.Usagef("--path: want naive, lean or full")
}

// workerStartTimeout bounds how long a worker process may take to poll;
// workerStopTimeout how long a SIGTERMed one may take to stop (its own
// grace for the activities in flight, and a margin), before it is killed.
const (
	workerStartTimeout = time.Minute
	workerStopTimeout  = worker.StopTimeout + 30*time.Second
)

// processWorkers runs each kind's worker as a child process of this binary,
// so its memory and CPU are its own: one childproc.Process a kind, started
// and stopped as often as the workloads ask, its stopped runs' CPU kept.
type processWorkers struct {
	env  []string
	args map[bench.Kind][]string
	// extraEnv is a kind's own variables over env (the outage variants'
	// mirror schemas).
	extraEnv map[bench.Kind][]string
	mu       sync.Mutex
	procs    map[bench.Kind]*workerProc
}

// workerProc is one kind's worker process and the output that hears its
// ready line.
type workerProc struct {
	proc  *childproc.Process
	ready *readyWriter
}

func newProcessWorkers(env []string, args map[bench.Kind][]string) *processWorkers {
	return &processWorkers{env: env, args: args, extraEnv: map[bench.Kind][]string{}, procs: map[bench.Kind]*workerProc{}}
}

// proc is kind's worker process, made at its first start from the
// arguments and environment set by then.
func (p *processWorkers) proc(k bench.Kind) (*workerProc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if wp := p.procs[k]; wp != nil {
		return wp, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("error finding this binary for the %s worker: %w", k, err)
	}
	env := p.env
	if extra := p.extraEnv[k]; len(extra) > 0 {
		env = workerEnv(p.env, extra...)
	}
	ready := &readyWriter{out: os.Stderr}
	wp := &workerProc{proc: childproc.New(env, ready, self, p.args[k]...), ready: ready}
	p.procs[k] = wp
	return wp, nil
}

// running is kind's worker process when it runs, else nil.
func (p *processWorkers) running(k bench.Kind) *childproc.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	if wp := p.procs[k]; wp != nil && wp.proc.Alive() {
		return wp.proc
	}
	return nil
}

// Start launches kind's worker and waits for its ready line.
func (p *processWorkers) Start(k bench.Kind) (time.Time, error) {
	wp, err := p.proc(k)
	if err != nil {
		return time.Time{}, err
	}
	ready := wp.ready.expect()
	if err := wp.proc.Start(); err != nil {
		return time.Time{}, fmt.Errorf("error starting the %s worker: %w", k, err)
	}
	select {
	case t := <-ready:
		return t, nil
	case <-wp.proc.Exited():
		return time.Time{}, fmt.Errorf("error starting the %s worker: it exited before polling", k)
	case <-time.After(workerStartTimeout):
		p.Stop(k)
		return time.Time{}, fmt.Errorf("error starting the %s worker: not polling after %s", k, workerStartTimeout)
	}
}

// readyWriter is a worker's output: it hands the instant on the next ready
// line to whoever expects it, and passes every other line (the worker's
// log) to out.
type readyWriter struct {
	out io.Writer
	mu  sync.Mutex
	buf []byte
	at  chan time.Time
}

// expect arms a wait for the next ready line.
func (w *readyWriter) expect() <-chan time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = make(chan time.Time, 1)
	return w.at
}

func (w *readyWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := w.buf[:i+1]
		if stamp, ok := strings.CutPrefix(string(line[:i]), readyLine+" "); ok {
			if t, err := time.Parse(time.RFC3339Nano, stamp); err == nil && w.at != nil {
				w.at <- t
				w.at = nil
			}
		} else {
			_, _ = w.out.Write(line)
		}
		w.buf = append(w.buf[:0], w.buf[i+1:]...)
	}
}

// Stop stops kind's worker as a deploy does (SIGTERM), killing it if it
// outlasts workerStopTimeout.
func (p *processWorkers) Stop(k bench.Kind) {
	if proc := p.running(k); proc != nil {
		if err := proc.Stop(workerStopTimeout); err != nil {
			fmt.Fprintf(os.Stderr, "bench: the %s worker: %v\n", k, err)
		}
	}
}

func (p *processWorkers) stopAll() {
	p.mu.Lock()
	kinds := slices.Collect(maps.Keys(p.procs))
	p.mu.Unlock()
	for _, k := range kinds {
		p.Stop(k)
	}
}

// CPU is the stopped runs' CPU plus the running one's (its children too).
func (p *processWorkers) CPU(k bench.Kind) float64 {
	p.mu.Lock()
	wp := p.procs[k]
	p.mu.Unlock()
	if wp == nil {
		return 0
	}
	total := wp.proc.Spent().Seconds()
	if pid := wp.proc.Pid(); pid != 0 {
		if s, err := bench.TreeCPU("/proc", pid); err == nil {
			total += s
		}
	}
	return total
}

// RSS is the running worker's resident memory.
func (p *processWorkers) RSS(k bench.Kind) int64 {
	proc := p.running(k)
	if proc == nil {
		return 0
	}
	return bench.ProcessRSS(proc.Pid())
}

// workerEnv is the environment a benchmark worker gets: this process's,
// less what would set one worker apart (the rate limit, the slots, the
// metrics address: settings come as flags, the same for all), plus extra.
func workerEnv(base []string, extra ...string) []string {
	var out []string
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SHIPNOTIFY_WORKER_") || name == "SHIPNOTIFY_METRICS_ADDR" {
			continue
		}
		drop := false
		for _, x := range extra {
			if xname, _, _ := strings.Cut(x, "="); xname == name {
				drop = true
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}
