package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shipnotify/shipnotify/mirror"
)

// What the fleet model (`shipnotify capacity --fleet`) takes from a run
// beside its CPU: the engine's shard writes and their latency, read from
// the Temporal server's own /metrics; how long a notify held its slot and
// what the mirror keeps per reminder, read from the mirror.

// shardWriteOps are the persistence operations a history shard serialises:
// a workflow's creation and every update of its mutable state and history.
var shardWriteOps = map[string]bool{"CreateWorkflowExecution": true, "UpdateWorkflowExecution": true}

// EngineMetrics are the Temporal server's own account of a run.
type EngineMetrics struct {
	// ShardWrites are the run's workflow writes (creations and updates)
	// per reminder; WriteSeconds their mean latency; ShardWaitSeconds how
	// long a shard's operations waited for its lock, on average.
	ShardWrites      float64 `json:"shard_writes_per_reminder"`
	WriteSeconds     float64 `json:"shard_write_seconds_mean"`
	ShardWaitSeconds float64 `json:"shard_wait_seconds_mean"`
}

// engineCounters are the server's cumulative counters at one scrape.
type engineCounters struct {
	writes, writeSeconds, waits, waitSeconds float64
}

// scrapeEngine reads the counters from the server's /metrics at url.
func scrapeEngine(ctx context.Context, url string) (engineCounters, error) {
	var c engineCounters
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return c, fmt.Errorf("error asking the server's metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("error reading the server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("error reading the server's metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return c, fmt.Errorf("error parsing the server's metrics: %w", err)
	}
	return countersOf(families), nil
}

// countersOf sums the shard writes' latency histograms and the shard
// lock's wait histogram.
func countersOf(families map[string]*dto.MetricFamily) engineCounters {
	var c engineCounters
	for _, m := range families["persistence_latency"].GetMetric() {
		if shardWriteOps[label(m, "operation")] && label(m, "namespace") != "temporal_system" {
			c.writes += float64(m.GetHistogram().GetSampleCount())
			c.writeSeconds += m.GetHistogram().GetSampleSum()
		}
	}
	for _, m := range families["semaphore_latency"].GetMetric() {
		if label(m, "service_name") == "history" {
			c.waits += float64(m.GetHistogram().GetSampleCount())
			c.waitSeconds += m.GetHistogram().GetSampleSum()
		}
	}
	return c
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// since is what the server did between before and c, for n reminders.
func (c engineCounters) since(before engineCounters, n int) EngineMetrics {
	var m EngineMetrics
	writes := c.writes - before.writes
	if n > 0 {
		m.ShardWrites = writes / float64(n)
	}
	if writes > 0 {
		m.WriteSeconds = (c.writeSeconds - before.writeSeconds) / writes
	}
	if waits := c.waits - before.waits; waits > 0 {
		m.ShardWaitSeconds = (c.waitSeconds - before.waitSeconds) / waits
	}
	return m
}

// slotSeconds is how long the run's reminders' sends held their claim, on
// average: from the claim to the recorded send, of those sent at the first
// attempt (a retry gives its slot back while it waits). A notify activity
// holds its slot that long, and a few milliseconds more.
func slotSeconds(ctx context.Context, store *mirror.Store, prefix string) (float64, error) {
	var s *float64
	err := store.Pool().QueryRow(ctx, `
SELECT avg(extract(epoch FROM d.finished_at - d.created_at))::float8
  FROM deliveries d JOIN reminders r ON r.id = d.reminder_id
 WHERE starts_with(r.shipment_id, $1) AND d.purpose = 'reminder' AND d.status = 'sent'
   AND d.attempts = 1`, prefix).Scan(&s)
	if err != nil {
		return 0, fmt.Errorf("error reading the sends' slot time: %w", err)
	}
	if s == nil {
		return 0, nil
	}
	return *s, nil
}

// MirrorFootprint is what the mirror holds per reminder once the runs are
// done: rows and bytes (with indexes and TOAST) of every table of the
// benchmark's schema, over its reminders.
type MirrorFootprint struct {
	Reminders int64 `json:"reminders"`
	// Tables are each table's rows and bytes.
	Tables          map[string]TableSize `json:"tables"`
	RowsPerReminder float64              `json:"rows_per_reminder"`
	// BytesPerReminder counts every table but the fixed-size ones.
	BytesPerReminder float64 `json:"bytes_per_reminder"`
}

// TableSize is one table's rows and bytes.
type TableSize struct {
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
}

// fixedTables do not grow with the reminders: the migrations' bookkeeping,
// the tallies' fixed slots, configuration and per-address or per-endpoint
// state. Any other table, a new one included, counts.
var fixedTables = map[string]bool{"goose_db_version": true, "reminder_tallies": true, "status_endpoints": true,
	"provider_health": true, "send_rate": true, "console_sessions": true, "disabled_endpoints": true, "suppressions": true}

// mirrorFootprint measures the schema the store's pool reaches.
func mirrorFootprint(ctx context.Context, store *mirror.Store) (MirrorFootprint, error) {
	f := MirrorFootprint{Tables: map[string]TableSize{}}
	rows, _ := store.Pool().Query(ctx, `
SELECT c.relname, pg_total_relation_size(c.oid)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND c.relkind = 'r'`)
	sizes := map[string]int64{}
	var name string
	var size int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &size}, func() error {
		sizes[name] = size
		return nil
	}); err != nil {
		return f, fmt.Errorf("error reading the mirror's tables: %w", err)
	}
	for name, size := range sizes {
		var n int64
		if err := store.Pool().QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{name}.Sanitize()).Scan(&n); err != nil {
			return f, fmt.Errorf("error counting %s: %w", name, err)
		}
		f.Tables[name] = TableSize{Rows: n, Bytes: size}
		if name == "reminders" {
			f.Reminders = n
		}
	}
	if f.Reminders == 0 {
		return f, nil
	}
	var allRows, allBytes int64
	for name, t := range f.Tables {
		if fixedTables[name] {
			continue
		}
		allRows += t.Rows
		allBytes += t.Bytes
	}
	f.RowsPerReminder = float64(allRows) / float64(f.Reminders)
	f.BytesPerReminder = float64(allBytes) / float64(f.Reminders)
	return f, nil
}
