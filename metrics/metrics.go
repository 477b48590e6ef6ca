// Package metrics is what shipnotify tells Prometheus: the two SLOs of the
// seed article (scheduling lag: notify start minus due; delivery: due to
// delivered, per channel — the worker observes a webhook's 2xx, serve
// SendGrid's delivered event), each provider call's duration, deliveries
// by outcome, retries, reminders by state, the age of the oldest overdue
// undelivered reminder — the one signal that catches a worker that is alive
// but starving — and its delivery-side twin, the oldest email accepted
// without an outcome; whether the mail provider refuses our key; and
// serve's provider events.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics records what the notify activity does. A nil *Metrics records
// nothing, so activities can run without it (tests, tools).
type Metrics struct {
	schedulingLag    prometheus.Histogram
	deliveryDuration *prometheus.HistogramVec
	deliveries       *prometheus.CounterVec
	retries          *prometheus.CounterVec
	deliverySLO      *prometheus.HistogramVec
}

// New registers the notify activity's metrics on reg. The mirror's gauges
// are WatchMirror's.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		schedulingLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shipnotify_scheduling_lag_seconds",
			Help:    "Notify activity start minus when the reminder was to go out (its due time, or its send window's opening): the scheduling SLO.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}),
		deliveryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shipnotify_delivery_duration_seconds",
			Help:    "Time one provider call took, by channel (the delivery SLO is shipnotify_delivery_slo_seconds).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15},
		}, []string{"channel"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipnotify_deliveries_total",
			Help: "Notify executions by channel, purpose and outcome (sent, already_sent, retry, unconfirmed, failed, skipped).",
		}, []string{"channel", "purpose", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipnotify_delivery_retries_total",
			Help: "Notify attempts after the first, by channel.",
		}, []string{"channel"}),
		deliverySLO: prometheus.NewHistogramVec(deliverySLOOpts, []string{"channel"}),
	}
	reg.MustRegister(m.schedulingLag, m.deliveryDuration, m.deliveries, m.retries, m.deliverySLO)
	return m
}

// SchedulingLag records how late a reminder's notify started.
func (m *Metrics) SchedulingLag(lag time.Duration) {
	if m == nil {
		return
	}
	m.schedulingLag.Observe(max(lag, 0).Seconds())
}

// Delivery records one provider call's duration and outcome.
func (m *Metrics) Delivery(channel, purpose, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	if took > 0 {
		m.deliveryDuration.WithLabelValues(channel).Observe(took.Seconds())
	}
	m.deliveries.WithLabelValues(channel, purpose, outcome).Inc()
}

// Retry counts an attempt after the first.
func (m *Metrics) Retry(channel string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(channel).Inc()
}

// Delivered records a reminder's due-to-delivered time for a channel whose
// delivery the worker sees (a webhook's 2xx); serve records email's.
func (m *Metrics) Delivered(channel string, took time.Duration) {
	if m == nil {
		return
	}
	m.deliverySLO.WithLabelValues(channel).Observe(max(took, 0).Seconds())
}
