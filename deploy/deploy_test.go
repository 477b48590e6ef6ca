package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

var metricName = regexp.MustCompile(`\b(shipnotify_[a-z_]+|temporal_[a-z_]+)\b`)

// served is what a scrape serves: metric names (with a histogram's
// _bucket, _sum and _count), and each one's label values by label name
// (a _bucket's le as the exposition writes it, so a rule's le="600" is
// checked against the bound Prometheus will store).
type served map[string]map[string]map[string]bool

// ours reads what shipnotify's /metrics endpoints serve from real scrapes:
// the worker's (its registry with a mirror holding one overdue reminder,
// after one delivery of each outcome an alert names, a retry and a
// webhook's delivery) and serve's (after one provider event of every
// outcome with each result, an email's delivery and an escalation, with a
// status endpoint owed an event and a post of each result). A labelled
// metric is served only once it has a value.
func ours(t *testing.T) served {
	t.Helper()
	ctx := context.Background()
	store := mirror.New(testenv.Postgres(t).Pool)
	now := time.Now()
	u := reminder.Update{ShipmentID: "SHP-1", UpdateID: "u-1", Kind: "delivery_window",
		Message:     reminder.Message{Subject: "s", Text: "t"},
		Subscribers: []reminder.Subscriber{{ID: "a", Channel: reminder.Email, Email: "a@b.example", DueAt: now.Add(-time.Minute)}}}
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	// A tracker's endpoint, owed the reminder's scheduled event.
	require.NoError(t, store.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{
		{Name: "tracker", Events: reminder.StatusTypes, URL: "https://tracker.example/status"}}))
	_, err = store.ScheduleUpdate(ctx, u, []mirror.NewReminder{{Reminder: rems[0], WorkflowID: "reminder/SHP-1/u-1/a"}})
	require.NoError(t, err)

	worker := prometheus.NewRegistry()
	m := metrics.New(worker)
	metrics.WatchMirror(t.Context(), worker, store, metrics.MirrorOptions{})
	metrics.WatchCredentials(worker, "sendgrid", email.NewSender(email.Options{}))
	m.SchedulingLag(time.Second)
	m.Delivery("email", "reminder", "sent", 100*time.Millisecond)
	m.Delivery("email", "reminder", "failed", 100*time.Millisecond)
	m.Retry("email")
	m.Delivered("webhook", 2*time.Second)

	serve := prometheus.NewRegistry()
	o := metrics.NewProviderEvents(serve)
	o.Batch("accepted")
	for _, outcome := range reminder.ProviderOutcomes {
		for _, result := range []string{"applied", "duplicate", "unknown_key", "ignored"} {
			o.Events(string(outcome), result, 1)
		}
	}
	o.Delivered("email", 3*time.Minute)
	o.EscalationStarted(reminder.ReasonUndeliverable)
	metrics.WatchOutbox(t.Context(), serve, store, metrics.MirrorOptions{})
	relay := metrics.NewStatusEvents(serve)
	for _, result := range []string{"delivered", "refused", "failed", "gone"} {
		relay.Posted("tracker", result)
	}
	relay.GivenUp(1)

	s := served{}
	scrape(t, worker, s)
	scrape(t, serve, s)
	up := s["shipnotify_mirror_up"]
	require.NotNil(t, up, "the scrape serves shipnotify_mirror_up")
	return s
}

var bucketLine = regexp.MustCompile(`(?m)^([a-z_]+)_bucket\{.*\ble="([^"]+)"`)

// scrape adds what reg's /metrics serves to s.
func scrape(t *testing.T, reg *prometheus.Registry, s served) {
	t.Helper()
	srv := httptest.NewServer(metrics.Handler(reg, func(context.Context) error { return nil }))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err, "the scrape is valid exposition text")

	add := func(name, label, value string) {
		if s[name] == nil {
			s[name] = map[string]map[string]bool{}
		}
		if label == "" {
			return
		}
		if s[name][label] == nil {
			s[name][label] = map[string]bool{}
		}
		s[name][label][value] = true
	}
	for name, f := range families {
		names := []string{name}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			names = append(names, name+"_bucket", name+"_sum", name+"_count")
		}
		for _, n := range names {
			add(n, "", "")
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					add(n, l.GetName(), l.GetValue())
				}
			}
		}
	}
	for _, b := range bucketLine.FindAllStringSubmatch(string(body), -1) {
		add(b[1]+"_bucket", "le", b[2])
	}
	if up := families["shipnotify_mirror_up"]; up != nil {
		require.Equal(t, 1.0, up.GetMetric()[0].GetGauge().GetValue(), "the scrape read the mirror")
	}
}

var (
	selector = regexp.MustCompile(`\b(shipnotify_[a-z_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	plainAlt = regexp.MustCompile(`^[a-z0-9_.+]+(\|[a-z0-9_.+]+)*$`)
)

// checkExpr fails unless every shipnotify metric expr names is served,
// and every label a selector matches on is one the metric has, with a
// value it serves (an =~ only when it is a plain alternation): a typo in
// either is a rule that silently never fires.
func checkExpr(t *testing.T, known served, where, expr string) {
	t.Helper()
	for _, m := range metricName.FindAllString(expr, -1) {
		if strings.HasPrefix(m, "shipnotify_") {
			require.NotNil(t, known[m], "%s uses unknown metric %s", where, m)
		}
	}
	for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
		labels := known[sel[1]]
		for _, mt := range matcher.FindAllStringSubmatch(sel[2], -1) {
			name, op, value := mt[1], mt[2], mt[3]
			values, ok := labels[name]
			require.True(t, ok, "%s: %s has no label %s", where, sel[1], name)
			if op != "=" && !(op == "=~" && plainAlt.MatchString(value)) {
				continue
			}
			for _, v := range strings.Split(value, "|") {
				require.True(t, values[v], "%s: %s never serves %s=%q", where, sel[1], name, v)
			}
		}
	}
}

// The alert rules parse, each says how urgent it is and what it means, and
// refers only to metrics, labels and bucket bounds that exist.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("prometheus/alerts.yml")
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rules))
	known := ours(t)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			require.NotEmpty(t, r.Expr, r.Alert)
			_, err := model.ParseDuration(r.For)
			require.NoError(t, err, "alert %s waits a duration before firing", r.Alert)
			require.Contains(t, []string{"page", "ticket"}, r.Labels["severity"], "alert %s: severity", r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], "alert %s: summary", r.Alert)
			require.NotEmpty(t, r.Annotations["description"], "alert %s: description", r.Alert)
			checkExpr(t, known, "alert "+r.Alert, r.Expr)
		}
	}
	for _, want := range []string{"ShipnotifySchedulingLagHigh", "ShipnotifyOldestOverdueReminder", "ShipnotifyDeliveryFailureRate",
		"ShipnotifyProviderCredentialsRefused", "ShipnotifyDeliverySLOBreached", "ShipnotifyOldestUnconfirmedEmail", "ShipnotifyBounceRateHigh",
		"ShipnotifyStatusEventsStuck", "ShipnotifyStatusEndpointDisabled"} {
		require.True(t, slices.Contains(alerts, want), want)
	}
}

// promtool is Prometheus's rule checker (scripts/dev.sh install-deploy installs it): CI
// must have it; a developer without it skips.
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err == nil {
		return bin
	}
	testenv.Missing(t, "promtool is not installed; scripts/dev.sh install-deploy (run by make test) installs it (Debian's prometheus package)")
	return ""
}

// The alert rules are PromQL Prometheus loads, and the delivery-side ones
// fire on what they are for and stay quiet otherwise, their annotations
// rendered (prometheus/alerts_test.yml).
func TestAlertRulesFire(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// dashboard is the Grafana dashboard's panels.
type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		GridPos struct {
			X, Y int
		} `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("grafana/shipnotify-dashboard.json")
	require.NoError(t, err)
	var dash dashboard
	require.NoError(t, json.Unmarshal(b, &dash))
	require.NotEmpty(t, dash.Panels)
	return dash
}

// The dashboard is valid JSON whose shipnotify queries name real metrics,
// labels and bucket bounds, and shows the two SLOs side by side.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	dash := readDashboard(t)
	known := ours(t)
	seen := map[string]bool{}
	row := map[string]int{}
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			checkExpr(t, known, fmt.Sprintf("panel %q", p.Title), target.Expr)
			for _, m := range metricName.FindAllString(target.Expr, -1) {
				m = strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count")
				seen[m] = true
				if _, ok := row[m]; !ok {
					row[m] = p.GridPos.Y
				}
			}
		}
	}
	for _, m := range []string{"shipnotify_scheduling_lag_seconds", "shipnotify_oldest_overdue_undelivered_seconds", "shipnotify_delivery_duration_seconds",
		"shipnotify_delivery_slo_seconds", "shipnotify_oldest_unconfirmed_seconds", "shipnotify_provider_events_total", "shipnotify_reminders",
		"shipnotify_status_outbox_oldest_pending_seconds", "shipnotify_status_outbox_pending"} {
		require.True(t, seen[m], "the dashboard shows %s", m)
	}
	require.Equal(t, row["shipnotify_scheduling_lag_seconds"], row["shipnotify_delivery_slo_seconds"], "the two SLOs side by side")
	require.Equal(t, row["shipnotify_oldest_overdue_undelivered_seconds"], row["shipnotify_oldest_unconfirmed_seconds"],
		"the oldest unconfirmed beside the oldest overdue")
}

// Every dashboard query is PromQL Prometheus parses: promtool checks them
// as recording rules.
func TestGrafanaQueriesParse(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	var rules []map[string]string
	for _, p := range readDashboard(t).Panels {
		for _, target := range p.Targets {
			rules = append(rules, map[string]string{"record": fmt.Sprintf("panel_%d", len(rules)), "expr": target.Expr})
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	file := t.TempDir() + "/dashboard-rules.yml"
	require.NoError(t, os.WriteFile(file, b, 0o600))
	out, err := exec.Command(bin, "check", "rules", file).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	require.Contains(t, string(out), fmt.Sprintf("SUCCESS: %d rules found", len(rules)))
}
