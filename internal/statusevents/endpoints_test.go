package statusevents_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/statusevents"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// An endpoints file names each endpoint's URL, secret, events and
// tenant; what is left out is every event of the default tenant.
func TestEndpointsFileParses(t *testing.T) {
	t.Parallel()
	eps, err := statusevents.ParseEndpoints(strings.NewReader(`
# the tracker's endpoints
tracker https://tracker.example/hooks/shipnotify `+testSecret+`
acme-eu https://acme.example/status `+testSecret+` events=sent,delivered,sent tenant=acme
home https://tracker.example/home `+testSecret+` tenant=main
`), statusevents.ParseOptions{DefaultTenant: "main"})
	require.NoError(t, err)
	require.Equal(t, []statusevents.Endpoint{
		{Name: "tracker", URL: "https://tracker.example/hooks/shipnotify", Secret: testSecret, Events: reminder.StatusTypes},
		{Name: "acme-eu", URL: "https://acme.example/status", Secret: testSecret, Tenant: "acme",
			Events: []reminder.StatusType{reminder.StatusSent, reminder.StatusDelivered}},
		{Name: "home", URL: "https://tracker.example/home", Secret: testSecret, Events: reminder.StatusTypes},
	}, eps)
	loop, err := statusevents.ParseEndpoints(strings.NewReader("local http://127.0.0.1:8099/status "+testSecret),
		statusevents.ParseOptions{Guard: webhook.Guard{AllowLoopback: true}})
	require.NoError(t, err)
	require.Len(t, loop, 1, "plain http to loopback where the guard allows it")
}

// A line that is wrong is refused whole: the error names the line and the
// field, never the secret or the URL.
func TestEndpointsFileErrorsNameTheLineAndField(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		"tracker https://t.example/s":                                                   "line 1: want name, url and secret",
		"tr/acker https://t.example/s " + testSecret:                                    "line 1: name",
		"tracker http://t.example/s " + testSecret:                                      "line 1: endpoint tracker: url: must use https",
		"tracker https://10.0.0.7/s " + testSecret:                                      "line 1: endpoint tracker: url: is not an allowed destination",
		"tracker http://127.0.0.1:8099/s " + testSecret:                                 "line 1: endpoint tracker: url: must use https",
		"tracker https://t.example/s whsec_c2hvcnQ=":                                    "line 1: endpoint tracker: secret",
		"tracker https://t.example/s hunter2-not-base64!":                               "line 1: endpoint tracker: secret",
		"tracker https://t.example/s " + testSecret + " events=sent,sentt":              `line 1: endpoint tracker: events: unknown event type "sentt"`,
		"tracker https://t.example/s " + testSecret + " tenant=a/b":                     "line 1: endpoint tracker: tenant",
		"tracker https://t.example/s " + testSecret + " colour=blue":                    "line 1: endpoint tracker: attributes",
		"tracker https://t.example/s " + testSecret + " tenant=a tenant=b":              "line 1: endpoint tracker: tenant: given twice",
		"a https://t.example/s " + testSecret + "\na https://t.example/t " + testSecret: "line 2: endpoint a: name: given twice",
	} {
		_, err := statusevents.ParseEndpoints(strings.NewReader(line), statusevents.ParseOptions{})
		require.ErrorContains(t, err, want, line)
		require.NotContains(t, err.Error(), testSecret, line)
		require.NotContains(t, err.Error(), "hunter2", line)
		require.NotContains(t, err.Error(), "t.example", line)
		require.NotContains(t, err.Error(), "10.0.0.7", line)
	}
}
