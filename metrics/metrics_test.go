package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
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
	s.Activities.Metrics = metrics.New(reg)
	metrics.WatchMirror(t.Context(), reg, s.Mirror, metrics.MirrorOptions{Every: 50 * time.Millisecond})
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
	require.Eventually(t, func() bool {
		byState := labelled(family(t, reg, "shipnotify_reminders"), map[string]string{"state": "sent"})
		return byState != nil && byState.GetGauge().GetValue() == 1
	}, 10*time.Second, 20*time.Millisecond, "the next refresh counts it sent")
}

// A row that is due and not delivered moves the oldest-overdue gauge; once
// it is sent the gauge falls back to zero.
func TestOverdueUndeliveredRowMovesTheGauge(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	reg := prometheus.NewRegistry()
	metrics.WatchMirror(t.Context(), reg, store, metrics.MirrorOptions{Every: 50 * time.Millisecond})
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
	require.Eventually(t, func() bool { return gauge() >= 120 }, 10*time.Second, 10*time.Millisecond, "two minutes overdue")
	require.Less(t, gauge(), 130.0)
	// The tallies refresh on their own pass: wait for it rather than race it.
	require.Eventually(t, func() bool {
		scheduled := labelled(family(t, reg, "shipnotify_reminders"), map[string]string{"state": "scheduled"})
		return scheduled.GetGauge().GetValue() == 1
	}, 10*time.Second, 10*time.Millisecond, "one scheduled reminder")

	key := rems[0].DeliveryKey()
	_, err = store.ClaimDelivery(ctx, mirror.Claim{Key: key, ReminderID: rems[0].ID, Purpose: reminder.PurposeReminder, Owner: "t", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.NoError(t, ignoreDelivered(store.RecordSent(ctx, key, "pm-1", nil)))
	require.Eventually(t, func() bool { return gauge() == 0 }, 10*time.Second, 10*time.Millisecond, "delivered: nothing overdue")
}

// countingReader counts the mirror reads behind the gauges and the most
// that ran at once.
type countingReader struct {
	store                *mirror.Store
	mu                   sync.Mutex
	reads, running, most int
}

func (c *countingReader) Gauges(ctx context.Context) (mirror.Gauges, error) {
	c.mu.Lock()
	c.reads++
	c.running++
	c.most = max(c.most, c.running)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}()
	return c.store.Gauges(ctx)
}

func (c *countingReader) counts() (reads, most int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads, c.most
}

// No scrape rate reaches the mirror: hundreds of concurrent scrapes are
// served from the last refresh, which reads the mirror once a period, one
// read at a time. The gauges still follow the mirror, a period late.
func TestScrapesNeverQueryTheMirror(t *testing.T) {
	t.Parallel()
	store := mirror.New(testenv.Postgres(t).Pool)
	reader := &countingReader{store: store}
	reg := prometheus.NewRegistry()
	const every = 200 * time.Millisecond
	began := time.Now()
	metrics.WatchMirror(t.Context(), reg, reader, metrics.MirrorOptions{Every: every})
	srv := httptest.NewServer(metrics.Handler(reg, func(context.Context) error { return nil }))
	defer srv.Close()

	const scrapers, each = 32, 25
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range scrapers {
		wg.Go(func() {
			for range each {
				resp, err := http.Get(srv.URL + "/metrics")
				if err != nil {
					failed.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "shipnotify_mirror_up 1") {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	require.Zero(t, failed.Load(), "every scrape is served, with the mirror up")
	reads, most := reader.counts()
	require.Equal(t, 1, most, "one read at a time")
	require.LessOrEqual(t, reads, 2+int(took/every), "%d scrapes in %s made %d reads", scrapers*each, took, reads)

	// A new reminder shows after the next refresh.
	now := time.Now()
	u := reminder.Update{ShipmentID: "SHP-1", UpdateID: "u-1", Kind: "delivery_window",
		Message:     reminder.Message{Subject: "s", Text: "t"},
		Subscribers: []reminder.Subscriber{{ID: "a", Channel: reminder.Email, Email: "a@b.example", DueAt: now.Add(time.Hour)}}}
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	_, err = store.ScheduleUpdate(context.Background(), u, []mirror.NewReminder{{Reminder: rems[0], WorkflowID: "reminder/SHP-1/u-1/a"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m := labelled(family(t, reg, "shipnotify_reminders"), map[string]string{"state": "scheduled"})
		return m != nil && m.GetGauge().GetValue() == 1
	}, 10*time.Second, 10*time.Millisecond)
}

// A mirror that cannot be read shows as shipnotify_mirror_up 0, and the
// refresh's error goes to the log, not to the scrape.
func TestUnreadableMirrorShowsDown(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	metrics.WatchMirror(t.Context(), reg, failingReader{}, metrics.MirrorOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	up := family(t, reg, "shipnotify_mirror_up")
	require.Equal(t, 0.0, up.GetMetric()[0].GetGauge().GetValue())
	require.Nil(t, family(t, reg, "shipnotify_reminders"))
	require.Contains(t, logs.String(), "connection refused")
}

type failingReader struct{}

func (failingReader) Gauges(context.Context) (mirror.Gauges, error) {
	return mirror.Gauges{}, errors.New("dial tcp 10.0.0.5:5432: connection refused")
}

func TestHealthEndpoints(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	var readyErr atomic.Pointer[error]
	readyErr.Store(new(error))
	srv := httptest.NewServer(metrics.Handler(reg, func(context.Context) error { return *readyErr.Load() }))
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

	// The body names what is down, never the driver's text.
	driver := errors.New(`failed to connect to user=app database=shipnotify: 10.0.0.5:5432: password authentication failed`)
	for err, want := range map[error]string{
		&metrics.Unready{Reason: "postgres: unavailable", Err: driver}:                              "not ready: postgres: unavailable\n",
		fmt.Errorf("readiness: %w", &metrics.Unready{Reason: "temporal: unavailable", Err: driver}): "not ready: temporal: unavailable\n",
		driver: "not ready\n",
	} {
		readyErr.Store(&err)
		code, body := get("/readyz")
		require.Equal(t, 503, code)
		require.Equal(t, want, body)
	}
	code, body := get("/metrics")
	require.Equal(t, 200, code)
	require.Contains(t, body, "shipnotify_scheduling_lag_seconds_bucket")
}

// However many probes call /readyz at once, one check runs at a time (the
// probes waiting share its answer), so probes cannot take the deliveries'
// database connections.
func TestReadinessChecksRunOneAtATime(t *testing.T) {
	t.Parallel()
	var running, most, checks atomic.Int64
	release := make(chan struct{})
	ready := func(context.Context) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if checks.Add(1) == 1 {
			<-release // the first check is slow: the others pile up behind it
		}
		return nil
	}
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	srv := httptest.NewServer(metrics.Handler(prometheus.NewRegistry(), ready))
	defer srv.Close()
	defer free()
	const probes = 64
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range probes {
		wg.Go(func() {
			resp, err := http.Get(srv.URL + "/readyz")
			if err == nil {
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
				resp.Body.Close()
			}
		})
	}
	require.Eventually(t, func() bool { return checks.Load() == 1 && running.Load() == 1 }, 10*time.Second, time.Millisecond)
	free()
	wg.Wait()
	require.Equal(t, int64(probes), ok.Load())
	require.Equal(t, int64(1), most.Load(), "one check at a time")
}

// The ops server bounds how long a client may take to send headers and
// body, to read the answer, and to sit idle.
func TestOpsServerHasTimeouts(t *testing.T) {
	t.Parallel()
	srv := metrics.NewServer(http.NotFoundHandler())
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		require.Positive(t, d, name)
	}
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
	s.Activities.Metrics = metrics.New(reg)
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

// A reminder past its due time but waiting for its send window to open is
// not overdue: the gauge counts from when it is to go out.
func TestAReminderWaitingForItsWindowIsNotOverdue(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	now := time.Now()
	// Open only on the day after tomorrow (UTC), all day.
	opens := now.UTC().Add(48 * time.Hour)
	u := reminder.Update{ShipmentID: "SHP-1", UpdateID: "u-1", Kind: "delivery_window",
		Message: reminder.Message{Subject: "s", Text: "t"},
		SendWindow: &reminder.WindowRequest{Window: sendwindow.Window{Days: 1 << opens.Weekday(), From: 0, To: sendwindow.EndOfDay},
			TimeZone: "UTC"},
		Subscribers: []reminder.Subscriber{{ID: "a", Channel: reminder.Email, Email: "a@b.example", DueAt: now.Add(-2 * time.Minute)}}}
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	require.True(t, rems[0].GoesOutAt().After(now), "it goes out on the day its window opens")
	_, err = store.ScheduleUpdate(t.Context(), u, []mirror.NewReminder{{Reminder: rems[0], WorkflowID: "reminder/SHP-1/u-1/a"}})
	require.NoError(t, err)
	overdue, err := store.OldestOverdue(t.Context())
	require.NoError(t, err)
	require.Zero(t, overdue, "two minutes past due, but its window has not opened")
}
