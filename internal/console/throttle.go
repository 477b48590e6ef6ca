package console

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failed logins are throttled, per client and per approver, so a key
// cannot be guessed at the speed of the hash: a client may fail loginBurst
// times, then once every loginEvery, and so may the keys of one approver
// (an expired key is the one failure that names its approver; a wrong key
// names no one). Only failures are charged and only failures are refused:
// the key is checked first, and a right one logs in whatever the throttle
// says, so no stranger can lock an approver out by failing in their name
// or from their address. There is no bound across all clients: it is what
// let strangers lock everyone out, and against 256-bit keys (the only
// kind that logs in) it guarded nothing.
const (
	loginBurst = 10
	loginEvery = 6 * time.Second
	// maxLoginClients bounds each table: past it, the limiters back at
	// full (as good as new) go, and if that is not room enough, all.
	maxLoginClients = 10_000
)

// throttle is the failed logins' limiters.
type throttle struct {
	mu        sync.Mutex
	clients   map[netip.Prefix]*rate.Limiter
	approvers map[string]*rate.Limiter
}

func newThrottle() *throttle {
	return &throttle{clients: map[netip.Prefix]*rate.Limiter{}, approvers: map[string]*rate.Limiter{}}
}

// limiter is key's limiter in m at now, made full if it is new.
func limiter[K comparable](m map[K]*rate.Limiter, key K, now time.Time) *rate.Limiter {
	l, seen := m[key]
	if seen {
		return l
	}
	if len(m) >= maxLoginClients {
		for k, l := range m {
			if l.TokensAt(now) >= loginBurst {
				delete(m, k)
			}
		}
		if len(m) >= maxLoginClients {
			clear(m)
		}
	}
	l = rate.NewLimiter(rate.Every(loginEvery), loginBurst)
	m[key] = l
	return l
}

// limiters are client's limiter and, when the attempt names one,
// approver's.
func (t *throttle) limiters(client netip.Prefix, approver string, now time.Time) []*rate.Limiter {
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := []*rate.Limiter{limiter(t.clients, client, now)}
	if approver != "" {
		ls = append(ls, limiter(t.approvers, approver, now))
	}
	return ls
}

// wait is how long a failing attempt from client (naming approver, or "")
// must wait at now: 0 while its limiters have failures left, else until
// they refill one.
func (t *throttle) wait(client netip.Prefix, approver string, now time.Time) time.Duration {
	var longest time.Duration
	for _, l := range t.limiters(client, approver, now) {
		if missing := 1 - l.TokensAt(now); missing > 0 {
			longest = max(longest, time.Duration(missing/float64(l.Limit())*float64(time.Second)))
		}
	}
	return longest
}

// failed spends one failure of client's, and of approver's, at now.
func (t *throttle) failed(client netip.Prefix, approver string, now time.Time) {
	for _, l := range t.limiters(client, approver, now) {
		l.AllowN(now, 1)
	}
}
