package bench

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// at returns instants t0+offset for each offset.
func at(offsets ...time.Duration) []time.Time {
	out := make([]time.Time, len(offsets))
	for i, o := range offsets {
		out[i] = t0.Add(o)
	}
	return out
}

func everySecond(from, to int) []time.Duration {
	var out []time.Duration
	for s := from; s <= to; s++ {
		out = append(out, time.Duration(s)*time.Second)
	}
	return out
}

func TestQuantileIsNearestRank(t *testing.T) {
	t.Parallel()
	xs := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want int
	}{{0.1, 1}, {0.5, 5}, {0.9, 9}, {0.95, 10}, {0.99, 10}, {1, 10}, {0.01, 1}} {
		require.Equal(t, tc.want, quantile(xs, tc.p), "p=%g", tc.p)
	}
}

func TestDrainRate(t *testing.T) {
	t.Parallel()
	even := make([]time.Duration, 100) // 50 a second for two seconds
	for i := range even {
		even[i] = time.Duration(i) * 20 * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		starts []time.Time
		want   float64
	}{
		// t10 = 0 s, t90 = 8 s: 0.8·10/8.
		{"one a second", at(everySecond(0, 9)...), 1},
		// The same ten with the last one a straggler: N/(last−first)
		// would say 0.1/s; the middle of the drain still says 1/s.
		{"a straggler does not move it", at(append(everySecond(0, 8), 100*time.Second)...), 1},
		// t10 = 0.18 s, t90 = 1.78 s: 0.8·100/1.6.
		{"fifty a second", at(even...), 50},
		{"order does not matter", at(9*time.Second, 0, 5*time.Second, 2*time.Second, 7*time.Second,
			time.Second, 3*time.Second, 8*time.Second, 4*time.Second, 6*time.Second), 1},
		{"all at one instant: cannot be told", at(0, 0, 0, 0), 0},
		{"none", nil, 0},
	} {
		require.InDelta(t, tc.want, DrainRate(tc.starts), 1e-9, tc.name)
	}
}

func TestTimeToDrain(t *testing.T) {
	t.Parallel()
	// Ten starts one a second, the first a second after the reference.
	got := TimeToDrain(at(everySecond(0, 9)...), t0.Add(-time.Second))
	require.Equal(t, Drain{P50: 5 * time.Second, P90: 9 * time.Second, P95: 10 * time.Second, P99: 10 * time.Second, Max: 10 * time.Second}, got)
	require.Equal(t, Drain{}, TimeToDrain(nil, t0))

	// Each from its own reference (a steady reminder's lag): the same
	// percentiles of the waits.
	var waits []time.Duration
	for ms := 100; ms >= 1; ms-- {
		waits = append(waits, time.Duration(ms)*time.Millisecond)
	}
	require.Equal(t, Drain{P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P95: 95 * time.Millisecond,
		P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}, DurationsDrain(waits))
	require.Equal(t, 100*time.Millisecond, waits[0], "the caller's slice is left as it was")
}

func TestLagPercentiles(t *testing.T) {
	t.Parallel()
	var lags []time.Duration
	for ms := 100; ms >= 1; ms-- { // unsorted on purpose
		lags = append(lags, time.Duration(ms)*time.Millisecond)
	}
	got := LagPercentiles(lags)
	require.Equal(t, Lags{P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}, got)
	require.Equal(t, 100*time.Millisecond, lags[0], "the caller's slice is left as it was")
}

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1}, 2},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.9, 1.4, 1.1, 1.2, 1.0}, 1.1},
	} {
		require.InDelta(t, tc.want, Median(tc.xs), 1e-12, "%v", tc.xs)
	}
	require.True(t, math.IsNaN(Median(nil)))
	xs := []float64{3, 1, 2}
	Median(xs)
	require.Equal(t, []float64{3, 1, 2}, xs, "the caller's slice is left as it was")
}

func TestBootstrapMedian(t *testing.T) {
	t.Parallel()
	// One value: no spread.
	low, high := BootstrapMedian([]float64{1.2}, Confidence, 1000, 1)
	require.Equal(t, []float64{1.2, 1.2}, []float64{low, high})

	// Five values: a resample's median is its 3rd smallest draw, and it is
	// the minimum with probability 0.058 (three or more of five draws the
	// smallest), above the 2.5% tail, so the 95% interval spans min to
	// max. Five pairs decide only when every pair agrees.
	low, high = BootstrapMedian([]float64{1.4, 1.0, 1.8, 1.2, 1.6}, Confidence, bootstrapResamples, bootstrapSeed)
	require.Equal(t, []float64{1.0, 1.8}, []float64{low, high})

	// Fifteen values close together: the interval is inside their range,
	// around the median, and shifts with them.
	xs := []float64{1.31, 1.35, 1.38, 1.40, 1.41, 1.42, 1.43, 1.44, 1.45, 1.46, 1.47, 1.49, 1.52, 1.55, 1.60}
	low, high = BootstrapMedian(xs, Confidence, bootstrapResamples, bootstrapSeed)
	require.Less(t, 1.31, low)
	require.LessOrEqual(t, low, Median(xs))
	require.LessOrEqual(t, Median(xs), high)
	require.Greater(t, 1.60, high)
	shifted := make([]float64, len(xs))
	for i, x := range xs {
		shifted[i] = x + 10
	}
	slow, shigh := BootstrapMedian(shifted, Confidence, bootstrapResamples, bootstrapSeed)
	require.InDelta(t, low+10, slow, 1e-9)
	require.InDelta(t, high+10, shigh, 1e-9)

	// A fixed seed: the same results always give the same interval.
	again, againHigh := BootstrapMedian(xs, Confidence, bootstrapResamples, bootstrapSeed)
	require.Equal(t, []float64{low, high}, []float64{again, againHigh})

	low, high = BootstrapMedian(nil, Confidence, 100, 1)
	require.True(t, math.IsNaN(low) && math.IsNaN(high))
}

func TestPairRatios(t *testing.T) {
	t.Parallel()
	require.Equal(t, []float64{2, 2}, PairRatios([]float64{2, 3, 4}, []float64{1, 0, 2}))
	require.Empty(t, PairRatios(nil, nil))
}
