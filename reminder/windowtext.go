package reminder

import (
	"fmt"
	"time"

	"github.com/shipnotify/shipnotify/sendwindow"
)

// GoingOut says, for people, when a reminder due at due goes out at
// goesOut in its send window w: "due Tue 03:00, goes out Tue 08:00 in the
// subscriber's window (mon,tue,wed,thu,fri 08:00-18:00 Asia/Singapore)".
// The clock times are the window's zone's, the zone its hours are in (the
// subscriber's), so they read against the window's own hours; a day a
// week or more away names its date too. The CLI's show and the console's
// reminder page both say it, in the same words.
func (w SendWindow) GoingOut(due, goesOut time.Time) string {
	loc, err := LoadTimeZone(w.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	due, goesOut = due.In(loc), goesOut.In(loc)
	layout := "Mon 15:04"
	if d := goesOut.Sub(due); d >= 6*24*time.Hour || d <= -6*24*time.Hour {
		layout = "Mon 2 Jan 15:04"
	}
	// The window's hours without the policy: the sentence says it.
	plain := w
	plain.Policy = sendwindow.Next
	switch {
	case goesOut.Equal(due):
		return fmt.Sprintf("due %s, inside the subscriber's window (%s): it goes out when due", due.Format(layout), plain)
	case goesOut.Before(due):
		return fmt.Sprintf("due %s, goes out %s at the close of the subscriber's window before it (%s)",
			due.Format(layout), goesOut.Format(layout), plain)
	}
	return fmt.Sprintf("due %s, goes out %s in the subscriber's window (%s)", due.Format(layout), goesOut.Format(layout), plain)
}
