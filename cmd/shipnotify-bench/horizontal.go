package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/migrations"
)

func init() {
	register("horizontal", "scale the product's own workers from 1 to N beside two serve replicas, and SIGKILL a worker and a replica mid-run (make bench-horizontal)", runHorizontal)
}

// horizontalFlags are the horizontal command's settings.
type horizontalFlags struct {
	workers         []int
	serves, n       int
	rounds          int
	warmup, kill    bool
	killAt          float64
	restartAfter    time.Duration
	workloads       []string
	provider        string
	bin             string
	fanout, conc    int
	idleGap         time.Duration
	minSlack        time.Duration
	quietWithin     time.Duration
	sampleEvery     time.Duration
	serverPIDFile   string
	serverMetrics   string
	postgresPIDFile string
	temporalAddress string
	engine, out     string
	asJSON, keep    bool
	workersText     string
	workloadsText   string
}

// parseHorizontalFlags reads the flags; the defaults are issue 24's run.
func parseHorizontalFlags(e cli.Env, args []string) (horizontalFlags, error) {
	var f horizontalFlags
	fs := cli.NewFlags(e, "horizontal", "horizontal [--workers 1,2,3] [--n 3000] [--rounds 2] [--kill] [--serves 2] [--out FILE] ...")
	fs.StringVar(&f.workersText, "workers", "1,2,3", "worker process counts to measure, in order (the even rounds reversed); the kill runs at the largest")
	fs.IntVar(&f.serves, "serves", 2, "serve replicas, behind a balancer, taking the mail sink's Event Webhook posts and relaying status events to the tracker")
	fs.IntVar(&f.n, "n", 3000, "reminders per burst and per catch-up")
	fs.IntVar(&f.rounds, "rounds", 2, "rounds of every worker count (and the kill); ratios are taken within a round")
	fs.BoolVar(&f.warmup, "warmup", true, "first a burst at the first worker count, not compared, so every compared run's lead is learned")
	fs.StringVar(&f.workloadsText, "workloads", strings.Join(bench.HorizontalWorkloads, ","), "of burst, catchup: what each step runs, in order")
	fs.BoolVar(&f.kill, "kill", true, "each round also runs each workload at the largest worker count with one worker and one serve replica SIGKILLed mid-run")
	fs.Float64Var(&f.killAt, "kill-at", 0.25, "the kill comes once this share of the run's mail is accepted, with mail in flight")
	fs.DurationVar(&f.restartAfter, "restart-after", 5*time.Second, "how long the killed worker and replica stay down, as a supervisor's restart takes")
	fs.StringVar(&f.provider, "provider", sink.RealisticName, "how the mail sink answers: realistic (median 220 ms, 1% at 6 s, 2.5 s of 429s a minute) or instant")
	fs.StringVar(&f.bin, "bin", ".dev/bin/shipnotify", "the product binary whose worker and serve commands run")
	fs.IntVar(&f.fanout, "fanout", 10, "subscribers per scheduled update")
	fs.IntVar(&f.conc, "concurrency", 80, "workflow starts in flight while scheduling")
	fs.DurationVar(&f.idleGap, "idle-gap", 5*time.Second, "how long the task queue must stay empty before the next run")
	fs.DurationVar(&f.minSlack, "min-slack", 2*time.Second, "a run whose starts' work ends closer than this to its first due time is left out")
	fs.DurationVar(&f.quietWithin, "quiet-within", 5*time.Minute, "after a run, how long to wait for its provider events to be applied and its status events delivered before checking")
	fs.DurationVar(&f.sampleEvery, "sample-every", time.Second, "how often every part's CPU is read, for the drain window's busy cores")
	fs.StringVar(&f.serverPIDFile, "server-pid-file", "", "the Temporal server's pid file, to report its CPU (none: \"-\")")
	fs.StringVar(&f.serverMetrics, "server-metrics", "", "the Temporal server's /metrics URL, for its shard writes per reminder and their latency (none: not reported)")
	fs.StringVar(&f.postgresPIDFile, "postgres-pid-file", "", "PostgreSQL's postmaster.pid, to report its CPU (none: \"-\")")
	fs.StringVar(&f.temporalAddress, "temporal-address", "", "the Temporal frontend (default: TEMPORAL_ADDRESS)")
	fs.StringVar(&f.engine, "engine", "", "what it runs on, for the report (default: Temporal at the address)")
	fs.StringVar(&f.out, "out", "", "also write the JSON report to this file")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&f.keep, "keep", false, "keep the benchmark's mirror schema")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return f, err
	}
	var err error
	if f.workers, err = parseCounts(f.workersText); err != nil {
		return f, cli.Usagef("--workers: %v", err)
	}
	for _, w := range strings.Split(f.workloadsText, ",") {
		if !slices.Contains(bench.HorizontalWorkloads, w) || slices.Contains(f.workloads, w) {
			return f, cli.Usagef("--workloads: want burst, catchup or both, each once")
		}
		f.workloads = append(f.workloads, w)
	}
	if f.serves < 1 || f.n < 1 || f.rounds < 1 || f.fanout < 1 || f.conc < 1 || f.idleGap < 0 || f.minSlack < 0 ||
		f.quietWithin <= 0 || f.sampleEvery <= 0 || f.restartAfter < 0 {
		return f, cli.Usagef("--serves, --n, --rounds, --fanout, --concurrency, --quiet-within and --sample-every must be positive")
	}
	if f.killAt <= 0 || f.killAt >= 1 {
		return f, cli.Usagef("--kill-at: want a share between 0 and 1")
	}
	if f.provider != sink.RealisticName && f.provider != sink.InstantName {
		return f, cli.Usagef("--provider: want realistic or instant")
	}
	return f, nil
}

// parseCounts reads "1,2,3": distinct positive counts, in order.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("want positive counts separated by commas, got %q", s)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%d is given twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

func runHorizontal(ctx context.Context, e cli.Env, args []string) error {
	f, err := parseHorizontalFlags(e, args)
	if err != nil {
		return err
	}
	if _, err := os.Stat(f.bin); err != nil {
		return cli.Usagef("--bin: %v (make build builds it)", err)
	}
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	if f.temporalAddress != "" {
		d.Cfg.Temporal.HostPort = f.temporalAddress
	}
	runID := randomHex(4)
	admin, err := d.Mirror(ctx, 2)
	if err != nil {
		return err
	}
	dbURL, err := benchSchema(ctx, d, admin, "horizontal_"+runID, f.keep)
	if err != nil {
		return err
	}
	d.Cfg.DatabaseURL = dbURL
	queue := "bench-horizontal-" + runID
	d.Cfg.TaskQueue = queue
	st, err := d.Starter(ctx)
	if err != nil {
		return err
	}
	if err := migrations.Up(ctx, st.Mirror.Pool(), d.Logger); err != nil {
		return err
	}
	// One update's fan-out starts together, as the run command's do.
	st.Concurrency = f.fanout
	provider := sink.Realistic(providerSeed)
	if f.provider == sink.InstantName {
		provider = sink.Instant()
	}
	o := bench.HorizontalOptions{
		Bin: f.bin,
		// The product's processes: this environment less the worker's
		// tuning (its defaults run), on the benchmark's schema and queue.
		Env: workerEnv(os.Environ(), "DATABASE_URL="+dbURL, "TEMPORAL_ADDRESS="+d.Cfg.Temporal.HostPort,
			"TEMPORAL_NAMESPACE="+d.Cfg.Temporal.Namespace, "SHIPNOTIFY_TASK_QUEUE="+queue),
		Temporal: st.Temporal, Namespace: d.Cfg.Temporal.Namespace, Starter: st, Mirror: st.Mirror, TaskQueue: queue,
		Workers: f.workers, Serves: f.serves, N: f.n, Rounds: f.rounds, Warmup: f.warmup, Workloads: f.workloads,
		Kill: f.kill, KillAt: f.killAt, RestartAfter: f.restartAfter, Provider: provider,
		Fanout: f.fanout, Concurrency: f.conc, IdleGap: f.idleGap, MinSlack: f.minSlack, QuietWithin: f.quietWithin,
		ServerCPU: pidCPU(e, f.serverPIDFile), PostgresCPU: pidCPU(e, f.postgresPIDFile),
		ServerMetrics: f.serverMetrics, SampleEvery: f.sampleEvery, Progress: e.Stderr,
	}
	report, err := bench.Horizontal(ctx, o)
	if err != nil {
		return err
	}
	report.Machine = machine()
	report.Engine = f.engine
	if report.Engine == "" {
		report.Engine = "Temporal at " + d.Cfg.Temporal.HostPort
	}
	report.Options = map[string]any{
		"workers": f.workers, "serves": f.serves, "n": f.n, "rounds": f.rounds, "warmup": f.warmup, "workloads": f.workloads,
		"kill": f.kill, "kill_at": f.killAt, "restart_after": f.restartAfter.String(), "provider": provider.Name,
		"fanout": f.fanout, "concurrency": f.conc, "idle_gap": f.idleGap.String(), "min_slack": f.minSlack.String(),
		"quiet_within": f.quietWithin.String(), "sample_every": f.sampleEvery.String(), "temporal_address": d.Cfg.Temporal.HostPort,
		"bin": f.bin,
	}
	if err := emitReport(e.Stdout, f.out, f.asJSON, report, func() error {
		fmt.Fprintf(e.Stdout, "%s, %s; %d serve replicas\n\n", report.Engine, report.Machine, f.serves)
		return bench.WriteHorizontalTable(e.Stdout, report)
	}); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(report.Errors) > 0 {
		return fmt.Errorf("horizontal: %d problem(s): %s", len(report.Errors), strings.Join(report.Errors, "; "))
	}
	return nil
}
