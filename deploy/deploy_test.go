package deploy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/testenv"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

var metricName = regexp.MustCompile(`\b(shipnotify_[a-z_]+|temporal_[a-z_]+)\b`)

// ours lists the metric names a worker's /metrics endpoint serves (with a
// histogram's _bucket, _sum and _count), read from a real scrape: the
// handler over a registry with a mirror holding one overdue reminder, after
// one delivery and one retry (a labelled metric is served only once it has
// a value).
func ours(t *testing.T) map[string]bool {
	t.Helper()
	ctx := context.Background()
	store := mirror.New(testenv.Postgres(t).Pool)
	now := time.Now()
	u := reminder.Update{ShipmentID: "SHP-1", UpdateID: "u-1", Kind: "delivery_window",
		Message:     reminder.Message{Subject: "s", Text: "t"},
		Subscribers: []reminder.Subscriber{{ID: "a", Channel: reminder.Email, Email: "a@b.example", DueAt: now.Add(-time.Minute)}}}
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	_, err = store.ScheduleUpdate(ctx, u, []mirror.NewReminder{{Reminder: rems[0], WorkflowID: "reminder/SHP-1/u-1/a"}})
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	metrics.WatchMirror(t.Context(), reg, store, metrics.MirrorOptions{})
	metrics.WatchCredentials(reg, "sendgrid", email.NewSender(email.Options{}))
	m.SchedulingLag(time.Second)
	m.Delivery("email", "reminder", "sent", 100*time.Millisecond)
	m.Retry("email")
	srv := httptest.NewServer(metrics.Handler(reg, func(context.Context) error { return nil }))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err, "the scrape is valid exposition text")

	names := map[string]bool{}
	for name, f := range families {
		names[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[name+suffix] = true
			}
		}
	}
	up := families["shipnotify_mirror_up"]
	require.NotNil(t, up, "the scrape serves shipnotify_mirror_up")
	require.Equal(t, 1.0, up.GetMetric()[0].GetGauge().GetValue(), "the scrape read the mirror")
	return names
}

// The alert rules parse and refer only to metrics that exist.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("prometheus/alerts.yml")
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
				For   string `yaml:"for"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rules))
	known := ours(t)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			for _, m := range metricName.FindAllString(r.Expr, -1) {
				require.True(t, known[m], "alert %s uses unknown metric %s", r.Alert, m)
			}
		}
	}
	for _, want := range []string{"ShipnotifySchedulingLagHigh", "ShipnotifyOldestOverdueReminder", "ShipnotifyDeliveryFailureRate", "ShipnotifyProviderCredentialsRefused"} {
		require.True(t, slices.Contains(alerts, want), want)
	}
}

// The dashboard is valid JSON whose shipnotify queries name real metrics.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("grafana/shipnotify-dashboard.json")
	require.NoError(t, err)
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &dash))
	require.NotEmpty(t, dash.Panels)
	known := ours(t)
	seen := map[string]bool{}
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, m := range metricName.FindAllString(target.Expr, -1) {
				if strings.HasPrefix(m, "shipnotify_") {
					require.True(t, known[m], "panel %q uses unknown metric %s", p.Title, m)
					seen[strings.TrimSuffix(m, "_bucket")] = true
				}
			}
		}
	}
	for _, m := range []string{"shipnotify_scheduling_lag_seconds", "shipnotify_oldest_overdue_undelivered_seconds", "shipnotify_delivery_duration_seconds"} {
		require.True(t, seen[m], "the dashboard shows %s", m)
	}
}
