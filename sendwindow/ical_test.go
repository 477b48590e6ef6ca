package sendwindow

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func dates(t *testing.T, ss ...string) []Date {
	t.Helper()
	var ds []Date
	for _, s := range ss {
		ds = append(ds, date(t, s))
	}
	return ds
}

// TestParseICalReadsAnOperatorsHolidayCalendar reads a calendar as an
// operator exports one: a time zone, yearly rules (one with an EXDATE),
// multi-day events by DTEND and by DURATION, a folded description, an
// alarm, a timed party and a cancelled outing (neither is a holiday).
func TestParseICalReadsAnOperatorsHolidayCalendar(t *testing.T) {
	t.Parallel()
	read := func(from, to string) []Date {
		f, err := os.Open("testdata/holidays-de-2027.ics")
		require.NoError(t, err)
		defer f.Close()
		got, err := ParseICal(f, date(t, from), date(t, to))
		require.NoError(t, err)
		return got
	}
	require.Equal(t, dates(t,
		"2027-01-01",               // Neujahr, yearly since 2020
		"2027-03-26", "2027-03-29", // Karfreitag, Ostermontag (Ostermontag with no DTEND)
		"2027-05-01",
		"2027-05-06", "2027-05-07", // Himmelfahrt and its bridge day, one event
		"2027-05-17",               // Pfingstmontag, a DTSTART without VALUE=DATE
		"2027-10-03",               // yearly since 1990, BYMONTHDAY
		"2027-12-25", "2027-12-26", // Weihnachten, a yearly two-day event; Heiligabend 2027 is an EXDATE
		"2027-12-27", "2027-12-28", "2027-12-29", "2027-12-30", "2027-12-31", // DURATION:P5D
	), read("2027-01-01", "2027-12-31"))

	// An occurrence that starts before the range still covers its days in
	// it, and the yearly rules go on into the next year.
	require.Equal(t, dates(t,
		"2027-12-26", "2027-12-27", "2027-12-28", "2027-12-29", "2027-12-30", "2027-12-31", "2028-01-01",
	), read("2027-12-26", "2028-01-01"))
	require.Equal(t, dates(t, "2028-10-03", "2028-12-24", "2028-12-25", "2028-12-26", "2029-01-01"),
		read("2028-06-01", "2029-01-01"))

	// The timed party and the cancelled outing are not holidays.
	require.Empty(t, read("2027-12-17", "2027-12-17"))
	require.Empty(t, read("2027-06-14", "2027-06-14"))
	require.Empty(t, read("2027-02-01", "2027-01-01"))
}

func TestParseICalRecurrences(t *testing.T) {
	t.Parallel()
	cal := func(body ...string) string {
		return "BEGIN:VCALENDAR\nVERSION:2.0\n" + strings.Join(body, "\n") + "\nEND:VCALENDAR\n"
	}
	for _, c := range []struct {
		name     string
		ics      string
		from, to string
		want     []string
	}{
		{"monthly with a count", cal("BEGIN:VEVENT", "UID:a", "DTSTART;VALUE=DATE:20270115", "RRULE:FREQ=MONTHLY;COUNT=3", "END:VEVENT"),
			"2027-01-01", "2027-12-31", []string{"2027-01-15", "2027-02-15", "2027-03-15"}},
		{"weekly until, every other week", cal("BEGIN:VEVENT", "UID:a", "DTSTART;VALUE=DATE:20270101", "RRULE:FREQ=WEEKLY;INTERVAL=2;UNTIL=20270129", "END:VEVENT"),
			"2027-01-01", "2027-12-31", []string{"2027-01-01", "2027-01-15", "2027-01-29"}},
		{"exdates listed on one line and an rdate", cal("BEGIN:VEVENT", "UID:a", "DTSTART;VALUE=DATE:20270104", "RRULE:FREQ=DAILY;COUNT=5",
			"EXDATE;VALUE=DATE:20270105,20270107", "RDATE;VALUE=DATE:20270120", "END:VEVENT"),
			"2027-01-01", "2027-12-31", []string{"2027-01-04", "2027-01-06", "2027-01-08", "2027-01-20"}},
		{"a moved occurrence", cal(
			"BEGIN:VEVENT", "UID:inv", "DTSTART;VALUE=DATE:20270301", "RRULE:FREQ=MONTHLY;COUNT=3", "END:VEVENT",
			"BEGIN:VEVENT", "UID:inv", "RECURRENCE-ID;VALUE=DATE:20270401", "DTSTART;VALUE=DATE:20270405", "END:VEVENT"),
			"2027-01-01", "2027-12-31", []string{"2027-03-01", "2027-04-05", "2027-05-01"}},
		{"a multi-day yearly event across the year's end", cal("BEGIN:VEVENT", "UID:a", "DTSTART;VALUE=DATE:20261231", "DTEND;VALUE=DATE:20270102", "RRULE:FREQ=YEARLY", "END:VEVENT"),
			"2027-01-01", "2027-12-31", []string{"2027-01-01", "2027-12-31"}},
		{"an event ending where it starts takes its day", cal("BEGIN:VEVENT", "UID:a", "DTSTART;VALUE=DATE:20270301", "DTEND;VALUE=DATE:20270301", "END:VEVENT"),
			"2027-01-01", "2027-12-31", []string{"2027-03-01"}},
		{"lower-case names and LF line ends", "begin:vcalendar\nbegin:vevent\ndtstart;value=date:20270301\nend:vevent\nend:vcalendar\n",
			"2027-01-01", "2027-12-31", []string{"2027-03-01"}},
	} {
		got, err := ParseICal(strings.NewReader(c.ics), date(t, c.from), date(t, c.to))
		require.NoError(t, err, c.name)
		require.Equal(t, dates(t, c.want...), got, c.name)
	}
}

// TestParseICalErrorsNameTheLine gives a bad file for each check: the
// error names the line and the property, and never repeats content (each
// bad value holds "s3cret").
func TestParseICalErrorsNameTheLine(t *testing.T) {
	t.Parallel()
	event := func(props ...string) string {
		return "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:x\r\n" + strings.Join(props, "\r\n") + "\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
	}
	for _, c := range []struct {
		name, ics, want string
	}{
		{"empty", "", "line 1: the file holds no calendar"},
		{"not a calendar", "s3cret\r\n", "line 1: is outside any calendar"},
		{"another component first", "BEGIN:VS3CRET\r\nEND:VS3CRET\r\n", "line 1: BEGIN: want a VCALENDAR first"},
		{"an END that closes nothing open", "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nEND:VS3CRET\r\n", "line 3: END: does not close"},
		{"a file that ends inside", "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20270101\r\n", "line 3: the file ends inside a VEVENT"},
		{"not a content line", event("DTSTART;VALUE=DATE", "s3cret"), "line 5: is not an iCalendar content line"},
		{"a folded bad line is named by its first line", event("DTSTART;VALUE=DATE:20270101", "SUMMARY;X=\"s3cret", " still:open"), "line 6: is not an iCalendar content line"},
		{"no DTSTART", event("SUMMARY:s3cret"), "line 3: DTSTART: is missing"},
		{"a bad date", event("DTSTART;VALUE=DATE:2027s3cret"), "line 5: DTSTART: is not a date"},
		{"a date that does not exist", event("DTSTART;VALUE=DATE:20270230"), "line 5: DTSTART: is not a date"},
		{"a timed end on a day", event("DTSTART;VALUE=DATE:20270101", "DTEND:20270101T120000Z"), "line 6: DTEND: is not a date, as DTSTART is"},
		{"an end before the start", event("DTSTART;VALUE=DATE:20270105", "DTEND;VALUE=DATE:20270101"), "line 6: DTEND: is before DTSTART"},
		{"an event of years", event("DTSTART;VALUE=DATE:20270101", "DTEND;VALUE=DATE:20300101"), "line 6: DTEND: is more than a year"},
		{"both end and duration", event("DTSTART;VALUE=DATE:20270101", "DTEND;VALUE=DATE:20270102", "DURATION:P1D"), "line 7: DURATION: may not be given with DTEND"},
		{"a bad duration", event("DTSTART;VALUE=DATE:20270101", "DURATION:Ps3cret"), "line 6: DURATION: is not a duration"},
		{"a negative duration", event("DTSTART;VALUE=DATE:20270101", "DURATION:-P1D"), "line 6: DURATION: is not a duration"},
		{"a bad rule", event("DTSTART;VALUE=DATE:20270101", "RRULE:FREQ=s3cret"), "line 6: RRULE: is not a recurrence rule"},
		{"a bad rule part", event("DTSTART;VALUE=DATE:20270101", "RRULE:FREQ=YEARLY;s3cret=1"), "line 6: RRULE: is not a recurrence rule"},
		{"two rules", event("DTSTART;VALUE=DATE:20270101", "RRULE:FREQ=YEARLY", "RRULE:FREQ=MONTHLY"), "line 7: RRULE: is given more than once"},
		{"an hourly holiday", event("DTSTART;VALUE=DATE:20270101", "RRULE:FREQ=HOURLY"), "line 6: RRULE: recurs more often than daily"},
		{"a bad second exdate", event("DTSTART;VALUE=DATE:20270101", "RRULE:FREQ=YEARLY", "EXDATE;VALUE=DATE:20280101", "EXDATE;VALUE=DATE:s3cret"), "line 8: EXDATE: is not a list of dates"},
		{"a bad rdate", event("DTSTART;VALUE=DATE:20270101", "RDATE;VALUE=DATE:20270105,s3cret"), "line 6: RDATE: is not a list of dates"},
		{"a bad recurrence id", event("DTSTART;VALUE=DATE:20270101", "RECURRENCE-ID;VALUE=DATE:s3cret"), "line 6: RECURRENCE-ID: is not a date"},
		{"a line too long", "BEGIN:VCALENDAR\r\nX-S3CRET:" + strings.Repeat("s3cret", maxICalLine/6+1) + "\r\n", "line 2: is longer than"},
	} {
		_, err := ParseICal(strings.NewReader(c.ics), Date{2027, 1, 1}, Date{2027, 12, 31})
		require.Error(t, err, c.name)
		require.True(t, strings.HasPrefix(err.Error(), c.want), "%s: %v", c.name, err)
		require.NotContains(t, strings.ToLower(err.Error()), "s3cret", c.name)
	}
}

// FuzzParseICal holds ParseICal to an error, never a panic, for any file
// (go-ical's decoder indexes past the end of some malformed lines).
func FuzzParseICal(f *testing.F) {
	ics, err := os.ReadFile("testdata/holidays-de-2027.ics")
	require.NoError(f, err)
	f.Add(string(ics))
	f.Add("BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE\nEND:VEVENT\nEND:VCALENDAR\n")
	f.Add("BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20270101\nRRULE:FREQ=DAILY;BYSETPOS=1\nEND:VEVENT\nEND:VCALENDAR\n")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseICal(strings.NewReader(s), Date{2027, 1, 1}, Date{2027, 12, 31})
		if err == nil {
			require.True(t, slices.IsSortedFunc(got, Date.Compare))
		}
	})
}
