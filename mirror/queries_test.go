package mirror_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// A reminder's provider outcome and delivered time reach every reader of
// the mirror's rows, and its exports; a reminder the provider has said
// nothing of has none (not a zero time).
func TestRowsCarryTheProviderOutcome(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Hour)
	insert(t, store, update("SHP-1", now.Add(time.Hour), now.Add(2*time.Hour)), now)
	reported, quiet := reminder.ID("", "SHP-1", "u-1", "sub-a"), reminder.ID("", "SHP-1", "u-1", "sub-b")
	outcomeAt, deliveredAt := now.Add(61*time.Minute), now.Add(62*time.Minute)
	_, err := db.Pool.Exec(ctx, `
UPDATE reminders SET state = 'undeliverable', sent_at = $2, provider_outcome = 'bounce', provider_outcome_at = $3,
       delivered_at = $4, undeliverable_at = $3
 WHERE id = $1`, reported, now.Add(time.Hour), outcomeAt, deliveredAt)
	require.NoError(t, err)

	check := func(reader string, rows ...mirror.Row) {
		t.Helper()
		require.NotEmpty(t, rows, reader)
		for _, r := range rows {
			switch r.ID {
			case reported:
				require.Equal(t, reminder.OutcomeBounce, r.ProviderOutcome, reader)
				require.NotNil(t, r.ProviderOutcomeAt, reader)
				require.True(t, outcomeAt.Equal(*r.ProviderOutcomeAt), "%s: %v", reader, r.ProviderOutcomeAt)
				require.NotNil(t, r.DeliveredAt, reader)
				require.True(t, deliveredAt.Equal(*r.DeliveredAt), "%s: %v", reader, r.DeliveredAt)
			case quiet:
				require.Empty(t, r.ProviderOutcome, reader)
				require.Nil(t, r.ProviderOutcomeAt, reader)
				require.Nil(t, r.DeliveredAt, reader)
			default:
				t.Fatalf("%s: unexpected row %s", reader, r.ID)
			}
		}
	}
	got, err := store.Get(ctx, reported)
	require.NoError(t, err)
	check("Get", got)
	listed, err := store.List(ctx, mirror.Filter{DueFrom: now, DueTo: now.Add(3 * time.Hour)})
	require.NoError(t, err)
	require.Len(t, listed, 2)
	check("List", listed...)
	var exported []mirror.Row
	require.NoError(t, store.Export(ctx, mirror.Filter{}, func(r mirror.Row) error { exported = append(exported, r); return nil }))
	check("Export", exported...)
	byWorkflow, err := store.ByWorkflowIDs(ctx, []string{workflows.ReminderWorkflowID(reminder.ID("", "SHP-1", "u-1", "sub-a"))})
	require.NoError(t, err)
	require.Len(t, byWorkflow, 1)
	for _, r := range byWorkflow {
		check("ByWorkflowIDs", r)
	}
	pending, err := store.PendingBefore(ctx, time.Now().Add(time.Minute), "", 10)
	require.NoError(t, err)
	check("PendingBefore", pending...)

	// The exports: JSON lines carry the outcome, null when there is none;
	// CSV has its columns after the first twelve, empty when there is none.
	var out bytes.Buffer
	w, err := mirror.NewRowWriter(&out, mirror.FormatJSONL)
	require.NoError(t, err)
	for _, r := range listed {
		require.NoError(t, w.Write(r))
	}
	require.NoError(t, w.Flush())
	var objects []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var o map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &o))
		objects = append(objects, o)
	}
	require.Len(t, objects, 2)
	require.Equal(t, "bounce", objects[0]["provider_outcome"])
	for key, want := range map[string]time.Time{"provider_outcome_at": outcomeAt, "delivered_at": deliveredAt} {
		at, err := time.Parse(time.RFC3339Nano, objects[0][key].(string))
		require.NoError(t, err, key)
		require.True(t, want.Equal(at), "%s: %v", key, at)
	}
	require.Equal(t, "", objects[1]["provider_outcome"])
	for _, key := range []string{"provider_outcome_at", "delivered_at"} {
		require.Contains(t, objects[1], key)
		require.Nil(t, objects[1][key], key)
	}

	out.Reset()
	w, err = mirror.NewRowWriter(&out, mirror.FormatCSV)
	require.NoError(t, err)
	for _, r := range listed {
		require.NoError(t, w.Write(r))
	}
	require.NoError(t, w.Flush())
	records, err := csv.NewReader(&out).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 3)
	require.Equal(t, []string{"provider_outcome", "provider_outcome_at", "delivered_at", "tenant"}, records[0][12:16])
	require.Equal(t, []string{"bounce", outcomeAt.Format(time.RFC3339Nano), deliveredAt.Format(time.RFC3339Nano), ""}, records[1][12:16])
	require.Equal(t, []string{"", "", "", ""}, records[2][12:16])
}

// Issue 35: the trail states every time one way, RFC 3339 in UTC with Z,
// whether Go wrote it or PostgreSQL's jsonb did (which writes +00:00).
func TestEventTimesAreUTCWithZ(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	due := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	insert(t, store, update("SHP-1", due), time.Now())
	id := reminder.ID("", "SHP-1", "u-1", "sub-a")
	// A detail written by Go in another zone, nested.
	_, err := db.Pool.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'note', $2)`,
		id, map[string]any{"when": []any{"2027-01-12T09:00:00+01:00"}})
	require.NoError(t, err)
	events, err := store.Events(ctx, id)
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, "scheduled", events[0].Type)
	require.Equal(t, due.Format(time.RFC3339Nano), events[0].Detail["due_at"])
	require.Equal(t, []any{"2027-01-12T08:00:00Z"}, events[1].Detail["when"])
	for _, ev := range events {
		require.Equal(t, time.UTC, ev.At.Location())
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		require.NotContains(t, string(b), "+00:00")
	}
}
