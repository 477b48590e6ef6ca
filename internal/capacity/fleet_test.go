package capacity_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/capacity"
)

// figures are round numbers, so the expectations can be worked by hand.
var figures = capacity.Figures{
	ActionsPerReminder: capacity.Figure{Value: 4}, EventsPerReminder: capacity.Figure{Value: 20},
	EngineCPU: capacity.Figure{Value: 0.1}, PersistenceCPU: capacity.Figure{Value: 0.05},
	PersistenceWrites: capacity.Figure{Value: 10}, PersistenceLatency: capacity.Figure{Value: 0.002},
	WorkerCPU: capacity.Figure{Value: 0.01}, MirrorCPU: capacity.Figure{Value: 0.004},
	MirrorRows: capacity.Figure{Value: 5}, MirrorBytes: capacity.Figure{Value: 2000},
	ProviderEvents: capacity.Figure{Value: 2}, SendSeconds: capacity.Figure{Value: 0.3},
	MeasuredRate: capacity.Figure{Value: 25},
}

func fleetInput(updates float64) capacity.FleetInput {
	return capacity.FleetInput{
		UpdatesPerDay: updates, SubscribersPerUpdate: 3, PeakFactor: 10, Outage: 6 * time.Hour, CatchUpWindow: time.Hour,
		Retention: 90 * 24 * time.Hour, Lead: 7 * 24 * time.Hour, SlotsPerWorker: 50, CoresPerWorker: 1,
		WorkerPool: 54, ServePool: 16, ServeReplica: 2, ExtraConnections: 2, ShardUtilisation: 0.5,
	}
}

// The fleet model keeps the seed article's own numbers for its load: 120,000
// deliveries, 1.4 a second, 14 at the peak, 30,000 behind after six hours.
func TestFleetKeepsTheSeedsNumbers(t *testing.T) {
	t.Parallel()
	p, err := capacity.PlanFleet(fleetInput(40000), figures)
	require.NoError(t, err)
	require.Equal(t, 120000.0, p.DeliveriesPerDay)
	require.InDelta(t, 1.4, p.AverageRate, 0.05)
	require.InDelta(t, 14, p.PeakRate, 0.5)
	require.InDelta(t, 30000, p.Backlog, 1)
	// The backlog cleared within the hour while arrivals go on: 1.39 + 30,000/3,600.
	require.InDelta(t, 120000.0/86400+30000.0/3600, p.CatchUpRate, 1e-9)
	require.Equal(t, p.PeakRate, p.DesignRate, "the peak is the larger")
	require.Equal(t, capacity.MinWorkers, p.Workers, "the seed's load needs no more than two workers")
	require.Equal(t, 14_400_000.0, p.ActionsPerMonth)
}

// A tracker a thousand times larger: 120 M deliveries a day, 1,389 a second,
// 13,889 at the peak; every output follows from the figures.
func TestFleetAtAThousandTimesTheSeed(t *testing.T) {
	t.Parallel()
	in := fleetInput(40_000_000)
	in.PricePerMillion = 25
	p, err := capacity.PlanFleet(in, figures)
	require.NoError(t, err)
	r := 120e6 / 86400 * 10
	require.InDelta(t, r, p.DesignRate, 1e-6)
	require.InDelta(t, 14.4e9, p.ActionsPerMonth, 1)
	require.InDelta(t, 360_000, p.Cost, 1e-6)
	require.InDelta(t, r*20, p.HistoryEvents, 1e-6)
	require.InDelta(t, r*0.1, p.EngineCores, 1e-6)
	require.InDelta(t, r*0.05, p.PersistenceCores, 1e-6)
	// Shards: r x 10 writes at 500 a shard, half used.
	require.InDelta(t, 500, p.ShardCeiling, 1e-9)
	require.Equal(t, int(math.Ceil(r*10/250)), p.ShardsNeeded)
	require.Equal(t, 4096, p.ShardsToCreate, "%d needed x 4, to a power of two", p.ShardsNeeded)
	// Workers: r x 0.3 s in flight over 50 slots; CPU r x 10 ms at 70% of a core.
	require.Equal(t, int(math.Ceil(r*0.3/50)), p.WorkersForSlots)
	require.Equal(t, int(math.Ceil(r*0.01/0.7)), p.WorkersForCPU)
	require.Equal(t, max(p.WorkersForSlots, p.WorkersForCPU), p.Workers)
	require.Equal(t, (p.Workers+1)*54+3*16+2, p.Connections)
	// The mirror holds 97 days of deliveries.
	require.InDelta(t, 120e6*97*5, p.MirrorRows, 1)
	require.InDelta(t, 120e6*97*2000, p.MirrorBytes, 1)
	require.InDelta(t, r*2, p.ProviderEvents, 1e-6)
}

// A provider's rate limit below the design rate sizes the fleet for the
// limit, and the outage's backlog drains at what it leaves over arrivals.
func TestFleetUnderTheProvidersLimit(t *testing.T) {
	t.Parallel()
	in := fleetInput(40_000_000)
	in.ProviderRate = 5000
	p, err := capacity.PlanFleet(in, figures)
	require.NoError(t, err)
	require.True(t, p.ProviderBound)
	require.Equal(t, 5000.0, p.DesignRate)
	require.True(t, p.ProviderKeeps)
	avg := 120e6 / 86400
	require.InDelta(t, (avg * 6 * 3600 / (5000 - avg)), p.ProviderCatchUp.Seconds(), 1)

	in.ProviderRate = 1000 // below the average: the backlog never clears
	p, err = capacity.PlanFleet(in, figures)
	require.NoError(t, err)
	require.False(t, p.ProviderKeeps)
	require.Zero(t, p.ProviderCatchUp)
}

func TestFleetBadInput(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*capacity.FleetInput, *capacity.Figures){
		"no window":         func(in *capacity.FleetInput, _ *capacity.Figures) { in.CatchUpWindow = 0 },
		"negative provider": func(in *capacity.FleetInput, _ *capacity.Figures) { in.ProviderRate = -1 },
		"no slots":          func(in *capacity.FleetInput, _ *capacity.Figures) { in.SlotsPerWorker = 0 },
		"no cores":          func(in *capacity.FleetInput, _ *capacity.Figures) { in.CoresPerWorker = 0 },
		"utilisation":       func(in *capacity.FleetInput, _ *capacity.Figures) { in.ShardUtilisation = 1.5 },
		"no latency":        func(_ *capacity.FleetInput, f *capacity.Figures) { f.PersistenceLatency.Value = 0 },
		"no updates":        func(in *capacity.FleetInput, _ *capacity.Figures) { in.UpdatesPerDay = 0 },
		"negative lead":     func(in *capacity.FleetInput, _ *capacity.Figures) { in.Lead = -time.Hour },
	} {
		in, f := fleetInput(40000), figures
		mutate(&in, &f)
		_, err := capacity.PlanFleet(in, f)
		require.Error(t, err, name)
	}
}
