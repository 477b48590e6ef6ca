package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
)

// The engine's account counts only its workflow writes (creations and
// updates, not the system namespace's) and the history service's shard
// lock, and divides what happened between two scrapes.
func TestEngineMetricsCountShardWrites(t *testing.T) {
	t.Parallel()
	scrape := func(updates, updateSum, creates, createSum, waits, waitSum string) engineCounters {
		text := `# TYPE persistence_latency histogram
persistence_latency_bucket{namespace="default",operation="UpdateWorkflowExecution",service_name="history",le="+Inf"} ` + updates + `
persistence_latency_sum{namespace="default",operation="UpdateWorkflowExecution",service_name="history"} ` + updateSum + `
persistence_latency_count{namespace="default",operation="UpdateWorkflowExecution",service_name="history"} ` + updates + `
persistence_latency_bucket{namespace="default",operation="CreateWorkflowExecution",service_name="history",le="+Inf"} ` + creates + `
persistence_latency_sum{namespace="default",operation="CreateWorkflowExecution",service_name="history"} ` + createSum + `
persistence_latency_count{namespace="default",operation="CreateWorkflowExecution",service_name="history"} ` + creates + `
persistence_latency_bucket{namespace="temporal_system",operation="CreateWorkflowExecution",service_name="history",le="+Inf"} 50
persistence_latency_sum{namespace="temporal_system",operation="CreateWorkflowExecution",service_name="history"} 9
persistence_latency_count{namespace="temporal_system",operation="CreateWorkflowExecution",service_name="history"} 50
persistence_latency_bucket{namespace="default",operation="GetWorkflowExecution",service_name="history",le="+Inf"} 999
persistence_latency_sum{namespace="default",operation="GetWorkflowExecution",service_name="history"} 99
persistence_latency_count{namespace="default",operation="GetWorkflowExecution",service_name="history"} 999
# TYPE semaphore_latency histogram
semaphore_latency_bucket{operation="ShardInfo",priority="0",service_name="history",le="+Inf"} ` + waits + `
semaphore_latency_sum{operation="ShardInfo",priority="0",service_name="history"} ` + waitSum + `
semaphore_latency_count{operation="ShardInfo",priority="0",service_name="history"} ` + waits + `
`
		parser := expfmt.NewTextParser(model.LegacyValidation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(text))
		require.NoError(t, err)
		return countersOf(families)
	}
	before := scrape("100", "1", "10", "0.5", "20", "2")
	after := scrape("1000", "19", "110", "2.5", "120", "52")
	m := after.since(before, 100)
	require.InDelta(t, 10, m.ShardWrites, 1e-9, "(900 updates + 100 creations) / 100 reminders")
	require.InDelta(t, 0.02, m.WriteSeconds, 1e-9, "(18 + 2) s over 1,000 writes")
	require.InDelta(t, 0.5, m.ShardWaitSeconds, 1e-9, "50 s over 100 waits")
}

// The mirror's footprint counts every table's rows and bytes and divides
// those of the growing tables by the reminders, leaving the fixed ones
// (the migrations' bookkeeping, say) out.
func TestMirrorFootprintPerReminder(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	loaded, err := SeedPrunable(ctx, db.Pool, 40)
	require.NoError(t, err)
	f, err := mirrorFootprint(ctx, mirror.New(db.Pool))
	require.NoError(t, err)
	require.EqualValues(t, 40, f.Reminders)
	require.EqualValues(t, 40, f.Tables["reminders"].Rows)
	require.EqualValues(t, loaded.Events, f.Tables["reminder_events"].Rows)
	require.Positive(t, f.Tables["goose_db_version"].Rows, "a fixed table is measured")
	var rows, bytes int64
	for name, ts := range f.Tables {
		if !fixedTables[name] {
			rows, bytes = rows+ts.Rows, bytes+ts.Bytes
		}
	}
	require.InDelta(t, float64(rows)/40, f.RowsPerReminder, 1e-9, "the growing tables' rows, the fixed ones left out")
	require.InDelta(t, float64(bytes)/40, f.BytesPerReminder, 1e-9)
	require.Greater(t, f.RowsPerReminder, 2.0, "a reminder leaves its trail and its delivery too")
}
