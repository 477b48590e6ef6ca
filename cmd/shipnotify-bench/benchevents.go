package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/tools/bench"
)

func init() {
	register("events", "the SendGrid Event Webhook's ingestion rate: signed batches of 1,000 events posted to the handler over loopback HTTP, into a private schema (PostgreSQL only)", runBenchEvents)
}

// EventsBenchReport is what bench-events writes with --json and to --out.
type EventsBenchReport struct {
	Machine string              `json:"machine"`
	At      time.Time           `json:"at"`
	Options map[string]any      `json:"options"`
	Events  *bench.EventsResult `json:"events"`
}

func runBenchEvents(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "events", "events [--batch 1000] [--batches 16] [--runs 5] [--concurrency 1,4] [--bounce 0.1] [--pool 16] [--cpuprofile FILE] [--keep] [--json] [--out FILE]")
	var o bench.EventsOptions
	fs.IntVar(&o.BatchSize, "batch", bench.TargetBatchSize, "events a batch, two a reminder (the target is judged at 1,000)")
	fs.IntVar(&o.Batches, "batches", 16, "batches a run")
	fs.IntVar(&o.Runs, "runs", 5, "runs of each mix and concurrency, after a warm-up")
	concurrency := fs.String("concurrency", "1,4", "batches in flight, one set of delivered-mix runs each; the bounce mix and the replay run at the first (the target is judged at 1)")
	fs.Float64Var(&o.BounceShare, "bounce", 0.1, "the bounce mix: share of its reminders that bounce instead of being delivered")
	pool := fs.Int("pool", 16, "the handler's PostgreSQL connections (serve's pool)")
	profile := fs.String("cpuprofile", "", "write a Go CPU profile of the measured runs (handler, store and client) to this file")
	fs.BoolVar(&o.Keep, "keep", false, "keep the benchmark's schema (events_<id>)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	out := fs.String("out", "", "also write the JSON report to this file")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if o.BatchSize < 2 || o.BatchSize%2 != 0 || o.Batches < 1 || o.Runs < 1 || *pool < 1 {
		return cli.Usagef("--batch must be even and at least 2; --batches, --runs and --pool must be positive")
	}
	if o.BounceShare <= 0 || o.BounceShare > 1 {
		return cli.Usagef("--bounce must be in (0, 1]")
	}
	var err error
	if o.Concurrency, err = parseConcurrency(*concurrency); err != nil {
		return cli.Usagef("--concurrency: %v", err)
	}
	o.PoolSize = int32(*pool)
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	o.DeferAfter, o.Progress = d.Cfg.DeferredEscalateAfter, e.Stderr
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return cli.Usagef("--cpuprofile: %v", err)
		}
		defer f.Close()
		o.Profile = f
	}
	res, err := bench.EventsLoad(ctx, d.Cfg.DatabaseURL, o)
	if err != nil {
		return err
	}
	report := EventsBenchReport{Machine: machine(), At: time.Now().UTC(), Events: &res, Options: map[string]any{
		"batch": o.BatchSize, "batches": o.Batches, "runs": o.Runs, "concurrency": o.Concurrency,
		"bounce": o.BounceShare, "pool": o.PoolSize, "defer_after": o.DeferAfter.String(),
	}}
	err = emitReport(e.Stdout, *out, *asJSON, report, func() error { return bench.WriteEventsTable(e.Stdout, res) })
	if err == nil && len(res.Failures) > 0 {
		err = fmt.Errorf("bench-events: %d checks failed: %s", len(res.Failures), strings.Join(res.Failures, "; "))
	}
	return err
}

// parseConcurrency reads "1,4": distinct positive counts, in order.
func parseConcurrency(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return nil, fmt.Errorf("want positive counts separated by commas, got %q", s)
		}
		for _, seen := range out {
			if seen == c {
				return nil, fmt.Errorf("%d is given twice", c)
			}
		}
		out = append(out, c)
	}
	return out, nil
}
