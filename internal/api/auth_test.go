package api_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// route is one route, called with input that conforms to the contract and
// reaches its handler without writing anything (unknown ids; an update due
// too far ahead, which only the server can tell).
type route struct {
	method, path string
	scope        api.Scope
	body         any
	// reached is the status the handler answers with such input.
	reached int
}

var routes = []route{
	{"POST", "/v1/updates", api.ScopeSchedule, map[string]any{
		"shipment_id": "SHP-scopes", "update_id": "u", "kind": "delivery_window",
		"message":     map[string]any{"subject": "s", "text": "t"},
		"subscribers": []any{map[string]any{"id": "a", "channel": "email", "email": "a@customer.example", "due_at": "2100-01-01T00:00:00Z"}},
	}, http.StatusUnprocessableEntity},
	{"POST", "/v1/shipments/NOPE/cancel", api.ScopeOperate, nil, http.StatusNotFound},
	{"POST", "/v1/shipments/NOPE/updates/u/reschedule", api.ScopeOperate, map[string]any{"window_start": "2027-01-15T08:00:00Z"}, http.StatusNotFound},
	{"POST", "/v1/shipments/NOPE/updates/u/reminders/s/reschedule", api.ScopeOperate, map[string]any{"due_at": "2027-01-15T08:00:00Z"}, http.StatusNotFound},
	{"POST", "/v1/shipments/NOPE/updates/u/approve", api.ScopeApprove, nil, http.StatusNotFound},
	{"POST", "/v1/shipments/NOPE/updates/u/reject", api.ScopeApprove, nil, http.StatusNotFound},
	{"POST", "/v1/shipments/NOPE/updates/u/reminders/s/approve", api.ScopeApprove, nil, http.StatusNotFound},
	{"POST", "/v1/shipments/NOPE/updates/u/reminders/s/reject", api.ScopeApprove, nil, http.StatusNotFound},
	{"GET", "/v1/reminders", api.ScopeRead, nil, http.StatusOK},
	{"GET", "/v1/shipments/NOPE/updates/u/reminders/s", api.ScopeRead, nil, http.StatusNotFound},
	{"GET", "/v1/suppressions", api.ScopeRead, nil, http.StatusOK},
	{"POST", "/v1/suppressions/lift", api.ScopeOperate, map[string]any{"address": "nobody@customer.example"}, http.StatusNotFound},
}

// Every route wants a key with its scope: none or an unknown one is 401
// with a Bearer challenge, a valid key without the scope 403, a key with it
// reaches the handler. Keys never reach the logs.
func TestEveryRouteChecksItsScope(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	// A key with every scope but one, per scope.
	allBut := map[api.Scope]string{}
	var opts api.Options
	for _, s := range api.Scopes {
		var scopes []api.Scope
		for _, o := range api.Scopes {
			if o != s {
				scopes = append(scopes, o)
			}
		}
		secret, k, err := api.NewKey("all-but-"+string(s), scopes)
		require.NoError(t, err)
		allBut[s] = secret
		opts.Keys = append(opts.Keys, k)
	}
	e.addKeys(t, opts.Keys, allBut)

	covered := map[string]bool{}
	for _, r := range routes {
		covered[r.method+" "+r.path] = true
		name := r.method + " " + r.path

		resp := e.send(t, request{method: r.method, path: r.path, body: r.body, expect: violating})
		require.Equal(t, http.StatusUnauthorized, resp.status, name)
		require.Equal(t, `Bearer realm="shipnotify"`, resp.header.Get("WWW-Authenticate"), name)
		resp.problem(t)

		resp = e.send(t, request{method: r.method, path: r.path, body: r.body, rawAuth: "Bearer snk_not-a-key-we-gave-out"})
		require.Equal(t, http.StatusUnauthorized, resp.status, name)
		require.Contains(t, resp.header.Get("WWW-Authenticate"), `error="invalid_token"`, name)

		resp = e.send(t, request{method: r.method, path: r.path, body: r.body, rawAuth: "Basic dHJhY2tlcjpzZWNyZXQ=", expect: malformed})
		require.Equal(t, http.StatusUnauthorized, resp.status, name)

		resp = e.send(t, request{method: r.method, path: r.path, body: r.body, rawAuth: "Bearer " + allBut[r.scope]})
		require.Equal(t, http.StatusForbidden, resp.status, name)
		require.Contains(t, resp.header.Get("WWW-Authenticate"), `error="insufficient_scope", scope="`+string(r.scope)+`"`, name)
		require.Contains(t, resp.problem(t).Detail, string(r.scope), name)

		resp = e.send(t, request{method: r.method, path: r.path, body: r.body, key: "admin"})
		require.Equal(t, r.reached, resp.status, "%s: %s", name, resp.body)
	}
	require.Len(t, covered, len(e.api.Patterns())-1, "every route but the document is in the table")

	// The document needs no key.
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/v1/openapi.json", "", nil).status)

	logs := e.logs.String() + e.Logs.String()
	for _, secret := range e.keys {
		require.NotContains(t, logs, secret)
		require.NotContains(t, logs, strings.TrimPrefix(secret, api.KeyPrefix))
	}
}

// addKeys serves the API again with extra keys (the same stack).
func (e *testEnv) addKeys(t *testing.T, keys []api.Key, secrets map[api.Scope]string) {
	t.Helper()
	var all []api.Key
	for name, scopes := range testKeys {
		all = append(all, keyFor(t, e.keys[name], name, scopes))
	}
	all = append(all, keys...)
	a, err := api.New(api.Options{Starter: e.Starter, Keys: all, Rate: rate.Inf})
	require.NoError(t, err)
	e.server.Config.Handler = api.NewRoot(a)
	for s, secret := range secrets {
		e.keys["all-but-"+string(s)] = secret
	}
}

// keyFor is the Key of a secret we made.
func keyFor(t *testing.T, secret, name string, scopes []api.Scope) api.Key {
	t.Helper()
	return api.Key{Name: name, Scopes: scopes, Hash: api.HashKey(secret)}
}

// Each key has its own token bucket: past its burst a key gets 429 with
// Retry-After (whole seconds until a token is back); another key is not
// held back by it. Every answer says where the key stands, in the IETF
// draft's RateLimit-Policy (the bucket: q requests over w seconds) and
// RateLimit (r left now, t seconds until the bucket is full again).
func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker, func(_ *testenv.StackOptions, o *api.Options) {
		o.Rate, o.Burst = rate.Every(time.Hour), 2
	})
	// standing is what an answer's RateLimit says: r and t.
	standing := func(resp response) (int, int) {
		t.Helper()
		require.Equal(t, `"per-key";q=2;w=7200`, resp.header.Get("RateLimit-Policy"))
		var r, reset int
		_, err := fmt.Sscanf(resp.header.Get("RateLimit"), `"per-key";r=%d;t=%d`, &r, &reset)
		require.NoError(t, err, resp.header.Get("RateLimit"))
		return r, reset
	}
	for want := range []int{1, 0} {
		resp := e.do(t, "GET", "/v1/reminders", "reader", nil)
		require.Equal(t, http.StatusOK, resp.status)
		r, reset := standing(resp)
		require.Equal(t, 1-want, r, "requests left")
		require.InDelta(t, 3600*(want+1), reset, 5, "until the bucket is full")
	}
	resp := e.do(t, "GET", "/v1/reminders", "reader", nil)
	require.Equal(t, http.StatusTooManyRequests, resp.status)
	r, reset := standing(resp)
	require.Zero(t, r)
	require.InDelta(t, 7200, reset, 5)
	retry, err := strconv.Atoi(resp.header.Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 3600, retry, 5, "a token comes back in an hour")
	require.Contains(t, resp.problem(t).Detail, "reader")

	require.Equal(t, http.StatusOK, e.do(t, "GET", "/v1/reminders", "tracker", nil).status, "another key has its own bucket")
	// A refused request spends nothing: still refused, still an hour.
	resp = e.do(t, "GET", "/v1/reminders", "reader", nil)
	require.Equal(t, http.StatusTooManyRequests, resp.status)
}

// Keys: made at random, kept as hashes in lines that parse back; bad lines
// are refused without repeating a hash.
func TestKeys(t *testing.T) {
	t.Parallel()
	secret, k, err := api.NewKey("tracker-eu", []api.Scope{api.ScopeSchedule, api.ScopeRead})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(secret, api.KeyPrefix))
	require.NotContains(t, k.Line(), secret)
	keys, err := api.ParseKeys(strings.NewReader("# the trackers\n\n" + k.Line() + " ; ops operate,approve " + strings.Repeat("ab", 32) + "\n"))
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, k, keys[0])
	require.Equal(t, api.HashKey(secret), keys[0].Hash)

	other, _, err := api.NewKey("x", []api.Scope{api.ScopeRead})
	require.NoError(t, err)
	require.NotEqual(t, secret, other)

	for _, tc := range []struct{ lines, want string }{
		{"tracker schedule", `want "name scope,scope sha256hex"`},
		{"tracker send " + strings.Repeat("ab", 32), "key tracker: scope 1 of the list is unknown"},
		{"tracker read,read " + strings.Repeat("ab", 32), "given twice"},
		{"tracker read snk_theKeyItself", "the hash is not 64 hex digits"},
		{"a/b read " + strings.Repeat("ab", 32), "the key's name is not an id"},
		{"a read " + strings.Repeat("ab", 32) + "\na write " + strings.Repeat("cd", 32), "key entry 2: key a: scope 1 of the list is unknown"},
		{"a read " + strings.Repeat("ab", 32) + "\na schedule " + strings.Repeat("cd", 32), "name a given twice"},
		{"a read " + strings.Repeat("ab", 32) + "\nb schedule " + strings.Repeat("ab", 32), "the same key as a"},
		{"a read " + strings.Repeat("ab", 32) + " colour=blue", "key a: unknown attribute colour (want expires or tenant)"},
		{"a read " + strings.Repeat("ab", 32) + " tenant=eu tenant=us", "key a: attribute tenant given twice"},
		{"a read " + strings.Repeat("ab", 32) + " expires=tomorrow", "key a: attribute expires: want an RFC 3339 time"},
		{"a read " + strings.Repeat("ab", 32) + " expires=2027-02-30", "key a: attribute expires"},
		{"a read " + strings.Repeat("ab", 32) + " tenant=acme@eu", "key a: attribute tenant: want letters"},
		{"a read " + strings.Repeat("ab", 32) + " " + strings.Repeat("ab", 32), "key a: after the hash only key=value"},
		{"a read " + strings.Repeat("ab", 32) + " X=" + strings.Repeat("ab", 32), "key a: an unknown attribute"},
		{"b read " + strings.Repeat("cd", 32) + "; a admin,write " + strings.Repeat("ab", 32), "key entry 2: key a: scope 2 of the list is unknown (want schedule, operate, approve, read or admin)"},
	} {
		_, err := api.ParseKeys(strings.NewReader(tc.lines))
		require.ErrorContains(t, err, tc.want, tc.lines)
		require.NotContains(t, err.Error(), "abab", tc.lines)
	}
}

// A key pasted into the wrong column of a line, or any name or scope that
// is not one, is refused with an error that names the entry and the
// attribute and never repeats it: the error goes to serve's log on a
// reload (it used to say unknown scope "snk_…").
func TestAKeyLineErrorNeverRepeatsWhatMayBeAKey(t *testing.T) {
	t.Parallel()
	secret, k, err := api.NewKey("tracker", []api.Scope{api.ScopeRead})
	require.NoError(t, err)
	hash := strings.Fields(k.Line())[2]
	for _, tc := range []struct{ line, want string }{
		{"tracker " + secret + " " + hash, "key entry 1: key tracker: scope 1 of the list is unknown (want schedule, operate, approve, read or admin)"},
		{"tracker read," + secret + " " + hash, "key entry 1: key tracker: scope 2 of the list is unknown"},
		{secret + " read " + hash, "key entry 1: the key's name is a key"},
		{"trac:" + secret + " read " + hash, "key entry 1: the key's name is not an id"},
		{"ok read " + strings.Repeat("cd", 32) + "\ntracker read " + secret, "key entry 2: key tracker: the hash is not 64 hex digits"},
		{"tracker read " + hash + " tenant=" + secret, "key entry 1: key tracker: attribute tenant"},
	} {
		_, err := api.ParseKeys(strings.NewReader(tc.line))
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), strings.TrimPrefix(secret, api.KeyPrefix)[:12], tc.want)
		require.NotContains(t, err.Error(), hash[:12], tc.want)
	}
}

// Only a key of the form shipnotify api-key makes (snk_ and 256 bits) is
// taken: a keys line holding the hash of a weak one (sha256 of
// "password") used to let "Bearer password" in. The line loads (its hash
// cannot tell), and the key is refused with 401 on every request, the
// detail saying what a key looks like.
func TestAKeyNotOfTheGeneratedFormIsRefusedEvenIfConfigured(t *testing.T) {
	t.Parallel()
	weak := []string{"password", "snk_password", api.KeyPrefix + strings.Repeat("A", 42), strings.Repeat("A", 47)}
	e := setup(t, withoutWorker, func(_ *testenv.StackOptions, o *api.Options) {
		for i, w := range weak {
			o.Keys = append(o.Keys, api.Key{Name: fmt.Sprintf("weak-%d", i), Scopes: api.Scopes, Hash: api.HashKey(w)})
		}
	})
	for _, w := range weak {
		resp := e.send(t, request{method: "GET", path: "/v1/reminders", rawAuth: "Bearer " + w})
		require.Equal(t, http.StatusUnauthorized, resp.status, w)
		require.Contains(t, resp.header.Get("WWW-Authenticate"), `error="invalid_token"`, w)
		detail := resp.problem(t).Detail
		require.Contains(t, detail, "snk_ and 43 characters", w)
		require.NotContains(t, detail, w)
	}
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/v1/reminders", "reader", nil).status, "a generated key is taken")
}

// fromAddr is a client of e's server whose connections come from ip (any
// 127/8 address reaches the loopback listener), so a test can be two
// clients.
func fromAddr(t *testing.T, ip string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Transport: checkedTransport{t: t, base: &http.Transport{DialContext: dialer.DialContext}}, Timeout: time.Minute}
}

// A client that keeps presenting keys that are none of ours is throttled
// by its address: FailedKeyBurst failures, then 429 with Retry-After until
// one comes back (400 wrong keys in 0.8 s all used to get 401). A valid
// key from the same address is answered all along (only its own rate
// limit holds it), an expired key is told it expired rather than
// throttled, and another address is not held back.
func TestFailedKeysAreThrottledPerClientNeverAValidKey(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Date(2027, 1, 14, 8, 0, 0, 0, time.UTC)}
	expiredSecret, expired, err := api.NewKey("tracker-expired", []api.Scope{api.ScopeRead})
	require.NoError(t, err)
	expired.Expires = c.now.Add(-time.Hour)
	e := setup(t, withoutWorker, func(_ *testenv.StackOptions, o *api.Options) {
		o.Keys, o.Now = append(o.Keys, expired), c.Now
	})
	stranger, other := fromAddr(t, "127.0.0.2"), fromAddr(t, "127.0.0.3")
	send := func(client *http.Client, auth string) response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", e.server.URL+"/v1/reminders", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", auth)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return response{status: resp.StatusCode, header: resp.Header, body: b}
	}
	wrong := func() string {
		w, _, err := api.NewKey("nobody", []api.Scope{api.ScopeRead})
		require.NoError(t, err)
		return "Bearer " + w
	}
	for i := range api.FailedKeyBurst {
		auth := wrong()
		if i%2 == 1 {
			auth = "Bearer password" // a key of another form fails as well
		}
		require.Equal(t, http.StatusUnauthorized, send(stranger, auth).status, "failure %d", i+1)
	}
	resp := send(stranger, wrong())
	require.Equal(t, http.StatusTooManyRequests, resp.status, "%s", resp.body)
	require.Equal(t, strconv.Itoa(int(api.FailedKeyEvery/time.Second)), resp.header.Get("Retry-After"))
	p := resp.problem(t)
	require.Contains(t, p.Detail, "not valid")
	require.Equal(t, http.StatusTooManyRequests, send(stranger, "Bearer password").status)

	valid := send(stranger, "Bearer "+e.keys["reader"])
	require.Equal(t, http.StatusOK, valid.status, "a valid key from the throttled address: %s", valid.body)
	resp = send(stranger, "Bearer "+expiredSecret)
	require.Equal(t, http.StatusUnauthorized, resp.status, "an expired key is ours: told, not throttled")
	require.Contains(t, resp.problem(t).Detail, "tracker-expired expired")
	require.Equal(t, http.StatusUnauthorized, send(other, wrong()).status, "another address has its own failures")

	c.Advance(api.FailedKeyEvery)
	require.Equal(t, http.StatusUnauthorized, send(stranger, wrong()).status, "a failure came back")
	require.Equal(t, http.StatusTooManyRequests, send(stranger, wrong()).status, "and was spent")
}

// A key line's attributes (tenant, expires as a time or a date) parse, and
// Line writes them back so the line reads as the same key.
func TestKeyAttributes(t *testing.T) {
	t.Parallel()
	h := strings.Repeat("ab", 32)
	keys, err := api.ParseKeys(strings.NewReader("a read " + h + " tenant=acme-eu expires=2027-01-15\n" +
		"b schedule,admin " + strings.Repeat("cd", 32) + " expires=2027-01-15T10:30:00+02:00\n" +
		"c read " + strings.Repeat("ef", 32) + "\n"))
	require.NoError(t, err)
	require.Len(t, keys, 3)
	require.Equal(t, "acme-eu", keys[0].Tenant.Name())
	require.Equal(t, time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC), keys[0].Expires, "a date is UTC midnight")
	require.Equal(t, time.Date(2027, 1, 15, 8, 30, 0, 0, time.UTC), keys[1].Expires)
	require.True(t, keys[1].Allows(api.ScopeAdmin))
	require.Empty(t, keys[2].Tenant.Name())
	require.True(t, keys[2].Expires.IsZero(), "no expires: never")
	require.Equal(t, "a read "+h+" tenant=acme-eu expires=2027-01-15", keys[0].Line())
	for _, k := range keys {
		again, err := api.ParseKeys(strings.NewReader(k.Line()))
		require.NoError(t, err, k.Line())
		require.Equal(t, k, again[0], k.Line())
	}
}

// clock is a settable clock for the API's key expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A key that has expired is refused as an invalid token (401), and the
// answer names the key (its name, never the key) and says it expired.
// Until then it works.
func TestAnExpiredKeyIsRefused(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Date(2027, 1, 14, 23, 0, 0, 0, time.UTC)}
	secret, k, err := api.NewKey("tracker-expiring", []api.Scope{api.ScopeRead})
	require.NoError(t, err)
	k.Expires = time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC)
	e := setup(t, withoutWorker, func(_ *testenv.StackOptions, o *api.Options) {
		o.Keys, o.Now = append(o.Keys, k), c.Now
	})
	read := func() response {
		return e.send(t, request{method: "GET", path: "/v1/reminders", rawAuth: "Bearer " + secret})
	}
	require.Equal(t, http.StatusOK, read().status, "an hour before it expires")
	c.Advance(time.Hour)
	resp := read()
	require.Equal(t, http.StatusUnauthorized, resp.status, "at its expiry")
	require.Contains(t, resp.header.Get("WWW-Authenticate"), `error="invalid_token"`)
	detail := resp.problem(t).Detail
	require.Contains(t, detail, "tracker-expiring expired at 2027-01-15T00:00:00Z")
	require.NotContains(t, detail, secret)
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/v1/reminders", "reader", nil).status, "keys without an expiry still work")
}

// SetKeys replaces the keys while the API serves: a key no longer given
// is refused, a new one accepted, and a key that remains keeps its rate
// limiter (a reload does not refill its bucket). Requests running during
// the swap each see one set or the other.
func TestSetKeysReplacesTheKeysInForce(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker, func(_ *testenv.StackOptions, o *api.Options) {
		o.Rate, o.Burst = rate.Every(time.Hour), 2
	})
	for range 2 {
		require.Equal(t, http.StatusOK, e.do(t, "GET", "/v1/reminders", "tracker", nil).status)
	}
	require.Equal(t, http.StatusTooManyRequests, e.do(t, "GET", "/v1/reminders", "tracker", nil).status)
	newSecret, newKey, err := api.NewKey("tracker-new", []api.Scope{api.ScopeRead})
	require.NoError(t, err)
	e.keys["tracker-new"] = newSecret
	kept := []api.Key{keyFor(t, e.keys["tracker"], "tracker", testKeys["tracker"]), newKey}

	// Readers run while the keys are swapped back and forth.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				code := e.do(t, "GET", "/v1/reminders", "tracker", nil).status
				if code != http.StatusTooManyRequests {
					t.Errorf("tracker during reloads: %d, want 429 (its bucket is kept)", code)
					return
				}
			}
		})
	}
	for range 50 {
		e.api.SetKeys(kept)
		e.api.SetKeys(append(kept, keyFor(t, e.keys["reader"], "reader", testKeys["reader"])))
	}
	close(stop)
	wg.Wait()
	e.api.SetKeys(kept)

	resp := e.do(t, "GET", "/v1/reminders", "reader", nil)
	require.Equal(t, http.StatusUnauthorized, resp.status, "a key removed is refused")
	require.Contains(t, resp.header.Get("WWW-Authenticate"), `error="invalid_token"`)
	require.Equal(t, http.StatusOK, e.do(t, "GET", "/v1/reminders", "tracker-new", nil).status, "a key added is accepted")
	require.Equal(t, http.StatusTooManyRequests, e.do(t, "GET", "/v1/reminders", "tracker", nil).status,
		"a key that remained kept its spent bucket")
}
