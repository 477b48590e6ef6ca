package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// The arithmetic the report rests on, as pure functions so each can be
// checked on numbers worked by hand.

// quantile is the nearest-rank p-quantile (0 < p ≤ 1) of sorted values:
// the smallest value with at least p of them at or below it.
func quantile[T any](sorted []T, p float64) T {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// sortedTimes returns the instants in order, leaving ts as it was.
func sortedTimes(ts []time.Time) []time.Time {
	s := slices.Clone(ts)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	return s
}

// DrainRate is reminders a second over the middle of a drain:
// 0.8·N/(t90−t10), where t10 and t90 are the 10th and 90th percentile
// notify starts. One straggler, or a slow first second, does not move it as
// it moves N/(last−first). 0 when it cannot be told (fewer than two
// distinct instants in that window).
func DrainRate(starts []time.Time) float64 {
	if len(starts) == 0 {
		return 0
	}
	s := sortedTimes(starts)
	window := quantile(s, 0.9).Sub(quantile(s, 0.1))
	if window <= 0 {
		return 0
	}
	return 0.8 * float64(len(s)) / window.Seconds()
}

// Drain is how long after a reference instant (the due instant, or the
// worker's first poll after an outage) a share of the reminders had begun
// their notify; or, per reminder, after its own due time.
type Drain struct {
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P95 time.Duration `json:"p95_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns,omitempty"`
}

// TimeToDrain gives the time-to-drain percentiles of starts from ref.
func TimeToDrain(starts []time.Time, ref time.Time) Drain {
	if len(starts) == 0 {
		return Drain{}
	}
	s := sortedTimes(starts)
	at := func(p float64) time.Duration { return quantile(s, p).Sub(ref) }
	return Drain{P50: at(0.50), P90: at(0.90), P95: at(0.95), P99: at(0.99), Max: s[len(s)-1].Sub(ref)}
}

// DurationsDrain gives the same percentiles of waits each measured from
// its own reference (a steady reminder's lag from its due time), leaving
// waits as they were.
func DurationsDrain(waits []time.Duration) Drain {
	if len(waits) == 0 {
		return Drain{}
	}
	s := slices.Clone(waits)
	slices.Sort(s)
	return Drain{P50: quantile(s, 0.50), P90: quantile(s, 0.90), P95: quantile(s, 0.95), P99: quantile(s, 0.99), Max: s[len(s)-1]}
}

// Lags are the percentiles of notify start minus due time.
type Lags struct {
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// LagPercentiles gives the lag percentiles, leaving lags as they were.
func LagPercentiles(lags []time.Duration) Lags {
	if len(lags) == 0 {
		return Lags{}
	}
	s := slices.Clone(lags)
	slices.Sort(s)
	return Lags{P50: quantile(s, 0.50), P90: quantile(s, 0.90), P99: quantile(s, 0.99), Max: s[len(s)-1]}
}

// Median is the middle value (the mean of the middle two for an even
// count); NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Bootstrap settings: enough resamples that the interval's ends do not
// move between runs of the report, and a fixed seed so the same results
// always give the same interval.
const (
	bootstrapResamples = 10_000
	bootstrapSeed      = 12
	// Confidence is the intervals' coverage.
	Confidence = 0.95
)

// BootstrapMedian is the percentile-bootstrap interval of the median of xs
// at the given confidence: xs resampled with replacement, the median of
// each resample, and the quantiles that leave (1−confidence)/2 out at each
// end. NaN, NaN for no values.
func BootstrapMedian(xs []float64, confidence float64, resamples int, seed uint64) (low, high float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	medians := make([]float64, resamples)
	sample := make([]float64, len(xs))
	for i := range medians {
		for j := range sample {
			sample[j] = xs[rng.IntN(len(xs))]
		}
		medians[i] = Median(sample)
	}
	slices.Sort(medians)
	tail := (1 - confidence) / 2
	return quantile(medians, tail), quantile(medians, 1-tail)
}

// PairRatios divides each pair's numerator by its denominator, skipping
// pairs whose denominator is not positive.
func PairRatios(num, den []float64) []float64 {
	var out []float64
	for i := range min(len(num), len(den)) {
		if den[i] > 0 {
			out = append(out, num[i]/den[i])
		}
	}
	return out
}
