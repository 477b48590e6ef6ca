package console_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/clientip"
	"github.com/shipnotify/shipnotify/internal/console"
)

// from is a client of srv whose connections leave from addr: any
// 127.0.0.0/8 address reaches a loopback listener, so one machine can be
// many clients. It follows no redirect.
func from(t *testing.T, addr string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// postLogin posts key to srv's login form through client, naming forwarded
// in X-Forwarded-For when it is not "" (as a proxy does, or a client
// forging it), and returns the answer, its body read.
func postLogin(t *testing.T, client *http.Client, srv *httptest.Server, key, forwarded string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/console/login", strings.NewReader(url.Values{"key": {key}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if forwarded != "" {
		req.Header.Set("X-Forwarded-For", forwarded)
	}
	res, err := client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res
}

// stopped is a clock that stands still: no failure is refilled while a
// test runs, however slow the machine.
func stopped() func() time.Time {
	now := time.Now()
	return func() time.Time { return now }
}

// behindProxy serves a console whose proxy is 127.0.0.1, on a stopped
// clock.
func behindProxy(t *testing.T, s *sessions) *httptest.Server {
	t.Helper()
	o := s.options(stopped())
	var err error
	o.Clients, err = clientip.Parse("127.0.0.1")
	require.NoError(t, err)
	return serve(t, o, false)
}

// Behind the reverse proxy every client arrives from one address. A
// stranger there sending one wrong key after another is throttled, by the
// address the proxy forwards, and the approvers behind the same proxy go
// on logging in between their attempts; a right key logs in even from
// the stranger's own throttled address.
func TestAStrangerBehindTheProxyCannotLockApproversOut(t *testing.T) {
	t.Parallel()
	s := newSessions(t)
	srv := behindProxy(t, s)
	proxy := from(t, "127.0.0.1")
	for i := range 30 {
		want := http.StatusUnauthorized
		if i >= 10 {
			want = http.StatusTooManyRequests
		}
		require.Equal(t, want, postLogin(t, proxy, srv, randomKey(t), "203.0.113.66").StatusCode, "the stranger's attempt %d", i+1)
		require.Equal(t, http.StatusSeeOther, postLogin(t, proxy, srv, s.alice, "198.51.100.7").StatusCode,
			"alice's login after the stranger's attempt %d", i+1)
	}
	require.Equal(t, http.StatusSeeOther, postLogin(t, proxy, srv, s.bob, "203.0.113.66").StatusCode,
		"a right key is never refused for throttling, even from a throttled address")
}

// Without a proxy, strangers at many addresses fail until each is
// throttled: many more failures than the old bound across all clients
// (100) held. A right key still logs in, from a fresh address and from a
// throttled one.
func TestStrangersAtManyAddressesCannotLockApproversOut(t *testing.T) {
	t.Parallel()
	s := newSessions(t)
	srv := serve(t, s.options(stopped()), false)
	for n := 2; n <= 13; n++ {
		stranger := from(t, "127.0.0."+strconv.Itoa(n))
		for i := range 11 {
			code := postLogin(t, stranger, srv, randomKey(t), "").StatusCode
			require.Contains(t, []int{http.StatusUnauthorized, http.StatusTooManyRequests}, code)
			if i == 10 {
				require.Equal(t, http.StatusTooManyRequests, code, "127.0.0.%d's eleventh failure", n)
			}
		}
	}
	require.Equal(t, http.StatusSeeOther, postLogin(t, from(t, "127.0.0.50"), srv, s.alice, "").StatusCode, "a fresh address")
	require.Equal(t, http.StatusSeeOther, postLogin(t, from(t, "127.0.0.2"), srv, s.bob, "").StatusCode, "a throttled address")
}

// Failures are still throttled, per client and per approver. After ten
// wrong keys a client's next wrong one is answered 429 with Retry-After,
// until a failure's worth of time has passed; another client is not held
// back. An expired key is the one failure that names its approver: ten of
// them, from ten clients, and the eleventh is 429 from any client, while
// other approvers and wrong keys from that client are not held back.
func TestFailedLoginsAreThrottledPerClientAndPerApprover(t *testing.T) {
	t.Parallel()
	c := &clock{}
	alice, bob := randomKey(t), randomKey(t)
	approvers, err := console.ParseApprovers(strings.NewReader(
		"alice approve " + hashOf(alice) + " expires=" + c.Now().Add(-time.Hour).UTC().Format(time.RFC3339) +
			"\nbob approve " + hashOf(bob) + "\n"))
	require.NoError(t, err)
	h := bareHandler(t, approvers, c)

	for range 20 {
		require.Equal(t, http.StatusSeeOther, loginAs(h, "192.0.2.1", bob).Code, "a login that succeeds costs nothing")
	}
	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, loginAs(h, "192.0.2.1", randomKey(t)).Code, "guess %d", i+1)
	}
	rec := loginAs(h, "192.0.2.1", randomKey(t))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	retry, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 6, retry, 1, "a failure's worth of time, in whole seconds")
	require.Equal(t, http.StatusSeeOther, loginAs(h, "192.0.2.1", bob).Code, "throttled, the client's right key still logs in")
	require.Equal(t, http.StatusUnauthorized, loginAs(h, "192.0.2.2", randomKey(t)).Code, "another client is not held back")
	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, loginAs(h, "[2001:db8::"+strconv.Itoa(i+1)+"]", randomKey(t)).Code, "IPv6 guess %d", i+1)
	}
	require.Equal(t, http.StatusTooManyRequests, loginAs(h, "[2001:db8::ffff]", randomKey(t)).Code,
		"an IPv6 client is charged by its /64: another address in it is no other client")
	require.Equal(t, http.StatusUnauthorized, loginAs(h, "[2001:db8:0:1::1]", randomKey(t)).Code, "the next /64 is")
	c.Advance(6 * time.Second)
	require.Equal(t, http.StatusUnauthorized, loginAs(h, "192.0.2.1", randomKey(t)).Code, "a failure's worth of time later")
	require.Equal(t, http.StatusTooManyRequests, loginAs(h, "192.0.2.1", randomKey(t)).Code, "and only one")

	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, loginAs(h, "198.51.100."+strconv.Itoa(i+1), alice).Code, "alice's expired key, try %d", i+1)
	}
	rec = loginAs(h, "198.51.100.50", alice)
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "alice's failures are spent, from whichever client")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	require.Equal(t, http.StatusUnauthorized, loginAs(h, "198.51.100.50", randomKey(t)).Code, "the client itself has failures left")
	require.Equal(t, http.StatusSeeOther, loginAs(h, "198.51.100.50", bob).Code, "bob is not held back")
}

// X-Forwarded-For counts only from a trusted proxy. Through the proxy,
// clients it names are charged apart; a client that is not the proxy
// cannot dodge its throttle by writing the header itself, whatever
// addresses it names.
func TestAForgedForwardedForIsIgnored(t *testing.T) {
	t.Parallel()
	s := newSessions(t)
	srv := behindProxy(t, s)
	proxy, forger := from(t, "127.0.0.1"), from(t, "127.0.0.2")
	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, postLogin(t, proxy, srv, randomKey(t), "198.51.100.1").StatusCode, "try %d", i+1)
	}
	require.Equal(t, http.StatusTooManyRequests, postLogin(t, proxy, srv, randomKey(t), "198.51.100.1").StatusCode)
	require.Equal(t, http.StatusUnauthorized, postLogin(t, proxy, srv, randomKey(t), "198.51.100.2").StatusCode,
		"another client behind the proxy has its own failures")

	for i := range 10 {
		forged := "198.51.100." + strconv.Itoa(100+i)
		require.Equal(t, http.StatusUnauthorized, postLogin(t, forger, srv, randomKey(t), forged).StatusCode, "try %d", i+1)
	}
	for _, forged := range []string{"198.51.100.200", "198.51.100.201, 127.0.0.1", "127.0.0.1"} {
		require.Equal(t, http.StatusTooManyRequests, postLogin(t, forger, srv, randomKey(t), forged).StatusCode, forged)
	}
}
