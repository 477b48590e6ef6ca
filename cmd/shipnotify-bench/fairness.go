package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/migrations"
	"github.com/shipnotify/shipnotify/reminder"
)

func init() {
	register("fairness", "one tenant's burst of 20,000 reminders beside another tenant's steady work: the quiet tenant's latency alone and beside it (make bench-fairness)", runFairness)
}

// fairnessFlags are the fairness command's settings.
type fairnessFlags struct {
	noisy, updateSize, posters int
	noisyLead, noisySpread     time.Duration
	noisyMoves                 int
	moveBy                     time.Duration
	quietEvery, quietLead      time.Duration
	quietMoveEvery             int
	baseline, drainWithin      time.Duration
	serves, workers            int
	provider, bin              string
	temporalAddress            string
	engine, out                string
	asJSON, keep               bool
}

// parseFairnessFlags reads the flags; the defaults are issue 38's run.
func parseFairnessFlags(e cli.Env, args []string) (fairnessFlags, error) {
	var f fairnessFlags
	fs := cli.NewFlags(e, "fairness", "fairness [--noisy-reminders 20000] [--update-size 500] [--baseline 60s] [--serves 1] [--workers 1] [--out FILE] ...")
	fs.IntVar(&f.noisy, "noisy-reminders", 20000, "reminders the noisy tenant (acme) posts")
	fs.IntVar(&f.updateSize, "update-size", reminder.MaxSubscribers, "subscribers per noisy update (at most 500)")
	fs.IntVar(&f.posters, "posters", 8, "the noisy tenant's updates in flight; a 429 waits its Retry-After, a 503 or 504 is posted again")
	fs.DurationVar(&f.noisyLead, "noisy-lead", 20*time.Second, "the noisy tenant's first reminders are due this long after it begins posting")
	fs.DurationVar(&f.noisySpread, "noisy-spread", time.Minute, "the noisy tenant's due times are spread over this window, update by update")
	fs.IntVar(&f.noisyMoves, "noisy-moves", 8, "once half its updates are accepted, the noisy tenant moves the window of this many, at once (0: none)")
	fs.DurationVar(&f.moveBy, "move-by", 10*time.Second, "how far each move puts a window later")
	fs.DurationVar(&f.quietEvery, "quiet-every", 2*time.Second, "the quiet tenant (globex) posts one update of one reminder this often")
	fs.DurationVar(&f.quietLead, "quiet-lead", 15*time.Second, "each of the quiet tenant's reminders is due this long after it is posted")
	fs.IntVar(&f.quietMoveEvery, "quiet-move-every", 5, "every this many posts the quiet tenant also moves the window of the update it posted before (0: never)")
	fs.DurationVar(&f.baseline, "baseline", time.Minute, "how long the quiet tenant runs alone first, the measure the rest is compared with")
	fs.DurationVar(&f.drainWithin, "drain-within", 15*time.Minute, "how long to wait for the noisy tenant's reminders to be sent, then for both tenants' to be delivered")
	fs.IntVar(&f.serves, "serves", 1, "serve replicas, behind a balancer")
	fs.IntVar(&f.workers, "workers", 1, "worker processes")
	fs.StringVar(&f.provider, "provider", sink.RealisticName, "how the mail sink answers: realistic (median 220 ms, 1% at 6 s, 2.5 s of 429s a minute) or instant")
	fs.StringVar(&f.bin, "bin", ".dev/bin/shipnotify", "the product binary whose worker and serve commands run")
	fs.StringVar(&f.temporalAddress, "temporal-address", "", "the Temporal frontend (default: TEMPORAL_ADDRESS)")
	fs.StringVar(&f.engine, "engine", "", "what it runs on, for the report (default: Temporal at the address)")
	fs.StringVar(&f.out, "out", "", "also write the JSON report to this file")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&f.keep, "keep", false, "keep the benchmark's mirror schema")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return f, err
	}
	switch {
	case f.noisy < 1:
		return f, cli.Usagef("--noisy-reminders: want at least 1")
	case f.updateSize < 1 || f.updateSize > reminder.MaxSubscribers:
		return f, cli.Usagef("--update-size: want 1 to %d (an update's subscribers)", reminder.MaxSubscribers)
	case f.posters < 1:
		return f, cli.Usagef("--posters: want at least 1")
	case f.noisyLead <= 0:
		return f, cli.Usagef("--noisy-lead: want a positive duration")
	case f.noisySpread < 0:
		return f, cli.Usagef("--noisy-spread: want zero or more")
	case f.noisyMoves < 0:
		return f, cli.Usagef("--noisy-moves: want zero or more")
	case f.moveBy <= 0:
		return f, cli.Usagef("--move-by: want a positive duration")
	case f.quietEvery <= 0:
		return f, cli.Usagef("--quiet-every: want a positive duration")
	case f.quietLead < time.Second:
		return f, cli.Usagef("--quiet-lead: want at least 1s, so a reminder is scheduled before it is due")
	case f.quietMoveEvery < 0:
		return f, cli.Usagef("--quiet-move-every: want zero or more")
	case f.baseline <= 0:
		return f, cli.Usagef("--baseline: want a positive duration: the quiet tenant alone is what the rest is compared with")
	case f.drainWithin <= 0:
		return f, cli.Usagef("--drain-within: want a positive duration")
	case f.serves < 1:
		return f, cli.Usagef("--serves: want at least 1")
	case f.workers < 1:
		return f, cli.Usagef("--workers: want at least 1")
	case f.provider != sink.RealisticName && f.provider != sink.InstantName:
		return f, cli.Usagef("--provider: want realistic or instant")
	}
	return f, nil
}

func runFairness(ctx context.Context, e cli.Env, args []string) error {
	f, err := parseFairnessFlags(e, args)
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
	dbURL, err := benchSchema(ctx, d, admin, "fairness_"+runID, f.keep)
	if err != nil {
		return err
	}
	store, err := d.MirrorAt(ctx, "DATABASE_URL", dbURL, 4)
	if err != nil {
		return err
	}
	if err := migrations.Up(ctx, store.Pool(), d.Logger); err != nil {
		return err
	}
	provider := sink.Realistic(providerSeed)
	if f.provider == sink.InstantName {
		provider = sink.Instant()
	}
	o := bench.FairnessOptions{
		Bin: f.bin,
		// The product's processes: this environment less the worker's
		// tuning (its defaults run; the API's limits are passed on), on
		// the benchmark's schema and queue.
		Env: workerEnv(os.Environ(), "DATABASE_URL="+dbURL, "TEMPORAL_ADDRESS="+d.Cfg.Temporal.HostPort,
			"TEMPORAL_NAMESPACE="+d.Cfg.Temporal.Namespace, "SHIPNOTIFY_TASK_QUEUE=bench-fairness-"+runID),
		Mirror: store, Serves: f.serves, Workers: f.workers, Provider: provider,
		NoisyReminders: f.noisy, UpdateSize: f.updateSize, Posters: f.posters, NoisyLead: f.noisyLead,
		NoisySpread: f.noisySpread, NoisyMoves: f.noisyMoves, MoveBy: f.moveBy,
		QuietEvery: f.quietEvery, QuietLead: f.quietLead, QuietMoveEvery: f.quietMoveEvery,
		Baseline: f.baseline, DrainWithin: f.drainWithin, Progress: e.Stderr,
	}
	report, err := bench.Fairness(ctx, o)
	if err != nil {
		return err
	}
	report.Machine = machine()
	report.Engine = f.engine
	if report.Engine == "" {
		report.Engine = "Temporal at " + d.Cfg.Temporal.HostPort
	}
	report.Options = map[string]any{
		"noisy_reminders": f.noisy, "update_size": f.updateSize, "posters": f.posters, "noisy_lead": f.noisyLead.String(),
		"noisy_spread": f.noisySpread.String(), "noisy_moves": f.noisyMoves, "move_by": f.moveBy.String(),
		"quiet_every": f.quietEvery.String(), "quiet_lead": f.quietLead.String(), "quiet_move_every": f.quietMoveEvery,
		"baseline": f.baseline.String(), "drain_within": f.drainWithin.String(), "serves": f.serves, "workers": f.workers,
		"provider": provider.Name, "temporal_address": d.Cfg.Temporal.HostPort, "bin": f.bin,
	}
	if err := emitReport(e.Stdout, f.out, f.asJSON, report, func() error {
		fmt.Fprintf(e.Stdout, "%s, %s; %d serve replica(s), %d worker(s)\n\n", report.Engine, report.Machine, f.serves, f.workers)
		return bench.WriteFairnessTable(e.Stdout, report)
	}); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(report.Errors) > 0 {
		return fmt.Errorf("fairness: %d problem(s): %s", len(report.Errors), strings.Join(report.Errors, "; "))
	}
	return nil
}
