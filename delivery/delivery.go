// Package delivery holds what the channels (email, webhook) share about a
// provider's answer: a failure that says whether to retry and when, in one
// type the notify activity turns into Temporal's retry decisions.
package delivery

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is a delivery the provider or receiver did not accept.
type Error struct {
	// Channel names who answered: "mail API" or "webhook receiver".
	Channel string
	// Status is the HTTP status; 0 when no answer came.
	Status int
	// Permanent means retrying cannot help: the request is refused for good.
	Permanent bool
	// Credentials means the provider refused our own key (401, 403): an
	// operator's fault to fix, so the delivery is retried, not failed.
	Credentials bool
	// RetryAfter is the wait the other side asked for; 0 when it did not say.
	RetryAfter time.Duration
	// Detail is a short excerpt of the answer or the transport error, never
	// a URL or an address.
	Detail string
}

func (e *Error) Error() string {
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
