// Package delivery holds what the channels (email, webhook) share about a
// provider's answer: a failure that says whether to retry and when, in one
// type the notify activity turns into Temporal's retry decisions.
package delivery

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
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

// RetryAfter reads a Retry-After header value: delay seconds or an HTTP date.
func RetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if sec, err := strconv.Atoi(v); err == nil && sec >= 0 {
		return time.Duration(sec) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
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
