// Package sendwindow says when a reminder may reach its recipient: some
// days of the week, between two local times of day, in the recipient's
// zone, except on dates to skip (a tenant's holidays). It has no I/O: the
// caller loads the zone and hands over holiday files' contents.
//
// # Openings
//
// A window opens once on each of its Days whose date is not in Skip, and
// is open over the closed interval [From, To] of that date's local clock.
// To may be 24:00: the start of the next day, the first instant its clock
// reads 00:00. The zone database decides what a clock time means on a day
// the clocks change, so no time is guessed:
//
//   - Spring forward: a From or To that falls in the skipped hour means the
//     first instant after the gap. A window from 02:30 in Europe/Berlin on
//     2027-03-28 (clocks jump from 02:00 to 03:00) opens at 03:00 CEST; a
//     window to 02:30 that day closes at 03:00 CEST.
//   - Fall back: a clock time the day reads twice means its first
//     occurrence for From and its second for To, so a window that spans
//     any part of the repeated hour is open for all of it: in Berlin on
//     2027-10-31 a window 02:30-02:45 is open from 02:30 CEST to 02:45 CET,
//     an hour and a quarter.
//
// # Going out
//
// A reminder due while its window is open goes out at its due time. One
// due outside it goes out, under the Next policy (the default), at the
// window's first opening after the due time, and under Previous (for a
// reminder that must not be late) at the close of the last opening before
// it: the latest instant before the due time that the window was open.
// A window that does not open within Horizon of the due time (every open
// day skipped) sends nothing: GoesOut says so and the caller refuses the
// reminder.
package sendwindow

import (
	"cmp"
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

// EndOfDay is 24:00, the To of a window open until midnight.
const EndOfDay Clock = 24 * 60

// ParseClock reads "HH:MM", 00:00 to 24:00.
func ParseClock(s string) (Clock, error) {
	bad := errors.New(`is not a time of day; use "HH:MM", 00:00 to 24:00`)
	if len(s) != 5 || s[2] != ':' || !isDigits(s[:2]) || !isDigits(s[3:]) {
		return 0, bad
	}
	h := int(s[0]-'0')*10 + int(s[1]-'0')
	m := int(s[3]-'0')*10 + int(s[4]-'0')
	if h > 24 || m > 59 || (h == 24 && m != 0) {
		return 0, bad
	}
	return Clock(h*60 + m), nil
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (c Clock) String() string { return fmt.Sprintf("%02d:%02d", int(c)/60, int(c)%60) }

// Date is a local calendar date.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// ParseDate reads "YYYY-MM-DD"; the date must exist.
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

// Compare orders dates, so a list of them sorts with slices.SortFunc.
func (d Date) Compare(e Date) int {
	if c := cmp.Compare(d.Year, e.Year); c != 0 {
		return c
	}
	if c := cmp.Compare(d.Month, e.Month); c != 0 {
		return c
	}
	return cmp.Compare(d.Day, e.Day)
}

// AddDays is the date n days after d (before, for negative n).
func (d Date) AddDays(n int) Date { return dateOfDay(d.day() + int64(n)) }

// valid reports whether d is a date the calendar has.
func (d Date) valid() bool {
	return d.Month >= time.January && d.Month <= time.December && d.Day >= 1 && dateOfDay(d.day()) == d
}

// day is d's day number: days since 1970-01-01 in the proleptic Gregorian
// calendar (Hinnant's days_from_civil), so walking dates costs no
// time.Date and no zone lookup.
func (d Date) day() int64 {
	y, m := int64(d.Year), int64(d.Month)
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + int64(d.Day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// dateOfDay is the date of day number n (Hinnant's civil_from_days).
func dateOfDay(n int64) Date {
	n += 719468
	era := floorDiv(n, 146097)
	doe := n - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	y := yoe + era*400
	if m <= 2 {
		y++
	}
	return Date{int(y), time.Month(m), int(d)}
}

// weekdayOf is day number n's weekday (1970-01-01 was a Thursday).
func weekdayOf(n int64) time.Weekday { return time.Weekday((n%7 + 7 + 4) % 7) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Window is when a recipient takes reminders: on Days, from From to To
// (both included) by the local clock, except on the Skip dates (in any
// order; sorted, as ParseICal and ParseDefaults give them, is faster).
type Window struct {
	Days     Days
	From, To Clock
	Skip     []Date
}

// Check refuses a window that can never open, naming the part at fault
// (days, hours or skip) and never a value. A window whose every open day
// is skipped passes: only GoesOut, which knows the due time, can tell.
func (w Window) Check() error {
	switch {
	case w.Days == 0:
		return errors.New("days: none named, so the window never opens")
	case w.Days&^allDays != 0:
		return errors.New("days: names a day that is not a weekday")
	case w.From < 0 || w.From > EndOfDay || w.To < 0 || w.To > EndOfDay:
		return errors.New("hours: out of range 00:00 to 24:00")
	case w.From >= w.To:
		return errors.New("hours: from must be before to, or the window never opens")
	}
	for _, d := range w.Skip {
		if !d.valid() {
			return errors.New("skip: holds a date the calendar does not have")
		}
	}
	return nil
}

const allDays Days = 1<<7 - 1

// GoesOut is when a reminder due at due goes out under policy p, with the
// window's clock read in loc (see the package comment for the exact
// rules): due itself when the window is open then, else its first opening
// after due (Next, and any policy but Previous) or the close of its last
// opening before due (Previous). ok is false when the window fails Check,
// loc is nil, or it does not open within Horizon of due.
func (w Window) GoesOut(due time.Time, loc *time.Location, p Policy) (time.Time, bool) {
	if loc == nil || w.Check() != nil {
		return time.Time{}, false
	}
	skip := w.Skip
	if !slices.IsSortedFunc(skip, Date.Compare) {
		skip = slices.Clone(skip)
		slices.SortFunc(skip, Date.Compare)
	}
	today := DateOf(due.In(loc)).day()
	// Only today's opening, or yesterday's when it runs to a midnight
	// that is due, can hold due.
	for d := today - 1; d <= today; d++ {
		if w.opensOn(d, skip) && !due.Before(w.open(d, loc)) && !due.After(w.close(d, loc)) {
			return due, true
		}
	}
	days := int64(Horizon / (24 * time.Hour))
	if p == Previous {
		for d := today; d >= today-days-1; d-- {
			if !w.opensOn(d, skip) {
				continue
			}
			if c := w.close(d, loc); c.Before(due) {
				return c, due.Sub(c) <= Horizon
			}
		}
		return time.Time{}, false
	}
	for d := today; d <= today+days+1; d++ {
		if !w.opensOn(d, skip) {
			continue
		}
		if o := w.open(d, loc); o.After(due) {
			return o, o.Sub(due) <= Horizon
		}
	}
	return time.Time{}, false
}

// opensOn reports whether the window opens on day number d: one of its
// days, and not a date skip (sorted) holds.
func (w Window) opensOn(d int64, skip []Date) bool {
	if !w.Days.Has(weekdayOf(d)) {
		return false
	}
	if len(skip) == 0 {
		return true
	}
	_, found := slices.BinarySearchFunc(skip, dateOfDay(d), Date.Compare)
	return !found
}

// open is when the window opens on day number d in loc: the first instant
// the clock reads From, or the end of the gap it falls in.
func (w Window) open(d int64, loc *time.Location) time.Time {
	return instant(wallSeconds(d, w.From), loc, false)
}

// close is when the window closes on day number d in loc: the last instant
// the clock reads To, or the end of the gap it falls in; To 24:00 is the
// next day's start.
func (w Window) close(d int64, loc *time.Location) time.Time {
	if w.To == EndOfDay {
		return instant(wallSeconds(d+1, 0), loc, false)
	}
	return instant(wallSeconds(d, w.To), loc, true)
}

// wallSeconds is the clock reading c on day number d, in seconds since
// 1970-01-01 00:00 on the same clock.
func wallSeconds(d int64, c Clock) int64 { return d*86400 + int64(c)*60 }

// maxOffset bounds how far any zone's clock, local mean times of the 19th
// century included, is from UTC, with a margin.
const maxOffset = 26 * 3600

// instant is the instant loc's clock reads wall (seconds on that clock
// since its 1970-01-01 00:00): the first such instant, or the last when
// last is set, where the clock reads it twice; the end of the gap, where
// the clock jumps over it. It walks the zone's periods (Time.ZoneBounds)
// that could hold the instant and solves each one's offset exactly,
// because time.Date does not promise which instant it picks in a gap or
// an overlap.
func instant(wall int64, loc *time.Location, last bool) time.Time {
	var found time.Time
	t := time.Unix(wall-maxOffset, 0).In(loc)
	for {
		_, offset := t.Zone()
		start, end := t.ZoneBounds()
		at := time.Unix(wall-int64(offset), 0).In(loc)
		switch {
		case !start.IsZero() && at.Before(start):
			// The clock read past wall on entering this period: it
			// jumped over wall at start, unless an earlier period
			// already read it.
			if found.IsZero() {
				return start
			}
		case end.IsZero() || at.Before(end):
			if !last {
				return at
			}
			found = at
		}
		if end.IsZero() || end.Unix() > wall+maxOffset {
			return found
		}
		t = end
	}
}
