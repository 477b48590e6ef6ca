package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
)

// singapore is the zone the send window tests' recipients work in.
var singapore = mustZone("Asia/Singapore")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// nextTuesday is midnight in Singapore of the first Tuesday at least two
// days from now, so the Monday night before it is still ahead.
func nextTuesday() time.Time {
	d := time.Now().In(singapore).AddDate(0, 0, 2)
	for d.Weekday() != time.Tuesday {
		d = d.AddDate(0, 0, 1)
	}
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, singapore)
}

// officeHours is a send window in a document: Monday to Friday, 08:00 to
// 18:00 in Singapore.
func officeHours() map[string]any {
	return map[string]any{"days": "mon-fri", "hours": "08:00-18:00", "time_zone": "Asia/Singapore"}
}

// windowSubscriber is an email subscriber due at due, with more members.
func windowSubscriber(id string, due time.Time, more map[string]any) map[string]any {
	s := map[string]any{"id": id, "channel": "email", "email": id + "@customer.example", "due_at": due.Format(time.RFC3339)}
	for k, v := range more {
		s[k] = v
	}
	return s
}

// windowUpdate is an update of the given subscribers.
func windowUpdate(shipment string, subs ...any) map[string]any {
	return map[string]any{
		"shipment_id": shipment, "update_id": "cutoff", "kind": "cutoff_reminder",
		"message": map[string]any{"subject": "Cut-off tomorrow", "text": "Documents are due by 12:00."}, "subscribers": subs,
	}
}

// A reminder due at night goes out when its window opens: the schedule
// answers goes_out_at at the opening (the next one, or with window_policy
// previous the close of the one before), the due time and so the delivery
// key stay the reminder's own, and GET shows due_at, goes_out_at and the
// window as resolved, the zone the update's or the subscriber's. The
// running workflow says the same, and a reschedule answers where the new
// due time goes out.
func TestTheAPISaysWhenAWindowedReminderGoesOut(t *testing.T) {
	t.Parallel()
	e := setup(t)
	shipment := testenv.ID(t, "SHP")
	tue := nextTuesday()
	due := tue.Add(3 * time.Hour) // Tuesday 03:00 in Singapore
	u := windowUpdate(shipment,
		windowSubscriber("night-desk", due, nil),
		windowSubscriber("cutoff-desk", due, map[string]any{"time_zone": "Asia/Singapore", "window_policy": "previous",
			"send_window": map[string]any{"days": "mon-fri", "hours": "09:00-17:00", "skip_dates": []string{"2030-12-25"}}}),
	)
	u["send_window"] = officeHours()

	resp := e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	var res api.Results
	resp.decode(t, &res)
	require.Len(t, res.Results, 2)
	opening := tue.Add(8 * time.Hour)                    // Tuesday 08:00
	closing := tue.AddDate(0, 0, -1).Add(17 * time.Hour) // Monday 17:00
	for i, want := range []time.Time{opening, closing} {
		r := res.Results[i]
		require.True(t, r.DueAt.Equal(due), "%s is due when asked: %s", r.SubscriberID, r.DueAt)
		require.True(t, r.GoesOutAt.Equal(want), "%s goes out at %s, not %s", r.SubscriberID, want, r.GoesOutAt)
		require.Equal(t, reminder.DeliveryKey(r.ReminderID, r.SubscriberID, due), r.DeliveryKey,
			"the delivery key is the due time's, not the window's")
	}

	path := "/v1/shipments/" + shipment + "/updates/cutoff/reminders/"
	var view api.ReminderView
	resp = e.do(t, "GET", path+"night-desk", "reader", nil)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	resp.decode(t, &view)
	require.True(t, view.Reminder.DueAt.Equal(due))
	require.True(t, view.Reminder.GoesOutAt.Equal(opening), "%s", view.Reminder.GoesOutAt)
	require.Equal(t, &api.SendWindow{Days: "mon,tue,wed,thu,fri", Hours: "08:00-18:00", TimeZone: "Asia/Singapore", Policy: "next"},
		view.Reminder.SendWindow, "the update's window, in its own zone")

	resp = e.do(t, "GET", path+"cutoff-desk", "reader", nil)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	resp.decode(t, &view)
	require.True(t, view.Reminder.GoesOutAt.Equal(closing), "%s", view.Reminder.GoesOutAt)
	require.Equal(t, &api.SendWindow{Days: "mon,tue,wed,thu,fri", Hours: "09:00-17:00", TimeZone: "Asia/Singapore",
		SkipDates: []string{"2030-12-25"}, Policy: "previous"}, view.Reminder.SendWindow,
		"the subscriber's own window replaces the update's, in the subscriber's zone")

	// The running workflow has worked out the same opening.
	require.Eventually(t, func() bool {
		resp := e.do(t, "GET", path+"night-desk", "reader", nil)
		var v api.ReminderView
		if resp.status != http.StatusOK || json.Unmarshal(resp.body, &v) != nil {
			return false
		}
		return v.Live != nil && v.Live.GoesOutAt != nil && v.Live.GoesOutAt.Equal(opening)
	}, 30*time.Second, 200*time.Millisecond, "the workflow's status never said when it goes out")

	// Moved to Wednesday 02:00, it goes out Wednesday at 08:00.
	moved := due.AddDate(0, 0, 1).Add(-time.Hour)
	outs := outcomes(t, e.do(t, "POST", path+"night-desk/reschedule", "operator", map[string]any{"due_at": moved.Format(time.RFC3339)}))
	require.Len(t, outs, 1)
	require.Equal(t, "rescheduled", outs[0].Status, "%+v", outs[0])
	require.NotNil(t, outs[0].GoesOutAt)
	require.True(t, outs[0].GoesOutAt.Equal(opening.AddDate(0, 0, 1)), "%s", outs[0].GoesOutAt)
	resp = e.do(t, "GET", path+"night-desk", "reader", nil)
	resp.decode(t, &view)
	require.True(t, view.Reminder.DueAt.Equal(moved))
	require.True(t, view.Reminder.GoesOutAt.Equal(opening.AddDate(0, 0, 1)), "%s", view.Reminder.GoesOutAt)
}

// "What do we owe next Tuesday?" counts by when reminders go out, not by
// when they are due: goes_out_from and goes_out_to find the reminder due
// on Monday night that goes out on Tuesday morning and leave out the one
// due on Tuesday evening that goes out on Wednesday, which due_from and
// due_to would list; a reminder without a window goes out when it is due.
// The bounds are half-open, page with the cursor like any listing, and a
// bad one is a 400 naming it.
func TestListingByGoesOutFindsWhatIsOwedThatDay(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	shipment := testenv.ID(t, "SHP")
	tue := nextTuesday()
	window := map[string]any{"send_window": officeHours()}
	u := windowUpdate(shipment,
		windowSubscriber("monday-night", tue.Add(-time.Hour), window),      // goes out Tuesday 08:00
		windowSubscriber("tuesday-evening", tue.Add(20*time.Hour), window), // goes out Wednesday 08:00
		windowSubscriber("tuesday-morning", tue.Add(10*time.Hour), nil),    // no window: Tuesday 10:00
		windowSubscriber("tuesday-eight", tue.Add(8*time.Hour), window),    // inside: Tuesday 08:00
	)
	resp := e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	wed := tue.AddDate(0, 0, 1)
	day := func(from, to string) url.Values {
		return url.Values{"shipment": {shipment}, "limit": {"1"}, from: {tue.Format(time.RFC3339)}, to: {wed.Format(time.RFC3339)}}
	}

	owed, pages := e.walk(t, day("goes_out_from", "goes_out_to"), nil)
	require.Equal(t, []string{"monday-night", "tuesday-eight", "tuesday-morning"}, subscriberIDs(owed), "in (due_at, id) order")
	require.Equal(t, 3, pages)
	for _, r := range owed {
		require.False(t, r.GoesOutAt.Before(tue), r.SubscriberID)
		require.True(t, r.GoesOutAt.Before(wed), r.SubscriberID)
	}
	require.True(t, owed[0].DueAt.Before(tue), "found by when it goes out, though due the day before")
	require.True(t, owed[2].GoesOutAt.Equal(owed[2].DueAt), "no window: it goes out when it is due")
	require.Nil(t, owed[2].SendWindow)

	due, _ := e.walk(t, day("due_from", "due_to"), nil)
	require.Equal(t, []string{"tuesday-eight", "tuesday-morning", "tuesday-evening"}, subscriberIDs(due),
		"by due time the day holds another set")

	// Half-open: from Tuesday 08:00 to 10:00 holds the two at 08:00, not
	// the one at 10:00.
	q := url.Values{"shipment": {shipment}, "limit": {"10"},
		"goes_out_from": {tue.Add(8 * time.Hour).Format(time.RFC3339)}, "goes_out_to": {tue.Add(10 * time.Hour).UTC().Format(time.RFC3339Nano)}}
	got, _ := e.walk(t, q, nil)
	require.Equal(t, []string{"monday-night", "tuesday-eight"}, subscriberIDs(got))

	for _, tc := range []struct{ query, field string }{
		{"goes_out_from=next+tuesday", "goes_out_from"},
		{"goes_out_to=2027-13-01", "goes_out_to"},
		{"goes_out_from=2027-01-02&goes_out_to=2027-01-01", "goes_out_to"},
		{"goes_out_from=2027-01-02T08:00:00Z&goes_out_to=2027-01-02T08:00:00Z", "goes_out_to"},
	} {
		resp := e.do(t, "GET", "/v1/reminders?"+tc.query, "reader", nil)
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", tc.query, resp.body)
		p := resp.problem(t)
		require.Equal(t, api.TypeInvalidParameter, p.Type, tc.query)
		require.Equal(t, tc.field, p.Field, tc.query)
	}
}

// A bad send window or window policy is refused, 422 naming the field at
// its path (the update's or the subscriber's), and writes nothing to
// PostgreSQL or Temporal.
func TestBadSendWindowsAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	window := func(change map[string]any) map[string]any {
		w := officeHours()
		for k, v := range change {
			if v == nil {
				delete(w, k)
				continue
			}
			w[k] = v
		}
		return w
	}
	for _, tc := range []struct {
		name   string
		field  string
		update map[string]any // set on the update
		sub    map[string]any // set on its first subscriber
	}{
		{"an unknown subscriber zone", "subscribers[0].time_zone",
			nil, map[string]any{"time_zone": "Mars/Olympus_Mons", "send_window": officeHours()}},
		{"an unknown window zone", "subscribers[0].send_window.time_zone",
			nil, map[string]any{"send_window": window(map[string]any{"time_zone": "Mars/Olympus_Mons"})}},
		{"no zone at all", "subscribers[0].time_zone",
			map[string]any{"send_window": window(map[string]any{"time_zone": nil})}, nil},
		{"empty days", "send_window.days", map[string]any{"send_window": window(map[string]any{"days": ""})}, nil},
		{"a misspelt day", "send_window.days", map[string]any{"send_window": window(map[string]any{"days": "mon-fry"})}, nil},
		{"hours out of range", "send_window.hours", map[string]any{"send_window": window(map[string]any{"hours": "08:00-25:00"})}, nil},
		{"hours that are no range", "send_window.hours", map[string]any{"send_window": window(map[string]any{"hours": "8-18"})}, nil},
		{"a window that never opens", "send_window.hours", map[string]any{"send_window": window(map[string]any{"hours": "10:00-10:00"})}, nil},
		{"a window that closes before it opens", "subscribers[0].send_window.hours",
			nil, map[string]any{"send_window": window(map[string]any{"hours": "18:00-08:00"})}},
		{"a bad skip date", "send_window.skip_dates[1]",
			map[string]any{"send_window": window(map[string]any{"skip_dates": []string{"2027-01-01", "01/02/2027"}})}, nil},
		{"an unknown policy", "window_policy", map[string]any{"send_window": officeHours(), "window_policy": "later"}, nil},
		{"a subscriber's unknown policy", "subscribers[0].window_policy",
			map[string]any{"send_window": officeHours()}, map[string]any{"window_policy": "soonest"}},
		{"a policy without a window", "window_policy", map[string]any{"window_policy": "previous"}, nil},
		{"a policy inside the window", "send_window.policy",
			map[string]any{"send_window": window(map[string]any{"policy": "previous"})}, nil},
		{"a misspelt key", "subscribers[0].send_window.hour",
			nil, map[string]any{"send_window": window(map[string]any{"hours": nil, "hour": "08:00-18:00"})}},
		{"a key in another case", "send_window.Days",
			map[string]any{"send_window": window(map[string]any{"days": nil, "Days": "mon-fri"})}, nil},
	} {
		u := windowUpdate(testenv.ID(t, "SHP"), windowSubscriber("desk", nextTuesday().Add(3*time.Hour), tc.sub))
		for k, v := range tc.update {
			u[k] = v
		}
		resp := e.send(t, request{method: "POST", path: "/v1/updates", key: "tracker", body: u, expect: malformed})
		require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%s: %s", tc.name, resp.body)
		p := resp.problem(t)
		require.Equal(t, api.TypeInvalidUpdate, p.Type, tc.name)
		require.Equal(t, tc.field, p.Field, "%s: %s", tc.name, p.Detail)
		require.True(t, strings.HasPrefix(p.Detail, p.Field+": "), "%s: %s", tc.name, p.Detail)
		body, err := json.Marshal(u)
		require.NoError(t, err)
		for _, secret := range []string{"Mars/Olympus_Mons", "mon-fry", "01/02/2027", "soonest", "later"} {
			if strings.Contains(string(body), secret) {
				require.NotContains(t, p.Detail, secret, "%s: a problem never repeats a value", tc.name)
			}
		}
	}
	require.Zero(t, e.mirrorCount(t), "nothing written to the mirror")
	e.requireNoWorkflowStarted(t)
}
