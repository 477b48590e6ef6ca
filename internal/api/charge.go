package api

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/shipnotify/shipnotify/reminder"
)

// An update costs the engine a workflow per reminder, and the resolver a
// lookup per webhook host, however few requests carry it: one request may
// hold 500 reminders. So beside each key's request bucket, an update is
// charged its reminders and host lookups, to its key's reminder bucket
// and to its tenant's (every key of the tenant, and admin keys acting for
// it, draw on the one bucket), before anything is looked up or written.
// The buckets are each serve's: with n replicas behind a balancer a tenant
// may schedule up to n times the rate.

// maxTenantBuckets bounds the tenant buckets kept; past it, full ones
// (which charge nothing a fresh one would not) are dropped.
const maxTenantBuckets = 10_000

// reminderBuckets are the tenants' reminder buckets.
type reminderBuckets struct {
	mu      sync.Mutex
	limit   rate.Limit
	burst   int
	tenants map[string]*rate.Limiter
}

func newReminderBuckets(limit rate.Limit, burst int) *reminderBuckets {
	return &reminderBuckets{limit: limit, burst: burst, tenants: map[string]*rate.Limiter{}}
}

// tenant is tenant's bucket ("" the default tenant's).
func (b *reminderBuckets) tenant(tenant string, now time.Time) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.tenants[tenant]; l != nil {
		return l
	}
	if len(b.tenants) >= maxTenantBuckets {
		for t, l := range b.tenants {
			if l.TokensAt(now) >= float64(l.Burst()) {
				delete(b.tenants, t)
			}
		}
	}
	l := rate.NewLimiter(b.limit, b.burst)
	b.tenants[tenant] = l
	return l
}

// chargeUpdate charges an update's reminders to start and its webhook host
// lookups to the key's and the tenant's reminder buckets, or answers 429
// with Retry-After until both hold them, charging neither. An update larger
// than a bucket needs it full and leaves it in debt: the next update waits
// the rest out.
func (a *API) chargeUpdate(c *caller, reminders, lookups int) *Problem {
	n := reminders + lookups
	if n <= 0 || a.reminderLimit == rate.Inf {
		return nil
	}
	now := a.now()
	buckets := []struct {
		l   *rate.Limiter
		who string
	}{
		{c.ring.reminders[c.key.Name], "the API key " + c.key.Name},
		{a.tenantReminders.tenant(c.tenant, now), "the tenant " + reminder.TenantName(c.tenant, a.defaultTenant)},
	}
	var delay time.Duration
	short := ""
	for _, b := range buckets {
		if b.l == nil {
			continue
		}
		need := min(n, b.l.Burst())
		if have := b.l.TokensAt(now); have < float64(need) {
			if d := time.Duration((float64(need) - have) / float64(b.l.Limit()) * float64(time.Second)); short == "" || d > delay {
				delay, short = d, b.who
			}
		}
	}
	if short != "" {
		secs := max(int64(math.Ceil(delay.Seconds())), 1)
		what := fmt.Sprintf("%d reminders", reminders)
		if lookups > 0 {
			what += fmt.Sprintf(" and %d webhook host lookups", lookups)
		}
		p := problem(http.StatusTooManyRequests, fmt.Sprintf("%s is over its reminder rate for the %s this update needs; nothing was written; retry after %d s",
			short, what, secs))
		p.header = http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}}
		return p
	}
	for _, b := range buckets {
		if b.l != nil {
			spend(b.l, now, n)
		}
	}
	return nil
}

// spend takes n tokens from l, into debt past what it holds: ReserveN
// takes at most a bucket at a time, and what it cannot take now it takes
// from the tokens to come.
func spend(l *rate.Limiter, now time.Time, n int) {
	for n > 0 {
		chunk := min(n, max(l.Burst(), 1))
		l.ReserveN(now, chunk)
		n -= chunk
	}
}
