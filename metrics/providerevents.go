package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DeliverySLOBuckets span a webhook's second to a deferred email's days.
var DeliverySLOBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 72 * 3600}

// deliverySLOOpts is the delivery SLO's histogram: serve observes it for
// email (SendGrid's delivered event), the worker for webhooks (the
// receiver's 2xx); Prometheus sums the two.
var deliverySLOOpts = prometheus.HistogramOpts{
	Name:    "shipnotify_delivery_slo_seconds",
	Help:    "Due time to delivered, by channel: SendGrid's delivered timestamp for email, the receiver's 2xx for webhooks. The delivery SLO.",
	Buckets: DeliverySLOBuckets,
}

// ProviderEvents records what serve's provider-event path does. A nil *ProviderEvents
// records nothing.
type ProviderEvents struct {
	batches     *prometheus.CounterVec
	events      *prometheus.CounterVec
	deliverySLO *prometheus.HistogramVec
	escalations *prometheus.CounterVec
}

// NewProviderEvents registers the provider-event path's metrics on reg.
func NewProviderEvents(reg prometheus.Registerer) *ProviderEvents {
	m := &ProviderEvents{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipnotify_provider_batches_total",
			Help: "Event Webhook batches by result: accepted, not_json, too_large, slow, busy, unsigned, bad_signature, stale, invalid, error.",
		}, []string{"result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipnotify_provider_events_total",
			Help: "Provider events by outcome and result: applied, duplicate (seen before), unknown_key (dropped), ignored (a type shipnotify does not keep).",
		}, []string{"outcome", "result"}),
		deliverySLO: prometheus.NewHistogramVec(deliverySLOOpts, []string{"channel"}),
		escalations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipnotify_outcome_escalations_started_total",
			Help: "Escalations a provider's outcome gave, started, by reason (undeliverable, delivery_deferred).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.batches, m.events, m.deliverySLO, m.escalations)
	return m
}

// Batch counts one batch by its result.
func (m *ProviderEvents) Batch(result string) {
	if m == nil {
		return
	}
	m.batches.WithLabelValues(result).Inc()
}

// Events counts n events of an outcome by their result.
func (m *ProviderEvents) Events(outcome, result string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.events.WithLabelValues(outcome, result).Add(float64(n))
}

// Delivered records one reminder's due-to-delivered time.
func (m *ProviderEvents) Delivered(channel string, took time.Duration) {
	if m == nil {
		return
	}
	m.deliverySLO.WithLabelValues(channel).Observe(max(took, 0).Seconds())
}

// EscalationStarted counts one escalation started.
func (m *ProviderEvents) EscalationStarted(reason string) {
	if m == nil {
		return
	}
	m.escalations.WithLabelValues(reason).Inc()
}
