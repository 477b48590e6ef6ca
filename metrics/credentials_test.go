package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/metrics"
)

// While SendGrid refuses our key, a scrape of /metrics shows it (the gauge
// at 1, the refusals counted) and /readyz answers 503 naming the cause; the
// next accepted call turns the gauge and /readyz back.
func TestRefusedCredentialsAreScrapedAndFailReadiness(t *testing.T) {
	t.Parallel()
	mail, err := sink.StartMail("", "SG.key")
	require.NoError(t, err)
	defer mail.Close()
	sender := email.NewSender(email.Options{APIKey: "SG.key", BaseURL: mail.URL(), FromEmail: "r@shipnotify.example"})
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	metrics.WatchCredentials(reg, "sendgrid", sender)
	srv := httptest.NewServer(metrics.Handler(reg, metrics.CredentialsReady(sender)))
	defer srv.Close()

	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	// scrape reads the refused gauge and the refusals counter for sendgrid
	// from the exposition /metrics serves.
	scrape := func() (refused, refusals float64) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		require.NoError(t, err)
		value := func(name string) float64 {
			f, ok := fams[name]
			require.True(t, ok, "%s is exposed", name)
			m := labelled(f, map[string]string{"provider": "sendgrid"})
			require.NotNil(t, m, "%s{provider=sendgrid}", name)
			if f.GetType() == dto.MetricType_COUNTER {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
		return value("shipnotify_provider_credentials_refused"), value("shipnotify_provider_credential_refusals_total")
	}
	send := func() error {
		_, err := sender.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "s", Text: "t", DeliveryKey: "k"})
		return err
	}

	refused, refusals := scrape()
	require.Zero(t, refused)
	require.Zero(t, refusals)
	code, _ := get("/readyz")
	require.Equal(t, http.StatusOK, code)

	mail.Fail(sink.Answer{Status: 401}, sink.Answer{Status: 401})
	require.Error(t, send())
	require.Error(t, send())
	refused, refusals = scrape()
	require.Equal(t, 1.0, refused)
	require.Equal(t, 2.0, refusals)
	code, body := get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "sendgrid: refusing our API key (401 Unauthorized) since ")

	require.NoError(t, send())
	refused, refusals = scrape()
	require.Zero(t, refused, "a 202 clears the refusal")
	require.Equal(t, 2.0, refusals, "the counter keeps counting")
	code, _ = get("/readyz")
	require.Equal(t, http.StatusOK, code)
}
