package balancer

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// replica answers with its name and counts what it took.
func replica(t *testing.T, name string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n.Add(1)
		_, _ = w.Write([]byte(name + ":" + string(body)))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/providers/sendgrid/events", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Requests go to the replicas in turn, body and all; a replica that takes
// no connection (killed) is passed over, so the others take its traffic.
func TestAKilledReplicaIsPassedOver(t *testing.T) {
	t.Parallel()
	a, na := replica(t, "a")
	b, nb := replica(t, "b")
	lb := httptest.NewServer(New([]string{a.URL, b.URL}))
	t.Cleanup(lb.Close)

	_, first := post(t, lb.URL, "1")
	_, second := post(t, lb.URL, "2")
	require.ElementsMatch(t, []string{"a:1", "b:2"}, []string{first, second}, "in turn, with the body")

	a.Close()
	for i := range 4 {
		code, got := post(t, lb.URL, "x")
		require.Equal(t, http.StatusOK, code, "request %d", i)
		require.Equal(t, "b:x", got)
	}
	require.Equal(t, int64(1), na.Load())
	require.Equal(t, int64(5), nb.Load())

	b.Close()
	code, _ := post(t, lb.URL, "y")
	require.Equal(t, http.StatusBadGateway, code, "no replica left")
}

// A replica that dies with the request in hand gets a 502, and the
// request is not sent to another replica: it may have been done.
func TestARequestCutMidwayIsNotSentAgain(t *testing.T) {
	t.Parallel()
	dying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
		}
	}))
	t.Cleanup(dying.Close)
	other, n := replica(t, "other")
	lb := httptest.NewServer(New([]string{dying.URL, other.URL}))
	t.Cleanup(lb.Close)

	code, _ := post(t, lb.URL, "batch")
	require.Equal(t, http.StatusBadGateway, code)
	require.Zero(t, n.Load(), "the cut request was not passed on")
}
