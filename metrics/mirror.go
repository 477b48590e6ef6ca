package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipnotify/shipnotify/mirror"
)

// DefaultMirrorRefresh is how often WatchMirror re-reads the mirror's
// gauges: often enough for alerts counted in minutes, rarely enough that
// counting a large table costs nothing the deliveries notice.
const DefaultMirrorRefresh = 30 * time.Second

// GaugeReader reads the mirror's gauges; *mirror.Store is one.
type GaugeReader interface {
	Gauges(context.Context) (mirror.Gauges, error)
}

// MirrorOptions configure WatchMirror.
type MirrorOptions struct {
	// Every is the refresh period; 0 means DefaultMirrorRefresh.
	Every time.Duration
	// Timeout bounds one refresh; 0 means 10 s.
	Timeout time.Duration
	// Logger receives a refresh's error (nil: discarded); the gauges show
	// only that it failed.
	Logger *slog.Logger
	// Now is the clock the ages are computed with; nil means time.Now.
	Now func() time.Time
	// UnconfirmedGrace: the oldest-unconfirmed gauge shows an email's wait
	// only once it is longer than this, so the seconds SendGrid usually
	// takes to report delivered raise no alert (SHIPNOTIFY_OUTCOME_GRACE).
	UnconfirmedGrace time.Duration
}

// WatchMirror serves the mirror's gauges (reminders by state, the oldest
// overdue reminder's age, the oldest unconfirmed email's wait, whether the
// mirror could be read) on reg from a
// refresh every o.Every, never from a scrape: however often and however
// many scrapers call, the mirror sees one read at a time, on one
// connection, once a period. It reads once before returning, then in the
// background until ctx ends.
func WatchMirror(ctx context.Context, reg prometheus.Registerer, src GaugeReader, o MirrorOptions) {
	o = o.withDefaults()
	c := &mirrorCollector{src: src, o: o}
	refreshEvery(ctx, o.Every, c.refresh)
	reg.MustRegister(c)
}

// withDefaults is o with its zero fields set.
func (o MirrorOptions) withDefaults() MirrorOptions {
	if o.Every <= 0 {
		o.Every = DefaultMirrorRefresh
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// refreshEvery runs refresh once, then every period in the background
// until ctx ends: one read at a time, never from a scrape.
func refreshEvery(ctx context.Context, every time.Duration, refresh func(context.Context)) {
	refresh(ctx)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				refresh(ctx)
			}
		}
	}()
}

// mirrorCollector serves the last refresh's gauges.
type mirrorCollector struct {
	src GaugeReader
	o   MirrorOptions

	mu sync.Mutex
	ok bool
	g  mirror.Gauges
	at time.Time
}

// refresh reads the gauges once; only WatchMirror's goroutine (and its
// first call) runs it, so reads never overlap.
func (c *mirrorCollector) refresh(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, c.o.Timeout)
	defer cancel()
	g, err := c.src.Gauges(ctx)
	at := c.o.Now()
	if parent.Err() != nil {
		return // stopping: the last values stand
	}
	if err != nil {
		c.o.Logger.Warn("error reading the mirror's gauges", "error", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok, c.g, c.at = err == nil, g, at
}

var (
	remindersDesc = prometheus.NewDesc("shipnotify_reminders",
		"Reminders in the mirror by state, as of the last refresh.", []string{"state"}, nil)
	oldestOverdueDesc = prometheus.NewDesc("shipnotify_oldest_overdue_undelivered_seconds",
		"Age past its due time of the oldest reminder that is due, scheduled and not yet sent (0 when none), as of the last refresh plus the time since.", nil, nil)
	oldestUnconfirmedDesc = prometheus.NewDesc("shipnotify_oldest_unconfirmed_seconds",
		"How long ago the provider accepted the oldest email it has not reported delivered, bounced or dropped, once longer than the grace (SHIPNOTIFY_OUTCOME_GRACE; 0 otherwise), as of the last refresh plus the time since.", nil, nil)
	mirrorUpDesc = prometheus.NewDesc("shipnotify_mirror_up",
		"1 if the last refresh of the mirror's gauges could read the mirror.", nil, nil)
)

func (c *mirrorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- remindersDesc
	ch <- oldestOverdueDesc
	ch <- oldestUnconfirmedDesc
	ch <- mirrorUpDesc
}

// Collect serves the last refresh without touching the mirror. The oldest
// overdue reminder and the oldest unconfirmed email keep ageing between
// refreshes; the latter may pass its grace between them.
func (c *mirrorCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ok, g, at := c.ok, c.g, c.at
	c.mu.Unlock()
	if !ok {
		ch <- prometheus.MustNewConstMetric(mirrorUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(mirrorUpDesc, prometheus.GaugeValue, 1)
	for state, n := range g.ByState {
		ch <- prometheus.MustNewConstMetric(remindersDesc, prometheus.GaugeValue, float64(n), string(state))
	}
	since := max(c.o.Now().Sub(at), 0)
	ch <- prometheus.MustNewConstMetric(oldestOverdueDesc, prometheus.GaugeValue, ageing(g.OldestOverdue, since).Seconds())
	unconfirmed := ageing(g.OldestUnconfirmed, since)
	if unconfirmed <= c.o.UnconfirmedGrace {
		unconfirmed = 0
	}
	ch <- prometheus.MustNewConstMetric(oldestUnconfirmedDesc, prometheus.GaugeValue, unconfirmed.Seconds())
}

// ageing is an age read since ago, now; none (0) stays none.
func ageing(age, since time.Duration) time.Duration {
	if age <= 0 {
		return 0
	}
	return age + since
}
