package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/migrations"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

func init() {
	register("run", "measure the reminder path against two bare Temporal baselines (make bench)", runBench)
}

// benchFlags are bench's settings.
type benchFlags struct {
	workloads         string
	n, holdN, pairs   int
	rate              string
	duration          time.Duration
	fanout            int
	concurrency       int
	viaAPI            bool
	asJSON, keep      bool
	out, merge        string
	ceilingFrom       string
	temporalAddress   string
	engine            string
	serverPIDFile     string
	postgresPIDFile   string
	idleGap, minSlack time.Duration
	workers           workerSettings
	// prunePairs and pruneSeed: steady's prune pairs (full alone, full
	// with prune beside it) and the old finished reminders each prune gets.
	prunePairs, pruneSeed int
	mirrorN               int
	// provider is the mail sink's profile for burst, catchup and steady
	// (a workload named with bench.InstantSuffix runs instant whatever it
	// says).
	provider string
	// slowN and slowPairs: the slow workload's burst and its rounds.
	slowN, slowPairs int
	// localPath adds full-local (the retired local first attempt) to the
	// burst, cold burst, catch-up and slow workloads; delayedPath adds
	// full-delayed (the starter's DelayedStart).
	localPath, delayedPath bool
	// outage, outagePairs and rateCap: the outage workload's 503s, its
	// rounds, and the sends a second each of its two workers is held to.
	outage      time.Duration
	outagePairs int
	// outageN is reminders per outage variant, due during the outage.
	outageN int
	rateCap float64
}

// benchWorkloads are the workloads bench knows, in the order it runs
// them by default (mirror and events are PostgreSQL alone, and make bench
// runs them last).
var benchWorkloads = []string{"burst", "burst" + bench.InstantSuffix, bench.ColdBurstWorkload, bench.ColdBurstWorkload + bench.InstantSuffix,
	"catchup", "catchup" + bench.InstantSuffix,
	"steady", "steady" + bench.InstantSuffix, "hold", "slow", bench.OutageWorkload, "mirror", "events"}

// defaultWorkloads is --workloads' default.
const defaultWorkloads = "burst,burst-instant,coldburst,catchup,catchup-instant,steady,hold,slow,outage"

// benchProvider is the provider profile a workload name runs with, and
// the name its results carry: a run with the instant provider is named
// with bench.InstantSuffix, so it never passes for a realistic one.
func benchProvider(workload, flag string) (sink.Profile, string) {
	base := bench.BaseWorkload(workload)
	if workload != base || flag == sink.InstantName {
		return sink.Instant(), base + bench.InstantSuffix
	}
	return sink.Realistic(providerSeed), base
}

// providerSeed fixes the realistic provider's latencies, so every run of
// every invocation draws the same sequence.
const providerSeed = 12

func parseBenchFlags(e cli.Env, args []string) (benchFlags, error) {
	var f benchFlags
	fs := cli.NewFlags(e, "run", "run [--workloads "+defaultWorkloads+"] [--provider realistic|instant] [--n N] [--pairs P] [--rate auto|R] [--temporal-address A] [--out FILE] ...\n"+
		"       bench --merge FILE,FILE,... [--out FILE] [--json]")
	fs.StringVar(&f.workloads, "workloads", defaultWorkloads, "which workloads to run, in order, of "+strings.Join(benchWorkloads, ", ")+
		" (coldburst: a burst whose path's worker is stopped and started again between scheduling and the due instant, so none holds the reminders in its cache when they come due, as in production; "+
		"burst-instant and the like: that workload with the instant provider; mirror: ten million rows in PostgreSQL alone; events: the SendGrid Event Webhook's ingestion, PostgreSQL alone)")
	fs.StringVar(&f.provider, "provider", sink.RealisticName, "burst, coldburst, catchup and steady: how the mail sink answers every path's sends: realistic (median 220 ms, 1% at 6 s, 2.5 s of 429s a minute) or instant (at once; results named burst-instant, ...)")
	fs.IntVar(&f.n, "n", 1000, "reminders per burst, cold burst and catch-up run, and per variant of the outage (1,000: a drain window, t10 to t90, of 12–16 s on the dev server, while a warm-up and 5 pairs of every path fit in about 25 minutes)")
	fs.IntVar(&f.slowN, "slow-n", 200, "slow: reminders due at one instant per run, every provider answer taking 6 s")
	fs.IntVar(&f.slowPairs, "slow-pairs", 2, "slow: alternating rounds after each path's warm-up")
	fs.BoolVar(&f.delayedPath, "delayed-path", true, "burst, coldburst, catchup and slow: also run full-delayed, the product scheduled with the starter's DelayedStart (Temporal's start delay up to the due time instead of a timer), on its own task queue and worker")
	fs.BoolVar(&f.localPath, "local-path", false, "burst, coldburst, catchup and slow: also run full-local, the product with the retired local first attempt (its worker pins it), to show what retiring it cost")
	fs.DurationVar(&f.outage, "outage", 5*time.Minute, "outage: how long the provider answers every call 503 while --n reminders a variant come due")
	fs.IntVar(&f.outageN, "outage-n", 1000, "outage: reminders per variant, due uniformly during the outage")
	fs.IntVar(&f.outagePairs, "outage-pairs", 2, "outage: rounds, each running both variants (provider-paced retries, and the old own backoff) at once")
	fs.Float64Var(&f.rateCap, "rate-cap", 50, "outage: sends a second each variant's worker is held to, as SHIPNOTIFY_WORKER_SENDS_PER_SECOND holds the product's")
	fs.IntVar(&f.pairs, "pairs", 5, "alternating rounds after each path's warm-up: every two paths meet as A B, B A, A B, ...")
	fs.StringVar(&f.rate, "rate", "auto", "steady: reminders due a second, or auto: 0.8 × the lean baseline's burst drain rate (from this run's burst, --ceiling-from, or a quick lean burst)")
	fs.DurationVar(&f.duration, "duration", 30*time.Second, "steady: how long reminders keep coming due")
	fs.IntVar(&f.holdN, "hold-n", 100_000, "hold: pending reminders")
	fs.IntVar(&f.fanout, "fanout", 10, "reminders per scheduling batch: subscribers per update on the full path, starts launched together on the baselines")
	fs.IntVar(&f.concurrency, "concurrency", 80, "workflow starts in flight on every path (concurrency/fanout batches at once)")
	fs.BoolVar(&f.viaAPI, "api", true, "burst: also schedule through the tracker API (POST /v1/updates to an in-process server over loopback HTTP) and compare its scheduling rate with the starter's")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&f.out, "out", "", "also write the JSON report to this file (capacity reads it)")
	fs.BoolVar(&f.keep, "keep", false, "keep the benchmark's mirror schema")
	fs.StringVar(&f.merge, "merge", "", "run nothing: merge these reports (comma-separated; make bench writes one per workload) into one, comparisons and targets recomputed")
	fs.StringVar(&f.ceilingFrom, "ceiling-from", "", "--rate auto: a report whose lean burst drain rate sets the steady rate when this run has no burst")
	fs.StringVar(&f.temporalAddress, "temporal-address", "", "the Temporal frontend to run against (default: TEMPORAL_ADDRESS)")
	fs.StringVar(&f.engine, "engine", "", "what the workloads run on, for the report (default: Temporal at the address)")
	fs.StringVar(&f.serverPIDFile, "server-pid-file", "", "the Temporal server's pid file, to report its CPU (none: \"-\")")
	fs.StringVar(&f.postgresPIDFile, "postgres-pid-file", "", "PostgreSQL's postmaster.pid, to report its CPU (none: \"-\")")
	fs.DurationVar(&f.idleGap, "idle-gap", 5*time.Second, "how long every queue must stay empty before the next run (the server caches backlog counts for 5 s, so less proves little)")
	fs.DurationVar(&f.minSlack, "min-slack", 2*time.Second, "a run whose starts' work (scheduling, each reminder's first workflow task) ends closer than this to its first due time is left out")
	fs.IntVar(&f.prunePairs, "prune-pairs", 2, "steady: then this many pairs of the full path alone and with `prune` running beside it, to show what retention does to the lag (0: none)")
	fs.IntVar(&f.pruneSeed, "prune-seed", 600_000, "steady's prune pairs: old finished reminders (with their events and deliveries) loaded for each prune, before its run")
	fs.IntVar(&f.mirrorN, "mirror-n", 10_000_000, "mirror: reminders COPYed into a private schema (PostgreSQL only; see the mirror command for its other settings)")
	f.workers.register(fs)
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return f, err
	}
	if f.merge != "" {
		return f, nil
	}
	if f.n < 1 || f.duration <= 0 || f.holdN < 1 || f.fanout < 1 || f.concurrency < 1 || f.pairs < 1 || f.idleGap < 0 || f.minSlack < 0 {
		return f, cli.Usagef("--n, --duration, --hold-n, --fanout, --concurrency and --pairs must be positive")
	}
	if f.slowN < 1 || f.slowPairs < 1 || f.outage <= 0 || f.outageN < 1 || f.outagePairs < 1 || f.rateCap <= 0 {
		return f, cli.Usagef("--slow-n, --slow-pairs, --outage, --outage-n, --outage-pairs and --rate-cap must be positive")
	}
	if f.provider != sink.RealisticName && f.provider != sink.InstantName {
		return f, cli.Usagef("--provider: want realistic or instant")
	}
	if f.prunePairs < 0 || f.pruneSeed < 1 || f.mirrorN < 1 {
		return f, cli.Usagef("--prune-pairs must not be negative; --prune-seed and --mirror-n must be positive")
	}
	if f.rate != "auto" {
		if r, err := strconv.ParseFloat(f.rate, 64); err != nil || r <= 0 {
			return f, cli.Usagef("--rate: want auto or a positive number of reminders a second")
		}
	}
	for _, w := range strings.Split(f.workloads, ",") {
		if !slices.Contains(benchWorkloads, w) {
			return f, cli.Usagef("--workloads: unknown workload %q", w)
		}
	}
	return f, f.workers.check()
}

func runBench(ctx context.Context, e cli.Env, args []string) error {
	f, err := parseBenchFlags(e, args)
	if err != nil {
		return err
	}
	var report BenchReport
	if f.merge != "" {
		if report, err = mergeReports(strings.Split(f.merge, ",")); err != nil {
			return err
		}
	} else if report, err = measure(ctx, e, f); err != nil {
		return err
	}
	report.judge()
	if err := emitReport(e.Stdout, f.out, f.asJSON, report, func() error {
		fmt.Fprintf(e.Stdout, "%s, %s\n\n", report.Engine, report.Machine)
		if err := bench.WriteTable(e.Stdout, report.Results, report.Comparisons, report.Targets); err != nil {
			return err
		}
		for _, p := range report.Prune {
			fmt.Fprintf(e.Stdout, "\nprune beside steady: %d reminders (%d rows) at %.0f reminders/s, %.0f rows/s; batch p99 %s\n",
				p.Stats.Reminders, p.Stats.Reminders+p.Stats.Events+p.Stats.Deliveries+p.Stats.Updates,
				p.RemindersPerSecond, p.RowsPerSecond, p.Batch.P99)
		}
		if report.Mirror != nil {
			fmt.Fprintln(e.Stdout)
			if err := bench.WriteMirrorTable(e.Stdout, *report.Mirror); err != nil {
				return err
			}
		}
		if report.Events != nil {
			fmt.Fprintln(e.Stdout)
			return bench.WriteEventsTable(e.Stdout, *report.Events)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(report.Errors) > 0 {
		return fmt.Errorf("bench: %d run(s) failed: %s", len(report.Errors), strings.Join(report.Errors, "; "))
	}
	return nil
}

// measure runs the workloads and returns their results.
func measure(ctx context.Context, e cli.Env, f benchFlags) (BenchReport, error) {
	d, err := cli.NewDeps(e)
	if err != nil {
		return BenchReport{}, err
	}
	defer d.Close()
	if f.temporalAddress != "" {
		d.Cfg.Temporal.HostPort = f.temporalAddress
	}
	runID := randomHex(4)
	admin, err := d.Mirror(ctx, 2)
	if err != nil {
		return BenchReport{}, err
	}
	dbURL, err := benchSchema(ctx, d, admin, "bench_"+runID, f.keep)
	if err != nil {
		return BenchReport{}, err
	}
	d.Cfg.DatabaseURL = dbURL
	st, err := d.Starter(ctx)
	if err != nil {
		return BenchReport{}, err
	}
	if err := migrations.Up(ctx, st.Mirror.Pool(), d.Logger); err != nil {
		return BenchReport{}, err
	}
	const apiKey = "SG.bench"
	mail, err := sink.StartMail("", apiKey)
	if err != nil {
		return BenchReport{}, err
	}
	defer mail.Close()

	queues := map[bench.Kind]string{
		bench.Naive: "bench-naive-" + runID, bench.Lean: "bench-lean-" + runID, bench.Full: "bench-full-" + runID,
	}
	if f.localPath {
		queues[bench.FullLocal] = "bench-full-local-" + runID
	}
	if f.delayedPath {
		queues[bench.FullDelayed] = "bench-full-delayed-" + runID
	}
	// full is the timer path, whatever the configuration's default.
	st.TaskQueue, st.DelayedStart = queues[bench.Full], false
	// One update's fan-out starts together, as a baseline batch does.
	st.Concurrency = f.fanout
	args := map[bench.Kind][]string{}
	for k, q := range queues {
		args[k] = append([]string{"worker", "--path", string(k), "--task-queue", q}, f.workers.args()...)
	}
	if f.localPath {
		args[bench.FullLocal] = append([]string{"worker", "--path", string(bench.Full), "--task-queue", queues[bench.FullLocal],
			"--local-first-attempt"}, f.workers.args()...)
	}
	if f.delayedPath {
		// The product's worker: what differs is how its reminders start.
		args[bench.FullDelayed] = append([]string{"worker", "--path", string(bench.Full), "--task-queue", queues[bench.FullDelayed]},
			f.workers.args()...)
	}
	workers := newProcessWorkers(workerEnv(os.Environ(),
		"DATABASE_URL="+dbURL, "SENDGRID_API_KEY="+apiKey, "SENDGRID_BASE_URL="+mail.URL(),
		"SHIPNOTIFY_TASK_QUEUE="+st.TaskQueue, "SHIPNOTIFY_LOG_LEVEL=warn", "SHIPNOTIFY_METRICS_ADDR=off",
		"TEMPORAL_ADDRESS="+d.Cfg.Temporal.HostPort), args)
	defer workers.stopAll()
	paths := []bench.Kind{bench.Naive, bench.Lean, bench.Full}
	if f.delayedPath {
		paths = append(paths, bench.FullDelayed)
	}
	if f.localPath {
		paths = append(paths, bench.FullLocal)
	}
	for _, k := range paths {
		if _, err := workers.Start(k); err != nil {
			return BenchReport{}, err
		}
	}
	r := &bench.Runner{
		Temporal: st.Temporal, Namespace: d.Cfg.Temporal.Namespace, Starter: st, Mirror: st.Mirror, Mail: mail,
		Queues: queues, Workers: workers, RunID: runID, Fanout: f.fanout, Concurrency: f.concurrency,
		Progress: e.Stderr, IdleGap: f.idleGap, MinSlack: f.minSlack,
		ServerCPU: pidCPU(e, f.serverPIDFile), PostgresCPU: pidCPU(e, f.postgresPIDFile),
	}
	r.Starters = map[bench.Kind]*starter.Starter{}
	if f.localPath {
		// The same mirror, its own task queue; reminders started as the
		// releases before levels did, so the worker's pin decides.
		local := *st
		local.TaskQueue, local.Unleveled = queues[bench.FullLocal], true
		r.Starters[bench.FullLocal] = &local
	}
	if f.delayedPath {
		// The same mirror, its own task queue; plain reminders started
		// with a delay up to their due time.
		delayed := *st
		delayed.TaskQueue, delayed.DelayedStart = queues[bench.FullDelayed], true
		r.Starters[bench.FullDelayed] = &delayed
	}
	if f.viaAPI {
		stop, err := benchAPI(r, st, d)
		if err != nil {
			return BenchReport{}, err
		}
		defer stop()
	}
	engine := f.engine
	if engine == "" {
		engine = "Temporal at " + d.Cfg.Temporal.HostPort
	}
	report := BenchReport{Machine: machine(), At: time.Now().UTC(), Engine: engine}
	options := map[string]any{
		"n": f.n, "pairs": f.pairs, "rate": f.rate, "duration": f.duration.String(), "hold_n": f.holdN,
		"fanout": f.fanout, "concurrency": f.concurrency, "api": f.viaAPI, "idle_gap": f.idleGap.String(),
		"min_slack": f.minSlack.String(), "temporal_address": d.Cfg.Temporal.HostPort,
		"provider": f.provider, "slow_n": f.slowN, "slow_pairs": f.slowPairs, "outage": f.outage.String(),
		"local_path": f.localPath, "delayed_path": f.delayedPath,
		"outage_pairs": f.outagePairs, "outage_n": f.outageN, "rate_cap": f.rateCap,
		// pollers 0: the SDK's autoscaling.
		"workers": map[string]int{
			"activity_slots": f.workers.activities, "workflow_task_slots": f.workers.workflowTasks,
			"local_activity_slots": f.workers.localActivities, "pollers": f.workers.pollers, "cache_size": f.workers.cache,
		},
	}
	report.Runs = []BenchRun{{At: report.At, Workloads: f.workloads, Options: options}}
	record := func(res bench.Result) {
		report.Results = append(report.Results, res)
		if res.Error != "" {
			report.Errors = append(report.Errors, fmt.Sprintf("%s %s round %d: %s", res.Workload, res.Kind, res.Round, res.Error))
		}
		left := ""
		if res.Invalid != "" {
			left = " [left out: " + res.Invalid + "]"
		}
		var drainP99 time.Duration
		if res.Drain != nil {
			drainP99 = res.Drain.P99
		}
		extra := ""
		if o := res.Outage; o != nil {
			extra = fmt.Sprintf(" after-recovery p50=%s p99=%s max=%s before-end=%d peak=%.1f/s attempts mean=%.2f actions mean=%.2f p99=%.0f max=%.0f",
				o.AfterRecovery.P50.Round(time.Millisecond), o.AfterRecovery.P99.Round(time.Millisecond),
				o.AfterRecovery.Max.Round(time.Millisecond), o.BeforeEnd, o.PeakRate, o.Attempts.Mean, o.Actions.Mean,
				o.Actions.P99, o.Actions.Max)
			if len(o.LateCauses) > 0 {
				extra += fmt.Sprintf(" late causes %v", o.LateCauses)
			}
		}
		if t := res.Tasks; t != nil {
			extra += fmt.Sprintf(" tasks: sticky-timeouts=%d start-timeouts=%d failed=%v heartbeats=%d wft-wait p50=%s p99=%s act-wait p99=%s (%d histories)",
				t.StickyTimeouts, t.StartTimeouts, t.Failed, t.Heartbeats, t.WorkflowTaskWait.P50.Round(time.Millisecond),
				t.WorkflowTaskWait.P99.Round(time.Millisecond), t.ActivityTaskWait.P99.Round(time.Millisecond), t.Histories)
		}
		if c := res.Cost; c != nil {
			extra += fmt.Sprintf(" per reminder: events=%.2f wfts=%.2f actions=%.2f (%d histories)", c.Events, c.WorkflowTasks, c.Actions, c.Histories)
		}
		if res.Restart > 0 {
			extra += fmt.Sprintf(" restart=%s", res.Restart.Round(time.Millisecond))
		}
		fmt.Fprintf(e.Stderr, "bench: %s %s (%s) round %d: n=%d delivered=%d dup=%d lost=%d drain=%.1f/s drain-p99=%s sched=%.0f/s slack=%s lag-p99=%s%s in %s%s\n",
			res.Workload, res.Kind, res.Provider, res.Round, res.N, res.Delivered, res.Duplicates, res.Lost, res.DrainRate,
			drainP99.Round(time.Millisecond), res.ScheduleRate, res.Slack.Round(time.Millisecond), res.Lag.P99.Round(time.Millisecond),
			extra, res.Elapsed.Round(time.Second), left)
	}
	if err := r.Settle(ctx, 2*time.Minute); err != nil {
		return BenchReport{}, err
	}
	for _, w := range strings.Split(f.workloads, ",") {
		if ctx.Err() != nil {
			break
		}
		provider, name := benchProvider(w, f.provider)
		r.UseProvider(provider)
		switch bench.BaseWorkload(w) {
		case "burst":
			kinds := paths
			if f.viaAPI {
				kinds = append(kinds, bench.API)
			}
			for _, s := range bench.Order(kinds, f.pairs) {
				res := r.Burst(ctx, s.Kind, f.n)
				res.Workload, res.Round = name, s.Round
				record(res)
			}
		case bench.ColdBurstWorkload:
			for _, s := range bench.Order(paths, f.pairs) {
				res := r.ColdBurst(ctx, s.Kind, f.n)
				res.Workload, res.Round = name, s.Round
				record(res)
			}
		case "catchup":
			for _, s := range bench.Order(paths, f.pairs) {
				res := r.Catchup(ctx, s.Kind, f.n)
				res.Workload, res.Round = name, s.Round
				record(res)
			}
		case "steady":
			perSecond, from, err := steadyRate(ctx, f, r, &report, record, "burst"+strings.TrimPrefix(name, "steady"))
			if err != nil {
				// The other workloads' results still count.
				report.Errors = append(report.Errors, name+": "+err.Error())
				fmt.Fprintf(e.Stderr, "bench: %s left out: %v\n", name, err)
				continue
			}
			options["steady_rate"], options["steady_rate_from"] = perSecond, from
			count := int(perSecond * f.duration.Seconds())
			for _, s := range bench.Order([]bench.Kind{bench.Naive, bench.Lean, bench.Full}, f.pairs) {
				res := r.Steady(ctx, s.Kind, count, perSecond)
				res.Workload, res.Round = name, s.Round
				record(res)
			}
			prune := bench.SteadyPruneWorkload + strings.TrimPrefix(name, "steady")
			for _, s := range bench.Order([]bench.Kind{bench.Full, bench.Pruning}, f.prunePairs) {
				res, pruned, err := steadyBesidePrune(ctx, r, s.Kind, count, perSecond, f.pruneSeed, e)
				if err != nil {
					report.Errors = append(report.Errors, prune+": "+err.Error())
					break
				}
				res.Workload, res.Kind, res.Round = prune, s.Kind, s.Round
				record(res)
				if pruned != nil {
					report.Prune = append(report.Prune, *pruned)
				}
			}
		case "slow":
			// Every answer takes 6 s: what each path does with sends in
			// flight that long, and whether any is made twice.
			r.UseProvider(sink.Slow())
			for _, s := range bench.Order(paths, f.slowPairs) {
				res := r.Burst(ctx, s.Kind, f.slowN)
				res.Workload, res.Round = "slow", s.Round
				record(res)
			}
		case bench.OutageWorkload:
			stop, err := startOutageVariants(ctx, d, admin, st, r, workers, f, runID)
			if err != nil {
				report.Errors = append(report.Errors, "outage: "+err.Error())
				fmt.Fprintf(e.Stderr, "bench: outage left out: %v\n", err)
				continue
			}
			o := bench.OutageOptions{N: f.outageN, Outage: f.outage, RateCap: f.rateCap}
			for round := 1; round <= f.outagePairs && ctx.Err() == nil; round++ {
				// Each goes first as often: the first is scheduled first.
				kinds := []bench.Kind{bench.Paced, bench.OwnBackoff}
				if round%2 == 0 {
					slices.Reverse(kinds)
				}
				for _, res := range r.Outage(ctx, kinds, o) {
					res.Round = round
					record(res)
				}
			}
			stop()
		case "mirror":
			res, err := mirrorWorkload(ctx, e, d, admin.Pool().Config().ConnString(), bench.MirrorOptions{N: f.mirrorN})
			report.Mirror = &res
			if err != nil {
				report.Errors = append(report.Errors, "mirror: "+err.Error())
			}
		case "events":
			// bench-events' defaults: the batches, c=1 and c=4.
			res, err := bench.EventsLoad(ctx, admin.Pool().Config().ConnString(),
				bench.EventsOptions{DeferAfter: d.Cfg.DeferredEscalateAfter, Progress: e.Stderr})
			report.Events = &res
			if err != nil {
				report.Errors = append(report.Errors, "events: "+err.Error())
			}
			for _, f := range res.Failures {
				report.Errors = append(report.Errors, "events: "+f)
			}
		case "hold":
			r.UseProvider(sink.Instant())
			record(r.Hold(ctx, f.holdN, 1000))
		}
	}
	return report, nil
}

// steadyBesidePrune runs one full-path steady run; for the Pruning kind,
// with `prune` (the product's Store.Prune, unthrottled) working beside it
// through the run on seed old finished reminders loaded first.
func steadyBesidePrune(ctx context.Context, r *bench.Runner, kind bench.Kind, n int, perSecond float64, seed int, e cli.Env) (bench.Result, *bench.PruneResult, error) {
	if kind != bench.Pruning {
		return r.Steady(ctx, bench.Full, n, perSecond), nil, nil
	}
	pool := r.Mirror.Pool()
	if _, err := bench.SeedPrunable(ctx, pool, seed); err != nil {
		return bench.Result{}, nil, fmt.Errorf("error seeding prune's rows: %w", err)
	}
	if err := r.Settle(ctx, 2*time.Minute); err != nil {
		return bench.Result{}, nil, err
	}
	pctx, stop := context.WithCancel(ctx)
	type outcome struct {
		res bench.PruneResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := bench.PruneLoad(pctx, pool, bench.PruneLoadOptions{Progress: e.Stderr})
		done <- outcome{res, err}
	}()
	res := r.Steady(ctx, bench.Full, n, perSecond)
	stop()
	o := <-done
	if o.err != nil && !errors.Is(o.err, context.Canceled) {
		return res, nil, fmt.Errorf("prune beside the steady run: %w", o.err)
	}
	return res, &o.res, nil
}

// steadyShare is the share of the lean ceiling the steady workload runs at.
const steadyShare = 0.8

// steadyRate is the steady workload's reminders a second: the --rate
// given, or steadyShare of the lean baseline's burst drain rate, measured
// in this run, read from --ceiling-from, or measured now with a lean burst.
func steadyRate(ctx context.Context, f benchFlags, r *bench.Runner, report *BenchReport, record func(bench.Result), burst string) (float64, string, error) {
	if f.rate != "auto" {
		v, _ := strconv.ParseFloat(f.rate, 64)
		return v, "--rate", nil
	}
	share := func(c float64, note, where string) string {
		return fmt.Sprintf("%.0f%% of the lean burst drain rate %.1f/s %s%s", steadyShare*100, c, where, note)
	}
	if c, note, ok := leanCeiling(report.Results, burst); ok {
		return steadyShare * c, share(c, note, "of this run"), nil
	}
	if f.ceilingFrom != "" {
		prev, err := readReport(f.ceilingFrom)
		if err != nil {
			return 0, "", cli.UsageError{Err: fmt.Errorf("--ceiling-from: %w", err)}
		}
		if c, note, ok := leanCeiling(prev.Results, burst); ok {
			return steadyShare * c, share(c, note, "in "+f.ceilingFrom), nil
		}
	}
	res := r.Burst(ctx, bench.Lean, f.n)
	res.Workload = ceilingWorkload + strings.TrimPrefix(burst, "burst")
	record(res)
	if c, note, ok := leanCeiling([]bench.Result{res}, burst); ok {
		return steadyShare * c, share(c, note, "measured for it"), nil
	}
	return 0, "", fmt.Errorf("--rate auto: the lean burst that measures the ceiling did not deliver everything (%s); pass --rate", res.Invalid)
}

// ceilingWorkload names the lean burst --rate auto runs when it has no
// other to go by.
const ceilingWorkload = "ceiling"

// leanCeiling is the lean baseline's median drain rate over its compared
// runs of the burst workload named burst (burst, or burst-instant: the
// steady workload's provider's); when none of them was valid, over the
// lean bursts that delivered everything (left out for another reason, such
// as a short slack, which matters less to a ceiling), and note says so.
func leanCeiling(results []bench.Result, burst string) (rate float64, note string, ok bool) {
	drain := func(r bench.Result) (float64, bool) { return r.DrainRate, r.DrainRate > 0 }
	if v, ok := bench.MedianOf(results, burst, bench.Lean, drain); ok {
		return v, "", true
	}
	ceiling := ceilingWorkload + strings.TrimPrefix(burst, "burst")
	var rates []float64
	for _, r := range results {
		if r.Kind == bench.Lean && (r.Workload == burst || r.Workload == ceiling) && r.Error == "" && r.Lost == 0 && r.DrainRate > 0 {
			rates = append(rates, r.DrainRate)
		}
	}
	if len(rates) == 0 {
		return 0, "", false
	}
	return bench.Median(rates), " (no lean burst was valid for comparison: the median of those that delivered everything)", true
}

// startOutageVariants gives the outage workload its two full-path
// workers, started: the product's provider-paced retries and the old own
// backoff, each with a mirror schema of its own (migrated, dropped with
// the benchmark's unless --keep), so each has its rate cap and outage
// record to itself, its own task queue, and a starter over both. stop
// stops the workers.
func startOutageVariants(ctx context.Context, d *cli.Deps, admin *mirror.Store, st *starter.Starter, r *bench.Runner,
	workers *processWorkers, f benchFlags, runID string) (stop func(), err error) {
	if r.Starters == nil {
		r.Starters = map[bench.Kind]*starter.Starter{}
	}
	for _, v := range []struct {
		kind  bench.Kind
		label string
		flags []string
	}{{bench.Paced, "paced", nil}, {bench.OwnBackoff, "own", []string{"--own-backoff"}}} {
		dbURL, err := benchSchema(ctx, d, admin, "bench_"+runID+"_"+v.label, f.keep)
		if err != nil {
			return nil, err
		}
		store, err := d.MirrorAt(ctx, "DATABASE_URL", dbURL, 0)
		if err != nil {
			return nil, err
		}
		if err := migrations.Up(ctx, store.Pool(), d.Logger); err != nil {
			return nil, err
		}
		queue := "bench-" + v.label + "-" + runID
		r.Queues[v.kind] = queue
		r.Starters[v.kind] = &starter.Starter{Temporal: st.Temporal, Mirror: store, TaskQueue: queue, Concurrency: st.Concurrency,
			Webhooks: st.Webhooks, Now: st.Now}
		workers.args[v.kind] = append(append([]string{"worker", "--path", string(bench.Full), "--task-queue", queue,
			"--rate-cap", strconv.FormatFloat(f.rateCap, 'f', -1, 64)}, v.flags...), f.workers.args()...)
		workers.extraEnv[v.kind] = []string{"DATABASE_URL=" + dbURL, "SHIPNOTIFY_TASK_QUEUE=" + queue}
	}
	stop = func() {
		workers.Stop(bench.Paced)
		workers.Stop(bench.OwnBackoff)
	}
	for _, k := range []bench.Kind{bench.Paced, bench.OwnBackoff} {
		if _, err := workers.Start(k); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// pidCPU reads the CPU of the process tree named by a pid file; nil (the
// report says "-") without one.
func pidCPU(e cli.Env, path string) func() (float64, error) {
	if path == "" {
		return nil
	}
	if _, err := bench.PIDFromFile(path); err != nil {
		fmt.Fprintf(e.Stderr, "bench: %v; its CPU is not reported\n", err)
		return nil
	}
	return func() (float64, error) {
		pid, err := bench.PIDFromFile(path)
		if err != nil {
			return 0, err
		}
		return bench.TreeCPU("/proc", pid)
	}
}

// benchAPI serves the tracker API over the runner's starter on a loopback
// port, with a key of its own and no rate limit (the benchmark measures the
// API's cost, not its limit), and points the runner's API path at it.
func benchAPI(r *bench.Runner, st *starter.Starter, d *cli.Deps) (stop func(), err error) {
	key, k, err := api.NewKey("bench", []api.Scope{api.ScopeSchedule})
	if err != nil {
		return nil, err
	}
	h, err := api.New(api.Options{Starter: st, Keys: []api.Key{k}, Rate: rate.Inf, Logger: d.Logger})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("error listening for the benchmark's API: %w", err)
	}
	// What serve listens with, so the cost measured is a tracker's.
	srv := api.NewServer(api.NewRoot(h), 0)
	go func() { _ = srv.Serve(ln) }()
	r.APIURL, r.APIKey = "http://"+ln.Addr().String(), key
	// Keep a connection per request in flight, as a tracker's pool does.
	r.HTTP = &http.Client{Timeout: api.DefaultRequestTimeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: r.Concurrency,
	}}
	return func() { _ = srv.Close() }, nil
}

// benchSchema creates schema, a mirror of a run's own, dropped when d
// closes unless keep, and returns the DATABASE_URL that reaches it.
func benchSchema(ctx context.Context, d *cli.Deps, admin *mirror.Store, schema string, keep bool) (string, error) {
	dbURL, err := withSearchPath(d.Cfg.DatabaseURL, schema)
	if err != nil {
		return "", cli.UsageError{Err: fmt.Errorf("DATABASE_URL: %w", err)}
	}
	if _, err := admin.Pool().Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", fmt.Errorf("error creating the benchmark schema %s: %w", schema, err)
	}
	if !keep {
		d.OnClose(func() { _, _ = admin.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	}
	return dbURL, nil
}

func withSearchPath(dbURL, schema string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func machine() string {
	host, _ := os.Hostname()
	cpus := 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cpus = strings.Count(string(b), "processor\t:")
	}
	return fmt.Sprintf("%s, %d CPUs", host, cpus)
}
