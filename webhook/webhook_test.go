package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
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
	require.True(t, derr.MaybeSent, "the receiver had the request: it may have taken it")
	require.Contains(t, derr.Detail, "timed out")
	require.NotContains(t, derr.Error(), srv.URL, "errors never carry the customer's URL")
}

// A receiver that refused the connection never saw the request: that one
// failure may say nothing was sent.
func TestRefusedConnectionSentNothing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/hook"
	require.NoError(t, ln.Close())
	_, err = send(t, local, url, webhook.NewSecret(), func(o *webhook.Options) { o.Timeout = time.Second })
	var derr *delivery.Error
	require.ErrorAs(t, err, &derr)
	require.Zero(t, derr.Status)
	require.False(t, derr.MaybeSent, "%v", err)
}

// A receiver that cannot be reached fails with one of delivery's fixed
// reasons, which the tenant reads in the failed event and the escalation
// contact in the mail: never the host name, its address or port, nor the
// resolver the worker asked (a transport error names all of them).
func TestAnUnreachedReceiverFailsWithAFixedReason(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := closed.Addr().String()
	require.NoError(t, closed.Close())
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(plain.Close)
	selfSigned := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(selfSigned.Close)
	for _, tc := range []struct {
		name, url, reason string
	}{
		{"a host that does not resolve", "https://hooks.customer-42.invalid/in", delivery.ReasonNotResolved},
		{"a refused connection", "http://" + refusing + "/in", delivery.ReasonRefused},
		{"TLS to a plain HTTP receiver", strings.Replace(plain.URL, "http:", "https:", 1) + "/in", delivery.ReasonTLSPlain},
		{"a certificate nobody vouches for", selfSigned.URL + "/in", delivery.ReasonTLSAuthority},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := send(t, local, tc.url, webhook.NewSecret(), func(o *webhook.Options) { o.Timeout = 5 * time.Second })
			var derr *delivery.Error
			require.ErrorAs(t, err, &derr)
			require.Equal(t, "webhook receiver unreachable: "+tc.reason, derr.Error())
			u, err := url.Parse(tc.url)
			require.NoError(t, err)
			for _, leak := range []string{u.Hostname(), u.Port(), "lookup", ":53", "dial"} {
				if leak != "" {
					require.NotContains(t, derr.Error()+derr.OperatorDetail, leak)
				}
			}
			require.False(t, derr.MaybeSent, "nothing left: no request was written")
		})
	}
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
		// The reason reaches the customer: it is fixed, and names no
		// address; the operator's log gets the address.
		var derr *delivery.Error
		require.ErrorAs(t, err, &derr, u)
		require.Equal(t, "webhook receiver unreachable: "+webhook.RefusedDestination, derr.Error(), u)
		require.NotContains(t, derr.Error(), "127.0.0.1", u)
		require.Contains(t, derr.OperatorDetail, "127.0.0.1", u)
		require.False(t, derr.MaybeSent, "nothing left: the connection was never made")
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
		"64:ff9b::a00:1", "2001:db8::1", "100::1", "fec0::1", "192.88.99.1", "3fff::1",
	}
	// The special-purpose ranges that embed or tunnel to an IPv4 address,
	// refused whatever that address is, even loopback when loopback is
	// allowed: IPv4-compatible ::/96, local-use NAT64 64:ff9b:1::/48, 6to4
	// 2002::/16, Teredo 2001::/32, and IPv4-translated (SIIT) ::ffff:0:0:0/96.
	tunnels := []string{
		"::a00:1", "::5db8:d822", "64:ff9b:1::a00:1", "64:ff9b:1::5db8:d822", "2002:a00:1::", "2002:5db8:d822::1",
		"2001::a00:1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "::ffff:0:a00:1", "::ffff:0:5db8:d822", "::ffff:0:7f00:1",
		"::7f00:1", "2002:7f00:1::",
	}
	for _, s := range append(forbidden, tunnels...) {
		require.ErrorIs(t, webhook.Guard{}.CheckAddr(netip.MustParseAddr(s), 443), webhook.ErrForbiddenAddress, s)
	}
	for _, s := range tunnels {
		require.Error(t, local.CheckAddr(netip.MustParseAddr(s), 443), s)
	}
	for _, s := range []string{"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "64:ff9b::5db8:d822", "::ffff:93.184.216.34"} {
		require.NoError(t, webhook.Guard{}.CheckAddr(netip.MustParseAddr(s), 443), s)
		require.Error(t, webhook.Guard{}.CheckAddr(netip.MustParseAddr(s), 8443), "only port 443: "+s)
	}
	require.NoError(t, local.CheckAddr(netip.MustParseAddr("127.0.0.1"), 8080), "loopback on any port when allowed")
	require.NoError(t, local.CheckAddr(netip.MustParseAddr("::1"), 9999))
	require.Error(t, local.CheckAddr(netip.MustParseAddr("10.0.0.1"), 443), "allowing loopback allows nothing else")
}

// stub answers lookups from a table; any other name resolves to a public
// address.
func stub(table map[string][]string) webhook.ResolverFunc {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range table[host] {
			out = append(out, netip.MustParseAddr(s))
		}
		if out == nil {
			out = []netip.Addr{netip.MustParseAddr("93.184.216.34")}
		}
		return out, nil
	}
}

// A name that resolves somewhere forbidden is refused without saying where:
// the address would tell a customer about our internal DNS.
func TestResolvedAddressIsNotEchoed(t *testing.T) {
	t.Parallel()
	g := webhook.Guard{Resolver: stub(map[string][]string{
		"internal.example": {"10.0.0.7"},
		"mixed.example":    {"93.184.216.34", "fd00:ec2::254"},
		"tunnel.example":   {"2002:a9fe:a9fe::"},
		"siit.example":     {"::ffff:0:a9fe:a9fe"},
		"nat64.example":    {"64:ff9b:1::a00:7"},
	})}
	ipLike := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|[0-9a-f]*:[0-9a-f]*:[0-9a-f:.]*`)
	for _, host := range []string{"internal.example", "mixed.example", "tunnel.example", "siit.example", "nat64.example"} {
		err := g.CheckURL(context.Background(), "https://"+host+"/in")
		require.EqualError(t, err, "resolves to a non-public address", host)
		require.NotRegexp(t, ipLike, err.Error(), host)
	}
	require.NoError(t, g.CheckURL(context.Background(), "https://public.example/in"))
}

// The lookups of many URLs run together, each distinct host once, and the
// whole call ends by its deadline however slow the resolver is: 500 slow
// hosts cost one deadline, not minutes.
func TestLookupsRunTogetherUnderOneDeadline(t *testing.T) {
	t.Parallel()
	urls := make([]string, 500)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://h%d.example/in", i%250) // each host twice
	}

	// 50 ms a lookup: one after another, 250 hosts would take 12.5 s.
	var lookups atomic.Int64
	slow := webhook.ResolverFunc(func(ctx context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	})
	start := time.Now()
	for i, err := range (webhook.Guard{Resolver: slow, LookupDeadline: 10 * time.Second}).CheckURLs(context.Background(), urls) {
		require.NoError(t, err, urls[i])
	}
	require.Less(t, time.Since(start), 5*time.Second, "lookups run concurrently")
	require.Equal(t, int64(250), lookups.Load(), "each distinct host is looked up once")

	// A resolver that never answers, not even to its context's cancellation.
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	hung := webhook.ResolverFunc(func(context.Context, string) ([]netip.Addr, error) {
		<-stuck
		return nil, errors.New("too late")
	})
	start = time.Now()
	verdicts := (webhook.Guard{Resolver: hung, LookupDeadline: time.Second}).CheckURLs(context.Background(),
		append(urls, "https://10.0.0.1/in"))
	took := time.Since(start)
	require.GreaterOrEqual(t, took, time.Second)
	require.Less(t, took, 4*time.Second, "the call ends by its deadline")
	for i, err := range verdicts[:len(urls)] {
		require.ErrorIs(t, err, webhook.ErrLookupDeadline, urls[i])
		require.ErrorContains(t, err, "within 1s")
	}
	require.ErrorContains(t, verdicts[len(urls)], "not an allowed destination", "a literal address needs no lookup")
}

func TestGuardURLsAtScheduleTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, u := range []string{
		"https://127.0.0.1/in", "https://localhost/in", "https://[::1]/in", "https://169.254.169.254/latest/meta-data",
		"https://10.1.2.3/in", "https://[::ffff:192.168.0.1]/in", "https://[64:ff9b::a00:1]/in",
		"http://hooks.example.com/in", "https://hooks.example.com:8443/in", "https://93.184.216.34:80/in",
		"http://127.0.0.1:8080/in", "https://[64:ff9b:1::a00:1]/", "https://[2002:a00:1::]/", "https://[::ffff:0:a00:1]/",
		"https://[::a00:1]/", "https://[2001::a00:1]/", "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
	} {
		err := webhook.Guard{}.CheckURL(ctx, u)
		require.Error(t, err, u)
		parsed, perr := url.Parse(u)
		require.NoError(t, perr)
		require.NotContains(t, err.Error(), parsed.Hostname(), "the refusal does not repeat the customer's URL")
	}
	for _, u := range []string{"https://93.184.216.34/in", "https://hooks.example.com/in", "https://hooks.example.com:443/in"} {
		require.NoError(t, webhook.Guard{}.CheckURL(ctx, u), u)
	}
	require.NoError(t, local.CheckURL(ctx, "http://127.0.0.1:8080/in"))
	require.NoError(t, local.CheckURL(ctx, "http://localhost:8080/in"))
	require.Error(t, local.CheckURL(ctx, "http://10.0.0.1:8080/in"))
	require.Error(t, local.CheckURL(ctx, "http://hooks.example.com/in"), "plain http only to loopback")
}
