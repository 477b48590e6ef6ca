package mirror_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// Issue 35: CSV and JSON lines exports carry the same columns in the same
// order, whatever a row holds: a JSON line has every key (null where CSV's
// cell is empty), and the values agree.
func TestExportFormatsCarryTheSameColumns(t *testing.T) {
	t.Parallel()
	due := time.Date(2027, 1, 12, 9, 0, 0, 0, time.FixedZone("CET", 3600))
	sent := due.Add(time.Second)
	rows := []mirror.Row{
		{ID: "SHP-1/u-1/a", ShipmentID: "SHP-1", UpdateID: "u-1", SubscriberID: "a", Channel: reminder.Email,
			DueAt: due, RequestedDueAt: due, State: reminder.Sent, DeliveryKey: strings.Repeat("a", 64), WorkflowID: "reminder/SHP-1/u-1/a",
			WorkflowStartedAt: &due, SentAt: &sent, CreatedAt: due, UpdatedAt: sent,
			ProviderOutcome: reminder.OutcomeDelivered, ProviderOutcomeAt: &sent, DeliveredAt: &sent, Tenant: "acme"},
		// The default tenant, nothing reported, not started: empty cells.
		{ID: "SHP-1/u-1/b", ShipmentID: "SHP-1", UpdateID: "u-1", SubscriberID: "b", Channel: reminder.Webhook,
			DueAt: due, RequestedDueAt: due, State: reminder.Scheduled, DeliveryKey: strings.Repeat("b", 64), WorkflowID: "reminder/SHP-1/u-1/b",
			CreatedAt: due, UpdatedAt: due},
	}
	write := func(format string) string {
		var out bytes.Buffer
		w, err := mirror.NewRowWriter(&out, format)
		require.NoError(t, err)
		for _, r := range rows {
			require.NoError(t, w.Write(r))
		}
		require.NoError(t, w.Flush())
		return out.String()
	}
	records, err := csv.NewReader(strings.NewReader(write(mirror.FormatCSV))).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 1+len(rows))
	header := records[0]
	require.Equal(t, mirror.ExportColumns(), header)
	require.Contains(t, header, "requested_due_at")

	lines := strings.Split(strings.TrimSpace(write(mirror.FormatJSONL)), "\n")
	require.Len(t, lines, len(rows))
	for i, l := range lines {
		// The keys, in order.
		dec := json.NewDecoder(strings.NewReader(l))
		tok, err := dec.Token()
		require.NoError(t, err)
		require.Equal(t, json.Delim('{'), tok)
		var keys []string
		values := map[string]any{}
		for dec.More() {
			k, err := dec.Token()
			require.NoError(t, err)
			var v any
			require.NoError(t, dec.Decode(&v))
			keys = append(keys, k.(string))
			values[k.(string)] = v
		}
		require.Equal(t, header, keys, "line %d", i+1)
		for j, name := range header {
			cell := records[i+1][j]
			if cell == "" && name != "tenant" && name != "provider_outcome" && name != "send_window" {
				require.Nil(t, values[name], "line %d: %s", i+1, name)
				continue
			}
			require.Equal(t, cell, values[name], "line %d: %s", i+1, name)
		}
	}
	// Times are UTC, RFC 3339 with Z, in both.
	require.Equal(t, "2027-01-12T08:00:00Z", records[1][5])
}
