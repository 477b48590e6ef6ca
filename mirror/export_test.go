package mirror_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// Exporting a large schedule streams it: the heap stays flat while far
// more than it is written.
func TestExportStreamsInConstantMemory(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	const rows = 200_000
	_, err := db.Pool.Exec(ctx, `
INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('SHP-BIG', 'u-1', 'delivery_window', 's', 't')`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
SELECT 'SHP-BIG/u-1/s' || g, 'SHP-BIG', 'u-1', 's' || g, 'email', 's' || g || '@big.example',
       now() + g * interval '1 second', now() + g * interval '1 second', CASE WHEN g % 4 = 0 THEN 'sent' ELSE 'scheduled' END,
       md5(g::text) || md5((g + 1)::text), 'reminder/SHP-BIG/u-1/s' || g
  FROM generate_series(1, $1) g`, rows)
	require.NoError(t, err)
	store := mirror.New(db.Pool)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	out := &countingWriter{}
	enc := json.NewEncoder(out)
	count := 0
	err = store.Export(ctx, mirror.Filter{State: mirror.Pending}, func(r mirror.Row) error {
		count++
		if count%20_000 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		require.NotEqual(t, reminder.Sent, r.State)
		return enc.Encode(r)
	})
	require.NoError(t, err)
	require.Equal(t, rows*3/4, count, "pending: scheduled and awaiting approval only")
	require.Greater(t, out.n, int64(40<<20), "over 40 MB of JSON written")
	require.Less(t, peak-base, uint64(16<<20), "the heap grew by %d bytes", peak-base)
}
