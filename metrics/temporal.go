package metrics

import (
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// TemporalHandler is a Temporal SDK metrics handler that reports into reg
// through tally (the SDK's contrib/tally), with Prometheus naming. Close
// the returned closer when done.
func TemporalHandler(reg *prometheus.Registry) (client.MetricsHandler, io.Closer, error) {
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:       reg,
		DefaultTimerType: tallyprom.HistogramTimerType,
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	if scope == nil {
		return nil, nil, fmt.Errorf("error creating the Temporal metrics scope")
	}
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), closer, nil
}
