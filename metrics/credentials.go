package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipnotify/shipnotify/email"
)

// CredentialSource is a provider client that remembers whether the
// provider accepts our key; *email.Sender is one.
type CredentialSource interface {
	Credentials() email.CredentialState
}

// WatchCredentials exposes src's credential state on reg, read on each
// scrape, so an alert can tell a key an operator must fix from an outage
// that retries ride out.
func WatchCredentials(reg prometheus.Registerer, provider string, src CredentialSource) {
	reg.MustRegister(&credentialsCollector{provider: provider, src: src})
}

var (
	credentialsRefusedDesc = prometheus.NewDesc("shipnotify_provider_credentials_refused",
		"1 while the provider refuses our API key (its latest 401/403 not yet followed by a 2xx).", []string{"provider"}, nil)
	credentialRefusalsDesc = prometheus.NewDesc("shipnotify_provider_credential_refusals_total",
		"Provider answers refusing our API key (401, 403).", []string{"provider"}, nil)
)

// credentialsCollector reads a provider's credential state when
// Prometheus scrapes.
type credentialsCollector struct {
	provider string
	src      CredentialSource
}

func (c *credentialsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- credentialsRefusedDesc
	ch <- credentialRefusalsDesc
}

func (c *credentialsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Credentials()
	refused := 0.0
	if s.Refused {
		refused = 1
	}
	ch <- prometheus.MustNewConstMetric(credentialsRefusedDesc, prometheus.GaugeValue, refused, c.provider)
	ch <- prometheus.MustNewConstMetric(credentialRefusalsDesc, prometheus.CounterValue, float64(s.Refusals), c.provider)
}
