package api

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/shipnotify/shipnotify/internal/clientip"
)

// Failed keys are throttled per client address: a client may present
// FailedKeyBurst keys that are not valid, then one every FailedKeyEvery;
// past that its failures are 429 with Retry-After, not 401. A valid key is
// checked first and never held back by it (only by its own rate limit), so
// a stranger sharing a tracker's address cannot lock the tracker out. The
// keys' 256 bits are what make guessing hopeless; the throttle tells a
// client that keeps failing to back off.
const (
	FailedKeyBurst = 20
	FailedKeyEvery = 3 * time.Second
	// maxFailingClients bounds the table: when it is full, clients whose
	// failures have all come back are forgotten (they hold nothing), and
	// if none have, the table starts over.
	maxFailingClients = 10_000
)

// client is what a request's failures are counted against: the client the
// trusted proxies name (Options.Clients), as clientip.Unit charges it.
func (a *API) client(r *http.Request) string {
	return clientip.Unit(a.clients.Client(r)).String()
}

// failures are the failed keys' limiters, by client address.
type failures struct {
	mu      sync.Mutex
	clients map[string]*rate.Limiter
}

func newFailures() *failures { return &failures{clients: map[string]*rate.Limiter{}} }

// fail spends one of client's failures at now, and says how long it must
// wait before the next would be answered rather than refused (0: it had
// one left).
func (f *failures) fail(client string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.clients[client]
	if l == nil {
		if len(f.clients) >= maxFailingClients {
			f.forget(now)
		}
		l = rate.NewLimiter(rate.Every(FailedKeyEvery), FailedKeyBurst)
		f.clients[client] = l
	}
	res := l.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	if delay == 0 {
		return 0
	}
	// Over: this failure is refused, and refusing it spends nothing, so a
	// client that waits Retry-After out is answered again.
	res.CancelAt(now)
	return delay
}

// forget drops the clients whose failures have all come back, or every
// client when that frees less than a tenth of the table: memory stays
// bounded whatever the addresses, and the table is walked at most once
// in a thousand new clients.
func (f *failures) forget(now time.Time) {
	for client, l := range f.clients {
		if l.TokensAt(now) >= FailedKeyBurst {
			delete(f.clients, client)
		}
	}
	if len(f.clients) > maxFailingClients*9/10 {
		clear(f.clients)
	}
}
