package reminder

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/sendwindow"
)

// Send windows (issue 39). A subscriber, its update or its tenant's
// default may name the days and local hours it takes reminders in; a
// reminder due outside them goes out at the window's next opening (or,
// under window_policy "previous", the last moment it was open before the
// due time). The due time, and so the delivery key, stays the reminder's
// own: the window moves only when it goes out.

// WindowRequest is a send window as an update or a subscriber asks for it.
type WindowRequest struct {
	Window sendwindow.Window
	// TimeZone is the zone its hours are in when the subscriber names
	// none ("": the subscriber's, or the tenant default's).
	TimeZone string
}

// WindowDefaults are what a tenant's reminders take when their update and
// subscriber name no window (sendwindow.ParseDefaults reads them from the
// operator's file), keyed by tenant id ("" the default tenant).
type WindowDefaults map[string]sendwindow.Default

// SendWindow is the window a reminder goes out in, resolved when it was
// scheduled: the hours, the zone they are in, the dates skipped (the
// window's own and its tenant's holidays then) and the policy. The mirror
// keeps it with the row and the workflow carries it, so a reschedule finds
// the same window; a tenant's later change of its default does not move it.
type SendWindow struct {
	Window   sendwindow.Window
	TimeZone string
	Policy   sendwindow.Policy
}

// GoesOut is when a reminder due at due goes out in the window.
func (w SendWindow) GoesOut(due time.Time) (time.Time, error) {
	loc, err := LoadTimeZone(w.TimeZone)
	if err != nil {
		return time.Time{}, fmt.Errorf("send window: time zone %s", err)
	}
	at, ok := w.Window.GoesOut(due, loc, w.Policy)
	if !ok {
		return time.Time{}, fmt.Errorf("send window: it does not open within %d days of the due time", sendwindow.Horizon/(24*time.Hour))
	}
	return at, nil
}

// String is the window for people: "mon,tue,wed,thu,fri 08:00-18:00
// Asia/Singapore", with the policy when it is "previous".
func (w SendWindow) String() string {
	s := fmt.Sprintf("%s %s-%s %s", w.Window.Days, w.Window.From, w.Window.To, w.TimeZone)
	if w.Policy == sendwindow.Previous {
		s += " (previous opening)"
	}
	return s
}

// sendWindowJSON is a send window as documents and the mirror write it.
type sendWindowJSON struct {
	Days      string   `json:"days"`
	Hours     string   `json:"hours"`
	TimeZone  string   `json:"time_zone,omitempty"`
	SkipDates []string `json:"skip_dates,omitempty"`
	// Policy is the resolved window's only (a request names it beside,
	// as window_policy).
	Policy string `json:"policy,omitempty"`
}

// MarshalJSON writes the window as the update document spells one.
func (w SendWindow) MarshalJSON() ([]byte, error) {
	j := sendWindowJSON{Days: w.Window.Days.String(), Hours: w.Window.From.String() + "-" + w.Window.To.String(),
		TimeZone: w.TimeZone, Policy: string(w.Policy)}
	for _, d := range w.Window.Skip {
		j.SkipDates = append(j.SkipDates, d.String())
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (w *SendWindow) UnmarshalJSON(b []byte) error {
	var j sendWindowJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	req, err := j.request("send_window")
	if err != nil {
		return err
	}
	policy, err := sendwindow.ParsePolicy(j.Policy)
	if err != nil {
		return fieldErr("send_window.policy", "%s", err)
	}
	*w = SendWindow{Window: req.Window, TimeZone: req.TimeZone, Policy: policy}
	return nil
}

// request checks a window as a document gives it; errors name the field
// under prefix, never the value.
func (j sendWindowJSON) request(prefix string) (WindowRequest, error) {
	var w sendwindow.Window
	var err error
	if j.Days == "" {
		return WindowRequest{}, fieldErr(prefix+".days", `is required (like "mon-fri")`)
	}
	if w.Days, err = sendwindow.ParseDays(j.Days); err != nil {
		return WindowRequest{}, fieldErr(prefix+".days", "%s", err)
	}
	from, to, ok := strings.Cut(j.Hours, "-")
	if !ok {
		return WindowRequest{}, fieldErr(prefix+".hours", `must be two times of day, like "08:00-18:00"`)
	}
	if w.From, err = sendwindow.ParseClock(from); err != nil {
		return WindowRequest{}, fieldErr(prefix+".hours", "opening %s", err)
	}
	if w.To, err = sendwindow.ParseClock(to); err != nil {
		return WindowRequest{}, fieldErr(prefix+".hours", "closing %s", err)
	}
	if err := w.Check(); err != nil {
		// Check names the part ("hours: …"); the error names its field.
		part, problem, _ := strings.Cut(err.Error(), ": ")
		field := map[string]string{"days": ".days", "hours": ".hours", "skip": ".skip_dates"}[part]
		return WindowRequest{}, fieldErr(prefix+field, "%s", problem)
	}
	for i, s := range j.SkipDates {
		d, err := sendwindow.ParseDate(s)
		if err != nil {
			return WindowRequest{}, fieldErr(fmt.Sprintf("%s.skip_dates[%d]", prefix, i), "%s", err)
		}
		w.Skip = append(w.Skip, d)
	}
	if j.TimeZone != "" {
		if _, err := LoadTimeZone(j.TimeZone); err != nil {
			return WindowRequest{}, fieldErr(prefix+".time_zone", "%s", err)
		}
	}
	return WindowRequest{Window: w, TimeZone: j.TimeZone}, nil
}

// parseWindow reads a document's send_window (nil when absent or null).
func parseWindow(raw json.RawMessage, prefix string) (*WindowRequest, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var j sendWindowJSON
	if err := decodeStrict(raw, &j, prefix); err != nil {
		return nil, err
	}
	if j.Policy != "" {
		return nil, fieldErr(prefix+".policy", "unknown field; the policy is window_policy, beside send_window")
	}
	w, err := j.request(prefix)
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// MarshalJSON writes a requested window as the document spells one.
func (w WindowRequest) MarshalJSON() ([]byte, error) {
	return SendWindow{Window: w.Window, TimeZone: w.TimeZone}.MarshalJSON()
}

// sendWindow resolves the window of subscriber s's reminder (field names
// the subscriber): the subscriber's own, else the update's,
// else the tenant's default; nil when none applies. Its zone is the
// subscriber's, else the window's, else the default's; its skipped dates
// are the window's and the tenant's holidays.
func (u Update) sendWindow(field string, s Subscriber, defaults WindowDefaults) (*SendWindow, error) {
	def := defaults[u.Tenant]
	req, where := s.SendWindow, field+".send_window"
	if req == nil {
		req, where = u.SendWindow, "send_window"
	}
	if req == nil && def.Window != nil {
		req, where = &WindowRequest{Window: *def.Window}, "send_window"
	}
	policy, err := sendwindow.ParsePolicy(cmp.Or(s.WindowPolicy, u.WindowPolicy, string(def.Policy)))
	if err != nil {
		if s.WindowPolicy != "" {
			return nil, fieldErr(field+".window_policy", "%s", err)
		}
		return nil, fieldErr("window_policy", "%s", err)
	}
	if req == nil {
		switch {
		case s.WindowPolicy != "":
			return nil, fieldErr(field+".window_policy", "needs a send window (the subscriber's, the update's or the tenant's default)")
		case u.WindowPolicy != "":
			return nil, fieldErr("window_policy", "needs a send window (the subscriber's, the update's or the tenant's default)")
		}
		return nil, nil
	}
	zone := cmp.Or(s.TimeZone, req.TimeZone, def.TimeZone)
	if zone == "" {
		return nil, fieldErr(field+".time_zone", "is required when a send window applies (or give %s.time_zone)", where)
	}
	w := SendWindow{Window: req.Window, TimeZone: zone, Policy: policy}
	w.Window.Skip = slices.Concat(req.Window.Skip, def.Holidays)
	slices.SortFunc(w.Window.Skip, sendwindow.Date.Compare)
	w.Window.Skip = slices.Compact(w.Window.Skip)
	return &w, nil
}
