package webhook_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/webhook"
)

const key = "6c73414258a313ec31d6132f1b2048238d18f07a6731dfda189c7a0e7a9fffd0"

var local = webhook.Guard{AllowLoopback: true}

func send(t *testing.T, g webhook.Guard, url, secret string, opts ...func(*webhook.Options)) (string, error) {
	t.Helper()
	o := webhook.Options{Guard: g}
	for _, f := range opts {
		f(&o)
	}
	return webhook.NewSender(o).Send(context.Background(), webhook.Message{URL: url, Secret: secret, ID: key, Body: []byte(`{"type":"shipment.reminder"}`)})
}

// Our requests verify with the official Standard Webhooks library.
func TestSignatureVerifiesWithTheOfficialLibrary(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	verifier, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	var got http.Header
	var verifyErr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got, verifyErr = r.Header.Clone(), verifier.Verify(body, r.Header)
		w.Header().Set("X-Request-Id", "rcv-1")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	id, err := send(t, local, srv.URL, secret)
	require.NoError(t, err)
	require.NoError(t, verifyErr)
	require.Equal(t, "rcv-1", id)
	require.Equal(t, key, got.Get("webhook-id"))
	require.Equal(t, key, got.Get("Idempotency-Key"))
	require.True(t, strings.HasPrefix(got.Get("webhook-signature"), "v1,"))

	// Signed with another secret, the same request does not verify.
	other, err := standardwebhooks.NewWebhook(webhook.NewSecret())
	require.NoError(t, err)
	require.Error(t, other.Verify([]byte(`{"type":"shipment.reminder"}`), got))
}

func TestAnswersAreClassified(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer target.Close()
	for _, tc := range []struct {
		name       string
		status     int
		headers    map[string]string
		body       string
		permanent  bool
		retryAfter time.Duration
	}{
		{"redirect is a failure, never followed", 302, map[string]string{"Location": target.URL}, "", false, 0},
		{"gone is permanent", 410, nil, "", true, 0},
		{"rate limited waits as asked", 429, map[string]string{"Retry-After": "7"}, "", false, 7 * time.Second},
		{"server error retries", 503, nil, strings.Repeat("x", 1<<20), false, 0},
		{"client error retries", 400, nil, "", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.headers {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			_, err := send(t, local, srv.URL, webhook.NewSecret())
			var derr *delivery.Error
			require.True(t, errors.As(err, &derr), "got %v", err)
			require.Equal(t, tc.status, derr.Status)
			require.Equal(t, tc.permanent, derr.Permanent)
			require.Equal(t, tc.retryAfter, derr.RetryAfter)
			require.LessOrEqual(t, len(derr.Detail), 204, "only a capped excerpt of the answer is kept")
		})
	}
	require.Zero(t, elsewhere.Load(), "the redirect was not followed")
}

func TestTimeoutIsATemporaryFailure(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	_, err := send(t, local, srv.URL, webhook.NewSecret(), func(o *webhook.Options) { o.Timeout = 200 * time.Millisecond })
	var derr *delivery.Error
	require.True(t, errors.As(err, &derr), "got %v", err)
	require.False(t, derr.Permanent)
	require.Contains(t, derr.Detail, "timed out")
	require.NotContains(t, derr.Error(), srv.URL, "errors never carry the customer's URL")
}

// The guard refuses at connection time, after resolution: a name that
// resolves to loopback is refused like the address itself.
func TestGuardRefusesLoopbackAtConnectionTime(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	for _, u := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		_, err := send(t, webhook.Guard{}, u, webhook.NewSecret())
		require.ErrorContains(t, err, "forbidden webhook destination", u)
	}
	require.Zero(t, hits.Load())
}

// A configured proxy is never used: it would hide the destination.
func TestProxyIsIgnored(t *testing.T) {
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxied.Add(1) }))
	defer proxy.Close()
	var direct atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { direct.Add(1) }))
	defer srv.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	_, err := send(t, local, srv.URL, webhook.NewSecret())
	require.NoError(t, err)
	require.Equal(t, int64(1), direct.Load())
	require.Zero(t, proxied.Load())
}

func TestGuardAddresses(t *testing.T) {
	t.Parallel()
	forbidden := []string{
		"127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
		"100.100.100.200", "0.0.0.0", "224.0.0.1", "239.255.255.250", "255.255.255.255", "192.0.0.192", "198.18.0.1",
		"::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1", "::ffff:10.0.0.1", "::ffff:127.0.0.1",
		"64:ff9b::a00:1", "2001:db8::1",
	}
	for _, s := range forbidden {
		require.Error(t, webhook.Guard{}.CheckAddr(netip.MustParseAddr(s), 443), s)
	}
	for _, s := range []string{"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "64:ff9b::5db8:d822"} {
		require.NoError(t, webhook.Guard{}.CheckAddr(netip.MustParseAddr(s), 443), s)
		require.Error(t, webhook.Guard{}.CheckAddr(netip.MustParseAddr(s), 8443), "only port 443: "+s)
	}
	require.NoError(t, local.CheckAddr(netip.MustParseAddr("127.0.0.1"), 8080), "loopback on any port when allowed")
	require.NoError(t, local.CheckAddr(netip.MustParseAddr("::1"), 9999))
	require.Error(t, local.CheckAddr(netip.MustParseAddr("10.0.0.1"), 443), "allowing loopback allows nothing else")
}

func TestGuardURLsAtScheduleTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, u := range []string{
		"https://127.0.0.1/in", "https://localhost/in", "https://[::1]/in", "https://169.254.169.254/latest/meta-data",
		"https://10.1.2.3/in", "https://[::ffff:192.168.0.1]/in", "https://[64:ff9b::a00:1]/in",
		"http://hooks.example.com/in", "https://hooks.example.com:8443/in", "https://93.184.216.34:80/in",
		"http://127.0.0.1:8080/in",
	} {
		require.Error(t, webhook.Guard{}.CheckURL(ctx, u), u)
	}
	for _, u := range []string{"https://93.184.216.34/in", "https://hooks.example.com/in", "https://hooks.example.com:443/in"} {
		require.NoError(t, webhook.Guard{}.CheckURL(ctx, u), u)
	}
	require.NoError(t, local.CheckURL(ctx, "http://127.0.0.1:8080/in"))
	require.NoError(t, local.CheckURL(ctx, "http://localhost:8080/in"))
	require.Error(t, local.CheckURL(ctx, "http://10.0.0.1:8080/in"))
	require.Error(t, local.CheckURL(ctx, "http://hooks.example.com/in"), "plain http only to loopback")
}
