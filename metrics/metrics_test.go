package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/testenv"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// family returns the gathered metric family called name.
func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

func labelled(f *dto.MetricFamily, labels map[string]string) *dto.Metric {
	for _, m := range f.GetMetric() {
		match := true
		for _, l := range m.GetLabel() {
			if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// A reminder sent ten seconds late moves the scheduling-lag histogram by
// ten seconds; the delivery is counted and timed.
func TestLateReminderMovesTheLagHistogram(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	reg := prometheus.NewRegistry()
	s.Activities.Metrics = metrics.New(reg, s.Mirror)
	s.StartWorker(t)
	ctx := context.Background()
	results, err := s.Starter.Schedule(ctx, s.Update(t, time.Now().Add(-10*time.Second), reminder.Email))
	require.NoError(t, err)
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, results[0].WorkflowID, "").Get(ctx, &res))

	lag := family(t, reg, "shipnotify_scheduling_lag_seconds").GetMetric()[0].GetHistogram()
	require.Equal(t, uint64(1), lag.GetSampleCount())
	require.GreaterOrEqual(t, lag.GetSampleSum(), 10.0)
	require.Less(t, lag.GetSampleSum(), 30.0)

	sent := labelled(family(t, reg, "shipnotify_deliveries_total"), map[string]string{"channel": "email", "purpose": "reminder", "outcome": "sent"})
	require.NotNil(t, sent)
	require.Equal(t, 1.0, sent.GetCounter().GetValue())
	require.Equal(t, uint64(1), family(t, reg, "shipnotify_delivery_duration_seconds").GetMetric()[0].GetHistogram().GetSampleCount())
	byState := labelled(family(t, reg, "shipnotify_reminders"), map[string]string{"state": "sent"})
	require.Equal(t, 1.0, byState.GetGauge().GetValue())
}

// A row that is due and not delivered moves the oldest-overdue gauge; once
// it is sent the gauge falls back to zero.
func TestOverdueUndeliveredRowMovesTheGauge(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	reg := prometheus.NewRegistry()
	metrics.New(reg, store)
	gauge := func() float64 {
		return family(t, reg, "shipnotify_oldest_overdue_undelivered_seconds").GetMetric()[0].GetGauge().GetValue()
	}
	require.Zero(t, gauge())

	now := time.Now()
	u := reminder.Update{ShipmentID: "SHP-1", UpdateID: "u-1", Kind: "delivery_window",
		Message:     reminder.Message{Subject: "s", Text: "t"},
		Subscribers: []reminder.Subscriber{{ID: "a", Channel: reminder.Email, Email: "a@b.example", DueAt: now.Add(-2 * time.Minute)}}}
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = store.ScheduleUpdate(ctx, u, []mirror.NewReminder{{Reminder: rems[0], WorkflowID: "reminder/SHP-1/u-1/a"}})
	require.NoError(t, err)
	require.InDelta(t, 120, gauge(), 10, "two minutes overdue")
	scheduled := labelled(family(t, reg, "shipnotify_reminders"), map[string]string{"state": "scheduled"})
	require.Equal(t, 1.0, scheduled.GetGauge().GetValue())

	key := rems[0].DeliveryKey()
	_, err = store.ClaimDelivery(ctx, mirror.Claim{Key: key, ReminderID: rems[0].ID, Purpose: reminder.PurposeReminder, Owner: "t", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.NoError(t, store.RecordSent(ctx, key, "pm-1", nil))
	require.Zero(t, gauge(), "delivered: nothing overdue")
}

func TestHealthEndpoints(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics.New(reg, nil)
	var readyErr error
	srv := httptest.NewServer(metrics.Handler(reg, func(context.Context) error { return readyErr }))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := get("/healthz")
	require.Equal(t, 200, code)
	code, _ = get("/readyz")
	require.Equal(t, 200, code)
	readyErr = errors.New("postgres: connection refused")
	code, body := get("/readyz")
	require.Equal(t, 503, code)
	require.Contains(t, body, "postgres")
	code, body = get("/metrics")
	require.Equal(t, 200, code)
	require.Contains(t, body, "shipnotify_scheduling_lag_seconds_bucket")
}

// The Temporal SDK's own metrics reach the same registry.
func TestTemporalSDKMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	handler, closer, err := metrics.TemporalHandler(reg)
	require.NoError(t, err)
	defer closer.Close()
	c, err := client.Dial(client.Options{HostPort: testenv.TemporalAddress(t), MetricsHandler: handler})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.DescribeWorkflowExecution(context.Background(), "no-such-workflow", "")
	require.Error(t, err)
	require.Eventually(t, func() bool {
		fams, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if strings.HasPrefix(f.GetName(), "temporal_request") {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond, "the SDK reports its requests")
}

// A temporary refusal is retried: the retry and both outcomes are counted.
func TestRetriesAreCounted(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	reg := prometheus.NewRegistry()
	s.Activities.Metrics = metrics.New(reg, s.Mirror)
	s.StartWorker(t)
	s.Mail.Fail(sink.Answer{Status: 503})
	ctx := context.Background()
	results, err := s.Starter.Schedule(ctx, s.Update(t, time.Now(), reminder.Email))
	require.NoError(t, err)
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, results[0].WorkflowID, "").Get(ctx, &res))

	retries := labelled(family(t, reg, "shipnotify_delivery_retries_total"), map[string]string{"channel": "email"})
	require.Equal(t, 1.0, retries.GetCounter().GetValue())
	outcomes := family(t, reg, "shipnotify_deliveries_total")
	require.Equal(t, 1.0, labelled(outcomes, map[string]string{"outcome": "retry"}).GetCounter().GetValue())
	require.Equal(t, 1.0, labelled(outcomes, map[string]string{"outcome": "sent"}).GetCounter().GetValue())
	lag := family(t, reg, "shipnotify_scheduling_lag_seconds").GetMetric()[0].GetHistogram()
	require.Equal(t, uint64(1), lag.GetSampleCount(), "the lag is the first attempt's, once")
}
