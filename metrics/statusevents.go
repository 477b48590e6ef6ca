package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipnotify/shipnotify/mirror"
)

// StatusEvents records what serve's status event relay does. A nil
// *StatusEvents records nothing.
type StatusEvents struct {
	posted  *prometheus.CounterVec
	givenUp prometheus.Counter
}

// NewStatusEvents registers the relay's counters on reg; its gauges are
// WatchOutbox's.
func NewStatusEvents(reg prometheus.Registerer) *StatusEvents {
	m := &StatusEvents{
		posted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipnotify_status_events_posted_total",
			Help: "Status events posted to the tracker's endpoints, by endpoint and result: delivered (2xx), refused (a 4xx for the event: it waits), failed (the endpoint failed: all its events wait; counted once a pass), gone (410: the endpoint is disabled).",
		}, []string{"endpoint", "result"}),
		givenUp: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shipnotify_status_events_given_up_total",
			Help: "Status events given up, undelivered for longer than the relay's give-up age.",
		}),
	}
	reg.MustRegister(m.posted, m.givenUp)
	return m
}

// Posted counts one post's result.
func (m *StatusEvents) Posted(endpoint, result string) { m.PostedN(endpoint, result, 1) }

// PostedN counts n posts' result.
func (m *StatusEvents) PostedN(endpoint, result string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.posted.WithLabelValues(endpoint, result).Add(float64(n))
}

// GivenUp counts n events given up.
func (m *StatusEvents) GivenUp(n int) {
	if m == nil {
		return
	}
	m.givenUp.Add(float64(n))
}

// OutboxReader reads the status outbox's endpoints and queues;
// *mirror.Store is one.
type OutboxReader interface {
	StatusEndpoints(context.Context) ([]mirror.StatusEndpointState, error)
}

// WatchOutbox serves the status outbox's gauges on reg (each endpoint's
// pending events, the age of its oldest, whether it is disabled) from a
// read every o.Every, never from a scrape, as WatchMirror does. It reads
// once before returning, then in the background until ctx ends.
func WatchOutbox(ctx context.Context, reg prometheus.Registerer, src OutboxReader, o MirrorOptions) {
	o = o.withDefaults()
	c := &outboxCollector{src: src, o: o}
	refreshEvery(ctx, o.Every, c.refresh)
	reg.MustRegister(c)
}

type outboxCollector struct {
	src OutboxReader
	o   MirrorOptions

	mu  sync.Mutex
	ok  bool
	eps []mirror.StatusEndpointState
	at  time.Time
}

func (c *outboxCollector) refresh(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, c.o.Timeout)
	defer cancel()
	eps, err := c.src.StatusEndpoints(ctx)
	at := c.o.Now()
	if parent.Err() != nil {
		return
	}
	if err != nil {
		c.o.Logger.Warn("error reading the status outbox's gauges", "error", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok, c.eps, c.at = err == nil, eps, at
}

var (
	outboxPendingDesc = prometheus.NewDesc("shipnotify_status_outbox_pending",
		"Status events waiting to be delivered to an endpoint, as of the last refresh.", []string{"endpoint"}, nil)
	outboxOldestDesc = prometheus.NewDesc("shipnotify_status_outbox_oldest_pending_seconds",
		"Age of an endpoint's oldest status event not yet delivered (0 when none), as of the last refresh plus the time since.", []string{"endpoint"}, nil)
	outboxDisabledDesc = prometheus.NewDesc("shipnotify_status_endpoint_disabled",
		"1 if the endpoint answered 410 Gone and is disabled (shipnotify outbox retry --endpoint enables it).", []string{"endpoint"}, nil)
	outboxUpDesc = prometheus.NewDesc("shipnotify_status_outbox_up",
		"1 if the last refresh of the status outbox's gauges could read the mirror.", nil, nil)
)

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxPendingDesc
	ch <- outboxOldestDesc
	ch <- outboxDisabledDesc
	ch <- outboxUpDesc
}

// Collect serves the last refresh; the oldest event keeps ageing between
// refreshes. Retired endpoints (no longer configured) are served while
// they hold pending events.
func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ok, eps, at := c.ok, c.eps, c.at
	c.mu.Unlock()
	if !ok {
		ch <- prometheus.MustNewConstMetric(outboxUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(outboxUpDesc, prometheus.GaugeValue, 1)
	since := max(c.o.Now().Sub(at), 0)
	for _, e := range eps {
		if e.RetiredAt != nil && e.Pending == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(outboxPendingDesc, prometheus.GaugeValue, float64(e.Pending), e.Name)
		ch <- prometheus.MustNewConstMetric(outboxOldestDesc, prometheus.GaugeValue, ageing(e.OldestPending, since).Seconds(), e.Name)
		disabled := 0.0
		if e.DisabledAt != nil {
			disabled = 1
		}
		ch <- prometheus.MustNewConstMetric(outboxDisabledDesc, prometheus.GaugeValue, disabled, e.Name)
	}
}
