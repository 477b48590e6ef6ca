package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipnotify/shipnotify/mirror"
)

// MirrorOptions configure MirrorLoad. Zero counts take the defaults the
// issue's bars are stated for.
type MirrorOptions struct {
	// N is the reminders loaded (default 10,000,000: the seed's customer
	// makes 44 million a year).
	N int
	// Windows is the "due between" queries timed, one random hour each
	// (default 1,000); Lookups the by-shipment listings (1,000); Overdue
	// the oldest-overdue reads (1,000); Scrapes the full /metrics
	// scrapes, gauges refresh included (200).
	Windows, Lookups, Overdue, Scrapes int
	// Pages is the pending-reminder pages read, no bar (100): reconcile
	// --verify's PendingBefore, page after page, and `list --state pending`
	// from a random due time.
	Pages int
	// SkipExport leaves out the export of every row.
	SkipExport bool
	// PruneFor, when set, ends the run with PruneLoad on the loaded mirror
	// for this long (90 days: most of the load is old enough).
	PruneFor time.Duration
	// Trail also loads every reminder's events and deliveries. The timed
	// queries read neither table, so it only adds load time.
	Trail bool
	// Keep keeps the schema (mirror_<id>) for a look afterwards.
	Keep bool
	Seed uint64
	// Registry is the process's metrics registry as a worker builds it
	// (nil: the Go and process collectors and the notify metrics); the
	// mirror's gauges are added to it.
	Registry *prometheus.Registry
	Progress io.Writer
}

// MirrorResult is what MirrorLoad measured.
type MirrorResult struct {
	Workload string `json:"workload"`
	N        int    `json:"n"`
	Schema   string `json:"schema"`
	Loaded   loaded `json:"loaded"`
	// LoadRate is reminders (with their updates, and trail if asked)
	// copied a second, the secondary indexes dropped meanwhile.
	LoadRate    float64 `json:"load_reminders_per_second"`
	LoadSeconds float64 `json:"load_seconds"`
	// IndexSeconds is building the secondary indexes after the load.
	IndexSeconds  float64 `json:"index_seconds"`
	VacuumSeconds float64 `json:"vacuum_analyze_seconds"`
	// Sizes are the tables' total sizes (indexes included), in bytes.
	Sizes map[string]int64 `json:"sizes_bytes"`
	// Indexes are the reminders table's index definitions, as measured.
	Indexes       []string `json:"indexes"`
	DueBetween    Latency  `json:"due_between"`
	ByShipment    Latency  `json:"by_shipment"`
	OldestOverdue Latency  `json:"oldest_overdue"`
	// PendingBefore is one page of reconcile --verify's walk through the
	// pending reminders, PendingList one page of `list --state pending
	// --due-from T`; they have no bar.
	PendingBefore Latency `json:"pending_before"`
	PendingList   Latency `json:"pending_list"`
	// GaugesRefresh is the mirror gauges' read (what every
	// SHIPNOTIFY_METRICS_REFRESH runs), Scrape one GET /metrics of the
	// registry, and MetricsFull both, timed together.
	GaugesRefresh Latency       `json:"gauges_refresh"`
	Scrape        Latency       `json:"scrape"`
	MetricsFull   Latency       `json:"metrics_full"`
	Export        *ExportResult `json:"export,omitempty"`
	Prune         *PruneResult  `json:"prune,omitempty"`
	Bars          []Bar         `json:"bars"`
	// Failures are measurements that could not be taken (a query that
	// timed out, say); their bars are missed.
	Failures []string            `json:"failures,omitempty"`
	Plans    map[string][]string `json:"plans"`
	Elapsed  time.Duration       `json:"elapsed_ns"`
}

// MirrorLoad loads o.N reminders with COPY into a private schema made by
// the product's migrations (no Temporal: it measures PostgreSQL), then
// times the mirror's reads at that size against the bars. The
// schema is dropped at the end unless o.Keep.
func MirrorLoad(ctx context.Context, dbURL string, o MirrorOptions) (MirrorResult, error) {
	o = o.withDefaults()
	begin := time.Now()
	res := MirrorResult{Workload: "mirror", N: o.N, Plans: map[string][]string{}}
	logf := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "bench: mirror: "+format+"\n", args...)
		}
	}
	s, err := newPrivateSchema(ctx, dbURL, "mirror")
	if err != nil {
		return res, err
	}
	defer s.Close(!o.Keep)
	res.Schema = s.Name

	now := time.Now()
	f := fleet{Prefix: "SHP-", N: o.N, From: now.Add(-335 * 24 * time.Hour), To: now.Add(30 * 24 * time.Hour),
		Now: now, Seed: o.Seed, Trail: o.Trail}
	logf("loading %d reminders into %s", o.N, s.Name)
	// The product's secondary indexes are built after the load, from their
	// own definitions: the same indexes, made faster.
	defs, err := dropSecondaryIndexes(ctx, s.Pool)
	if err != nil {
		return res, err
	}
	t := time.Now()
	next := o.N / 10
	res.Loaded, err = f.load(ctx, s.Pool, func(done int) {
		if done >= next {
			logf("%d reminders loaded (%.0f/s)", done, float64(done)/time.Since(t).Seconds())
			next += o.N / 10
		}
	})
	if err != nil {
		return res, err
	}
	res.LoadSeconds = time.Since(t).Seconds()
	res.LoadRate = float64(res.Loaded.Reminders) / res.LoadSeconds
	t = time.Now()
	if err := buildIndexes(ctx, s.Pool, defs); err != nil {
		return res, err
	}
	res.IndexSeconds = time.Since(t).Seconds()
	// A mirror in service has been vacuumed and analysed by autovacuum;
	// a fresh load has not.
	t = time.Now()
	if _, err := s.Pool.Exec(ctx, "VACUUM (ANALYZE) updates, reminders, reminder_events, deliveries"); err != nil {
		return res, fmt.Errorf("error vacuuming the loaded mirror: %w", err)
	}
	res.VacuumSeconds = time.Since(t).Seconds()
	if res.Sizes, res.Indexes, err = describe(ctx, s.Pool); err != nil {
		return res, err
	}
	logf("loaded in %.0fs (%.0f reminders/s), indexed in %.0fs, vacuumed in %.0fs; reminders take %d MB",
		res.LoadSeconds, res.LoadRate, res.IndexSeconds, res.VacuumSeconds, res.Sizes["reminders"]>>20)

	m := &mirrorMeasure{store: mirror.New(s.Pool), pool: s.Pool, f: f, shipments: res.Loaded.Shipments,
		rng: rand.New(rand.NewPCG(o.Seed, 0x9e7)), plans: res.Plans}
	// A measurement that fails is reported, and the others still run.
	failed := func(what string, err error) bool {
		if err != nil && ctx.Err() == nil {
			res.Failures = append(res.Failures, what+": "+err.Error())
			logf("%s failed: %v", what, err)
		}
		return err != nil
	}
	if !failed("reads", m.reads(ctx, o, &res)) {
		logf("due between p99 %s, by shipment p99 %s, oldest overdue p99 %s, pending pages p99 %s and %s",
			res.DueBetween.P99, res.ByShipment.P99, res.OldestOverdue.P99, res.PendingBefore.P99, res.PendingList.P99)
	}
	if !failed("metrics", m.scrapes(ctx, o, &res)) {
		logf("gauges refresh p99 %s, scrape p99 %s, both p99 %s", res.GaugesRefresh.P99, res.Scrape.P99, res.MetricsFull.P99)
	}
	if !o.SkipExport {
		logf("exporting %d reminders", res.Loaded.Reminders)
		exp, err := m.export(ctx)
		if !failed("export", err) {
			res.Export = &exp
			logf("exported %d rows at %.0f/s, heap %d MB → peak %d MB", exp.Rows, exp.RowsPerSecond, exp.HeapBefore>>20, exp.HeapPeak>>20)
		}
	}
	if o.PruneFor > 0 {
		logf("pruning for %s", o.PruneFor)
		pctx, cancel := context.WithTimeout(ctx, o.PruneFor)
		p, err := PruneLoad(pctx, s.Pool, PruneLoadOptions{Progress: o.Progress})
		cancel()
		if !failed("prune", err) {
			res.Prune = &p
		}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res.Bars = mirrorBars(res)
	res.Elapsed = time.Since(begin)
	return res, nil
}

func (o MirrorOptions) withDefaults() MirrorOptions {
	if o.N <= 0 {
		o.N = 10_000_000
	}
	for _, c := range []*int{&o.Windows, &o.Lookups, &o.Overdue} {
		if *c <= 0 {
			*c = 1000
		}
	}
	if o.Pages <= 0 {
		o.Pages = 100
	}
	if o.Scrapes <= 0 {
		o.Scrapes = 200
	}
	return o
}

// describe reads the tables' sizes and the reminders' index definitions.
func describe(ctx context.Context, pool *pgxpool.Pool) (map[string]int64, []string, error) {
	sizes := map[string]int64{}
	for _, table := range []string{"updates", "reminders", "reminder_events", "deliveries"} {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", table).Scan(&n); err != nil {
			return nil, nil, fmt.Errorf("error reading the size of %s: %w", table, err)
		}
		sizes[table] = n
	}
	rows, _ := pool.Query(ctx, `
SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'reminders' ORDER BY indexname`)
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, fmt.Errorf("error reading the indexes: %w", err)
	}
	return sizes, defs, nil
}
