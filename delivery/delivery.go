// Package delivery holds what the channels (email, webhook) share about a
// provider's answer: a failure that says whether to retry and when, and
// whether the request may have reached the other side, in one type the
// notify activity turns into Temporal's retry decisions.
package delivery

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Error is a delivery the provider or receiver did not accept.
type Error struct {
	// Channel names who answered: "mail API" or "webhook receiver".
	Channel string
	// Status is the HTTP status; 0 when no answer came.
	Status int
	// MaybeSent: no answer came, and the request may have reached the other
	// side (a timeout, a reset or a cut after the connection was made). An
	// ambiguous outcome is a send: its claim is kept, never released as
	// "nothing was sent". Only a failure before any connection (DNS, a
	// refused connection or TLS handshake) or an answer says nothing went.
	MaybeSent bool
	// Permanent means retrying cannot help: the request is refused for good.
	Permanent bool
	// Credentials means the provider refused our own key (401, 403): an
	// operator's fault to fix, so the delivery is retried, not failed.
	Credentials bool
	// RetryAfter is the wait the other side asked for; 0 when it did not say.
	RetryAfter time.Duration
	// Detail is a short excerpt of the answer or the transport error, never
	// a URL or an address: it reaches the reminder's trail, the tracker and
	// the escalation contact.
	Detail string
	// OperatorDetail is what only the operator's log may hold (the
	// internal address a guard refused); never part of Error().
	OperatorDetail string
}

func (e *Error) Error() string {
	if e.Status == 0 && e.MaybeSent {
		return e.Channel + " gave no answer after the request may have reached it (it may have been sent): " + e.Detail
	}
	if e.Status == 0 {
		return e.Channel + " unreachable: " + e.Detail
	}
	kind := "temporary failure"
	switch {
	case e.Permanent:
		kind = "permanent failure"
	case e.Credentials:
		kind = "our credentials refused"
	}
	msg := fmt.Sprintf("%s answered %d (%s)", e.Channel, e.Status, kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// The range a wait asked for by the other side is held to. A receiver
// must not steer our retries: not hammer us into retrying at once, and not
// park a delivery for days (nor, with an overflowing value, turn the wait
// negative).
const (
	MinRetryAfter = time.Second
	MaxRetryAfter = time.Hour
)

// maxRetryAfterSeconds is the largest delay in seconds a time.Duration holds.
const maxRetryAfterSeconds = int64(math.MaxInt64 / time.Second)

// RetryAfter reads a Retry-After header value: delay seconds or an HTTP
// date, held to [MinRetryAfter, MaxRetryAfter]. A value that is negative,
// overflows a time.Duration, or is not a number or date is ignored (0:
// the retry policy decides), as is a date already past.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if sec, err := strconv.ParseInt(v, 10, 64); err == nil {
		if sec < 0 || sec > maxRetryAfterSeconds {
			return 0
		}
		return ClampRetryAfter(time.Duration(sec) * time.Second)
	} else if isDigits(v) {
		return 0 // beyond int64: an overflow, not a date
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return ClampRetryAfter(t.Sub(now))
	}
	return 0
}

// ClampRetryAfter holds a wait the other side asked for (a Retry-After, a
// rate limit's reset time) to [MinRetryAfter, MaxRetryAfter]; 0 or less
// stays 0, "not said".
func ClampRetryAfter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return min(max(d, MinRetryAfter), MaxRetryAfter)
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// Excerpt keeps an answer's body short and valid UTF-8: bodies can be large,
// and error text ends up in workflow histories and logs.
func Excerpt(body []byte) string {
	const max = 200
	s := string(bytes.ToValidUTF8(bytes.TrimSpace(body), nil))
	if len(s) > max {
		s = string(bytes.ToValidUTF8([]byte(s[:max]), nil)) + "…"
	}
	return s
}

// Departure follows one request, so a failure without an answer can tell a
// request that never left from one that may have arrived.
type Departure struct{ left atomic.Bool }

// Track returns ctx with an HTTP client trace that notes when the request
// got its connection: from then on its bytes may reach the other side.
func Track(ctx context.Context) (context.Context, *Departure) {
	d := &Departure{}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { d.left.Store(true) },
	}), d
}

// MayHaveLeft reports whether the request got a connection, so some of it
// may have been written.
func (d *Departure) MayHaveLeft() bool { return d.left.Load() }

// Unanswered is the failure of a request that got no answer: MaybeSent
// when it may have left.
func Unanswered(channel string, d *Departure, detail string) *Error {
	return &Error{Channel: channel, MaybeSent: d.MayHaveLeft(), Detail: detail}
}

// How a retry after a provider's failure waits, once the provider itself
// has been failing a while (Backoff).
const (
	// OutageAfter is how long a provider must have been failing for its
	// outage, not the reminder's own attempts, to set the pace.
	OutageAfter = 10 * time.Second
	// OutageFloor is the least wait during an outage, and the most while it
	// is young: no reminder hammers a provider known to be down, and none
	// waits much longer than this once it answers again.
	OutageFloor = 40 * time.Second
	// MaxBackoff is the retry policy's own ceiling.
	MaxBackoff = 10 * time.Minute
)

// Backoff is the wait before the next attempt after the provider failed
// one, given the reminder's own wait as the retry policy would grow it and
// how long the provider has been failing (a record every worker shares).
// A blip (an outage under OutageAfter) leaves the wait to the retry policy:
// 0. In a longer outage the reminder's own wait is held between
// OutageFloor and the greater of OutageFloor and an eighth of the outage
// (at most MaxBackoff): a reminder due late in an outage does not make the
// early, fast retries, and none sleeps through the recovery at some
// retry's tenth minute; the backlog goes within about OutageFloor of it.
// jitter, in [0, 1), spreads the waits ±20% so they do not come back
// together.
func Backoff(own, outage time.Duration, jitter float64) time.Duration {
	if outage < OutageAfter {
		return 0
	}
	ceiling := min(max(OutageFloor, outage/8), MaxBackoff)
	d := min(max(own, OutageFloor), ceiling)
	return time.Duration(float64(d) * (0.8 + 0.4*jitter))
}
