package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// pruneFixture is a schema holding old finished reminders with their
// trail (bench.SeedPrunable) and one young pending one.
func pruneFixture(t *testing.T, n int) (testenv.DB, cmdline) {
	t.Helper()
	db := testenv.Postgres(t)
	ctx := context.Background()
	_, err := bench.SeedPrunable(ctx, db.Pool, n)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `
INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('SHP-NEW', 'u', 'k', 's', 'b');
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, delivery_key, workflow_id)
VALUES ('SHP-NEW/u/s', 'SHP-NEW', 'u', 's', 'email', 'a@b.example', now() + interval '1 day', now() + interval '1 day', md5('x'), 'reminder/SHP-NEW/u/s')`)
	require.NoError(t, err)
	return db, cmdline{env: map[string]string{"DATABASE_URL": db.URL, "SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys}}
}

// tableCounts is the row count of each table prune touches.
func tableCounts(t *testing.T, db testenv.DB) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"updates", "reminders", "reminder_events", "deliveries"} {
		var n int
		require.NoError(t, db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
		out[table] = n
	}
	return out
}

// prune --export writes every reminder it removes, in export's format,
// and removes them with their trail in batches; the young reminder stays.
func TestPruneCommandExportsThenRemoves(t *testing.T) {
	t.Parallel()
	db, c := pruneFixture(t, 120)
	archive := filepath.Join(t.TempDir(), "pruned.jsonl")

	code, stdout, stderr := c.run(t, "", "prune", "--older-than", "90d", "--dry-run", "--updates")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `^would prune 120 reminders \(sent \d+.*\), \d+ events, \d+ deliveries and the updates they leave empty in `, stdout)
	require.Equal(t, 121, tableCounts(t, db)["reminders"], "a dry run removes nothing")

	code, stdout, stderr = c.run(t, "", "prune", "--older-than", "2160h", "--batch", "25", "--export", archive, "--updates")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `^pruned 120 reminders \(sent \d+.*\), \d+ events, \d+ deliveries and \d+ updates in .*reminders/s`, stdout)
	left := tableCounts(t, db)
	require.Equal(t, map[string]int{"updates": 1, "reminders": 1, "reminder_events": 0, "deliveries": 0}, left)

	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	info, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the archive is the operator's alone")
	ids := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// The archive's lines are the export's columns (mirror.ExportColumns).
		var r struct {
			ID    string         `json:"reminder_id"`
			State reminder.State `json:"state"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		require.True(t, strings.HasPrefix(r.ID, "PRUNE-"), r.ID)
		require.True(t, r.State.Terminal())
		ids[r.ID] = true
	}
	require.Len(t, ids, 120, "each pruned reminder archived once")

	code, stdout, stderr = c.run(t, "", "prune", "--older-than", "90d", "--json")
	require.Equal(t, 0, code, stderr)
	var again struct {
		Reminders int  `json:"reminders"`
		DryRun    bool `json:"dry_run"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &again))
	require.Zero(t, again.Reminders, "nothing left to prune")
}

// Every bad flag is refused with a one-line error naming it, exit status
// 2, and nothing written: no archive file, no row removed.
func TestPruneBadFlagsWriteNothing(t *testing.T) {
	t.Parallel()
	db, c := pruneFixture(t, 20)
	before := tableCounts(t, db)
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.jsonl")
	require.NoError(t, os.WriteFile(existing, []byte("kept\n"), 0o600))
	archive := filepath.Join(dir, "archive.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--older-than is required"},
		{[]string{"--older-than", "banana"}, "--older-than"},
		{[]string{"--older-than", "-90d"}, "--older-than"},
		{[]string{"--older-than", "0s"}, "--older-than"},
		{[]string{"--older-than", "3d"}, "--older-than: at least 4d"},
		{[]string{"--older-than", "72h", "--force"}, "--older-than: at least 4d"},
		{[]string{"--older-than", "10d"}, "--force"},
		{[]string{"--older-than", "90d", "--batch", "0"}, "--batch"},
		{[]string{"--older-than", "90d", "--batch", "100000"}, "--batch"},
		{[]string{"--older-than", "90d", "--pause", "-1s"}, "--pause"},
		{[]string{"--older-than", "90d", "--export", archive, "--format", "xml"}, "--format"},
		{[]string{"--older-than", "90d", "--export", archive, "--dry-run"}, "--export and --dry-run"},
		{[]string{"--older-than", "90d", "--export", existing}, "--export: " + existing + " exists"},
		{[]string{"--older-than", "90d", "--export", filepath.Join(dir, "no", "such", "dir.jsonl")}, "--export"},
		{[]string{"--older-than", "90d", "now"}, "unexpected argument"},
		{[]string{"--older-than", "90d", "--unknown"}, "-unknown"},
	} {
		code, stdout, stderr := c.run(t, "", append([]string{"prune"}, tc.args...)...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want, tc.args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
		require.Empty(t, stdout, tc.args)
		require.NoFileExists(t, archive, tc.args)
		require.Equal(t, before, tableCounts(t, db), tc.args)
	}
	b, err := os.ReadFile(existing)
	require.NoError(t, err)
	require.Equal(t, "kept\n", string(b), "an existing archive is never overwritten")
	require.NoDirExists(t, filepath.Join(dir, "no"))
}

// prune runs on SHIPNOTIFY_PRUNE_DATABASE_URL: the runtime role of
// DATABASE_URL may not delete, a member of shipnotify_pruner may.
func TestPruneRunsAsThePruner(t *testing.T) {
	t.Parallel()
	db, c := pruneFixture(t, 10)
	c.env["DATABASE_URL"] = testenv.RuntimeRole(t, db)
	before := tableCounts(t, db)

	code, _, stderr := c.run(t, "", "prune", "--older-than", "90d")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "permission denied")
	require.Equal(t, before, tableCounts(t, db))

	c.env["SHIPNOTIFY_PRUNE_DATABASE_URL"] = testenv.PrunerRole(t, db)
	code, stdout, stderr := c.run(t, "", "prune", "--older-than", "90d")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `^pruned 10 reminders \(.*\), \d+ events and \d+ deliveries in `, stdout)
	left := tableCounts(t, db)
	require.Equal(t, 1, left["reminders"])
	require.Equal(t, before["updates"], left["updates"], "update rows stay without --updates")
}

// Issue 35: prune's summary counts in words that agree with the number.
func TestPruneSummaryAgreesInNumber(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	one := mirror.PruneStats{Reminders: 1, ByState: map[reminder.State]int64{reminder.Sent: 1}, Events: 1, Deliveries: 1, Updates: 1,
		Skipped: 1, Elapsed: time.Second}
	require.NoError(t, printPruneSummary(&b, one, mirror.PruneOptions{Updates: true}, false))
	require.Regexp(t, `^pruned 1 reminder \(sent 1\), 1 event, 1 delivery and 1 update in 1s: `, b.String())
	require.Contains(t, b.String(), "\nkept 1 old finished reminder still in use ")
	b.Reset()
	many := mirror.PruneStats{Reminders: 12000, Events: 2, Deliveries: 0, Skipped: 3, Elapsed: time.Second}
	require.NoError(t, printPruneSummary(&b, many, mirror.PruneOptions{}, false))
	require.Regexp(t, `^pruned 12,000 reminders, 2 events and 0 deliveries in 1s: `, b.String())
	require.Contains(t, b.String(), "\nkept 3 old finished reminders still in use ")
}
