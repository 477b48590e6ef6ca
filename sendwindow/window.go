// Package sendwindow says when a reminder may reach its recipient: some
// days of the week, between two local times of day, in the recipient's
// zone, except on dates to skip (a tenant's holidays). A reminder that
// comes due outside its window goes out at the window's next opening, or,
// under the Previous policy, at the last moment it was open before the due
// time. It has no I/O: the caller loads the zone and reads holiday files.
package sendwindow

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Horizon is how far from a due time GoesOut looks for an opening: past
// it, the window is said never to open.
const Horizon = 400 * 24 * time.Hour

// Policy chooses the opening a reminder due outside its window takes.
type Policy string

const (
	// Next: the window's next opening after the due time (the default).
	Next Policy = "next"
	// Previous: the last moment the window was open before the due time,
	// for a reminder that must not be late.
	Previous Policy = "previous"
)

// ParsePolicy reads a policy; "" is Next.
func ParsePolicy(s string) (Policy, error) {
	switch Policy(s) {
	case "", Next:
		return Next, nil
	case Previous:
		return Previous, nil
	}
	return "", errors.New(`is not a window policy; use "next" or "previous"`)
}

// Days is a set of weekdays: bit i is time.Weekday(i).
type Days uint8

// Has reports whether d holds day.
func (d Days) Has(day time.Weekday) bool { return d&(1<<day) != 0 }

// Weekdays is Monday to Friday.
const Weekdays Days = 1<<time.Monday | 1<<time.Tuesday | 1<<time.Wednesday | 1<<time.Thursday | 1<<time.Friday

var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseDay reads a day's three-letter English name ("mon"), any case.
func ParseDay(s string) (time.Weekday, error) {
	i := slices.Index(dayNames, strings.ToLower(s))
	if i < 0 {
		return 0, errors.New(`is not a day; use "mon", "tue", "wed", "thu", "fri", "sat" or "sun"`)
	}
	return time.Weekday(i), nil
}

// ParseDays reads days as a list of names and ranges, "mon-fri" or
// "mon,wed,fri" or "sat-sun"; a range runs forward through the week
// ("fri-mon" is Friday to Monday).
func ParseDays(s string) (Days, error) {
	var d Days
	for part := range strings.SplitSeq(s, ",") {
		from, to, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := ParseDay(from)
		if err != nil {
			return 0, err
		}
		b := a
		if isRange {
			if b, err = ParseDay(to); err != nil {
				return 0, err
			}
		}
		for day := a; ; day = (day + 1) % 7 {
			d |= 1 << day
			if day == b {
				break
			}
		}
	}
	return d, nil
}

// String is the days as ParseDays reads them, "mon,tue,wed,thu,fri".
func (d Days) String() string {
	var names []string
	for _, day := range []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday, time.Sunday} {
		if d.Has(day) {
			names = append(names, dayNames[day])
		}
	}
	return strings.Join(names, ",")
}

// Clock is a local time of day in minutes after midnight, 0 (00:00) to
// 1440 (24:00, the end of the day).
type Clock int

// ParseClock reads "HH:MM", 00:00 to 24:00.
func ParseClock(s string) (Clock, error) {
	bad := errors.New(`is not a time of day; use "HH:MM", 00:00 to 24:00`)
	if len(s) != 5 || s[2] != ':' {
		return 0, bad
	}
	var h, m int
	if _, err := fmt.Sscanf(s, "%02d:%02d", &h, &m); err != nil || h > 24 || m > 59 || (h == 24 && m != 0) {
		return 0, bad
	}
	return Clock(h*60 + m), nil
}

func (c Clock) String() string { return fmt.Sprintf("%02d:%02d", int(c)/60, int(c)%60) }

// Date is a local calendar date.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// ParseDate reads "YYYY-MM-DD".
func ParseDate(s string) (Date, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return Date{}, errors.New(`is not a date; use "YYYY-MM-DD"`)
	}
	return DateOf(t), nil
}

// DateOf is t's date where t is.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{y, m, d}
}

func (d Date) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day) }

// Compare orders dates.
func (d Date) Compare(e Date) int {
	return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, time.UTC).Compare(time.Date(e.Year, e.Month, e.Day, 0, 0, 0, 0, time.UTC))
}

// Window is when a recipient takes reminders: on Days, from From to To
// (both included) by the local clock, except on the Skip dates.
type Window struct {
	Days     Days
	From, To Clock
	Skip     []Date
}

// Check refuses a window that never opens.
func (w Window) Check() error {
	switch {
	case w.Days == 0:
		return errors.New("names no day: the window never opens")
	case w.From < 0 || w.To > 24*60:
		return errors.New("has hours out of range 00:00 to 24:00")
	case w.From >= w.To:
		return errors.New("closes before it opens: from must be before to")
	}
	return nil
}

// skips reports whether the window is closed all of date d.
func (w Window) skips(d Date) bool {
	return slices.ContainsFunc(w.Skip, func(s Date) bool { return s == d })
}

// day is the window's opening on date d in loc: the first instant the
// local clock reads From or later that day, and the last it reads To or
// earlier (To 24:00 is the next midnight). ok is false on a day it is
// closed.
func (w Window) day(d Date, loc *time.Location) (open, close time.Time, ok bool) {
	midnight := time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, loc)
	if !w.Days.Has(midnight.Weekday()) || w.skips(d) {
		return time.Time{}, time.Time{}, false
	}
	return wallTime(d, w.From, loc), wallTime(d, w.To, loc), true
}

// wallTime is the first instant of date d in loc whose local clock reads c
// or later: the clock's own instant, the earlier of two on a day the
// clocks go back, and the end of the gap on a day they go forward past it.
func wallTime(d Date, c Clock, loc *time.Location) time.Time {
	t := time.Date(d.Year, d.Month, d.Day, int(c)/60, int(c)%60, 0, 0, loc)
	// Where the clock reads c twice, time.Date may give the later one.
	if e := t.Add(-time.Hour); e.Hour() == t.Hour() && e.Minute() == t.Minute() && DateOf(e) == DateOf(t) {
		t = e
	}
	return t
}

// GoesOut is when a reminder due at due goes out in loc: due itself when
// the window is open then, else its next opening (Next) or the last
// instant it was open before due (Previous). ok is false when the window
// does not open within Horizon of due.
func (w Window) GoesOut(due time.Time, loc *time.Location, p Policy) (time.Time, bool) {
	if w.Check() != nil {
		return time.Time{}, false
	}
	local := due.In(loc)
	start := DateOf(local)
	for i := 0; i <= int(Horizon/(24*time.Hour)); i++ {
		step := i
		if p == Previous {
			step = -i
		}
		at := time.Date(start.Year, start.Month, start.Day+step, 12, 0, 0, 0, loc)
		open, close, ok := w.day(DateOf(at), loc)
		if !ok {
			continue
		}
		if !due.Before(open) && !due.After(close) {
			return due, true
		}
		if p == Previous && !close.After(due) {
			return close, true
		}
		if p != Previous && open.After(due) {
			return open, true
		}
	}
	return time.Time{}, false
}

// Default is what a tenant's reminders take when neither their update nor
// their subscriber names a window.
type Default struct {
	// Window is the default window; nil: none.
	Window *Window
	// TimeZone is the zone for a subscriber that names none ("": none).
	TimeZone string
	Policy   Policy
	// Holidays are dates every window of the tenant skips.
	Holidays []Date
}
