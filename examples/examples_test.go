package examples

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

func TestExamplesAreValidUpdates(t *testing.T) {
	files, err := filepath.Glob("*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	// The examples' dates are fixed; check them against the day they were written.
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, f := range files {
		r, err := os.Open(f)
		require.NoError(t, err)
		u, err := reminder.ParseUpdate(r)
		r.Close()
		require.NoError(t, err, f)
		_, err = u.Plan(reminder.PlanOptions{Now: now})
		require.NoError(t, err, f)
	}
}

// The send window example goes out as docs/usage.md says: the night
// desk's reminder, due 03:00 in Singapore, at 08:00 there; the Berlin
// office's, due 21:00 on Monday under window_policy previous, at its
// window's close at 17:00 that day; the webhook's, due 20:00 on Thursday
// in the update's window (its zone the window's), on Monday, as Friday
// the 15th is skipped. The due times, and so the delivery keys, stay
// their own.
func TestTheSendWindowExampleGoesOutAsTheDocsSay(t *testing.T) {
	r, err := os.Open("update-send-window.json")
	require.NoError(t, err)
	defer r.Close()
	u, err := reminder.ParseUpdate(r)
	require.NoError(t, err)
	rems, err := u.Plan(reminder.PlanOptions{Now: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	want := map[string][2]string{
		"sg-night-desk": {"2027-01-13T00:00:00Z",
			"due Wed 03:00, goes out Wed 08:00 in the subscriber's window (mon,tue,wed,thu,fri 08:00-18:00 Asia/Singapore)"},
		"berlin-ops": {"2027-01-11T16:00:00Z",
			"due Mon 21:00, goes out Mon 17:00 at the close of the subscriber's window before it (mon,tue,wed,thu,fri 09:00-17:00 Europe/Berlin)"},
		"consignee-hook": {"2027-01-18T00:00:00Z",
			"due Thu 20:00, goes out Mon 08:00 in the subscriber's window (mon,tue,wed,thu,fri 08:00-18:00 Asia/Singapore)"},
	}
	require.Len(t, rems, len(want))
	for _, rem := range rems {
		w, ok := want[rem.SubscriberID]
		require.True(t, ok, rem.SubscriberID)
		require.NotNil(t, rem.Window, rem.SubscriberID)
		require.Equal(t, w[0], rem.GoesOutAt().UTC().Format(time.RFC3339), rem.SubscriberID)
		require.Equal(t, w[1], rem.Window.GoingOut(rem.DueAt, rem.GoesOutAt()), rem.SubscriberID)
		require.Equal(t, reminder.DeliveryKey(rem.ID, rem.SubscriberID, rem.DueAt), rem.DeliveryKey(), "the key is the due time's")
	}
}

// The digest example goes out as docs/usage.md says: the ops desk's
// reminder, due 08:10, at the update's 30-minute boundary, 08:30, with
// whatever else reaches its inbox in that interval; the webhook, whose
// "off" replaces the update's digest, when due.
func TestTheDigestExampleGoesOutAsTheDocsSay(t *testing.T) {
	r, err := os.Open("update-digest.json")
	require.NoError(t, err)
	defer r.Close()
	u, err := reminder.ParseUpdate(r)
	require.NoError(t, err)
	rems, err := u.Plan(reminder.PlanOptions{Now: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	want := map[string][2]string{"ops-desk": {"2027-01-17T08:30:00Z", "30m0s"}, "consignee-hook": {"2027-01-17T08:10:00Z", "0s"}}
	require.Len(t, rems, len(want))
	for _, rem := range rems {
		require.Equal(t, want[rem.SubscriberID], [2]string{rem.GoesOutAt().UTC().Format(time.RFC3339), rem.Digest.String()}, rem.SubscriberID)
	}
}
