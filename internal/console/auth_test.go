package console_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

func TestParseApprovers(t *testing.T) {
	t.Parallel()
	a, b := hashOf("key-a"), hashOf("key-b")
	got, err := console.ParseApprovers(strings.NewReader(fmt.Sprintf(`
# approvers and the API's keys share one file
alice approve %s
  tracker schedule,read %s
`, a, b)))
	require.NoError(t, err)
	require.Len(t, got, 1, "only keys with the approve scope log in")
	require.Equal(t, "alice", got[0].Name)
	require.Equal(t, a, fmt.Sprintf("%x", got[0].KeyHash))
	require.Empty(t, got[0].Tenant)
	require.True(t, got[0].Expires.IsZero(), "no expires: never")

	// Attributes, as the API's key lines take them; admin is a scope.
	got, err = console.ParseApprovers(strings.NewReader(
		"alice approve " + a + " tenant=acme-eu expires=2027-01-15\n" +
			"bob approve,admin " + b + " expires=2027-01-15T10:30:00+02:00\n"))
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "acme-eu", got[0].Tenant)
	require.Equal(t, time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC), got[0].Expires, "a date is UTC midnight")
	require.Equal(t, time.Date(2027, 1, 15, 8, 30, 0, 0, time.UTC), got[1].Expires)

	for line, want := range map[string]string{
		"alice approve":                                                 "want `name scope",
		"alice approve " + a + " extra":                                 "line 1: key alice: after the hash only key=value",
		"alice approve " + a + " " + b:                                  "line 1: key alice: after the hash only key=value",
		"ops@shipper.example approve " + a:                              "never an address",
		"alice aprove " + a:                                             `unknown scope "aprove" (want schedule, operate, approve, read, admin)`,
		"alice approve key-a":                                           "64 hex digits",
		"alice approve " + a + "\nbob read " + a:                        "listed twice",
		"bob read " + b + "\nalice approve " + a + " role=boss":         "line 2: key alice: unknown attribute role",
		"alice approve " + a + " expires=2027-01-15 expires=2028-01-15": "line 1: key alice: attribute expires given twice",
		"alice approve " + a + " expires=next-week":                     "line 1: key alice: attribute expires: want an RFC 3339 time",
		"alice approve " + a + " tenant=":                               "line 1: key alice: attribute tenant: want letters",
		"carol read " + b + " tenant=acme/eu":                           "line 1: key carol: attribute tenant",
	} {
		_, err := console.ParseApprovers(strings.NewReader(line))
		require.ErrorContains(t, err, want, line)
		require.NotContains(t, err.Error(), a, line)
		require.NotContains(t, err.Error(), b, line)
	}
}

// bare is a console whose pages never reach the mirror or Temporal in
// these tests: the session checks run before either.
func bare(t *testing.T, approvers []console.Approver, secure bool, now func() time.Time, keys links.Keys) *httptest.Server {
	t.Helper()
	base, _ := url.Parse("http://127.0.0.1")
	mux := http.NewServeMux()
	mux.Handle(console.Path, console.New(console.Options{
		Starter: &starter.Starter{}, Mirror: mirror.New(nil), Approvers: approvers, SecureCookie: secure,
		Links: &links.Signer{Keys: keys, BaseURL: base}, Now: now, SessionTTL: time.Hour,
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// A session cookie is HttpOnly and SameSite=Strict (and Secure over
// https); it names its approver under an HMAC, so an altered one, an
// expired one, or one whose key was removed from the file is no session.
func TestSessions(t *testing.T) {
	t.Parallel()
	keys, err := links.ParseKeys(base64.StdEncoding.EncodeToString([]byte(randomKey(t))))
	require.NoError(t, err)
	alice, bob := randomKey(t), randomKey(t)
	approvers, err := console.ParseApprovers(strings.NewReader(
		"alice approve " + hashOf(alice) + "\nbob approve " + hashOf(bob) + "\n"))
	require.NoError(t, err)
	c := &clock{}

	login := func(srv *httptest.Server, key string) *http.Cookie {
		t.Helper()
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := client.PostForm(srv.URL+"/console/login", url.Values{"key": {key}})
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		require.Len(t, res.Cookies(), 1)
		return res.Cookies()[0]
	}
	// authed reports whether the cookie passes the session check: a bad
	// decision value is refused after it (422) without touching anything.
	authed := func(srv *httptest.Server, ck *http.Cookie) bool {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/console/decide", strings.NewReader("decision=maybe"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(ck)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Contains(t, []int{http.StatusUnauthorized, http.StatusUnprocessableEntity}, res.StatusCode)
		return res.StatusCode == http.StatusUnprocessableEntity
	}

	srv := bare(t, approvers, false, c.Now, keys)
	ck := login(srv, alice)
	require.Equal(t, "shipnotify_console", ck.Name)
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.False(t, ck.Secure)
	require.Equal(t, "/console/", ck.Path)
	require.True(t, authed(srv, ck))

	// Altered: alice's cookie renamed to bob, signature kept.
	enc, sig, _ := strings.Cut(ck.Value, ".")
	payload, err := base64.RawURLEncoding.DecodeString(enc)
	require.NoError(t, err)
	renamed := *ck
	renamed.Value = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), "|alice|", "|bob|", 1))) + "." + sig
	require.False(t, authed(srv, &renamed))
	// Signed with other keys (another deployment).
	otherKeys, err := links.ParseKeys(base64.StdEncoding.EncodeToString([]byte(randomKey(t))))
	require.NoError(t, err)
	require.False(t, authed(bare(t, approvers, false, c.Now, otherKeys), ck))
	// A link token is no session, though signed with the same keys.
	token := keys.Token(links.Claim{ReminderID: "alice", Decision: links.Approve, Expires: time.Now().Add(time.Hour)})
	require.False(t, authed(srv, &http.Cookie{Name: ck.Name, Value: token}))
	// Alice's key removed from the file: her session ends.
	require.False(t, authed(bare(t, approvers[1:], false, c.Now, keys), ck))
	// Minted by whoever holds the link key (the worker does), expiring in
	// the year 9999: past any login's TTL, it is no session. The same
	// claim, expiring within the TTL, is one: the check is the expiry.
	mint := func(expires time.Time) *http.Cookie {
		payload := strings.Join([]string{"1", "alice", strconv.FormatInt(expires.Unix(), 10), hashOf(alice)[:16]}, "|")
		return &http.Cookie{Name: ck.Name, Value: base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
			base64.RawURLEncoding.EncodeToString(keys.Derive("console-session").Sign("shipnotify session\x00"+payload))}
	}
	require.True(t, authed(srv, mint(c.Now().Add(30*time.Minute))))
	require.False(t, authed(srv, mint(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))))
	// Expired.
	c.Advance(time.Hour)
	require.False(t, authed(srv, ck))

	// Over https (or behind a TLS-terminating proxy) the cookie is Secure.
	secure := bare(t, approvers, true, time.Now, keys)
	ck = login(secure, bob)
	require.Equal(t, "__Secure-shipnotify_console", ck.Name)
	require.True(t, ck.Secure)
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.True(t, authed(secure, ck))
	// There, the same valid session under the plain name (a cookie anyone
	// on the path could plant) logs no one in.
	plain := *ck
	plain.Name = "shipnotify_console"
	require.False(t, authed(secure, &plain))
}

// loginAs posts key to h's login form and returns the answer.
func loginAs(h http.Handler, client, key string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/console/login", strings.NewReader(url.Values{"key": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.RemoteAddr = client + ":40000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// decides reports whether ck passes h's session check: a bad decision
// value is refused after it (422) without touching anything.
func decides(t *testing.T, h http.Handler, ck *http.Cookie) bool {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/console/decide", strings.NewReader("decision=maybe"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(ck)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Contains(t, []int{http.StatusUnauthorized, http.StatusUnprocessableEntity}, rec.Code, rec.Body.String())
	return rec.Code == http.StatusUnprocessableEntity
}

// bareHandler is a console over approvers whose pages never reach the
// mirror or Temporal (the session checks run first), on clock c.
func bareHandler(t *testing.T, approvers []console.Approver, c *clock) *console.Handler {
	t.Helper()
	keys, err := links.ParseKeys(base64.StdEncoding.EncodeToString([]byte(randomKey(t))))
	require.NoError(t, err)
	base, _ := url.Parse("http://127.0.0.1")
	return console.New(console.Options{
		Starter: &starter.Starter{}, Mirror: mirror.New(nil), Approvers: approvers,
		Links: &links.Signer{Keys: keys, BaseURL: base}, Now: c.Now, SessionTTL: 12 * time.Hour,
	})
}

// A key that does not look like one `shipnotify api-key` makes (snk_ and
// 256 random bits) cannot log in, even with its hash configured: the login
// says why. A generated key with its hash configured logs in.
func TestWeakApproverKeysAreRefused(t *testing.T) {
	t.Parallel()
	strong := randomKey(t)
	weak := []string{
		"correct-horse-battery-staple",
		strings.TrimPrefix(randomKey(t), api.KeyPrefix), // the old recipe: 256 bits, no prefix
		api.KeyPrefix + "short",
		api.KeyPrefix + strings.Repeat("A", 42) + "B", // 43 characters, but not canonical base64url
		strong + "A",
	}
	var lines []string
	for i, k := range append([]string{strong}, weak...) {
		lines = append(lines, fmt.Sprintf("approver-%d approve %s", i, hashOf(k)))
	}
	approvers, err := console.ParseApprovers(strings.NewReader(strings.Join(lines, "\n")))
	require.NoError(t, err)
	h := bareHandler(t, approvers, &clock{})
	for _, k := range weak {
		rec := loginAs(h, "192.0.2.1", k)
		require.Equal(t, http.StatusUnauthorized, rec.Code, k)
		require.Empty(t, rec.Result().Cookies(), k)
		require.Contains(t, rec.Body.String(), "approver keys are made by shipnotify api-key", k)
		require.Contains(t, rec.Body.String(), "refused even if it is configured", k)
	}
	rec := loginAs(h, "192.0.2.2", strong)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Len(t, rec.Result().Cookies(), 1)
}

// An approver line's expires ends the key: until then it logs in; from
// then its login is refused, saying it expired, and the session it made
// before stops working. Other approvers are untouched.
func TestAnExpiredApproverIsLoggedOut(t *testing.T) {
	t.Parallel()
	c := &clock{}
	alice, bob := randomKey(t), randomKey(t)
	expires := c.Now().Add(time.Hour).UTC().Truncate(time.Second)
	approvers, err := console.ParseApprovers(strings.NewReader(
		"alice approve " + hashOf(alice) + " expires=" + expires.Format(time.RFC3339) + "\nbob approve " + hashOf(bob) + "\n"))
	require.NoError(t, err)
	h := bareHandler(t, approvers, c)
	rec := loginAs(h, "192.0.2.1", alice)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	aliceSession := rec.Result().Cookies()[0]
	bobSession := loginAs(h, "192.0.2.1", bob).Result().Cookies()[0]
	require.True(t, decides(t, h, aliceSession))

	c.Advance(time.Hour)
	require.False(t, decides(t, h, aliceSession), "her session ends with her key")
	rec = loginAs(h, "192.0.2.1", alice)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Empty(t, rec.Result().Cookies())
	require.Contains(t, rec.Body.String(), "That key expired at "+expires.Format(time.RFC3339))
	require.True(t, decides(t, h, bobSession), "a key without expires goes on")
}

// SetApprovers replaces who may log in while the console serves: a
// removed approver's session ends and their key no longer logs in, an
// added one's does. Requests during the swap see one set or the other.
func TestSetApproversReplacesWhoMayLogIn(t *testing.T) {
	t.Parallel()
	alice, bob := randomKey(t), randomKey(t)
	parse := func(lines string) []console.Approver {
		a, err := console.ParseApprovers(strings.NewReader(lines))
		require.NoError(t, err)
		return a
	}
	before := parse("alice approve " + hashOf(alice) + "\n")
	after := parse("bob approve " + hashOf(bob) + "\n")
	h := bareHandler(t, before, &clock{})
	aliceSession := loginAs(h, "192.0.2.1", alice).Result().Cookies()[0]
	require.True(t, decides(t, h, aliceSession))
	require.Equal(t, http.StatusUnauthorized, loginAs(h, "192.0.2.2", bob).Code, "bob is not an approver yet")

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				decides(t, h, aliceSession)
			}
		})
	}
	for range 50 {
		h.SetApprovers(after)
		h.SetApprovers(before)
	}
	wg.Wait()
	h.SetApprovers(after)

	require.False(t, decides(t, h, aliceSession), "a removed approver's session ends")
	require.Equal(t, http.StatusUnauthorized, loginAs(h, "192.0.2.3", alice).Code, "and her key no longer logs in")
	rec := loginAs(h, "192.0.2.3", bob)
	require.Equal(t, http.StatusSeeOther, rec.Code, "an added approver logs in")
	require.True(t, decides(t, h, rec.Result().Cookies()[0]))
}

// Failed logins are throttled per client: after ten wrong keys a client
// is answered 429 with Retry-After, even for the right key, until a
// failure's worth of time has passed; another client is not held back,
// and a login that succeeds costs nothing.
func TestFailedLoginsAreThrottled(t *testing.T) {
	t.Parallel()
	keys, err := links.ParseKeys(base64.StdEncoding.EncodeToString([]byte(randomKey(t))))
	require.NoError(t, err)
	alice := randomKey(t)
	approvers, err := console.ParseApprovers(strings.NewReader("alice approve " + hashOf(alice) + "\n"))
	require.NoError(t, err)
	c := &clock{}
	base, _ := url.Parse("http://127.0.0.1")
	h := console.New(console.Options{
		Starter: &starter.Starter{}, Mirror: mirror.New(nil), Approvers: approvers,
		Links: &links.Signer{Keys: keys, BaseURL: base}, Now: c.Now,
	})
	login := func(client, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/console/login", strings.NewReader(url.Values{"key": {key}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.RemoteAddr = client + ":40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for range 20 {
		require.Equal(t, http.StatusSeeOther, login("192.0.2.1", alice).Code, "a login that succeeds costs nothing")
	}
	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, login("192.0.2.1", randomKey(t)).Code, "guess %d", i+1)
	}
	rec := login("192.0.2.1", randomKey(t))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	require.Equal(t, http.StatusTooManyRequests, login("192.0.2.1", alice).Code, "throttled, the right key waits too")
	require.Equal(t, http.StatusSeeOther, login("192.0.2.2", alice).Code, "another client is not held back")
	c.Advance(6 * time.Second)
	require.Equal(t, http.StatusSeeOther, login("192.0.2.1", alice).Code, "a failure's worth of time later")
}
