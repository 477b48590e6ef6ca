package reminder_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
)

// What show and the console say of a reminder in a send window: its due
// time and when it goes out by the window's zone's clock, and the window,
// for a reminder held to the next opening, sent at the close before, or
// due inside; days a week apart are named by their date.
func TestGoingOutSaysWhenInTheSubscribersZone(t *testing.T) {
	t.Parallel()
	w := reminder.SendWindow{Window: sendwindow.Window{Days: sendwindow.Weekdays, From: 8 * 60, To: 18 * 60}, TimeZone: "Asia/Singapore"}
	sgt := time.FixedZone("SGT", 8*3600)
	due := time.Date(2026, 12, 8, 3, 0, 0, 0, sgt) // a Tuesday
	for _, tc := range []struct {
		name    string
		policy  sendwindow.Policy
		due, at time.Time
		want    string
	}{
		{"next", sendwindow.Next, due, time.Date(2026, 12, 8, 8, 0, 0, 0, sgt),
			"due Tue 03:00, goes out Tue 08:00 in the subscriber's window (mon,tue,wed,thu,fri 08:00-18:00 Asia/Singapore)"},
		{"previous", sendwindow.Previous, due, time.Date(2026, 12, 7, 18, 0, 0, 0, sgt),
			"due Tue 03:00, goes out Mon 18:00 at the close of the subscriber's window before it (mon,tue,wed,thu,fri 08:00-18:00 Asia/Singapore)"},
		{"inside", sendwindow.Next, due.Add(7 * time.Hour), due.Add(7 * time.Hour),
			"due Tue 10:00, inside the subscriber's window (mon,tue,wed,thu,fri 08:00-18:00 Asia/Singapore): it goes out when due"},
		{"a week on", sendwindow.Next, due, time.Date(2026, 12, 15, 8, 0, 0, 0, sgt),
			"due Tue 8 Dec 03:00, goes out Tue 15 Dec 08:00 in the subscriber's window (mon,tue,wed,thu,fri 08:00-18:00 Asia/Singapore)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := w
			w.Policy = tc.policy
			// The instants in UTC: the sentence's clock is the window's zone's.
			require.Equal(t, tc.want, w.GoingOut(tc.due.UTC(), tc.at.UTC()))
		})
	}
}
