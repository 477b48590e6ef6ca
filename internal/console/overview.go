package console

import (
	"context"
	"net/http"
	"time"

	"github.com/shipnotify/shipnotify/reminder"
)

// The due chart covers what is pending, from today to the day the last
// pending reminder goes out (in the reader's zone), in days up to
// maxDayBars of them, then in weeks up to maxWeekBars, then in months up
// to maxMonthBars (what goes out later is counted apart). It shows at
// least minDays days. It counts reminders by when they go out (their send
// window's opening, else their due time: mirror.PendingDueCounts), as
// what is owed on a day is what goes out that day.
const (
	minDays      = 7
	maxDayBars   = 31
	maxWeekBars  = 26
	maxMonthBars = 36
)

// stateBar is one state's row in the by-state chart.
type stateBar struct {
	State reminder.State
	N     int
	// Pct is the bar's length, in percent of the longest.
	Pct int
}

// dueBar is one span's bar in the due chart: a day, a week or a month.
type dueBar struct {
	From, Until time.Time
	N           int
	// Pct is the bar's height, in percent of the highest.
	Pct int
	// Label is set on the spans the axis names; LabelEnd ends it at the
	// bar's right, near the chart's end, so it stays within the page.
	Label    string
	LabelEnd bool
}

type overviewData struct {
	States []stateBar
	Total  int
	// Bars span what is pending, in Unit ("day", "week" or "month").
	Bars []dueBar
	Unit string
	// Pending counts the reminders yet to be sent; Overdue those of them
	// that were to go out before today, Later those going out after the
	// chart's last span.
	Pending, Overdue, Later, Most int
	From, Until                   time.Time
}

// overview shows the tenant's reminders at a glance: how many are in each
// state, and when those yet to be sent go out, from today to the last of
// them, in the reader's days: bars drawn as SVG with HTML labels (readable
// at a phone's width), and the numbers in a table beside them. It needs no
// script.
func (c *console) overview(w http.ResponseWriter, r *http.Request, a Approver) {
	st := styleFor(r, c.o.Now())
	d, err := c.overviewOf(r.Context(), c.tenantOf(a), st)
	if err != nil {
		c.log.Error("console: reading the overview failed", "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; try again.")
		return
	}
	c.render(w, r, http.StatusOK, "overview.html", page{Title: "Overview", Approver: a.Name, Data: d})
}

func (c *console) overviewOf(ctx context.Context, tenant string, st timeStyle) (overviewData, error) {
	var d overviewData
	o, err := c.o.Mirror.Overview(ctx, tenant, st.now, 0)
	if err != nil {
		return d, err
	}
	most := 0
	for _, s := range reminder.States {
		most = max(most, o.ByState[s])
		d.Total += o.ByState[s]
	}
	for _, s := range reminder.States {
		b := stateBar{State: s, N: o.ByState[s]}
		if most > 0 {
			b.Pct = b.N * 100 / most
		}
		if b.N > 0 {
			b.Pct = max(b.Pct, 1)
		}
		d.States = append(d.States, b)
	}
	span, err := c.o.Mirror.PendingDueSpan(ctx, tenant)
	if err != nil {
		return d, err
	}
	d.Pending = span.N
	today := st.dayStart(st.now)
	bounds, unit := dueBounds(st, today, span.Last)
	d.Unit = unit
	// Before today, each bar, after the last bar.
	spans := append(append([]time.Time{time.Unix(0, 0)}, bounds...), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	counts, err := c.o.Mirror.PendingDueCounts(ctx, tenant, spans)
	if err != nil {
		return d, err
	}
	d.Overdue, d.Later = counts[0], counts[len(counts)-1]
	d.From, d.Until = bounds[0], bounds[len(bounds)-1].Add(-time.Nanosecond)
	n := len(bounds) - 1
	for i := range n {
		d.Most = max(d.Most, counts[1+i])
	}
	every := max(1, (n+5)/6) // about six labels, whatever the span
	for i := range n {
		b := dueBar{From: bounds[i], Until: bounds[i+1].Add(-time.Nanosecond), N: counts[1+i]}
		if d.Most > 0 {
			b.Pct = b.N * 100 / d.Most
		}
		if b.N > 0 {
			b.Pct = max(b.Pct, 2)
		}
		if i%every == 0 {
			b.LabelEnd = i*100/n >= 80
			if unit == "month" {
				b.Label = b.From.In(st.loc).Format("Jan 2006")
			} else {
				b.Label = st.Short(b.From)
			}
		}
		d.Bars = append(d.Bars, b)
	}
	return d, nil
}

// dueBounds are the chart's spans from today to cover last's day: days,
// weeks or months in the reader's zone (a day of a change to or from
// summer time is 23 or 25 hours, as it is to them).
func dueBounds(st timeStyle, today, last time.Time) ([]time.Time, string) {
	days := minDays
	if !last.IsZero() {
		lastDay := st.dayStart(last)
		for n := 0; n < maxWeekBars*7+1 && today.AddDate(0, 0, n).Before(lastDay); n++ {
			days = max(days, n+2)
		}
	}
	var out []time.Time
	switch {
	case days <= maxDayBars:
		for i := range days + 1 {
			out = append(out, today.AddDate(0, 0, i))
		}
		return out, "day"
	case days <= maxWeekBars*7:
		for i := range (days+6)/7 + 1 {
			out = append(out, today.AddDate(0, 0, 7*i))
		}
		return out, "week"
	}
	out = append(out, today)
	y, m, _ := today.Date()
	for i := 1; i <= maxMonthBars; i++ {
		next := time.Date(y, m+time.Month(i), 1, 0, 0, 0, 0, st.loc)
		out = append(out, next)
		if next.After(last) {
			break
		}
	}
	return out, "month"
}
