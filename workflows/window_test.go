package workflows_test

import (
	"testing"
	"time"
	_ "time/tzdata" // the subscribers' zones, on a machine without zoneinfo too

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
	"github.com/shipnotify/shipnotify/workflows"
)

// singapore is the zone of the subscribers below: t0 is 17:00 there, a
// Monday.
var singapore = func() *time.Location {
	loc, err := time.LoadLocation("Asia/Singapore")
	if err != nil {
		panic(err)
	}
	return loc
}()

func officeHours(p sendwindow.Policy) *reminder.SendWindow {
	return &reminder.SendWindow{
		Window:   sendwindow.Window{Days: sendwindow.Weekdays, From: 8 * 60, To: 18 * 60},
		TimeZone: "Asia/Singapore", Policy: p,
	}
}

func windowed(due time.Time, w *reminder.SendWindow) workflows.ReminderInput {
	in := input(due)
	in.Window = w
	return in
}

func TestAReminderDueAtNightGoesOutWhenItsWindowOpens(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 12, 1, 3, 0, 0, 0, singapore) // Tuesday 03:00
	for _, tc := range []struct {
		policy sendwindow.Policy
		goes   time.Time
	}{
		{sendwindow.Next, time.Date(2026, 12, 1, 8, 0, 0, 0, singapore)},
		// The last moment it was open before: Monday's close.
		{sendwindow.Previous, time.Date(2026, 11, 30, 18, 0, 0, 0, singapore)},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.env.RegisterDelayedCallback(func() {
				require.Empty(t, h.notifies, "nothing goes out a minute before the window's opening")
			}, tc.goes.Sub(t0)-time.Minute)

			res := h.run(windowed(due, officeHours(tc.policy)))

			require.Len(t, h.notifies, 1)
			require.True(t, tc.goes.Equal(h.notifies[0].At), "sent at %s, want %s", h.notifies[0].At, tc.goes)
			require.True(t, due.Equal(h.notifies[0].In.DueAt), "the send names the reminder's own due time")
			require.True(t, tc.goes.Equal(h.notifies[0].In.GoesOutAt), "and when it was to go out, which its lateness counts from")
			require.Equal(t, reminder.DeliveryKey("SHP-1/window-1/ops", "ops", due), res.DeliveryKey,
				"the key is the due time's, whatever the window")
		})
	}
}

func TestADueTimeInsideTheWindowGoesOutAtIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	due := time.Date(2026, 12, 1, 10, 30, 0, 0, singapore)
	h.run(windowed(due, officeHours(sendwindow.Next)))
	require.Len(t, h.notifies, 1)
	require.True(t, due.Equal(h.notifies[0].At))
}

func TestARescheduleIntoTheWeekendGoesOutOnMonday(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	saturday := time.Date(2026, 12, 5, 10, 0, 0, 0, singapore)
	o := h.update(30*time.Minute, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: saturday, By: "ops"})
	var status workflows.Status
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryStatus)
		require.NoError(t, err)
		require.NoError(t, v.Get(&status))
	}, time.Hour)

	res := h.run(windowed(time.Date(2026, 12, 1, 10, 0, 0, 0, singapore), officeHours(sendwindow.Next)))

	require.NoError(t, o.err)
	monday := time.Date(2026, 12, 7, 8, 0, 0, 0, singapore)
	require.Len(t, h.notifies, 1)
	require.True(t, monday.Equal(h.notifies[0].At), "sent at %s, want Monday 08:00 in Singapore", h.notifies[0].At)
	require.Equal(t, reminder.DeliveryKey("SHP-1/window-1/ops", "ops", saturday), res.DeliveryKey)
	require.True(t, saturday.Equal(status.DueAt))
	require.True(t, monday.Equal(status.GoesOutAt), "the status query says when it goes out: %s", status.GoesOutAt)
}
