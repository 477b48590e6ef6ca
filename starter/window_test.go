package starter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// clockOf is t's local time of day as a window's clock, to the minute.
func clockOf(t time.Time) sendwindow.Clock {
	return sendwindow.Clock(t.Hour()*60 + t.Minute())
}

// A reminder comes due outside its subscriber's send window: the mirror
// says when it goes out and the workflow sends it then, not at its due
// time, under its own due time's key. Next: due now, the window opens at
// the next whole minute. Previous: due tomorrow, the window today closes
// at the next whole minute, the last moment before the due time it is
// open.
func TestAReminderOutsideItsWindowGoesOutAtTheOpeningItTakes(t *testing.T) {
	t.Parallel()
	for _, policy := range []sendwindow.Policy{sendwindow.Next, sendwindow.Previous} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			s := testenv.NewStack(t)
			ctx := context.Background()
			zone, loc := testenv.MiddayZone(time.Now())
			now := time.Now().In(loc)
			// At least 10 s ahead, so the window is shut when it is scheduled.
			edge := now.Add(10 * time.Second).Truncate(time.Minute).Add(time.Minute)
			w := sendwindow.Window{Days: 1 << edge.Weekday()}
			due := now.Add(time.Second)
			if policy == sendwindow.Next {
				w.From, w.To = clockOf(edge), clockOf(edge)+60
			} else {
				w.From, w.To = clockOf(edge)-60, clockOf(edge)
				due = now.Add(24 * time.Hour)
			}
			u := s.Update(t, due, reminder.Email)
			u.SendWindow = &reminder.WindowRequest{Window: w, TimeZone: zone}
			u.WindowPolicy = string(policy)

			results, err := s.Starter.Schedule(ctx, u)
			require.NoError(t, err)
			res := results[0]
			require.True(t, edge.Equal(res.GoesOutAt), "goes out at %s, want %s", res.GoesOutAt, edge)
			require.Equal(t, reminder.DeliveryKey(res.ReminderID, res.SubscriberID, reminder.NormalizeTime(due)), res.DeliveryKey,
				"the key is the due time's")
			r := row(t, s, res.ReminderID)
			require.True(t, edge.Equal(r.GoesOutAt), "the mirror says when it goes out")
			require.NotNil(t, r.Window)
			require.Equal(t, policy, r.Window.Policy)
			owed, err := s.Mirror.List(ctx, mirror.Filter{ShipmentID: u.ShipmentID, GoesOutFrom: edge, GoesOutTo: edge.Add(time.Second)})
			require.NoError(t, err)
			require.Len(t, owed, 1, "what is owed at the opening counts it")

			// The opening is up to 70 s away: wait for it, then as long as
			// any reminder (waitFor's minute).
			wait, cancel := context.WithDeadline(ctx, edge.Add(time.Minute))
			defer cancel()
			var done workflows.ReminderResult
			require.NoError(t, s.Temporal.GetWorkflow(wait, res.WorkflowID, "").Get(wait, &done))
			require.Equal(t, reminder.Sent, done.State)
			mails := mailsFor(s, res.ReminderID, reminder.PurposeReminder)
			require.Len(t, mails, 1)
			require.False(t, mails[0].Received.Before(edge), "sent at %s, before its window's opening %s", mails[0].Received, edge)
			testenv.RecordHistory(t, s.Temporal, res.WorkflowID, testenv.AtCurrentLevel("sent-in-send-window-"+string(policy)))
		})
	}
}

// A reschedule moves the due time; the time it goes out follows, in the
// same window.
func TestARescheduleMovesWhenAWindowedReminderGoesOut(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(48*time.Hour), reminder.Email)
	u.Subscribers[0].SendWindow = &reminder.WindowRequest{
		Window: sendwindow.Window{Days: sendwindow.Weekdays, From: 8 * 60, To: 18 * 60}}
	u.Subscribers[0].TimeZone = "Asia/Singapore"
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	res := results[0]
	terminateAtCleanup(t, s, res.WorkflowID)

	sgt, err := time.LoadLocation("Asia/Singapore")
	require.NoError(t, err)
	saturday := nextWeekday(time.Now().In(sgt).Add(72*time.Hour), time.Saturday)
	saturday = time.Date(saturday.Year(), saturday.Month(), saturday.Day(), 10, 0, 0, 0, sgt)
	monday := time.Date(saturday.Year(), saturday.Month(), saturday.Day()+2, 8, 0, 0, 0, sgt)

	out, err := s.Starter.RescheduleReminder(ctx, "", res.ReminderID, saturday, starter.Actor{By: "ops"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRescheduled, out.Status)
	require.NotNil(t, out.GoesOutAt)
	require.True(t, monday.Equal(*out.GoesOutAt), "goes out %s, want Monday 08:00 in Singapore", out.GoesOutAt)
	r := row(t, s, res.ReminderID)
	require.True(t, saturday.Equal(r.DueAt))
	require.True(t, monday.Equal(r.GoesOutAt), "the mirror's goes-out time follows the due time: %s", r.GoesOutAt)
	require.Eventually(t, func() bool {
		st, err := starter.LiveStatus(ctx, s.Temporal, r, nil)
		return err == nil && monday.Equal(st.GoesOutAt)
	}, 20*time.Second, 100*time.Millisecond, "the workflow sleeps until Monday's opening")
}

func nextWeekday(t time.Time, d time.Weekday) time.Time {
	for t.Weekday() != d {
		t = t.Add(24 * time.Hour)
	}
	return t
}

// A reminder due before a window that opens at 02:30 in Berlin, on the
// day the clocks go from 02:00 to 03:00: 02:30 never happens that day, so
// the window opens at the end of the gap, 03:00 CEST. The mirror, the
// schedule's answer and the sleeping workflow (its own arithmetic, in a
// side effect on the worker) all say so.
func TestOnASpringForwardDayAWindowInTheGapOpensAtItsEnd(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	due := time.Date(2027, 3, 28, 0, 30, 0, 0, time.UTC) // 01:30 CET
	u := s.Update(t, due, reminder.Email)
	u.SendWindow = &reminder.WindowRequest{Window: sendwindow.Window{Days: 1<<7 - 1, From: 2*60 + 30, To: 18 * 60}, TimeZone: "Europe/Berlin"}
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	res := results[0]
	terminateAtCleanup(t, s, res.WorkflowID)

	opens := time.Date(2027, 3, 28, 1, 0, 0, 0, time.UTC) // 03:00 CEST
	require.True(t, opens.Equal(res.GoesOutAt), "goes out at %s, want 03:00 CEST", res.GoesOutAt)
	r := row(t, s, res.ReminderID)
	require.True(t, opens.Equal(r.GoesOutAt))
	require.Eventually(t, func() bool {
		st, err := starter.LiveStatus(ctx, s.Temporal, r, nil)
		return err == nil && opens.Equal(st.GoesOutAt)
	}, 20*time.Second, 100*time.Millisecond, "the workflow sleeps until 03:00 CEST")
}

// A tenant's holiday, from its default, closes its window all day: a
// reminder due that morning goes out the next working morning.
func TestATenantsHolidayClosesItsWindow(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	s.Starter.Windows = reminder.WindowDefaults{"": {
		Window:   &sendwindow.Window{Days: sendwindow.Weekdays, From: 8 * 60, To: 18 * 60},
		TimeZone: "Europe/Berlin",
		Holidays: []sendwindow.Date{{Year: 2027, Month: time.December, Day: 24}},
	}}
	u := s.Update(t, time.Date(2027, 12, 24, 9, 0, 0, 0, time.UTC), reminder.Email) // Friday, Christmas Eve
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	res := results[0]
	terminateAtCleanup(t, s, res.WorkflowID)
	monday := time.Date(2027, 12, 27, 7, 0, 0, 0, time.UTC) // 08:00 CET
	require.True(t, monday.Equal(res.GoesOutAt), "goes out at %s, want Monday 08:00 CET", res.GoesOutAt)
	r := row(t, s, res.ReminderID)
	require.NotNil(t, r.Window)
	require.Contains(t, r.Window.Window.Skip, sendwindow.Date{Year: 2027, Month: time.December, Day: 24}, "the holiday is kept with the row")
}
