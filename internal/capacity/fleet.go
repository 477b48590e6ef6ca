package capacity

import (
	"errors"
	"math"
	"time"
)

// Figure is one measured input of the fleet model, with where it was
// measured, so every output can be traced to a run that can be repeated.
type Figure struct {
	Value float64
	// Source names the report and the run the value comes from.
	Source string
}

// Figures are what one delivered reminder costs, measured by this
// project's benchmarks. DefaultFigures holds the ones in docs/; a newer
// report replaces them (ReadFigures).
type Figures struct {
	// ActionsPerReminder are the Temporal Cloud billable actions of one
	// delivered reminder, counted from its history.
	ActionsPerReminder Figure
	// EventsPerReminder are the history events of one delivered reminder.
	EventsPerReminder Figure
	// EngineCPU is the Temporal server's CPU seconds per delivered
	// reminder: frontend, history and matching together (one process).
	EngineCPU Figure
	// PersistenceCPU is the CPU seconds Temporal's PostgreSQL spends per
	// delivered reminder.
	PersistenceCPU Figure
	// PersistenceWrites are Temporal's persistence requests per delivered
	// reminder that go through a history shard's serialised writes.
	PersistenceWrites Figure
	// PersistenceLatency is one such write's latency (seconds, median):
	// a shard takes about one write at a time, so its ceiling is the
	// inverse.
	PersistenceLatency Figure
	// WorkerCPU is the worker's CPU seconds per delivered reminder.
	WorkerCPU Figure
	// MirrorCPU is the mirror's PostgreSQL CPU seconds per delivered
	// reminder.
	MirrorCPU Figure
	// MirrorRows and MirrorBytes are the mirror's rows and bytes (with
	// their indexes) one delivered reminder leaves.
	MirrorRows, MirrorBytes Figure
	// ProviderEvents are SendGrid's Event Webhook events per delivered
	// email (processed, delivered, ...), which serve ingests.
	ProviderEvents Figure
	// SendSeconds is how long a notify activity holds its slot: the
	// provider's answer and the mirror's writes.
	SendSeconds Figure
	// MeasuredRate is the drain rate (reminders a second) the CPU figures
	// were measured at: beyond it they are extrapolated.
	MeasuredRate Figure
}

// FleetInput is the load, and the choices the fleet is sized under.
type FleetInput struct {
	UpdatesPerDay, SubscribersPerUpdate, PeakFactor float64
	// Outage is how long nothing is delivered; CatchUpWindow is how soon
	// after it the backlog must be gone, while new reminders keep coming
	// at the average rate.
	Outage, CatchUpWindow time.Duration
	// ProviderRate is the provider's rate limit (sends a second); 0: none.
	ProviderRate float64
	// Retention is how long finished reminders stay in the mirror (prune's
	// --older-than); Lead is how far ahead of their due time reminders
	// are scheduled, on average: the mirror holds those too.
	Retention, Lead time.Duration
	// SlotsPerWorker is SHIPNOTIFY_WORKER_MAX_ACTIVITIES; CoresPerWorker
	// the CPU a worker pod is given. WorkerPool is the mirror connections
	// a worker with that many slots keeps; ServePool serve's, and
	// ServeReplicas how many serve run. ExtraConnections are the others
	// (migrate).
	SlotsPerWorker          int
	CoresPerWorker          float64
	WorkerPool              int
	ServePool, ServeReplica int
	ExtraConnections        int
	// ShardUtilisation is the share of a shard's write ceiling the design
	// rate may use (0.5: half, leaving room for retries and skew).
	ShardUtilisation float64
	// PricePerMillion prices the actions; 0: no cost.
	PricePerMillion float64
}

// MinWorkers is the fewest workers a fleet runs: one may be restarted.
const MinWorkers = 2

// CPUTarget is the share of a worker's cores the sizing fills.
const CPUTarget = 0.7

// ShardHeadroom multiplies the shards needed for the count to create: it
// is fixed when the cluster is created.
const ShardHeadroom = 4

// FleetPlan is what the model says a fleet needs.
type FleetPlan struct {
	Plan
	// CatchUpRate is the drain that clears the outage's backlog within the
	// window while new reminders arrive; DesignRate the larger of it and
	// the peak: what the fleet is sized for.
	CatchUpRate, DesignRate float64
	// ProviderBound says the provider's rate limit is below the design
	// rate: the fleet is sized for the limit, and the catch-up takes
	// ProviderCatchUp instead (0 and false for Keeps when the limit
	// cannot outrun arrivals).
	ProviderBound   bool
	ProviderCatchUp time.Duration
	ProviderKeeps   bool
	// Cost is the month's actions at the price (0 without one).
	Cost float64
	// HistoryEvents is history events a second at the design rate.
	HistoryEvents float64
	// EngineCores and PersistenceCores are the Temporal server's and its
	// database's CPU at the design rate, extrapolated from the measured
	// figures.
	EngineCores, PersistenceCores float64
	// PersistenceWrites is shard writes a second at the design rate;
	// ShardCeiling one shard's writes a second; ShardsNeeded how many
	// keep each under the utilisation; ShardsToCreate that times the
	// headroom, as a power of two.
	PersistenceWrites, ShardCeiling float64
	ShardsNeeded, ShardsToCreate    int
	// Concurrency is notify activities in flight at the design rate
	// (Little's law: rate x slot time); Workers the fleet, the larger of
	// WorkersForSlots and WorkersForCPU (and MinWorkers).
	Concurrency                    float64
	WorkerCores                    float64
	WorkersForSlots, WorkersForCPU int
	Workers                        int
	// MirrorCores is the mirror's PostgreSQL CPU at the design rate;
	// MirrorRows and MirrorBytes what it holds after the retention.
	MirrorCores             float64
	MirrorRows, MirrorBytes float64
	// Connections are the mirror connections the fleet can open: each
	// worker's and serve's pool, one more pod of each during a rollout.
	Connections int
	// ProviderEvents are Event Webhook events a second at the design
	// rate.
	ProviderEvents float64
}

// PlanFleet sizes a fleet for in from the measured figures.
func PlanFleet(in FleetInput, f Figures) (FleetPlan, error) {
	switch {
	case in.CatchUpWindow <= 0:
		return FleetPlan{}, errors.New("the catch-up window must be positive")
	case in.ProviderRate < 0:
		return FleetPlan{}, errors.New("the provider's rate limit must not be negative")
	case in.Retention < 0 || in.Lead < 0:
		return FleetPlan{}, errors.New("the retention and the lead must not be negative")
	case in.SlotsPerWorker < 1 || in.CoresPerWorker <= 0:
		return FleetPlan{}, errors.New("a worker needs at least one slot and some CPU")
	case in.ShardUtilisation <= 0 || in.ShardUtilisation > 1:
		return FleetPlan{}, errors.New("the shard utilisation must be above 0 and at most 1")
	case in.PricePerMillion < 0:
		return FleetPlan{}, errors.New("the price must not be negative")
	case f.PersistenceLatency.Value <= 0 || f.SendSeconds.Value <= 0:
		return FleetPlan{}, errors.New("the persistence latency and the send time must be positive")
	}
	var p FleetPlan
	base, err := Compute(Input{
		UpdatesPerDay: in.UpdatesPerDay, SubscribersPerUpdate: in.SubscribersPerUpdate, PeakFactor: in.PeakFactor,
		DrainRate: 1, Outage: in.Outage, ActionsPerDelivery: f.ActionsPerReminder.Value,
	})
	if err != nil {
		return p, err
	}
	p.CatchUpRate = base.AverageRate + base.Backlog/in.CatchUpWindow.Seconds()
	p.DesignRate = max(base.PeakRate, p.CatchUpRate)
	if in.ProviderRate > 0 && in.ProviderRate < p.DesignRate {
		p.ProviderBound, p.DesignRate = true, in.ProviderRate
	}
	// The plan at the design rate: headroom 1, the catch-up as drained.
	if p.Plan, err = Compute(Input{
		UpdatesPerDay: in.UpdatesPerDay, SubscribersPerUpdate: in.SubscribersPerUpdate, PeakFactor: in.PeakFactor,
		DrainRate: p.DesignRate, Outage: in.Outage, ActionsPerDelivery: f.ActionsPerReminder.Value,
	}); err != nil {
		return p, err
	}
	if in.ProviderRate > 0 {
		limited := min(in.ProviderRate, p.DesignRate)
		if limited > p.AverageRate {
			p.ProviderCatchUp, p.ProviderKeeps = seconds(p.Backlog/(limited-p.AverageRate)), true
		}
	}
	p.Cost = Cost(p.ActionsPerMonth, in.PricePerMillion)
	r := p.DesignRate
	p.HistoryEvents = r * f.EventsPerReminder.Value
	p.EngineCores = r * f.EngineCPU.Value
	p.PersistenceCores = r * f.PersistenceCPU.Value
	p.PersistenceWrites = r * f.PersistenceWrites.Value
	p.ShardCeiling = 1 / f.PersistenceLatency.Value
	p.ShardsNeeded = int(math.Ceil(p.PersistenceWrites / (p.ShardCeiling * in.ShardUtilisation)))
	p.ShardsToCreate = powerOfTwo(p.ShardsNeeded * ShardHeadroom)
	p.Concurrency = r * f.SendSeconds.Value
	p.WorkerCores = r * f.WorkerCPU.Value
	p.WorkersForSlots = int(math.Ceil(p.Concurrency / float64(in.SlotsPerWorker)))
	p.WorkersForCPU = int(math.Ceil(p.WorkerCores / (in.CoresPerWorker * CPUTarget)))
	p.Workers = max(MinWorkers, p.WorkersForSlots, p.WorkersForCPU)
	p.MirrorCores = r * f.MirrorCPU.Value
	held := p.DeliveriesPerDay * (in.Retention + in.Lead).Hours() / 24
	p.MirrorRows = held * f.MirrorRows.Value
	p.MirrorBytes = held * f.MirrorBytes.Value
	p.Connections = (p.Workers+1)*in.WorkerPool + (in.ServeReplica+1)*in.ServePool + in.ExtraConnections
	p.ProviderEvents = r * f.ProviderEvents.Value
	return p, nil
}

// powerOfTwo is the least power of two at or above n (Temporal's shard
// counts are powers of two).
func powerOfTwo(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}
