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
