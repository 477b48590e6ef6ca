package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
)

// mirrorMeasure times the product's reads of a loaded mirror.
type mirrorMeasure struct {
	store     *mirror.Store
	pool      *pgxpool.Pool
	f         fleet
	shipments int
	rng       *rand.Rand
	plans     map[string][]string
}

// reads times the three listings as `list` and the gauges run them:
// List with a due window and list's default limit, List by shipment, and
// the oldest-overdue query. Each is EXPLAINed once too.
func (m *mirrorMeasure) reads(ctx context.Context, o MirrorOptions, res *MirrorResult) error {
	span := m.f.To.Sub(m.f.From) - time.Hour
	window := func() mirror.Filter {
		from := m.f.From.Add(time.Duration(m.rng.Int64N(int64(span))))
		return mirror.Filter{DueFrom: from, DueTo: from.Add(time.Hour), Limit: 1000}
	}
	shipment := func() mirror.Filter {
		return mirror.Filter{ShipmentID: fmt.Sprintf("%s%09d", m.f.Prefix, 1+m.rng.IntN(m.shipments)), Limit: 1000}
	}
	found := 0
	list := func(next func() mirror.Filter) func() error {
		return func() error {
			rows, err := m.store.List(ctx, next())
			found += len(rows)
			return err
		}
	}
	var err error
	if res.DueBetween, err = timeEach(o.Windows, list(window)); err != nil {
		return err
	}
	if found == 0 {
		return fmt.Errorf("no due window found a reminder: the load and the queries disagree")
	}
	found = 0
	if res.ByShipment, err = timeEach(o.Lookups, list(shipment)); err != nil {
		return err
	}
	if found < o.Lookups {
		return fmt.Errorf("a shipment listing found nothing: the load and the queries disagree")
	}
	if res.OldestOverdue, err = timeEach(o.Overdue, func() error {
		age, err := m.store.OldestOverdue(ctx)
		if err == nil && age <= 0 {
			err = fmt.Errorf("no overdue reminder found: the load has some")
		}
		return err
	}); err != nil {
		return err
	}
	// Reconcile --verify's walk (pages of 500, as it reads them) from the
	// start; then pending listings from random due times.
	after := ""
	if res.PendingBefore, err = timeEach(o.Pages, func() error {
		rows, err := m.store.PendingBefore(ctx, m.f.Now, after, 500)
		if len(rows) > 0 {
			after = rows[len(rows)-1].ID
		}
		return err
	}); err != nil {
		return err
	}
	pending := func() mirror.Filter {
		return mirror.Filter{State: mirror.Pending, DueFrom: m.f.From.Add(time.Duration(m.rng.Int64N(int64(span)))), Limit: 1000}
	}
	if res.PendingList, err = timeEach(o.Pages, list(pending)); err != nil {
		return err
	}
	for name, f := range map[string]mirror.Filter{"due_between": window(), "by_shipment": shipment(), "pending_list": pending()} {
		q, args := mirror.ListQuery(f)
		if m.plans[name], err = explain(ctx, m.pool, true, q, args...); err != nil {
			return err
		}
	}
	for name, q := range map[string]string{"oldest_overdue": mirror.OldestOverdueQuery, "count_by_state": mirror.CountByStateQuery} {
		if m.plans[name], err = explain(ctx, m.pool, true, q); err != nil {
			return err
		}
	}
	if m.plans["pending_before"], err = explain(ctx, m.pool, true, mirror.PendingBeforeQuery, m.f.Now, after, 500); err != nil {
		return err
	}
	q, args := mirror.ListQuery(mirror.Filter{})
	m.plans["export"], err = explain(ctx, m.pool, false, q, args...)
	return err
}

// scrapes times what one /metrics scrape costs in all: the gauges'
// refresh (the mirror read WatchMirror runs every
// SHIPNOTIFY_METRICS_REFRESH) and a GET /metrics of the process registry
// served as the worker serves it.
func (m *mirrorMeasure) scrapes(ctx context.Context, o MirrorOptions, res *MirrorResult) error {
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		metrics.New(reg)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	// The background refresh stays out of the way; the loop below runs it.
	metrics.WatchMirror(wctx, reg, m.store, metrics.MirrorOptions{Every: 24 * time.Hour})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("error listening for the metrics scrape: %w", err)
	}
	srv := metrics.NewServer(metrics.Handler(reg, func(context.Context) error { return nil }))
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/metrics"
	client := &http.Client{Timeout: metrics.ServerWriteTimeout}
	var refresh, scrape, full []time.Duration
	for range o.Scrapes {
		t0 := time.Now()
		if _, err := m.store.Gauges(ctx); err != nil {
			return err
		}
		t1 := time.Now()
		if err := get(ctx, client, url); err != nil {
			return err
		}
		t2 := time.Now()
		refresh, scrape, full = append(refresh, t1.Sub(t0)), append(scrape, t2.Sub(t1)), append(full, t2.Sub(t0))
	}
	res.GaugesRefresh, res.Scrape, res.MetricsFull = latencyOf(refresh), latencyOf(scrape), latencyOf(full)
	return nil
}

func get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("error scraping /metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("error scraping /metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "shipnotify_reminders{") {
		return fmt.Errorf("scraping /metrics: %d, without the mirror's gauges", resp.StatusCode)
	}
	return nil
}

// explain returns a statement's plan, run (ANALYZE, BUFFERS) when analyze
// is set, as its lines.
func explain(ctx context.Context, pool *pgxpool.Pool, analyze bool, q string, args ...any) ([]string, error) {
	opts := "EXPLAIN "
	if analyze {
		opts = "EXPLAIN (ANALYZE, BUFFERS) "
	}
	rows, _ := pool.Query(ctx, opts+q, args...)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error explaining a query: %w", err)
	}
	return lines, nil
}
