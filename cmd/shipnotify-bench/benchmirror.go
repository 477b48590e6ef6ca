package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/metrics"
)

func init() {
	register("mirror", "the mirror at the seed's scale: COPY N reminders into a private schema, time its reads, scrape and export (PostgreSQL only)", runBenchMirror)
}

// MirrorBenchReport is what bench-mirror writes with --json and to --out.
type MirrorBenchReport struct {
	Machine string              `json:"machine"`
	At      time.Time           `json:"at"`
	Options map[string]any      `json:"options"`
	Mirror  *bench.MirrorResult `json:"mirror"`
}

func runBenchMirror(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "mirror", "mirror [--n N] [--windows N] [--lookups N] [--overdue N] [--scrapes N] [--pages N] [--trail] [--no-export] [--prune-for D] [--keep] [--json] [--out FILE]")
	var o bench.MirrorOptions
	fs.IntVar(&o.N, "n", 10_000_000, "reminders to load")
	fs.IntVar(&o.Windows, "windows", 1000, "\"due between\" queries, one random hour each")
	fs.IntVar(&o.Lookups, "lookups", 1000, "list --shipment queries, one random shipment each")
	fs.IntVar(&o.Overdue, "overdue", 1000, "oldest-overdue queries")
	fs.IntVar(&o.Scrapes, "scrapes", 200, "full /metrics scrapes, each with the gauges' refresh")
	fs.IntVar(&o.Pages, "pages", 100, "pages of pending reminders read (reconcile --verify's walk, list --state pending)")
	fs.BoolVar(&o.Trail, "trail", false, "also load every reminder's events and deliveries (no timed query reads them)")
	noExport := fs.Bool("no-export", false, "skip the export of every row")
	fs.DurationVar(&o.PruneFor, "prune-for", 0, "then prune the loaded mirror (--older-than 90d) for this long and report its rate (0: no prune)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the loaded schema (mirror_<id>)")
	seed := fs.Uint64("seed", 1, "the generator's seed: one seed, one mirror")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	out := fs.String("out", "", "also write the JSON report to this file")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if o.N < 1 || o.Windows < 1 || o.Lookups < 1 || o.Overdue < 1 || o.Scrapes < 1 || o.Pages < 1 {
		return cli.Usagef("--n, --windows, --lookups, --overdue, --scrapes and --pages must be positive")
	}
	if o.PruneFor < 0 {
		return cli.Usagef("--prune-for must not be negative")
	}
	o.SkipExport, o.Seed, o.Progress = *noExport, *seed, e.Stderr
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := mirrorWorkload(ctx, e, d, d.Cfg.DatabaseURL, o)
	if err != nil {
		return err
	}
	report := MirrorBenchReport{Machine: machine(), At: time.Now().UTC(), Mirror: &res, Options: map[string]any{
		"n": o.N, "windows": o.Windows, "lookups": o.Lookups, "overdue": o.Overdue, "scrapes": o.Scrapes, "pages": o.Pages,
		"trail": o.Trail, "export": !o.SkipExport, "seed": o.Seed, "prune_for": o.PruneFor.String(),
	}}
	err = emitReport(e.Stdout, *out, *asJSON, report, func() error { return bench.WriteMirrorTable(e.Stdout, res) })
	if err == nil && len(res.Failures) > 0 {
		err = fmt.Errorf("bench-mirror: %d measurements failed: %s", len(res.Failures), strings.Join(res.Failures, "; "))
	}
	return err
}

// mirrorWorkload loads and measures the mirror at scale (bench.MirrorLoad)
// with the registry a worker serves, so the timed scrape is the worker's.
func mirrorWorkload(ctx context.Context, e cli.Env, d *cli.Deps, dbURL string, o bench.MirrorOptions) (bench.MirrorResult, error) {
	reg, closeMetrics, err := cli.OpsRegistry(d)
	if err != nil {
		return bench.MirrorResult{}, err
	}
	defer closeMetrics()
	metrics.New(reg)
	metrics.WatchCredentials(reg, "sendgrid", cli.NewActivities(d.Cfg, nil).Email)
	o.Registry = reg
	if o.Progress == nil {
		o.Progress = e.Stderr
	}
	return bench.MirrorLoad(ctx, dbURL, o)
}
