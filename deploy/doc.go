// Package deploy holds what operators deploy beside the binary: the Helm
// chart (helm/shipnotify), the Grafana dashboard, Prometheus alert rules and
// an example of the tenants' send windows (send-windows);
// its tests also check the repository's docker-compose.yml.
package deploy

// The chart carries the alert rules as its PrometheusRule; Helm reads files
// inside the chart only, so it holds a copy, which TestHelmChartAlertRulesAreDeploys
// keeps equal to the source.
//go:generate cp prometheus/alerts.yml helm/shipnotify/files/alerts.yml
