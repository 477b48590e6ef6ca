package console

import (
	"net/http"
	"time"

	"github.com/shipnotify/shipnotify/reminder"
)

// overviewDays is how far ahead the overview's due chart looks.
const overviewDays = 30

// The charts' geometry, in SVG user units: the page scales them to fit.
const (
	chartWidth  = 640
	stateRowH   = 24
	stateLabelW = 130
	dueChartH   = 160
	dueAxisH    = 20
)

// stateBar is one state's bar in the by-state chart.
type stateBar struct {
	State reminder.State
	N     int
	// Y is the row's top; W the bar's width; CountX where its number goes.
	Y, W, CountX int
}

// dayBar is one day's bar in the due chart.
type dayBar struct {
	Day  time.Time
	N    int
	X, Y int
	W, H int
	// Label is set on the days the axis names.
	Label string
}

type overviewData struct {
	States      []stateBar
	StatesH     int
	Days        []dayBar
	DayMax      int
	Total, Due  int
	From, Until time.Time
	// Geometry, for the template.
	Width, LabelW, ChartH, AxisH int
}

// overview shows the tenant's reminders at a glance: how many are in each
// state, and how many fall due on each of the next 30 days (UTC), as
// server-drawn SVG charts with the numbers in a table beside them. It
// needs no script.
func (c *console) overview(w http.ResponseWriter, r *http.Request, a Approver) {
	now := c.o.Now()
	o, err := c.o.Mirror.Overview(r.Context(), c.tenantOf(a), now, overviewDays)
	if err != nil {
		c.log.Error("console: reading the overview failed", "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; try again.")
		return
	}
	c.render(w, http.StatusOK, "overview.html", page{Title: "Overview", Approver: a.Name, Data: overviewOf(o.ByState, o.From, o.DuePerDay)})
}

func overviewOf(byState map[reminder.State]int, from time.Time, perDay []int) overviewData {
	d := overviewData{From: from, Until: from.AddDate(0, 0, len(perDay)-1),
		Width: chartWidth, LabelW: stateLabelW, ChartH: dueChartH, AxisH: dueAxisH}
	most := 0
	for _, s := range reminder.States {
		most = max(most, byState[s])
		d.Total += byState[s]
	}
	barSpace := chartWidth - stateLabelW - 60 // room for the count after the bar
	for i, s := range reminder.States {
		n := byState[s]
		b := stateBar{State: s, N: n, Y: i * stateRowH}
		if most > 0 {
			b.W = n * barSpace / most
		}
		if n > 0 {
			b.W = max(b.W, 2)
		}
		b.CountX = stateLabelW + b.W + 6
		d.States = append(d.States, b)
	}
	d.StatesH = len(reminder.States) * stateRowH
	for _, n := range perDay {
		d.DayMax = max(d.DayMax, n)
		d.Due += n
	}
	slot := chartWidth / max(len(perDay), 1)
	for i, n := range perDay {
		b := dayBar{Day: from.AddDate(0, 0, i), N: n, X: i * slot, W: slot - 2}
		if d.DayMax > 0 {
			b.H = n * (dueChartH - 4) / d.DayMax
		}
		if n > 0 {
			b.H = max(b.H, 2)
		}
		b.Y = dueChartH - b.H
		if i%7 == 0 {
			b.Label = b.Day.Format("2 Jan")
		}
		d.Days = append(d.Days, b)
	}
	return d
}
