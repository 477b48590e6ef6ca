package sink

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Profile is how the mail sink answers each call, so a benchmark can make
// every path it compares pay the same provider: a latency per accepted
// call, recurring windows of 429s, and an outage of 503s. The zero Profile
// answers at once (Instant).
type Profile struct {
	// Name labels the profile in reports.
	Name string
	// Median and Sigma shape a lognormal latency of each accepted call
	// (Sigma 0: exactly Median; Median 0: no latency).
	Median time.Duration
	Sigma  float64
	// Spread, when set, adds a uniform draw in [0, Spread) to Median
	// instead of the lognormal: a Median of 6 s and a Spread of 2 s answer
	// in 6 to 8 s.
	Spread time.Duration
	// AcceptFirst takes each message (records it, queues its events) as
	// the call arrives and answers after the latency: a provider that
	// took the mail at once and answers late, whose events may reach
	// serve before its answer reaches the caller. Without it a message is
	// accepted once its latency passed.
	AcceptFirst bool
	// TailShare of the accepted calls take Tail instead: the slow calls a
	// real API has now and then, which a lognormal makes too rare.
	TailShare float64
	Tail      time.Duration
	// Every LimitEvery, for LimitFor, every call is answered 429 with
	// X-RateLimit-Reset (the window's end, Unix seconds) and Retry-After,
	// and nothing is accepted. The first window opens LimitOffset after
	// Origin; the windows repeat both ways from there.
	LimitEvery, LimitFor, LimitOffset time.Duration
	// Origin anchors the 429 windows (zero: when SetProfile is called), so
	// a benchmark can put them at the same place in every run it compares.
	Origin time.Time
	// From OutageFrom until OutageTo every call is answered 503 without a
	// Retry-After, and nothing is accepted: a provider that is down.
	OutageFrom, OutageTo time.Time
	// Seed makes the latencies a fixed sequence: the same Seed draws the
	// same latencies, call after call.
	Seed uint64
}

// Profile names, as reports show them.
const (
	InstantName   = "instant"
	RealisticName = "realistic"
	SlowName      = "slow"
	OutageName    = "outage"
)

// Instant answers every call at once: what the sink always did.
func Instant() Profile { return Profile{Name: InstantName} }

// Realistic is what a real mail API shows a sender: a lognormal latency
// with a median of 220 ms, 1% of calls answered after 6 s, and 2.5 s of
// 429s every minute (the first 5 s after Origin).
func Realistic(seed uint64) Profile {
	return Profile{
		Name: RealisticName, Median: 220 * time.Millisecond, Sigma: 0.5, TailShare: 0.01, Tail: 6 * time.Second,
		LimitEvery: time.Minute, LimitFor: 2500 * time.Millisecond, LimitOffset: 5 * time.Second, Seed: seed,
	}
}

// SlowAnswer is how long the Slow profile takes to answer every call.
const SlowAnswer = 6 * time.Second

// Slow answers every call after SlowAnswer, accepting its mail whether or
// not the caller is still there: the provider on a bad day, and the
// window in which a caller may give up on a mail that went.
func Slow() Profile { return Profile{Name: SlowName, Median: SlowAnswer} }

// Outage answers every call 503 from from until to, and at once otherwise.
func Outage(from, to time.Time) Profile {
	return Profile{Name: OutageName, OutageFrom: from, OutageTo: to}
}

// IsInstant reports whether the profile answers every call at once and
// accepts it: no latency, no 429s, no outage.
func (p Profile) IsInstant() bool {
	return p.Median <= 0 && p.Spread <= 0 && (p.TailShare <= 0 || p.Tail <= 0) && !p.limits() && !p.OutageTo.After(p.OutageFrom)
}

func (p Profile) limits() bool { return p.LimitEvery > 0 && p.LimitFor > 0 }

// verdict is how the sink answers one call: Status 0 accepts the mail
// after Delay (or at once, answering after Delay, when AcceptFirst);
// anything else is answered at once with Headers.
type verdict struct {
	Status      int
	Headers     map[string]string
	Delay       time.Duration
	AcceptFirst bool
}

// answerModel is a Profile in use: its random draws, behind a mutex, so
// concurrent calls share one deterministic sequence.
type answerModel struct {
	p      Profile
	origin time.Time
	mu     sync.Mutex
	rng    *rand.Rand
}

func newAnswerModel(p Profile, now time.Time) *answerModel {
	origin := p.Origin
	if origin.IsZero() {
		origin = now
	}
	return &answerModel{p: p, origin: origin, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x5eed))}
}

// answer decides how the call arriving at now is answered.
func (m *answerModel) answer(now time.Time) verdict {
	p := m.p
	if p.OutageTo.After(p.OutageFrom) && !now.Before(p.OutageFrom) && now.Before(p.OutageTo) {
		return verdict{Status: http.StatusServiceUnavailable}
	}
	if end, in := m.limitWindow(now); in {
		return verdict{Status: http.StatusTooManyRequests, Headers: map[string]string{
			// Unix seconds rounded up, so the reset is never before the
			// window's end; Retry-After likewise.
			"X-RateLimit-Reset": strconv.FormatInt(int64(math.Ceil(float64(end.UnixNano())/1e9)), 10),
			"Retry-After":       strconv.Itoa(max(1, int(math.Ceil(end.Sub(now).Seconds())))),
		}}
	}
	return verdict{Delay: m.latency(), AcceptFirst: p.AcceptFirst}
}

// limitWindow reports whether now is in a 429 window, and when it ends.
func (m *answerModel) limitWindow(now time.Time) (end time.Time, in bool) {
	p := m.p
	if !p.limits() {
		return time.Time{}, false
	}
	pos := now.Sub(m.origin.Add(p.LimitOffset)) % p.LimitEvery
	if pos < 0 {
		pos += p.LimitEvery
	}
	if pos >= p.LimitFor {
		return time.Time{}, false
	}
	return now.Add(p.LimitFor - pos), true
}

// latency draws one accepted call's latency.
func (m *answerModel) latency() time.Duration {
	p := m.p
	if p.Median <= 0 && p.Spread <= 0 && (p.TailShare <= 0 || p.Tail <= 0) {
		return 0
	}
	m.mu.Lock()
	u, z := m.rng.Float64(), m.rng.NormFloat64()
	m.mu.Unlock()
	if p.TailShare > 0 && u < p.TailShare {
		return p.Tail
	}
	if p.Spread > 0 {
		return p.Median + time.Duration(u*float64(p.Spread))
	}
	return time.Duration(float64(p.Median) * math.Exp(p.Sigma*z))
}
