package console_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

	for line, want := range map[string]string{
		"alice approve":                          "want `name scope",
		"alice approve " + a + " extra":          "want `name scope",
		"ops@shipper.example approve " + a:       "never an address",
		"alice aprove " + a:                      `unknown scope "aprove"`,
		"alice approve key-a":                    "64 hex digits",
		"alice approve " + a + "\nbob read " + a: "listed twice",
	} {
		_, err := console.ParseApprovers(strings.NewReader(line))
		require.ErrorContains(t, err, want, line)
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
