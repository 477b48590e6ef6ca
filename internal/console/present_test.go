package console

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Times read in the reader's zone, named as people say it, in their
// locale's order: the zone from the cookie the console's script sets, the
// order from Accept-Language; UTC when the browser named no zone, or one
// that is no zone (never the server's own).
func TestTimesInTheReadersZoneAndLocale(t *testing.T) {
	at := time.Date(2027, 2, 7, 8, 0, 0, 0, time.UTC)
	summer := time.Date(2027, 7, 7, 8, 0, 0, 0, time.UTC)
	style := func(zone, lang string) timeStyle {
		r := httptest.NewRequest("GET", "/console/", nil)
		if zone != "" {
			r.Header.Set("Cookie", zoneCookie+"="+zone)
		}
		if lang != "" {
			r.Header.Set("Accept-Language", lang)
		}
		return styleFor(r, at)
	}
	nb := func(s string) string { return strings.ReplaceAll(s, "\u00a0", " ") }

	st := style("Europe/Berlin", "en-GB,en;q=0.9")
	require.Equal(t, "7 Feb 2027, 09:00 CET", nb(st.Text(at)))
	require.Equal(t, "7 Jul 2027, 10:00 CEST", nb(st.Text(summer)))
	require.Equal(t, "CET (Europe/Berlin)", st.Name())
	require.True(t, st.FromBrowser)
	require.Equal(t, "7 Feb 2027", st.Day(at))
	require.Equal(t, "7 Feb", st.Short(at))

	us := style("America/New_York", "en-US,en;q=0.9")
	require.Equal(t, "Feb 7, 2027, 3:00 AM EST", nb(us.Text(at)))
	require.Equal(t, "Feb 7", us.Short(at))
	require.Equal(t, "EST (America/New_York)", us.Name())

	// A zone without a name people say is named by its offset.
	require.Equal(t, "7 Feb 2027, 05:00 UTC-03", nb(style("America/Sao_Paulo", "").Text(at)))

	// The day and the clock each keep to one line; the tooltip is UTC.
	html := string(st.when(at))
	require.Contains(t, html, `title="2027-02-07 08:00:00 UTC"`)
	require.Contains(t, html, "<span>7\u00a0Feb\u00a02027,</span> <span>09:00\u00a0CET</span>")

	for _, zone := range []string{"", "Local", "../../etc/passwd", "Europe/Nowhere", strings.Repeat("A", 80)} {
		st := style(zone, "de-DE")
		require.Equal(t, "7 Feb 2027, 08:00 UTC", nb(st.Text(at)), "%q", zone)
		require.Equal(t, "UTC", st.Name())
		require.False(t, st.FromBrowser)
	}

	// A day of the list's filter is the reader's day.
	_, f, err := parseListFilter(map[string][]string{"due_from": {"2027-02-07"}, "due_to": {"2027-02-07"}}, st.loc)
	require.NoError(t, err)
	require.Equal(t, time.Date(2027, 2, 6, 23, 0, 0, 0, time.UTC), f.DueFrom.UTC())
	require.Equal(t, time.Date(2027, 2, 7, 23, 0, 0, 0, time.UTC), f.DueTo.UTC())
}

// The due chart spans what is pending: days up to a month, then weeks,
// then months, from the reader's today; never a month of empty days
// while reminders fall due later.
func TestTheDueChartSpansWhatIsPending(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	st := timeStyle{loc: berlin, Zone: "Europe/Berlin"}
	today := time.Date(2026, 12, 3, 0, 0, 0, 0, berlin)
	for _, c := range []struct {
		last  time.Time
		unit  string
		spans int
	}{
		{time.Time{}, "day", minDays},
		{today.AddDate(0, 0, 2), "day", minDays},
		{today.AddDate(0, 0, 20).Add(13 * time.Hour), "day", 21},
		{today.AddDate(0, 0, 45), "week", 7},
		{today.AddDate(0, 9, 0), "month", 10},
		{today.AddDate(10, 0, 0), "month", maxMonthBars},
	} {
		bounds, unit := dueBounds(st, today, c.last)
		require.Equal(t, c.unit, unit, "%v", c.last)
		require.Len(t, bounds, c.spans+1, "%v", c.last)
		require.Equal(t, today, bounds[0])
		if !c.last.IsZero() && c.spans < maxMonthBars {
			require.True(t, bounds[len(bounds)-1].After(c.last), "the last span holds %v: %v", c.last, bounds)
		}
	}
	// Days across the change to summer time are the reader's days.
	bounds, _ := dueBounds(st, time.Date(2027, 3, 27, 0, 0, 0, 0, berlin), time.Date(2027, 3, 30, 0, 0, 0, 0, berlin))
	require.Equal(t, 23*time.Hour, bounds[2].Sub(bounds[1]))
	require.Equal(t, 0, bounds[2].In(berlin).Hour())
}

// A message's line breaks stay line breaks, its text escaped.
func TestLinesKeepsLineBreaks(t *testing.T) {
	require.Equal(t, "Dear &lt;b&gt;,<br>\n<br>\nGate 4.<br>\nBye", string(lines("Dear <b>,\r\n\nGate 4.\rBye")))
}
