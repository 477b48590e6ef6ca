package capacity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/capacity"
)

// The seed article's worked example: 40,000 updates a day, three
// subscribers each, a 10x morning peak, a drain of 1,000 rows per 30 s tick.
func TestTheArticlesNumbers(t *testing.T) {
	t.Parallel()
	p, err := capacity.Compute(capacity.Input{
		UpdatesPerDay: 40000, SubscribersPerUpdate: 3, PeakFactor: 10, DrainRate: 1000.0 / 30, Outage: 6 * time.Hour,
	})
	require.NoError(t, err)
	require.Equal(t, 120000.0, p.DeliveriesPerDay, "120,000 deliveries")
	require.InDelta(t, 1.4, p.AverageRate, 0.05, "roughly 1.4 per second averaged")
	require.InDelta(t, 14, p.PeakRate, 0.5, "call it 14 per second at a morning peak")
	require.InDelta(t, 2.4, p.Headroom, 0.1, "a bit over 2x peak")
	require.InDelta(t, 30000, p.Backlog, 1, "six hours accumulates 30,000")
	require.InDelta(t, (15 * time.Minute).Seconds(), p.CatchUp.Seconds(), 1, "fifteen minutes of drain")
	require.True(t, p.Keeps)
	require.Greater(t, p.CatchUpWhileArriving, p.CatchUp)

	// "A scanner paused for 20 minutes accumulates about 1,700 rows."
	p, err = capacity.Compute(capacity.Input{UpdatesPerDay: 40000, SubscribersPerUpdate: 3, PeakFactor: 10, DrainRate: 1000.0 / 30, Outage: 20 * time.Minute})
	require.NoError(t, err)
	require.InDelta(t, 1700, p.Backlog, 50)
}

func TestADrainSlowerThanArrivalsNeverCatchesUp(t *testing.T) {
	t.Parallel()
	p, err := capacity.Compute(capacity.Input{UpdatesPerDay: 86400, SubscribersPerUpdate: 1, PeakFactor: 1, DrainRate: 0.5, Outage: time.Hour})
	require.NoError(t, err)
	require.False(t, p.Keeps)
	require.Zero(t, p.CatchUpWhileArriving)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	for _, in := range []capacity.Input{
		{UpdatesPerDay: 0, SubscribersPerUpdate: 3, PeakFactor: 10, DrainRate: 1},
		{UpdatesPerDay: 1, SubscribersPerUpdate: 3, PeakFactor: 0.5, DrainRate: 1},
		{UpdatesPerDay: 1, SubscribersPerUpdate: 3, PeakFactor: 1, DrainRate: 0},
		{UpdatesPerDay: 1, SubscribersPerUpdate: 3, PeakFactor: 1, DrainRate: 1, Outage: -time.Hour},
	} {
		_, err := capacity.Compute(in)
		require.Error(t, err)
	}
}

// Actions scale with deliveries: the seed's 120,000 deliveries a day at 4
// actions each are 480,000 a day, 14.4 million in a 30-day month; at a
// price of 25 per million that month costs 360.
func TestActions(t *testing.T) {
	t.Parallel()
	p, err := capacity.Compute(capacity.Input{
		UpdatesPerDay: 40000, SubscribersPerUpdate: 3, PeakFactor: 10, DrainRate: 50, ActionsPerDelivery: 4,
	})
	require.NoError(t, err)
	require.InDelta(t, 480_000, p.ActionsPerDay, 1e-6)
	require.InDelta(t, 14_400_000, p.ActionsPerMonth, 1e-6)
	require.InDelta(t, 360, capacity.Cost(p.ActionsPerMonth, 25), 1e-9)

	p, err = capacity.Compute(capacity.Input{UpdatesPerDay: 40000, SubscribersPerUpdate: 3, PeakFactor: 10, DrainRate: 50})
	require.NoError(t, err)
	require.Zero(t, p.ActionsPerDay, "unknown actions: none computed")

	_, err = capacity.Compute(capacity.Input{UpdatesPerDay: 1, SubscribersPerUpdate: 1, PeakFactor: 1, DrainRate: 1, ActionsPerDelivery: -1})
	require.Error(t, err)
}
