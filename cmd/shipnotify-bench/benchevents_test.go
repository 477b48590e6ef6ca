package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// bench-events end to end at a tiny size (a warm-up of 4 batches of 10
// reminders, then 3 runs of 2, one bounce a bounce-mix batch): the table on
// stdout, the report at --out, and the target left unjudged off the
// issue's batch size.
func TestBenchEvents(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	out := filepath.Join(t.TempDir(), "events.json")
	code, stdout, stderr := cmdline{env: map[string]string{"DATABASE_URL": db.URL}}.run(t, "", "events",
		"--batch", "20", "--batches", "2", "--runs", "1", "--out", out)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "target: not judged")
	require.Contains(t, stdout, "verified: 100 reminders: 98 delivered, 2 undeliverable, 0 other")

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep EventsBenchReport
	require.NoError(t, json.Unmarshal(b, &rep))
	require.NotNil(t, rep.Events)
	require.Empty(t, rep.Events.Failures)
	require.Len(t, rep.Events.Summaries, 4)
	require.Equal(t, []int{1, 4}, rep.Events.Concurrency)
}

func TestBenchEventsFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--batch", "999"}, {"--batches", "0"}, {"--runs", "0"}, {"--concurrency", "0"}, {"--concurrency", "1,1"},
		{"--concurrency", "one"}, {"--bounce", "0"}, {"--bounce", "1.5"}, {"--pool", "0"},
	} {
		code, _, stderr := cmdline{env: map[string]string{}}.run(t, "", append([]string{"events"}, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
}

// make bench's last workload, events, survives the merge of the
// per-workload reports, its failures with it.
func TestBenchMergeKeepsEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	burst := filepath.Join(dir, "burst.json")
	events := filepath.Join(dir, "events.json")
	require.NoError(t, writeJSON(burst, BenchReport{Runs: []BenchRun{{Workloads: "burst"}}}))
	require.NoError(t, writeJSON(events, BenchReport{Runs: []BenchRun{{Workloads: "events"}},
		Events: &bench.EventsResult{Workload: "events", BatchSize: 1000, Concurrency: []int{1, 4}},
		Errors: []string{"events: provider_events rows: 1, want 2"}}))
	out := filepath.Join(dir, "bench.json")
	code, stdout, _ := cmdline{env: map[string]string{}}.run(t, "", "run", "--merge", burst+","+events, "--out", out)
	require.Equal(t, 1, code, "the events' failure fails the merge")
	require.Contains(t, stdout, "events: 0 sent reminders seeded")
	rep, err := readReport(out)
	require.NoError(t, err)
	require.NotNil(t, rep.Events)
	require.Equal(t, 1000, rep.Events.BatchSize)
	require.Equal(t, []string{"events: provider_events rows: 1, want 2"}, rep.Errors)
}
