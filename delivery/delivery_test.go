package delivery_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/delivery"
)

// A receiver cannot steer our retries: its Retry-After is held to a second
// to an hour, and a value that overflows a time.Duration or is negative is
// ignored (0: the retry policy decides), never turned into a negative or
// absurd wait.
func TestRetryAfterIsClamped(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":      0,
		"0":     0,
		"1":     time.Second,
		"12":    12 * time.Second,
		" 30 ":  30 * time.Second,
		"3600":  time.Hour,
		"3601":  time.Hour,
		"86400": time.Hour,
		// The largest whole seconds a time.Duration holds is 9223372036;
		// one more overflows it, and so does 2^64 ns in seconds.
		"9223372036":           time.Hour,
		"9223372037":           0,
		"18446744073":          0,
		"99999999999999999999": 0,
		"-1":                   0,
		"-9223372037":          0,
		"soon":                 0,
		"1.5":                  0,
		// HTTP dates: in the past ignored, near honoured, far clamped.
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(48 * time.Hour).Format(http.TimeFormat):   time.Hour,
		"Fri, 31 Dec 9999 23:59:59 GMT":                   time.Hour,
		now.Add(time.Second).Format(http.TimeFormat):      time.Second,
	} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			got := delivery.RetryAfter(v, now)
			require.Equal(t, want, got, "Retry-After: %q", v)
			require.True(t, got == 0 || (got >= delivery.MinRetryAfter && got <= delivery.MaxRetryAfter), "%q: %s", v, got)
		})
	}
}

// A retry after a provider's failure follows the provider's outage, not the
// reminder's own count: a blip leaves the wait to the retry policy; in an
// outage no retry comes sooner than the floor (a reminder due late in it
// does not make the fast early retries), and none later than the greater
// of the floor and an eighth of the outage, so the backlog goes soon after
// the provider answers again; the waits are spread ±20%.
func TestBackoffFollowsTheProvidersOutage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		own, outage, want time.Duration
	}{
		{time.Second, 0, 0},
		{time.Second, 9 * time.Second, 0},
		{time.Second, 10 * time.Second, delivery.OutageFloor},
		{4 * time.Minute, 5 * time.Minute, delivery.OutageFloor},
		{8 * time.Minute, time.Hour, 450 * time.Second},
		{2 * time.Minute, time.Hour, 2 * time.Minute},
		{time.Second, time.Hour, delivery.OutageFloor},
		{10 * time.Minute, 72 * time.Hour, delivery.MaxBackoff},
	} {
		require.Equal(t, tc.want, delivery.Backoff(tc.own, tc.outage, 0.5), "own %s, outage %s", tc.own, tc.outage)
	}
	lo, hi := delivery.Backoff(time.Second, 5*time.Minute, 0), delivery.Backoff(time.Second, 5*time.Minute, 0.999999)
	require.Equal(t, time.Duration(0.8*float64(delivery.OutageFloor)), lo)
	require.InDelta(t, 1.2*float64(delivery.OutageFloor), float64(hi), float64(time.Millisecond))
}
