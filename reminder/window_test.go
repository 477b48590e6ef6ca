package reminder_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
)

// windowedDoc is the valid update with send windows: the update's for
// every subscriber, the second subscriber's own, under the policy given.
func windowedDoc(t *testing.T, mutate func(u map[string]any)) reminder.Update {
	t.Helper()
	u := testenv.ValidUpdate(now)
	u["send_window"] = map[string]any{"days": "mon-fri", "hours": "08:00-18:00", "time_zone": "Asia/Singapore"}
	subs := u["subscribers"].([]any)
	subs[1].(map[string]any)["send_window"] = map[string]any{"days": "sat-sun", "hours": "10:00-12:00", "skip_dates": []string{"2026-12-05"}}
	subs[1].(map[string]any)["time_zone"] = "Europe/Berlin"
	subs[1].(map[string]any)["window_policy"] = "previous"
	if mutate != nil {
		mutate(u)
	}
	b, err := json.Marshal(u)
	require.NoError(t, err)
	parsed, err := reminder.ParseUpdate(bytes.NewReader(b))
	require.NoError(t, err)
	return parsed
}

// The subscriber's window replaces the update's, whose zone is the
// window's when the subscriber names none; the subscriber's zone wins
// over the window's; the tenant's holidays join every window's skipped
// dates; the reminder goes out at the opening its due time takes.
func TestASubscribersWindowReplacesTheUpdatesAndTheTenantsDefault(t *testing.T) {
	t.Parallel()
	christmas := sendwindow.Date{Year: 2026, Month: time.December, Day: 25}
	defaults := reminder.WindowDefaults{"": {
		Window:   &sendwindow.Window{Days: 1<<7 - 1, From: 0, To: 24 * 60},
		TimeZone: "UTC", Holidays: []sendwindow.Date{christmas},
	}}
	rems, err := windowedDoc(t, nil).Plan(reminder.PlanOptions{Now: now, Windows: defaults})
	require.NoError(t, err)

	require.NotNil(t, rems[0].Window)
	require.Equal(t, "Asia/Singapore", rems[0].Window.TimeZone, "the update's window, in its own zone")
	require.Equal(t, sendwindow.Weekdays, rems[0].Window.Window.Days)
	require.Equal(t, sendwindow.Next, rems[0].Window.Policy)
	require.Contains(t, rems[0].Window.Window.Skip, christmas, "the tenant's holidays")

	require.NotNil(t, rems[1].Window)
	require.Equal(t, "Europe/Berlin", rems[1].Window.TimeZone, "the subscriber's zone")
	require.Equal(t, sendwindow.Previous, rems[1].Window.Policy)
	require.Equal(t, []sendwindow.Date{{Year: 2026, Month: time.December, Day: 5}, christmas}, rems[1].Window.Window.Skip)
	// Due Monday 30 November 10:00 UTC; its window is weekends 10-12 in
	// Berlin (Saturday the 5th skipped): the last opening before is Sunday
	// 29 November, closing 12:00 CET.
	require.Equal(t, time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC), rems[1].GoesOutAt().UTC())
	require.Equal(t, now.Add(time.Hour), rems[1].DueAt, "the due time stays what was asked")
	require.Equal(t, reminder.DeliveryKey(rems[1].ID, rems[1].SubscriberID, rems[1].DueAt), rems[1].DeliveryKey())
}

// With no window in the update, the tenant's default applies; another
// tenant's does not.
func TestATenantsDefaultWindowAppliesToItsOwnReminders(t *testing.T) {
	t.Parallel()
	defaults := reminder.WindowDefaults{"acme": {Window: &sendwindow.Window{Days: sendwindow.Weekdays, From: 9 * 60, To: 17 * 60}, TimeZone: "Europe/Berlin"}}
	u := windowedDoc(t, func(u map[string]any) {
		delete(u, "send_window")
		delete(u["subscribers"].([]any)[1].(map[string]any), "send_window")
		delete(u["subscribers"].([]any)[1].(map[string]any), "window_policy")
	})
	rems, err := u.Plan(reminder.PlanOptions{Now: now, Windows: defaults})
	require.NoError(t, err)
	require.Nil(t, rems[0].Window, "the default tenant has no default window")
	require.True(t, rems[0].GoesOutAt().Equal(rems[0].DueAt))

	u.Tenant = "acme"
	rems, err = u.Plan(reminder.PlanOptions{Now: now, Windows: defaults})
	require.NoError(t, err)
	require.NotNil(t, rems[0].Window)
	require.Equal(t, "Europe/Berlin", rems[0].Window.TimeZone)
	require.NotNil(t, rems[1].Window)
	require.Equal(t, "Europe/Berlin", rems[1].Window.TimeZone, "the subscriber's own zone")
}

// A resubmission that names a different window is a change; one that
// names none, where the tenant's default gave one, is not: the default may
// have changed between a call and its retry.
func TestAResubmittedWindowIsComparedOnlyWhenNamed(t *testing.T) {
	t.Parallel()
	first := windowedDoc(t, nil)
	was, err := first.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	require.Empty(t, reminder.Changes(first, was, first, was))

	other := windowedDoc(t, func(u map[string]any) {
		u["send_window"].(map[string]any)["hours"] = "09:00-18:00"
	})
	nowRems, err := other.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	require.Equal(t, []string{"subscribers[0].send_window", "subscribers[2].send_window"}, reminder.Changes(first, was, other, nowRems))

	bare := windowedDoc(t, func(u map[string]any) {
		delete(u, "send_window")
		delete(u["subscribers"].([]any)[1].(map[string]any), "send_window")
		delete(u["subscribers"].([]any)[1].(map[string]any), "window_policy")
	})
	defaults := reminder.WindowDefaults{"": {Window: &sendwindow.Window{Days: 1, From: 0, To: 60}, TimeZone: "UTC"}}
	bareRems, err := bare.Plan(reminder.PlanOptions{Now: now, Windows: defaults})
	require.NoError(t, err)
	require.Empty(t, reminder.Changes(first, was, bare, bareRems))
}

// The resolved window survives the round trip through the mirror's JSON.
func TestASendWindowReadsBackAsWritten(t *testing.T) {
	t.Parallel()
	w := reminder.SendWindow{Window: sendwindow.Window{Days: sendwindow.Weekdays, From: 8 * 60, To: 24 * 60,
		Skip: []sendwindow.Date{{Year: 2026, Month: time.December, Day: 25}}}, TimeZone: "Asia/Singapore", Policy: sendwindow.Previous}
	b, err := json.Marshal(w)
	require.NoError(t, err)
	require.JSONEq(t, `{"days":"mon,tue,wed,thu,fri","hours":"08:00-24:00","time_zone":"Asia/Singapore","skip_dates":["2026-12-25"],"policy":"previous"}`, string(b))
	var back reminder.SendWindow
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, w, back)
}
