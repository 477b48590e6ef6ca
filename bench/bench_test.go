package bench

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

// The API path sends each update as the document the parser reads back to
// the very update the starter path schedules.
func TestUpdateDocumentParsesBackToTheUpdate(t *testing.T) {
	t.Parallel()
	r := &Runner{Fanout: 3}
	due := time.Now().Add(time.Hour)
	b := &batch{shipment: "BENCH-x-1", due: []time.Time{
		reminder.NormalizeTime(due), reminder.NormalizeTime(due.Add(1500 * time.Nanosecond)), reminder.NormalizeTime(due),
		reminder.NormalizeTime(due.Add(time.Minute)),
	}}
	updates := r.updates(b)
	require.Len(t, updates, 2)
	for _, u := range updates {
		doc, err := json.Marshal(updateDocument(u))
		require.NoError(t, err)
		got, err := reminder.ParseUpdate(bytes.NewReader(doc))
		require.NoError(t, err)
		require.Equal(t, u, got)
	}
}

// The API/starter ratio compares median schedule rates of one workload.
func TestAPIRatios(t *testing.T) {
	t.Parallel()
	res := []Result{
		{Workload: "burst", Kind: Full, ScheduleRate: 100}, {Workload: "burst", Kind: API, ScheduleRate: 90},
		{Workload: "burst", Kind: Bare, ScheduleRate: 300}, {Workload: "burst", Kind: Full, ScheduleRate: 200},
		{Workload: "burst", Kind: API, ScheduleRate: 50}, {Workload: "burst", Kind: Full, ScheduleRate: 120},
		{Workload: "burst", Kind: API, ScheduleRate: 110}, {Workload: "catchup", Kind: Full, ScheduleRate: 10},
	}
	require.Equal(t, []APIRatio{{Workload: "burst", APIRate: 90, StarterRate: 120, Rate: 0.75}}, APIRatios(res))
}
