package sendwindow

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-ical"
	"github.com/teambition/rrule-go"
)

// maxICalLine bounds one physical line of an iCalendar file (RFC 5545
// folds at 75 octets; a megabyte is a file that is not one).
const maxICalLine = 1 << 20

// ParseICal reads a tenant's holidays from an iCalendar file (RFC 5545),
// as an operator exports it from a calendar: the dates its all-day events
// cover within [from, to], sorted and distinct, so they can be a Window's
// Skip as they are.
//
// An all-day event is a VEVENT whose DTSTART is a DATE; it covers every
// day from DTSTART up to its DTEND (exclusive), or for its DURATION, or
// the one day when it gives neither. A recurring event (RRULE, at most
// daily; RDATE) covers each occurrence, except those EXDATE names or a
// RECURRENCE-ID event of the same UID moves. Timed events (a DTSTART with
// a time of day) are ignored: a holiday is a whole day, and a meeting in a
// holiday calendar is not one. Cancelled events are ignored too.
//
// Errors name the line (the first physical line of a folded one) and the
// property, never the file's content.
func ParseICal(r io.Reader, from, to Date) ([]Date, error) {
	events, err := readEvents(r)
	if err != nil {
		return nil, err
	}
	// Occurrences a RECURRENCE-ID event replaces, by UID.
	moved := map[string][]time.Time{}
	for _, e := range events {
		if e.recurrenceID.IsZero() {
			continue
		}
		moved[e.uid] = append(moved[e.uid], e.recurrenceID)
	}
	lo := time.Date(from.Year, from.Month, from.Day, 0, 0, 0, 0, time.UTC)
	hi := time.Date(to.Year, to.Month, to.Day, 0, 0, 0, 0, time.UTC)
	var dates []Date
	for _, e := range events {
		if e.skip {
			continue
		}
		starts := []time.Time{e.start}
		if e.set != nil {
			if e.recurrenceID.IsZero() {
				for _, m := range moved[e.uid] {
					e.set.ExDate(m)
				}
			}
			// An occurrence that starts before from may still cover it.
			starts = e.set.Between(lo.AddDate(0, 0, -e.days+1), hi, true)
		}
		for _, s := range starts {
			for k := range e.days {
				d := s.AddDate(0, 0, k)
				if !d.Before(lo) && !d.After(hi) {
					dates = append(dates, DateOf(d))
				}
			}
		}
	}
	slices.SortFunc(dates, Date.Compare)
	return slices.Compact(dates), nil
}

// event is an all-day VEVENT as ParseICal needs it: where it starts (UTC
// midnight of its date), how many days it covers, and its recurrences.
type event struct {
	skip         bool // timed or cancelled
	uid          string
	start        time.Time
	days         int
	set          *rrule.Set // nil: it does not recur
	recurrenceID time.Time  // the occurrence of uid it moves, or zero
}

// icalLine is one unfolded content line and where it began.
type icalLine struct {
	n    int
	text string
}

// unfold splits an iCalendar file into content lines, joining a line
// that begins with a space or a tab to the one before (RFC 5545 3.1).
func unfold(r io.Reader) ([]icalLine, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxICalLine)
	var lines []icalLine
	n := 0
	for sc.Scan() {
		n++
		s := strings.TrimSuffix(sc.Text(), "\r")
		if len(s) > 0 && (s[0] == ' ' || s[0] == '\t') && len(lines) > 0 {
			lines[len(lines)-1].text += s[1:]
			continue
		}
		if strings.TrimSpace(s) == "" {
			continue
		}
		lines = append(lines, icalLine{n: n, text: s})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: is longer than %d bytes", n+1, maxICalLine)
		}
		return nil, fmt.Errorf("error reading iCalendar file: %w", err)
	}
	return lines, nil
}

// readEvents reads the file's VEVENTs, checking that its components nest
// (BEGIN and END agree) and that what ParseICal reads of them is sound.
// go-ical's Decoder reports no line numbers, so each content line of an
// event is decoded on its own, and the nesting is followed here.
func readEvents(r io.Reader) ([]event, error) {
	lines, err := unfold(r)
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, errors.New("line 1: the file holds no calendar (want BEGIN:VCALENDAR)")
	}
	var events []event
	var stack []string
	var comp *ical.Component
	where := map[string][]int{} // the lines of comp's properties, by name
	begun := 0
	for _, l := range lines {
		name, value, _ := strings.Cut(l.text, ":")
		switch {
		case strings.EqualFold(name, "BEGIN"):
			c := strings.ToUpper(strings.TrimSpace(value))
			if len(stack) == 0 && c != ical.CompCalendar {
				return nil, fmt.Errorf("line %d: BEGIN: want a VCALENDAR first", l.n)
			}
			stack = append(stack, c)
			if c == ical.CompEvent && len(stack) == 2 {
				comp, where, begun = ical.NewComponent(c), map[string][]int{}, l.n
			}
			continue
		case strings.EqualFold(name, "END"):
			c := strings.ToUpper(strings.TrimSpace(value))
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return nil, fmt.Errorf("line %d: END: does not close the component open there", l.n)
			}
			stack = stack[:len(stack)-1]
			if c == ical.CompEvent && len(stack) == 1 {
				e, err := readEvent(comp, where, begun)
				if err != nil {
					return nil, err
				}
				events = append(events, e)
				comp = nil
			}
			continue
		case len(stack) == 0:
			return nil, fmt.Errorf("line %d: is outside any calendar (want BEGIN:VCALENDAR)", l.n)
		case len(stack) != 2 || stack[1] != ical.CompEvent:
			continue // a property of the calendar, a time zone or an alarm
		}
		p, err := decodeProp(l.text)
		if err != nil {
			return nil, fmt.Errorf("line %d: is not an iCalendar content line", l.n)
		}
		comp.Props.Add(p)
		where[p.Name] = append(where[p.Name], l.n)
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("line %d: the file ends inside a %s", lines[len(lines)-1].n, stack[len(stack)-1])
	}
	return events, nil
}

// decodeProp reads one content line with go-ical's own decoder (names,
// parameters and quoting as RFC 5545 has them), by giving it a calendar
// of that line alone. The decoder indexes past the end of some malformed
// lines (a parameter with no ':' after it), so a panic is its error.
func decodeProp(line string) (p *ical.Prop, err error) {
	defer func() {
		if recover() != nil {
			p, err = nil, errors.New("malformed content line")
		}
	}()
	cal, err := ical.NewDecoder(strings.NewReader("BEGIN:VCALENDAR\r\n" + line + "\r\nEND:VCALENDAR\r\n")).Decode()
	if err != nil {
		return nil, err
	}
	for _, ps := range cal.Props {
		if len(ps) == 1 {
			return &ps[0], nil
		}
	}
	return nil, errors.New("no property")
}

// isDate reports whether p holds a DATE: VALUE=DATE, or (as some
// exporters write it) no VALUE and an eight-digit value.
func isDate(p *ical.Prop) bool {
	switch ical.ValueType(strings.ToUpper(p.Params.Get(ical.ParamValue))) {
	case ical.ValueDate:
		return true
	case ical.ValueDefault:
		return len(p.Value) == len("20060102")
	}
	return false
}

// date reads a DATE value as UTC midnight, so days are 24 hours.
func dateValue(p *ical.Prop) (time.Time, error) {
	return time.ParseInLocation("20060102", p.Value, time.UTC)
}

// dateList reads a property's comma-separated DATE values (EXDATE and RDATE
// may list several).
func dateList(p ical.Prop) ([]time.Time, error) {
	var ts []time.Time
	for v := range strings.SplitSeq(p.Value, ",") {
		// A date-time on an all-day event can only mean its date.
		if len(v) > len("20060102") && v[8] == 'T' {
			v = v[:8]
		}
		t, err := time.ParseInLocation("20060102", v, time.UTC)
		if err != nil {
			return nil, errors.New("is not a list of dates")
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// readEvent reads what ParseICal needs of the VEVENT that begins on line
// begun; where has the lines of its properties, by name.
func readEvent(comp *ical.Component, where map[string][]int, begun int) (event, error) {
	// failAt names the line of the i-th property called name (the
	// event's first line when it has none).
	failAt := func(name string, i int, problem string) (event, error) {
		n := begun
		if i < len(where[name]) {
			n = where[name][i]
		}
		return event{}, fmt.Errorf("line %d: %s: %s", n, name, problem)
	}
	fail := func(name, problem string) (event, error) { return failAt(name, 0, problem) }
	props := comp.Props
	if status, _ := props.Text(ical.PropStatus); strings.EqualFold(status, string(ical.EventCancelled)) {
		return event{skip: true}, nil
	}
	ds := props.Get(ical.PropDateTimeStart)
	if ds == nil {
		return fail(ical.PropDateTimeStart, "is missing")
	}
	if !isDate(ds) {
		return event{skip: true}, nil
	}
	start, err := dateValue(ds)
	if err != nil {
		return fail(ical.PropDateTimeStart, "is not a date")
	}
	e := event{start: start, days: 1}
	e.uid, _ = props.Text(ical.PropUID)
	end := start.AddDate(0, 0, 1)
	if de := props.Get(ical.PropDateTimeEnd); de != nil {
		if !isDate(de) {
			return fail(ical.PropDateTimeEnd, "is not a date, as DTSTART is")
		}
		if end, err = dateValue(de); err != nil {
			return fail(ical.PropDateTimeEnd, "is not a date")
		}
		if props.Get(ical.PropDuration) != nil {
			return fail(ical.PropDuration, "may not be given with DTEND")
		}
	} else if du := props.Get(ical.PropDuration); du != nil {
		d, err := du.Duration()
		if err != nil || d < 0 {
			return fail(ical.PropDuration, "is not a duration")
		}
		end = start.Add(d)
	}
	if end.Before(start) {
		return fail(ical.PropDateTimeEnd, "is before DTSTART")
	}
	// The days the event touches; one that ends where it starts still
	// takes its day.
	e.days = max(1, int((end.Sub(start)+24*time.Hour-1)/(24*time.Hour)))
	if e.days > 366 {
		return fail(ical.PropDateTimeEnd, "is more than a year after DTSTART")
	}
	if rid := props.Get(ical.PropRecurrenceID); rid != nil {
		ts, err := dateList(*rid)
		if err != nil || len(ts) != 1 {
			return fail(ical.PropRecurrenceID, "is not a date")
		}
		e.recurrenceID = ts[0]
	}
	if len(props.Values(ical.PropRecurrenceRule)) > 1 {
		return failAt(ical.PropRecurrenceRule, 1, "is given more than once")
	}
	rdates := props.Values(ical.PropRecurrenceDates)
	opt, err := props.RecurrenceRule()
	if err != nil {
		return fail(ical.PropRecurrenceRule, "is not a recurrence rule")
	}
	if opt == nil && len(rdates) == 0 {
		return e, nil
	}
	e.set = &rrule.Set{}
	e.set.RDate(start) // DTSTART is always the first occurrence
	if opt != nil {
		if opt.Freq > rrule.DAILY {
			return fail(ical.PropRecurrenceRule, "recurs more often than daily, which an all-day event cannot")
		}
		opt.Dtstart = start
		rule, err := rrule.NewRRule(*opt)
		if err != nil {
			return fail(ical.PropRecurrenceRule, "is not a recurrence rule")
		}
		e.set.RRule(rule)
	}
	for i, p := range rdates {
		ts, err := dateList(p)
		if err != nil {
			return failAt(ical.PropRecurrenceDates, i, "is not a list of dates")
		}
		for _, t := range ts {
			e.set.RDate(t)
		}
	}
	for i, p := range props.Values(ical.PropExceptionDates) {
		ts, err := dateList(p)
		if err != nil {
			return failAt(ical.PropExceptionDates, i, "is not a list of dates")
		}
		for _, t := range ts {
			e.set.ExDate(t)
		}
	}
	return e, nil
}
