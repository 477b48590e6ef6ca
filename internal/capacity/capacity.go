// Package capacity is the seed article's arithmetic as a tool: deliveries
// a day, average and peak rate, the headroom a drain rate leaves, and how
// long the backlog of an outage takes to clear.
package capacity

import (
	"errors"
	"time"
)

// Input is the load and the machinery's speed.
type Input struct {
	UpdatesPerDay        float64
	SubscribersPerUpdate float64
	// PeakFactor is the peak rate over the average (the morning peak).
	PeakFactor float64
	// DrainRate is the deliveries a second the system sustains (the
	// benchmark's catch-up drain rate, or the seed's batch cap per tick).
	DrainRate float64
	// Outage is how long nothing is delivered.
	Outage time.Duration
	// ActionsPerDelivery is the Temporal Cloud actions one delivered
	// reminder costs (the benchmark counts them from its history); 0 when
	// unknown.
	ActionsPerDelivery float64
}

// DaysPerMonth is the month the monthly figures assume.
const DaysPerMonth = 30

// Plan is what the numbers come to.
type Plan struct {
	DeliveriesPerDay float64
	AverageRate      float64 // deliveries per second
	PeakRate         float64
	// Headroom is DrainRate over PeakRate: above 1 the peak is absorbed.
	Headroom float64
	// Backlog is the deliveries an outage accumulates at the average rate.
	Backlog float64
	// CatchUp is how long the backlog takes at the drain rate, as the seed
	// article reckons it.
	CatchUp time.Duration
	// CatchUpWhileArriving also drains what keeps arriving at the average
	// rate meanwhile; infinite (0 and false) when the drain rate cannot
	// outrun arrivals.
	CatchUpWhileArriving time.Duration
	Keeps                bool
	// ActionsPerDay and ActionsPerMonth are what the deliveries cost in
	// Temporal Cloud actions (0 when ActionsPerDelivery is unknown).
	ActionsPerDay   float64
	ActionsPerMonth float64
}

// Compute does the arithmetic.
func Compute(in Input) (Plan, error) {
	switch {
	case in.UpdatesPerDay <= 0 || in.SubscribersPerUpdate <= 0:
		return Plan{}, errors.New("updates per day and subscribers per update must be positive")
	case in.PeakFactor < 1:
		return Plan{}, errors.New("the peak factor must be at least 1")
	case in.DrainRate <= 0:
		return Plan{}, errors.New("the drain rate must be positive")
	case in.Outage < 0:
		return Plan{}, errors.New("the outage must not be negative")
	case in.ActionsPerDelivery < 0:
		return Plan{}, errors.New("the actions per delivery must not be negative")
	}
	p := Plan{DeliveriesPerDay: in.UpdatesPerDay * in.SubscribersPerUpdate}
	p.AverageRate = p.DeliveriesPerDay / (24 * 60 * 60)
	p.PeakRate = p.AverageRate * in.PeakFactor
	p.Headroom = in.DrainRate / p.PeakRate
	p.Backlog = p.AverageRate * in.Outage.Seconds()
	p.CatchUp = seconds(p.Backlog / in.DrainRate)
	if in.DrainRate > p.AverageRate {
		p.CatchUpWhileArriving, p.Keeps = seconds(p.Backlog/(in.DrainRate-p.AverageRate)), true
	}
	p.ActionsPerDay = p.DeliveriesPerDay * in.ActionsPerDelivery
	p.ActionsPerMonth = p.ActionsPerDay * DaysPerMonth
	return p, nil
}

// Cost is what actions cost at a price per million. No price is built
// in: prices change and differ by plan, so the caller brings one.
func Cost(actions, pricePerMillion float64) float64 {
	return actions / 1e6 * pricePerMillion
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Second)
}
