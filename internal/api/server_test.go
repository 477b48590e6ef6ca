package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/metrics"
)

// A request in flight when shutdown begins runs to its end and is answered;
// the listener is closed at once, so no new connection is taken; Serve then
// returns cleanly.
func TestGracefulShutdownFinishesRequestsInFlight(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := api.NewServer(api.NewRoot(e.api), 0)
	require.Equal(t, api.ServerReadHeaderTimeout, srv.ReadHeaderTimeout)
	require.Equal(t, api.ServerReadTimeout, srv.ReadTimeout)
	require.Equal(t, api.DefaultRequestTimeout+10*time.Second, srv.WriteTimeout)
	require.Equal(t, api.ServerIdleTimeout, srv.IdleTimeout)
	active := make(chan struct{}, 1)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateActive {
			select {
			case active <- struct{}{}:
			default:
			}
		}
	}
	shuttingDown := make(chan struct{})
	srv.RegisterOnShutdown(func() { close(shuttingDown) })
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- api.Serve(ctx, srv, ln, time.Minute) }()

	// A schedule whose body arrives in two parts: the handler is reading
	// it when shutdown begins.
	doc, err := json.Marshal(e.update(t))
	require.NoError(t, err)
	body, feed := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), "POST", "http://"+ln.Addr().String()+"/v1/updates", body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.keys["tracker"])
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := e.client.Do(req)
		if err != nil {
			t.Errorf("the request in flight failed: %v", err)
			close(answered)
			return
		}
		answered <- resp
	}()
	_, err = feed.Write(doc[:len(doc)/2])
	require.NoError(t, err)
	<-active

	stop()
	<-shuttingDown
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	require.Error(t, err, "no new connection once shutdown began")
	select {
	case err := <-served:
		t.Fatalf("Serve returned with a request in flight: %v", err)
	default:
	}

	_, err = feed.Write(doc[len(doc)/2:])
	require.NoError(t, err)
	require.NoError(t, feed.Close())
	resp := <-answered
	require.NotNil(t, resp)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var res api.Results
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
	require.Len(t, res.Results, 3)
	require.NoError(t, <-served)
}

// The API counts requests and times them by route (the pattern, never the
// raw path with its ids) and status, read back from a real scrape; an
// unknown route is counted as unmatched and answered with a problem.
func TestMetricsByRouteAndStatus(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	e.do(t, "GET", "/v1/reminders", "reader", nil)
	e.do(t, "GET", "/v1/reminders", "reader", nil)
	e.send(t, request{method: "GET", path: "/v1/reminders?limit=0", key: "reader", expect: violating})
	e.do(t, "GET", "/v1/reminders", "operator", nil)
	e.do(t, "GET", "/v1/shipments/SHP-1/updates/u/reminders/a", "reader", nil)
	e.do(t, "GET", "/v1/shipments/SHP-2/updates/u/reminders/b", "reader", nil)
	resp := e.send(t, request{method: "GET", path: "/v1/nowhere", key: "reader", expect: undocumented})
	require.Equal(t, http.StatusNotFound, resp.status)
	// Through serve's listener too: a path not in its clean form, and one
	// outside /v1/ that nothing mounted takes (serve's mux counted the
	// first as route="/v1/" and answered the others itself).
	// (Sent as they are: the contract's transport would clean them.)
	raw := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"//v1/reminders", "/v1/./reminders", "/nowhere"} {
		req, err := http.NewRequest(http.MethodGet, e.server.URL+p, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+e.keys["reader"])
		got, err := raw.Do(req)
		require.NoError(t, err)
		require.NoError(t, got.Body.Close())
		require.Equal(t, http.StatusNotFound, got.StatusCode, p)
	}
	resp = e.send(t, request{method: "DELETE", path: "/v1/updates", key: "reader", expect: undocumented})
	require.Equal(t, http.StatusMethodNotAllowed, resp.status)
	require.Equal(t, "POST", resp.header.Get("Allow"))

	ops := httptest.NewServer(metrics.Handler(e.reg, func(context.Context) error { return nil }))
	defer ops.Close()
	scrape, err := http.Get(ops.URL + "/metrics")
	require.NoError(t, err)
	defer scrape.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(scrape.Body)
	require.NoError(t, err)
	counts := map[[2]string]float64{}
	for _, m := range families["shipnotify_api_requests_total"].GetMetric() {
		var route, status string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "route":
				route = l.GetValue()
			case "status":
				status = l.GetValue()
			}
		}
		counts[[2]string{route, status}] = m.GetCounter().GetValue()
	}
	require.Equal(t, map[[2]string]float64{
		{"GET /v1/reminders", "200"}: 2,
		{"GET /v1/reminders", "400"}: 1,
		{"GET /v1/reminders", "403"}: 1,
		{"GET /v1/shipments/{shipment}/updates/{update}/reminders/{subscriber}", "404"}: 2,
		{"unmatched", "404"}: 4,
		{"unmatched", "405"}: 1,
	}, counts)
	var observed uint64
	for _, m := range families["shipnotify_api_request_duration_seconds"].GetMetric() {
		observed += m.GetHistogram().GetSampleCount()
	}
	require.EqualValues(t, 11, observed)
}
