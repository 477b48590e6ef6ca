package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
)

// A reminder due at 03:00 in Singapore, whose subscriber takes reminders
// from 08:00, goes out at 08:00, and the console says so: its page says
// "due Tue 03:00, goes out Tue 08:00 in the subscriber's window" with the
// window, the list shows when it goes out beside its due time, and the
// overview counts it on the day it goes out (08:00 in Singapore is
// midnight UTC, the next day of the reader's). One due then without a
// window shows none of it.
func TestTheConsoleShowsWhenTheWindowLetsItGo(t *testing.T) {
	t.Parallel()
	f, tenant, erin := tenantFixture(t, 100)
	sgt := time.FixedZone("SGT", 8*3600)
	local := time.Now().Add(2 * time.Hour).In(sgt)
	due := time.Date(local.Year(), local.Month(), local.Day(), 3, 0, 0, 0, sgt)
	if due.Before(local) {
		due = due.AddDate(0, 0, 1)
	}
	opens := due.Add(5 * time.Hour)
	u := f.s.Update(t, due, reminder.Email, reminder.Email)
	u.Tenant = tenant
	u.Subscribers[0].TimeZone = "Asia/Singapore"
	every, err := sendwindow.ParseDays("mon-sun")
	require.NoError(t, err)
	u.Subscribers[0].SendWindow = &reminder.WindowRequest{Window: sendwindow.Window{Days: every, From: 8 * 60, To: 18 * 60}}
	results, err := f.s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range results {
			_ = f.s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})
	night, day := results[0], results[1]
	require.True(t, night.GoesOutAt.Equal(opens), night.GoesOutAt)

	page := erin.get("/console/reminder?id=" + url.QueryEscape(night.ReminderID))
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	dayName := due.Format("Mon")
	require.Contains(t, page.Text(), "Due "+shown(due)+" Goes out "+shown(opens)+" due "+dayName+" 03:00, goes out "+dayName+
		" 08:00 in the subscriber's window (mon,tue,wed,thu,fri,sat,sun 08:00-18:00 Asia/Singapore)")
	require.NotContains(t, page.Text(), "overdue")
	page = erin.get("/console/reminder?id=" + url.QueryEscape(day.ReminderID))
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.NotContains(t, page.Text(), "Goes out")

	page = erin.get("/console/?state=pending")
	due1 := map[string]string{}
	for _, row := range page.rows("reminders") {
		due1[strings.Fields(row[1])[4]] = row[0]
	}
	require.Equal(t, shown(due)+" goes out "+shown(opens), due1[night.SubscriberID])
	require.Equal(t, shown(due), due1[day.SubscriberID])

	page = erin.get("/console/overview")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "When the 2 yet to be sent go out")
	require.Contains(t, page.Body, `data-day="`+due.UTC().Format(time.DateOnly)+`" data-n="1"`, "the one without a window, on its due day")
	require.Contains(t, page.Body, `data-day="`+opens.UTC().Format(time.DateOnly)+`" data-n="1"`, "the night desk's, on the day it goes out")
}
