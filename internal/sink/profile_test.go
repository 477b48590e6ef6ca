package sink

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var origin = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// The realistic profile's latencies have a median a real mail API shows
// (150–300 ms) and a 1% tail at 6 s; the same seed draws the same
// sequence.
func TestRealisticLatencyHasAMedianInRangeAndAOnePercentTail(t *testing.T) {
	t.Parallel()
	draw := func(seed uint64, n int) []time.Duration {
		m := newAnswerModel(Realistic(seed), origin)
		out := make([]time.Duration, n)
		for i := range out {
			// Between the windows: every call is accepted.
			v := m.answer(origin.Add(30 * time.Second))
			require.Zero(t, v.Status)
			out[i] = v.Delay
		}
		return out
	}
	const n = 100_000
	lat := draw(7, n)
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	median := sorted[n/2]
	require.GreaterOrEqual(t, median, 150*time.Millisecond)
	require.LessOrEqual(t, median, 300*time.Millisecond)
	tail := 0
	for _, d := range lat {
		if d == 6*time.Second {
			tail++
		}
	}
	require.InDelta(t, 0.01, float64(tail)/n, 0.002, "about 1%% of calls take 6 s")
	require.Equal(t, lat[:100], draw(7, 100), "a seed is a fixed sequence")
	require.NotEqual(t, lat[:100], draw(8, 100))
}

// Concurrent calls share one sequence without a race: n draws from many
// goroutines are the n draws of one, in some order.
func TestLatencyDrawsAreConcurrencySafe(t *testing.T) {
	t.Parallel()
	m := newAnswerModel(Realistic(3), origin)
	var mu sync.Mutex
	var got []time.Duration
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				d := m.answer(origin.Add(30 * time.Second)).Delay
				mu.Lock()
				got = append(got, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	one := newAnswerModel(Realistic(3), origin)
	var want []time.Duration
	for range 4000 {
		want = append(want, one.answer(origin.Add(30*time.Second)).Delay)
	}
	require.ElementsMatch(t, want, got)
}

// Inside a 429 window every call is refused with the window's end as
// X-RateLimit-Reset (Unix seconds, never before the end) and a
// Retry-After; outside, calls are accepted. The windows recur every
// LimitEvery, from Origin plus LimitOffset.
func TestRealisticRateLimitWindowsAnswer429(t *testing.T) {
	t.Parallel()
	m := newAnswerModel(Realistic(1), origin)
	for _, tc := range []struct {
		at        time.Duration
		limited   bool
		end       time.Duration
		retryLeft int
	}{
		{0, false, 0, 0},
		{4900 * time.Millisecond, false, 0, 0},
		{5 * time.Second, true, 7500 * time.Millisecond, 3},
		{7 * time.Second, true, 7500 * time.Millisecond, 1},
		{7500 * time.Millisecond, false, 0, 0},
		{65200 * time.Millisecond, true, 67500 * time.Millisecond, 3},
		{-55 * time.Second, true, -52500 * time.Millisecond, 3},
	} {
		v := m.answer(origin.Add(tc.at))
		if !tc.limited {
			require.Zero(t, v.Status, "at %s", tc.at)
			continue
		}
		require.Equal(t, http.StatusTooManyRequests, v.Status, "at %s", tc.at)
		end := origin.Add(tc.end)
		reset, err := strconv.ParseInt(v.Headers["X-RateLimit-Reset"], 10, 64)
		require.NoError(t, err)
		require.False(t, time.Unix(reset, 0).Before(end), "at %s: reset %d is not before the window's end", tc.at, reset)
		require.Less(t, time.Unix(reset, 0).Sub(end), time.Second)
		require.Equal(t, strconv.Itoa(tc.retryLeft), v.Headers["Retry-After"], "at %s", tc.at)
	}
}

// Through the sink: a call in a 429 window, and one in an outage, is
// refused and nothing is accepted; the slow profile accepts after its
// latency; Instant is what an untouched sink does.
func TestProfilesThroughTheSink(t *testing.T) {
	t.Parallel()
	s, err := StartMail("", "SG.k")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.True(t, s.Profile().IsInstant())
	send := func() (*http.Response, time.Duration) {
		body := `{"from":{"email":"a@b.example"},"subject":"s","personalizations":[{"to":[{"email":"c@d.example"}]}],` +
			`"content":[{"type":"text/plain","value":"t"}],"custom_args":{"delivery_key":"k"}}`
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v3/mail/send", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer SG.k")
		began := time.Now()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp, time.Since(began)
	}

	p := Realistic(1)
	p.Origin = time.Now().Add(-p.LimitOffset - time.Second) // a second into a window
	s.SetProfile(p)
	resp, _ := send()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("X-RateLimit-Reset"))
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	s.SetProfile(Outage(time.Now().Add(-time.Second), time.Now().Add(time.Minute)))
	resp, _ = send()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Empty(t, s.Mails(), "nothing is accepted in a 429 window or an outage")

	s.SetProfile(Profile{Name: "slow-ish", Median: 300 * time.Millisecond})
	resp, took := send()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.GreaterOrEqual(t, took, 300*time.Millisecond)
	require.Len(t, s.Mails(), 1)

	s.SetProfile(Instant())
	resp, _ = send()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, 4, s.Requests())
	require.False(t, Slow().IsInstant())
	require.False(t, Outage(origin, origin.Add(time.Minute)).IsInstant())
}
