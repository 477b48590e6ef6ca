package sendwindow

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed

	"github.com/stretchr/testify/require"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func at(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

func date(t testing.TB, s string) Date {
	t.Helper()
	d, err := ParseDate(s)
	require.NoError(t, err)
	return d
}

func clock(t testing.TB, s string) Clock {
	t.Helper()
	c, err := ParseClock(s)
	require.NoError(t, err)
	return c
}

// TestGoesOutTakesTheOpeningThePolicyNames pins every rule of the package
// comment to an instant, with each expected instant written with its
// offset, so a day the clocks change reads as the zone database has it.
func TestGoesOutTakesTheOpeningThePolicyNames(t *testing.T) {
	t.Parallel()
	all := Days(127)
	cases := []struct {
		name     string
		zone     string
		days     Days
		from, to string
		skip     []string
		due      string
		next     string
		previous string
	}{
		{name: "a due at night waits for the morning, or takes the evening before",
			zone: "Asia/Singapore", days: Weekdays, from: "08:00", to: "18:00",
			due: "2027-03-10T22:00:00+08:00", next: "2027-03-11T08:00:00+08:00", previous: "2027-03-10T18:00:00+08:00"},
		{name: "a due inside goes out when due",
			zone: "Asia/Singapore", days: Weekdays, from: "08:00", to: "18:00",
			due: "2027-03-10T10:15:30+08:00", next: "2027-03-10T10:15:30+08:00", previous: "2027-03-10T10:15:30+08:00"},
		{name: "both ends of the window are in it",
			zone: "Asia/Singapore", days: Weekdays, from: "08:00", to: "18:00",
			due: "2027-03-10T18:00:00+08:00", next: "2027-03-10T18:00:00+08:00", previous: "2027-03-10T18:00:00+08:00"},
		{name: "a second after the close is out",
			zone: "Asia/Singapore", days: Weekdays, from: "08:00", to: "18:00",
			due: "2027-03-10T18:00:01+08:00", next: "2027-03-11T08:00:00+08:00", previous: "2027-03-10T18:00:00+08:00"},
		{name: "a Saturday waits for Monday, or takes Friday",
			zone: "Asia/Singapore", days: Weekdays, from: "08:00", to: "18:00",
			due: "2027-03-13T12:00:00+08:00", next: "2027-03-15T08:00:00+08:00", previous: "2027-03-12T18:00:00+08:00"},
		{name: "a holiday pushes to the day after",
			zone: "Asia/Singapore", days: Weekdays, from: "08:00", to: "18:00", skip: []string{"2027-03-11"},
			due: "2027-03-10T22:00:00+08:00", next: "2027-03-12T08:00:00+08:00", previous: "2027-03-10T18:00:00+08:00"},
		{name: "a holiday pulls back to the day before",
			zone: "Asia/Singapore", days: Weekdays, from: "08:00", to: "18:00", skip: []string{"2027-03-11"},
			due: "2027-03-11T12:00:00+08:00", next: "2027-03-12T08:00:00+08:00", previous: "2027-03-10T18:00:00+08:00"},
		{name: "unsorted skip dates are skipped all the same",
			zone: "Asia/Singapore", days: Weekdays, from: "08:00", to: "18:00", skip: []string{"2027-03-15", "2027-03-11", "2027-03-12"},
			due: "2027-03-10T22:00:00+08:00", next: "2027-03-16T08:00:00+08:00", previous: "2027-03-10T18:00:00+08:00"},
		{name: "spring forward: a from in the gap opens when the gap ends",
			zone: "Europe/Berlin", days: all, from: "02:30", to: "05:00",
			due: "2027-03-28T01:00:00+01:00", next: "2027-03-28T03:00:00+02:00", previous: "2027-03-27T05:00:00+01:00"},
		{name: "spring forward: the gap's end is in a window from the gap",
			zone: "Europe/Berlin", days: all, from: "02:30", to: "05:00",
			due: "2027-03-28T03:00:00+02:00", next: "2027-03-28T03:00:00+02:00", previous: "2027-03-28T03:00:00+02:00"},
		{name: "spring forward: a to in the gap closes when the gap ends",
			zone: "Europe/Berlin", days: all, from: "01:00", to: "02:30",
			due: "2027-03-28T04:00:00+02:00", next: "2027-03-29T01:00:00+02:00", previous: "2027-03-28T03:00:00+02:00"},
		{name: "fall back: a from read twice opens at its first",
			zone: "Europe/Berlin", days: all, from: "02:30", to: "04:00",
			due: "2027-10-31T01:00:00+02:00", next: "2027-10-31T02:30:00+02:00", previous: "2027-10-30T04:00:00+02:00"},
		{name: "fall back: a to read twice closes at its second",
			zone: "Europe/Berlin", days: all, from: "01:00", to: "02:30",
			due: "2027-10-31T02:45:00+01:00", next: "2027-11-01T01:00:00+01:00", previous: "2027-10-31T02:30:00+01:00"},
		{name: "fall back: the window is open between the two readings of its close",
			zone: "Europe/Berlin", days: all, from: "01:00", to: "02:30",
			due: "2027-10-31T02:45:00+02:00", next: "2027-10-31T02:45:00+02:00", previous: "2027-10-31T02:45:00+02:00"},
		{name: "fall back: a window inside the repeated hour is open for all of it",
			zone: "Europe/Berlin", days: all, from: "02:30", to: "02:45",
			due: "2027-10-31T02:15:00+01:00", next: "2027-10-31T02:15:00+01:00", previous: "2027-10-31T02:15:00+01:00"},
		{name: "New York: the weekend the clocks go forward moves the offset",
			zone: "America/New_York", days: Weekdays, from: "09:00", to: "17:00",
			due: "2027-03-12T18:00:00-05:00", next: "2027-03-15T09:00:00-04:00", previous: "2027-03-12T17:00:00-05:00"},
		{name: "New York: previous across the change",
			zone: "America/New_York", days: Weekdays, from: "09:00", to: "17:00",
			due: "2027-03-15T08:00:00-04:00", next: "2027-03-15T09:00:00-04:00", previous: "2027-03-12T17:00:00-05:00"},
		{name: "Lord Howe: half an hour forward, a from in the gap",
			zone: "Australia/Lord_Howe", days: all, from: "02:15", to: "06:00",
			due: "2027-10-03T01:00:00+10:30", next: "2027-10-03T02:30:00+11:00", previous: "2027-10-02T06:00:00+10:30"},
		{name: "Lord Howe: half an hour back, a from read twice",
			zone: "Australia/Lord_Howe", days: all, from: "01:45", to: "06:00",
			due: "2027-04-04T01:00:00+11:00", next: "2027-04-04T01:45:00+11:00", previous: "2027-04-03T06:00:00+11:00"},
		{name: "Lord Howe: half an hour back, a to read twice",
			zone: "Australia/Lord_Howe", days: all, from: "01:00", to: "01:45",
			due: "2027-04-04T01:50:00+10:30", next: "2027-04-05T01:00:00+10:30", previous: "2027-04-04T01:45:00+10:30"},
		{name: "00:00-24:00 every day is always open",
			zone: "Europe/Berlin", days: all, from: "00:00", to: "24:00",
			due: "2027-03-28T02:59:59+01:00", next: "2027-03-28T02:59:59+01:00", previous: "2027-03-28T02:59:59+01:00"},
		{name: "00:00-24:00 on weekdays: a Saturday takes Friday's midnight",
			zone: "Europe/Berlin", days: Weekdays, from: "00:00", to: "24:00",
			due: "2027-03-13T12:00:00+01:00", next: "2027-03-15T00:00:00+01:00", previous: "2027-03-13T00:00:00+01:00"},
		{name: "24:00 is the next midnight, and in the window",
			zone: "Europe/Berlin", days: Weekdays, from: "00:00", to: "24:00",
			due: "2027-03-13T00:00:00+01:00", next: "2027-03-13T00:00:00+01:00", previous: "2027-03-13T00:00:00+01:00"},
		{name: "Santiago: midnight in the gap, 24:00 is the gap's end",
			zone: "America/Santiago", days: 1 << time.Saturday, from: "20:00", to: "24:00",
			due: "2027-09-05T02:00:00-03:00", next: "2027-09-11T20:00:00-03:00", previous: "2027-09-05T01:00:00-03:00"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			loc := mustLoad(t, c.zone)
			w := Window{Days: c.days, From: clock(t, c.from), To: clock(t, c.to)}
			for _, s := range c.skip {
				w.Skip = append(w.Skip, date(t, s))
			}
			require.NoError(t, w.Check())
			due := at(t, c.due)
			for _, p := range []struct {
				policy Policy
				want   string
			}{{Next, c.next}, {"", c.next}, {Previous, c.previous}} {
				got, ok := w.GoesOut(due, loc, p.policy)
				require.True(t, ok, "policy %q", p.policy)
				require.True(t, at(t, p.want).Equal(got), "policy %q: want %s, got %s", p.policy, p.want, got.Format(time.RFC3339))
			}
		})
	}
}

// TestAWindowThatNeverOpensIsRefused covers each way a window can never
// open: Check names the part at fault, and GoesOut sends nothing.
func TestAWindowThatNeverOpensIsRefused(t *testing.T) {
	t.Parallel()
	loc := mustLoad(t, "Europe/Berlin")
	due := at(t, "2027-03-10T22:00:00+01:00")
	for _, c := range []struct {
		name  string
		w     Window
		field string
	}{
		{"no day", Window{Days: 0, From: 8 * 60, To: 18 * 60}, "days:"},
		{"a day past Saturday", Window{Days: 1 << 7, From: 8 * 60, To: 18 * 60}, "days:"},
		{"from after to", Window{Days: Weekdays, From: 18 * 60, To: 8 * 60}, "hours:"},
		{"from equal to to", Window{Days: Weekdays, From: 8 * 60, To: 8 * 60}, "hours:"},
		{"to past midnight", Window{Days: Weekdays, From: 8 * 60, To: 24*60 + 1}, "hours:"},
		{"from negative", Window{Days: Weekdays, From: -1, To: 60}, "hours:"},
		{"a skip date the calendar lacks", Window{Days: Weekdays, From: 8 * 60, To: 18 * 60, Skip: []Date{{2027, 2, 30}}}, "skip:"},
	} {
		err := c.w.Check()
		require.Error(t, err, c.name)
		require.True(t, strings.HasPrefix(err.Error(), c.field), "%s: %v", c.name, err)
		for _, p := range []Policy{Next, Previous} {
			_, ok := c.w.GoesOut(due, loc, p)
			require.False(t, ok, c.name)
		}
	}

	// Mondays only, and every Monday within the horizon either side
	// skipped: it passes Check, but never opens.
	w := Window{Days: 1 << time.Monday, From: 8 * 60, To: 18 * 60}
	for d := DateOf(due).AddDays(-int(Horizon/(24*time.Hour)) - 7); d.Compare(DateOf(due).AddDays(int(Horizon/(24*time.Hour))+7)) <= 0; d = d.AddDays(1) {
		w.Skip = append(w.Skip, d)
	}
	require.NoError(t, w.Check())
	for _, p := range []Policy{Next, Previous} {
		_, ok := w.GoesOut(due, loc, p)
		require.False(t, ok)
	}

	// A nil zone is refused, not a panic.
	_, ok := Window{Days: Weekdays, From: 0, To: 60}.GoesOut(due, nil, Next)
	require.False(t, ok)
}

// TestAnOpeningJustPastTheHorizonIsNone holds GoesOut to Horizon exactly.
func TestAnOpeningJustPastTheHorizonIsNone(t *testing.T) {
	t.Parallel()
	loc := time.UTC
	due := at(t, "2027-01-01T12:00:00Z")
	days := int(Horizon / (24 * time.Hour))
	w := Window{Days: 127, From: 12 * 60, To: 13 * 60}
	for i := 1; i < days; i++ {
		w.Skip = append(w.Skip, DateOf(due).AddDays(i))
	}
	w.Skip = append(w.Skip, DateOf(due)) // today too
	// Day `days` opens exactly Horizon after due: in.
	got, ok := w.GoesOut(due, loc, Next)
	require.True(t, ok)
	require.Equal(t, Horizon, got.Sub(due))
	// Skip it too, and the next opening is a day past the horizon.
	w.Skip = append(w.Skip, DateOf(due).AddDays(days))
	_, ok = w.GoesOut(due, loc, Next)
	require.False(t, ok)
}

func TestParsersTakeGoodInputAndNeverRepeatBad(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Days{
		"mon-fri":     Weekdays,
		"MON-Fri":     Weekdays,
		"mon,wed,fri": 1<<time.Monday | 1<<time.Wednesday | 1<<time.Friday,
		"sat-sun":     1<<time.Saturday | 1<<time.Sunday,
		"fri-mon":     1<<time.Friday | 1<<time.Saturday | 1<<time.Sunday | 1<<time.Monday,
		"sun":         1 << time.Sunday,
		"mon-sun":     127,
		" tue , thu ": 1<<time.Tuesday | 1<<time.Thursday,
	} {
		got, err := ParseDays(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	require.Equal(t, "mon,tue,wed,thu,fri", Weekdays.String())
	round, err := ParseDays(Days(127).String())
	require.NoError(t, err)
	require.Equal(t, Days(127), round)

	for in, want := range map[string]Clock{"00:00": 0, "08:30": 510, "23:59": 1439, "24:00": EndOfDay} {
		got, err := ParseClock(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		require.Equal(t, in, got.String())
	}
	for in, want := range map[string]Date{"2027-03-28": {2027, 3, 28}, "2024-02-29": {2024, 2, 29}} {
		got, err := ParseDate(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		require.Equal(t, in, got.String())
	}
	for in, want := range map[string]Policy{"": Next, "next": Next, "previous": Previous} {
		got, err := ParsePolicy(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}

	bad := map[string]func(string) error{
		"days": func(s string) error { _, err := ParseDays(s); return err },
		"hour": func(s string) error { _, err := ParseClock(s); return err },
		"date": func(s string) error { _, err := ParseDate(s); return err },
		"plcy": func(s string) error { _, err := ParsePolicy(s); return err },
	}
	for _, c := range []struct{ kind, in string }{
		{"days", ""}, {"days", "monday"}, {"days", "mon-"}, {"days", "mon-tue-wed"}, {"days", "mon,,fri"}, {"days", "sekret-token"},
		{"hour", ""}, {"hour", "8:00"}, {"hour", "24:01"}, {"hour", "25:00"}, {"hour", "08:60"}, {"hour", " 8:00"}, {"hour", "+8:00"}, {"hour", "08-00"}, {"hour", "0800h"},
		{"date", ""}, {"date", "2027-02-30"}, {"date", "27-03-28"}, {"date", "2027/03/28"}, {"date", "sekret-token"},
		{"plcy", "Next"}, {"plcy", "later"}, {"plcy", "sekret-token"},
	} {
		err := bad[c.kind](c.in)
		require.Error(t, err, "%s %q", c.kind, c.in)
		if len(c.in) >= 3 {
			require.NotContains(t, err.Error(), c.in, "%s %q", c.kind, c.in)
		}
	}
}

func TestDateArithmeticAgreesWithTheTimePackage(t *testing.T) {
	t.Parallel()
	base := time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 365 * 900 {
		tm := base.AddDate(0, 0, i)
		d := DateOf(tm)
		n := d.day()
		require.Equal(t, tm.Unix()/86400, n)
		require.Equal(t, d, dateOfDay(n))
		require.Equal(t, tm.Weekday(), weekdayOf(n))
	}
}

// model is an independent account of a window, by stepping whole minutes
// through the zone (every zone used here changes on the minute): the
// opening of a day is the first minute whose clock reads From or later;
// its close the last minute that reads To, else (To in a gap) the first
// that reads later. A day's span is cached, since the walk is slow.
type model struct {
	w     Window
	loc   *time.Location
	spans map[int64][2]time.Time
}

func reading(t time.Time) int64 {
	_, off := t.Zone()
	return t.Unix() + int64(off)
}

func (m *model) span(d int64) ([2]time.Time, bool) {
	if !m.w.Days.Has(weekdayOf(d)) {
		return [2]time.Time{}, false
	}
	for _, s := range m.w.Skip {
		if s == dateOfDay(d) {
			return [2]time.Time{}, false
		}
	}
	if s, ok := m.spans[d]; ok {
		return s, true
	}
	first := func(wall int64) time.Time {
		for u := wall - 15*3600; ; u += 60 {
			if t := time.Unix(u, 0).In(m.loc); reading(t) >= wall {
				return t
			}
		}
	}
	var s [2]time.Time
	s[0] = first(wallSeconds(d, m.w.From))
	if m.w.To == EndOfDay {
		s[1] = first(wallSeconds(d+1, 0))
	} else {
		wall := wallSeconds(d, m.w.To)
		for u := wall - 15*3600; u <= wall+15*3600; u += 60 {
			if t := time.Unix(u, 0).In(m.loc); reading(t) == wall {
				s[1] = t
			}
		}
		if s[1].IsZero() {
			s[1] = first(wall)
		}
	}
	m.spans[d] = s
	return s, true
}

func (m *model) open(t time.Time) bool {
	today := DateOf(t.In(m.loc)).day()
	for d := today - 1; d <= today; d++ {
		if s, ok := m.span(d); ok && !t.Before(s[0]) && !t.After(s[1]) {
			return true
		}
	}
	return false
}

// TestGoesOutIsTheNearestOpenInstant checks random windows and due times,
// many on days the clocks change, against the model: the result is in the
// window, is the due time when that is, and no minute of the window lies
// strictly between the due time and the result.
func TestGoesOutIsTheNearestOpenInstant(t *testing.T) {
	t.Parallel()
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago",
		"Asia/Kathmandu", "Pacific/Chatham", "Asia/Singapore", "UTC"}
	locs := map[string]*time.Location{}
	for _, z := range zones {
		locs[z] = mustLoad(t, z)
	}
	r := rand.New(rand.NewPCG(39, 2027))
	for i := range 600 {
		zone := zones[r.IntN(len(zones))]
		loc := locs[zone]
		var due time.Time
		change := Clock(-1) // the clock reading just before a change, when due is near one
		if r.IntN(2) == 0 {
			// Near one of the zone's changes in 2027.
			_, end := time.Date(2027, time.Month(1+r.IntN(12)), 1, 0, 0, 0, 0, loc).ZoneBounds()
			if end.IsZero() {
				end = time.Date(2027, 6, 1, 0, 0, 0, 0, loc)
			}
			due = end.Add(time.Duration(r.IntN(48*3600)-24*3600) * time.Second)
			before := end.Add(-time.Minute).In(loc)
			change = Clock(before.Hour()*60+before.Minute()) / 15 * 15
		} else {
			due = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(365 * 24 * time.Hour))))
		}
		from := Clock(r.IntN(96) * 15)
		if change >= 0 && r.IntN(2) == 0 {
			// From or To in or beside the gap or the repeated hour.
			from = min(max(change+Clock(r.IntN(7)-4)*15, 0), EndOfDay-15)
		}
		to := from + Clock(1+r.IntN(int(EndOfDay-from)/15))*15
		if r.IntN(4) == 0 {
			to = from + Clock(1+r.IntN(int(EndOfDay-from)))
		}
		w := Window{Days: Days(1 + r.IntN(127)), From: from, To: to}
		if change >= 0 && r.IntN(2) == 0 {
			w.Days = 127
		}
		for range r.IntN(4) {
			w.Skip = append(w.Skip, DateOf(due.In(loc)).AddDays(r.IntN(9)-4))
		}
		m := &model{w: w, loc: loc, spans: map[int64][2]time.Time{}}
		for _, p := range []Policy{Next, Previous} {
			got, ok := w.GoesOut(due, loc, p)
			require.True(t, ok, "case %d", i)
			msg := []any{"case %d: %s %s %v due %s got %s", i, zone, p, w, due.In(loc).Format(time.RFC3339), got.Format(time.RFC3339)}
			require.True(t, m.open(got), msg...)
			if m.open(due) {
				require.True(t, got.Equal(due), msg...)
				continue
			}
			lo, hi := due, got
			if p == Previous {
				lo, hi = got, due
			}
			for u := lo.Truncate(time.Minute).Add(time.Minute); u.Before(hi); u = u.Add(time.Minute) {
				if u.After(lo) {
					require.False(t, m.open(u), append(msg, "open at", u.In(loc).Format(time.RFC3339))...)
				}
			}
		}
	}
}

func BenchmarkGoesOut(b *testing.B) {
	loc := mustLoad(b, "Europe/Berlin")
	w := Window{Days: Weekdays, From: 8 * 60, To: 18 * 60}
	for d := (Date{2027, 1, 1}); d.Year == 2027; d = d.AddDays(12) {
		w.Skip = append(w.Skip, d)
	}
	due := at(b, "2027-03-13T22:00:00+01:00") // a Saturday night
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := w.GoesOut(due, loc, Next); !ok {
			b.Fatal("no opening")
		}
	}
}
