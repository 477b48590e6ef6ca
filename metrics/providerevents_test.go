package metrics_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// gaugeOf is the value of the unlabelled gauge name in fams.
func gaugeOf(t *testing.T, fams []*dto.MetricFamily, name string) float64 {
	t.Helper()
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	require.Failf(t, "no such metric", "%s is not served", name)
	return 0
}

// An email the provider accepted moves the oldest-unconfirmed gauge only
// once it has waited longer than the grace; its final outcome clears it.
// A webhook's 2xx is its delivery: it never waits.
func TestUnconfirmedEmailMovesTheGaugeAfterItsGrace(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	reg := prometheus.NewRegistry()
	metrics.WatchMirror(t.Context(), reg, store, metrics.MirrorOptions{Every: 50 * time.Millisecond, UnconfirmedGrace: time.Hour})
	// One gathering: the sent count and the gauge are of one refresh.
	read := func() (sent, delivered, unconfirmed float64) {
		fams, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if f.GetName() != "shipnotify_reminders" {
				continue
			}
			if m := labelled(f, map[string]string{"state": "sent"}); m != nil {
				sent = m.GetGauge().GetValue()
			}
			if m := labelled(f, map[string]string{"state": "delivered"}); m != nil {
				delivered = m.GetGauge().GetValue()
			}
		}
		return sent, delivered, gaugeOf(t, fams, "shipnotify_oldest_unconfirmed_seconds")
	}
	_, _, unconfirmed := read()
	require.Zero(t, unconfirmed)

	ctx := context.Background()
	now := time.Now()
	u := reminder.Update{ShipmentID: "SHP-1", UpdateID: "u-1", Kind: "delivery_window",
		Message: reminder.Message{Subject: "s", Text: "t"},
		Subscribers: []reminder.Subscriber{
			{ID: "a", Channel: reminder.Email, Email: "a@b.example", DueAt: now.Add(-time.Minute)},
			{ID: "w", Channel: reminder.Webhook, URL: "https://hooks.example/r",
				Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", DueAt: now.Add(-3 * time.Hour)},
		}}
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	var news []mirror.NewReminder
	for _, r := range rems {
		news = append(news, mirror.NewReminder{Reminder: r, WorkflowID: "reminder/SHP-1/u-1/" + r.SubscriberID})
	}
	_, err = store.ScheduleUpdate(ctx, u, news)
	require.NoError(t, err)
	var email reminder.Reminder
	for _, r := range rems {
		key := r.DeliveryKey()
		_, err = store.ClaimDelivery(ctx, mirror.Claim{Key: key, ReminderID: r.ID, Purpose: reminder.PurposeReminder, Owner: "t", LeaseFor: time.Minute})
		require.NoError(t, err)
		require.NoError(t, ignoreDelivered(store.RecordSent(ctx, key, "pm-"+r.SubscriberID, nil)))
		if r.Channel == reminder.Email {
			email = r
		}
	}

	// Accepted a moment ago: within the grace, nothing to show.
	require.Eventually(t, func() bool {
		var sent, delivered float64
		sent, delivered, unconfirmed = read()
		return sent == 1 && delivered == 1
	}, 10*time.Second, 10*time.Millisecond, "the next refresh sees the email sent and the webhook delivered")
	require.Zero(t, unconfirmed, "within the grace")

	// Accepted two hours ago (the database's clock): past the grace, the
	// gauge shows the whole wait.
	_, err = db.Pool.Exec(ctx, `UPDATE reminders SET awaiting_outcome_since = now() - interval '2 hours' WHERE id = $1`, email.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, _, u := read(); return u >= 7200 }, 10*time.Second, 10*time.Millisecond, "two hours unconfirmed")
	_, _, unconfirmed = read()
	require.Less(t, unconfirmed, 7260.0)

	// SendGrid reports it delivered: nothing waits.
	applied, err := store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{{
		ID: "ev-1", DeliveryKey: email.DeliveryKey(), Outcome: reminder.OutcomeDelivered, At: time.Now()}}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, map[reminder.ProviderOutcome]int{reminder.OutcomeDelivered: 1}, applied.Applied)
	require.Eventually(t, func() bool {
		sent, delivered, unconfirmed := read()
		return sent == 0 && delivered == 2 && unconfirmed == 0
	}, 10*time.Second, 10*time.Millisecond, "delivered: nothing unconfirmed")
}

// A bounce is a final outcome too.
func TestBounceClearsTheUnconfirmedGauge(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	now := time.Now()
	u := reminder.Update{ShipmentID: "SHP-2", UpdateID: "u-1", Kind: "delivery_window",
		Message:     reminder.Message{Subject: "s", Text: "t"},
		Subscribers: []reminder.Subscriber{{ID: "a", Channel: reminder.Email, Email: "a@b.example", DueAt: now}}}
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	_, err = store.ScheduleUpdate(ctx, u, []mirror.NewReminder{{Reminder: rems[0], WorkflowID: "reminder/SHP-2/u-1/a"}})
	require.NoError(t, err)
	key := rems[0].DeliveryKey()
	_, err = store.ClaimDelivery(ctx, mirror.Claim{Key: key, ReminderID: rems[0].ID, Purpose: reminder.PurposeReminder, Owner: "t", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.NoError(t, ignoreDelivered(store.RecordSent(ctx, key, "pm-1", nil)))
	_, err = db.Pool.Exec(ctx, `UPDATE reminders SET awaiting_outcome_since = now() - interval '90 minutes' WHERE id = $1`, rems[0].ID)
	require.NoError(t, err)

	g, err := store.Gauges(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, g.OldestUnconfirmed, 90*time.Minute)
	require.Less(t, g.OldestUnconfirmed, 91*time.Minute)

	_, err = store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{{
		ID: "ev-1", DeliveryKey: key, Outcome: reminder.OutcomeBounce, At: time.Now(), Reason: "550"}}, time.Hour)
	require.NoError(t, err)
	g, err = store.Gauges(ctx)
	require.NoError(t, err)
	require.Zero(t, g.OldestUnconfirmed)
	require.Equal(t, int64(1), g.ByState[reminder.Undeliverable])
}

// fixedReader serves the same gauges on every read.
type fixedReader mirror.Gauges

func (f fixedReader) Gauges(context.Context) (mirror.Gauges, error) { return mirror.Gauges(f), nil }

// Between refreshes the unconfirmed wait keeps growing, and crosses its
// grace without waiting for the next read.
func TestUnconfirmedAgesBetweenRefreshes(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock.Store(t0.UnixNano())
	reg := prometheus.NewRegistry()
	metrics.WatchMirror(t.Context(), reg, fixedReader{OldestUnconfirmed: 50 * time.Minute, OldestOverdue: time.Minute},
		metrics.MirrorOptions{Every: 24 * time.Hour, UnconfirmedGrace: time.Hour, Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	gather := func() []*dto.MetricFamily {
		fams, err := reg.Gather()
		require.NoError(t, err)
		return fams
	}
	require.Zero(t, gaugeOf(t, gather(), "shipnotify_oldest_unconfirmed_seconds"), "50 minutes: within the hour's grace")

	clock.Store(t0.Add(15 * time.Minute).UnixNano())
	fams := gather()
	require.Equal(t, (65 * time.Minute).Seconds(), gaugeOf(t, fams, "shipnotify_oldest_unconfirmed_seconds"))
	require.Equal(t, (16 * time.Minute).Seconds(), gaugeOf(t, fams, "shipnotify_oldest_overdue_undelivered_seconds"))
}

// The worker's webhook deliveries and serve's email deliveries land in
// one histogram: the same name, help and buckets, by channel.
func TestWebhookDeliveriesJoinTheDeliverySLO(t *testing.T) {
	t.Parallel()
	worker, serve := prometheus.NewRegistry(), prometheus.NewRegistry()
	metrics.New(worker).Delivered("webhook", 90*time.Second)
	metrics.NewProviderEvents(serve).Delivered("email", 20*time.Minute)
	var nilMetrics *metrics.Metrics
	nilMetrics.Delivered("webhook", time.Second) // records nothing, and does not panic

	hist := func(reg *prometheus.Registry, channel string) (*dto.MetricFamily, *dto.Histogram) {
		f := family(t, reg, "shipnotify_delivery_slo_seconds")
		require.NotNil(t, f, "%s is served", channel)
		m := labelled(f, map[string]string{"channel": channel})
		require.NotNil(t, m, channel)
		return f, m.GetHistogram()
	}
	wf, wh := hist(worker, "webhook")
	sf, sh := hist(serve, "email")
	require.Equal(t, uint64(1), wh.GetSampleCount())
	require.Equal(t, 90.0, wh.GetSampleSum())
	within := func(h *dto.Histogram, le float64) uint64 {
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == le {
				return b.GetCumulativeCount()
			}
		}
		require.Failf(t, "no bucket", "le=%v", le)
		return 0
	}
	require.Equal(t, uint64(0), within(wh, 60))
	require.Equal(t, uint64(1), within(wh, 600), "within the SLO's 10 minutes")
	require.Equal(t, uint64(0), within(sh, 600), "20 minutes: outside it")

	require.Equal(t, sf.GetHelp(), wf.GetHelp())
	var wb, sb []float64
	for _, b := range wh.GetBucket() {
		wb = append(wb, b.GetUpperBound())
	}
	for _, b := range sh.GetBucket() {
		sb = append(sb, b.GetUpperBound())
	}
	require.Equal(t, sb, wb)
	require.Equal(t, metrics.DeliverySLOBuckets, wb)
}

func ignoreDelivered(_ []mirror.DeliveredReminder, err error) error { return err }
