package console

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failed logins are throttled, per client and across all of them, so a
// key cannot be guessed at the speed of the hash: a client may fail
// loginBurst times, then once every loginEvery; every client together ten
// times that. A login that succeeds costs nothing, so approvers behind one
// proxy are not held back by each other's logins.
const (
	loginBurst     = 10
	loginEvery     = 6 * time.Second
	maxLoginClient = 10_000 // clients remembered before the table starts over
)

// throttle is the failed logins' limiters.
type throttle struct {
	mu      sync.Mutex
	clients map[string]*rate.Limiter
	all     *rate.Limiter
}

func newThrottle() *throttle {
	return &throttle{
		clients: map[string]*rate.Limiter{},
		all:     rate.NewLimiter(10*rate.Every(loginEvery), 10*loginBurst),
	}
}

// limiters are r's client's limiter and the one across all clients.
func (t *throttle) limiters(r *http.Request) []*rate.Limiter {
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l, seen := t.clients[client]
	if !seen {
		if len(t.clients) >= maxLoginClient {
			clear(t.clients)
		}
		l = rate.NewLimiter(rate.Every(loginEvery), loginBurst)
		t.clients[client] = l
	}
	return []*rate.Limiter{l, t.all}
}

// wait is how long r's client must wait before its next attempt at now:
// 0 while it has failures left, else until its limiters refill one.
func (t *throttle) wait(r *http.Request, now time.Time) time.Duration {
	var longest time.Duration
	for _, l := range t.limiters(r) {
		if missing := 1 - l.TokensAt(now); missing > 0 {
			longest = max(longest, time.Duration(missing/float64(l.Limit())*float64(time.Second)))
		}
	}
	return longest
}

// failed spends one of r's client's failures at now.
func (t *throttle) failed(r *http.Request, now time.Time) {
	for _, l := range t.limiters(r) {
		l.AllowN(now, 1)
	}
}
