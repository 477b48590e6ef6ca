package console_test

import (
	"context"
	"crypto/sha256"
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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

func TestParseApprovers(t *testing.T) {
	t.Parallel()
	a, b := hashOf("key-a"), hashOf("key-b")
	pasted, _, err := api.NewKey("pasted", []api.Scope{api.ScopeApprove}) // a key in the wrong column
	require.NoError(t, err)
	got, err := console.ParseApprovers(strings.NewReader(fmt.Sprintf(`
# approvers and the API's keys share one file
alice approve %s
  tracker schedule,read %s
`, a, b)))
	require.NoError(t, err)
	require.Len(t, got, 1, "only keys with the approve scope log in")
	require.Equal(t, "alice", got[0].Name)
	require.Equal(t, a, fmt.Sprintf("%x", got[0].KeyHash))
	require.Empty(t, got[0].Tenant.Name())
	require.True(t, got[0].Expires.IsZero(), "no expires: never")

	// Attributes, as the API's key lines take them; admin is a scope.
	got, err = console.ParseApprovers(strings.NewReader(
		"alice approve " + a + " tenant=acme-eu expires=2027-01-15\n" +
			"bob approve,admin " + b + " expires=2027-01-15T10:30:00+02:00\n"))
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "acme-eu", got[0].Tenant.Name())
	require.Equal(t, time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC), got[0].Expires, "a date is UTC midnight")
	require.Equal(t, time.Date(2027, 1, 15, 8, 30, 0, 0, time.UTC), got[1].Expires)

	for line, want := range map[string]string{
		"alice approve":                                                 "want `name scope",
		"alice approve " + a + " extra":                                 "line 1: key alice: after the hash only key=value",
		"alice approve " + a + " " + b:                                  "line 1: key alice: after the hash only key=value",
		"ops@shipper.example approve " + a:                              "never an address",
		"alice aprove " + a:                                             "line 1: key alice: a scope is unknown (want schedule, operate, approve, read, admin)",
		"alice approve," + pasted + " " + a:                             "line 1: key alice: a scope is unknown",
		pasted + " approve " + a:                                        "line 1: the name is a key",
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
		require.NotContains(t, err.Error(), pasted[4:16], line)
	}
}

// sessions is what the bare consoles of a test share, as serve's replicas
// do: the mirror (reached as the runtime role, as serve runs), the link
// key (which the worker holds too) and the session key (serve's alone).
type sessions struct {
	db              testenv.DB
	store           *mirror.Store
	links, sessions links.Keys
	approvers       []console.Approver
	// keys of the approvers alice and bob.
	alice, bob string
}

func newSessions(t *testing.T) *sessions {
	t.Helper()
	s := &sessions{db: testenv.Postgres(t), alice: randomKey(t), bob: randomKey(t)}
	pool, err := pgxpool.New(context.Background(), testenv.RuntimeRole(t, s.db))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s.store = mirror.New(pool)
	s.links, s.sessions = newKeys(t), newKeys(t)
	s.approvers, err = console.ParseApprovers(strings.NewReader(
		"alice approve " + hashOf(s.alice) + "\nbob approve " + hashOf(s.bob) + "\n"))
	require.NoError(t, err)
	return s
}

func newKeys(t *testing.T) links.Keys {
	t.Helper()
	k, err := links.ParseKeys(base64.StdEncoding.EncodeToString([]byte(randomKey(t))))
	require.NoError(t, err)
	return k
}

// options are a bare console's: its pages that reach only the mirror in
// these tests (the session checks run before anything else).
func (s *sessions) options(now func() time.Time) console.Options {
	base, _ := url.Parse("http://127.0.0.1")
	return console.Options{
		Starter: &starter.Starter{}, Mirror: s.store, Approvers: s.approvers,
		Links: &links.Signer{Keys: s.links, BaseURL: base}, SessionKeys: s.sessions, Now: now, SessionTTL: time.Hour,
	}
}

// serve serves a console built from o over plain http, or over TLS.
func serve(t *testing.T, o console.Options, tls bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(console.Path, console.New(o))
	srv := httptest.NewUnstartedServer(mux)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// login logs in with key and returns the session cookie set.
func login(t *testing.T, srv *httptest.Server, key string) *http.Cookie {
	t.Helper()
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := client.PostForm(srv.URL+"/console/login", url.Values{"key": {key}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Len(t, res.Cookies(), 1)
	return res.Cookies()[0]
}

// authed reports whether the cookies pass the session check: a bad
// decision value is refused after it (422) without touching anything.
func authed(t *testing.T, srv *httptest.Server, cookies ...*http.Cookie) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/console/decide", strings.NewReader("decision=maybe"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Contains(t, []int{http.StatusUnauthorized, http.StatusUnprocessableEntity}, res.StatusCode)
	return res.StatusCode == http.StatusUnprocessableEntity
}

// logout posts the console's logout with ck.
func logout(t *testing.T, srv *httptest.Server, ck *http.Cookie) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/console/logout", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Len(t, res.Cookies(), 1)
	require.Equal(t, ck.Name, res.Cookies()[0].Name)
	require.Negative(t, res.Cookies()[0].MaxAge, "the browser's cookie is cleared")
}

// mint makes a session cookie as whoever holds keys could: a claim for
// approver's key, expiring at expires, naming session id.
func mint(keys links.Keys, name, key string, expires time.Time, id string) *http.Cookie {
	payload := strings.Join([]string{"2", name, strconv.FormatInt(expires.Unix(), 10), hashOf(key)[:16], id}, "|")
	return &http.Cookie{Name: "shipnotify_console", Value: base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(keys.Derive("console-session").Sign("shipnotify session\x00"+payload))}
}

// idOf is the session id a cookie carries.
func idOf(t *testing.T, ck *http.Cookie) string {
	t.Helper()
	enc, _, _ := strings.Cut(ck.Value, ".")
	payload, err := base64.RawURLEncoding.DecodeString(enc)
	require.NoError(t, err)
	parts := strings.Split(string(payload), "|")
	require.Len(t, parts, 5)
	return parts[4]
}

// A session cookie is HttpOnly and SameSite=Strict; it names its approver
// under an HMAC, so an altered one, one signed elsewhere, a link token,
// an expired one, one expiring past a login's TTL, or one whose key was
// removed from the file is no session.
func TestSessions(t *testing.T) {
	t.Parallel()
	s := newSessions(t)
	c := &clock{}
	srv := serve(t, s.options(c.Now), false)
	ck := login(t, srv, s.alice)
	require.Equal(t, "shipnotify_console", ck.Name)
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.False(t, ck.Secure)
	require.Equal(t, "/console/", ck.Path)
	require.True(t, authed(t, srv, ck))

	// Altered: alice's cookie renamed to bob, signature kept.
	enc, sig, _ := strings.Cut(ck.Value, ".")
	payload, err := base64.RawURLEncoding.DecodeString(enc)
	require.NoError(t, err)
	renamed := *ck
	renamed.Value = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), "|alice|", "|bob|", 1))) + "." + sig
	require.False(t, authed(t, srv, &renamed))
	// Signed with another session key (another deployment).
	other := s.options(c.Now)
	other.SessionKeys = newKeys(t)
	require.False(t, authed(t, serve(t, other, false), ck))
	// A link token is no session, though signed with the link keys.
	token := s.links.Token(links.Claim{ReminderID: "alice", Decision: links.Approve, Expires: time.Now().Add(time.Hour)})
	require.False(t, authed(t, srv, &http.Cookie{Name: ck.Name, Value: token}))
	// Alice's key removed from the file: her session ends.
	removed := s.options(c.Now)
	removed.Approvers = s.approvers[1:]
	require.False(t, authed(t, serve(t, removed, false), ck))
	// Minted with the session key for alice's live session, expiring in
	// the year 9999: past any login's TTL, it is no session. The same
	// claim, expiring within the TTL, is one: the check is the expiry.
	require.True(t, authed(t, srv, mint(s.sessions, "alice", s.alice, c.Now().Add(30*time.Minute), idOf(t, ck))))
	require.False(t, authed(t, srv, mint(s.sessions, "alice", s.alice, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), idOf(t, ck))))
	// Expired.
	c.Advance(time.Hour)
	require.False(t, authed(t, srv, ck))
}

// Sessions are signed with a key only serve holds. One minted with the
// link key, as the worker could (it holds that key, and the approvers'
// hashes are no secret), is refused, even for a session id whose row the
// worker's database role wrote; a session from a real login works. The
// console will not even start with a session key the link keys share.
func TestASessionNeedsServesKey(t *testing.T) {
	t.Parallel()
	s := newSessions(t)
	srv := serve(t, s.options(time.Now), false)
	require.True(t, authed(t, srv, login(t, srv, s.alice)), "a real login")

	id, expires := "worker-made-session-id", time.Now().Add(30*time.Minute)
	sum := sha256.Sum256([]byte(id))
	require.NoError(t, s.store.CreateConsoleSession(context.Background(), sum[:], "alice", expires, time.Now()))
	require.True(t, authed(t, srv, mint(s.sessions, "alice", s.alice, expires, id)), "the row is live: only the key is missing")
	require.False(t, authed(t, srv, mint(s.links, "alice", s.alice, expires, id)), "minted with the link key")

	same := s.options(time.Now)
	same.SessionKeys = s.links
	require.PanicsWithValue(t, "console: SessionKeys must share no key with Links", func() { console.New(same) })
}

// Over https the cookie is __Host-shipnotify_console: Secure, Path=/ and
// no Domain, so no sibling subdomain or network attacker can plant one,
// and it still reaches the console under /console/. Only that name is
// read there: the same valid session under the plain or the __Secure-
// name logs no one in. Over plain http (loopback development) the cookie
// keeps its plain name, Path=/console/.
func TestOverHTTPSOnlyTheHostCookieCounts(t *testing.T) {
	t.Parallel()
	s := newSessions(t)
	for _, behindProxy := range []bool{false, true} {
		o := s.options(time.Now)
		// Behind a TLS-terminating proxy the request is plain; the
		// configured https public URL says the cookie must be Secure.
		o.SecureCookie = behindProxy
		srv := serve(t, o, !behindProxy)
		ck := login(t, srv, s.bob)
		require.Equal(t, "__Host-shipnotify_console", ck.Name, "behind a proxy: %v", behindProxy)
		require.True(t, ck.Secure)
		require.Equal(t, "/", ck.Path)
		require.Empty(t, ck.Domain)
		require.True(t, ck.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
		require.True(t, authed(t, srv, ck))
		for _, planted := range []string{"shipnotify_console", "__Secure-shipnotify_console"} {
			require.False(t, authed(t, srv, &http.Cookie{Name: planted, Value: ck.Value}), planted)
		}
	}

	// A browser keeps the Path=/ cookie and sends it to the console's pages.
	srv := serve(t, s.options(time.Now), true)
	b := newBrowser(t, srv.URL)
	b.client.Transport = srv.Client().Transport
	page := b.get("/console/login")
	page = b.submit(page.formFor(t, "Approver key"), "Log in", map[string]string{"key": s.bob}, "same-origin")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Equal(t, "/console/", page.URL.Path)
	require.Contains(t, page.Text(), "Logged in as bob")

	// Over plain http: the plain name, and only it.
	plain := serve(t, s.options(time.Now), false)
	ck := login(t, plain, s.bob)
	require.Equal(t, "shipnotify_console", ck.Name)
	require.False(t, ck.Secure)
	require.Equal(t, "/console/", ck.Path)
	require.True(t, authed(t, plain, ck))
	require.False(t, authed(t, plain, &http.Cookie{Name: "__Host-shipnotify_console", Value: ck.Value}))
}

// Logout ends the session in the mirror, not only in the browser: a copy
// of the old cookie, replayed on the serve that logged it out, on another
// replica, or on one started afterwards, logs no one in. It ends only
// that session: the same approver's session in another browser goes on.
func TestLogoutEndsTheSessionEverywhere(t *testing.T) {
	t.Parallel()
	s := newSessions(t)
	one, two := serve(t, s.options(time.Now), false), serve(t, s.options(time.Now), false)
	laptop, phone := login(t, one, s.alice), login(t, two, s.alice)
	require.True(t, authed(t, two, laptop), "a session holds on every replica")
	require.True(t, authed(t, one, phone))

	logout(t, one, laptop)
	restarted := serve(t, s.options(time.Now), false)
	for _, srv := range []*httptest.Server{one, two, restarted} {
		require.False(t, authed(t, srv, laptop), "the logged-out cookie, replayed")
		require.True(t, authed(t, srv, phone), "the other browser's session goes on")
	}
	require.True(t, authed(t, one, login(t, one, s.alice)), "logging in again works")
}

// Every login deletes the sessions that have expired, so the table holds
// only live ones without a prune run.
func TestLoginsPruneExpiredSessions(t *testing.T) {
	t.Parallel()
	s := newSessions(t)
	c := &clock{}
	srv := serve(t, s.options(c.Now), false)
	rows := func() int {
		var n int
		require.NoError(t, s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM console_sessions`).Scan(&n))
		return n
	}
	login(t, srv, s.alice)
	login(t, srv, s.bob)
	require.Equal(t, 2, rows(), "live sessions stay")
	c.Advance(time.Hour)
	ck := login(t, srv, s.bob)
	require.Equal(t, 1, rows(), "the expired two went with the next login")
	require.True(t, authed(t, srv, ck))
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
	// Sessions are rows in the mirror, reached as the runtime role.
	o := newSessions(t).options(c.Now)
	o.Approvers, o.SessionTTL = approvers, 12*time.Hour
	return console.New(o)
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
		require.Contains(t, rec.Body.String(), "Ask your administrator for a console key", k)
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
	require.Contains(t, strings.ReplaceAll(rec.Body.String(), "\u00a0", " "), "That key expired at "+shown(expires)+"; ask your administrator")
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
		h.SetApprovers(context.Background(), after)
		h.SetApprovers(context.Background(), before)
	}
	wg.Wait()
	h.SetApprovers(context.Background(), after)

	require.False(t, decides(t, h, aliceSession), "a removed approver's session ends")
	require.Equal(t, http.StatusUnauthorized, loginAs(h, "192.0.2.3", alice).Code, "and her key no longer logs in")
	rec := loginAs(h, "192.0.2.3", bob)
	require.Equal(t, http.StatusSeeOther, rec.Code, "an added approver logs in")
	require.True(t, decides(t, h, rec.Result().Cookies()[0]))
}

// listed is what GET /console/ answers ck: 200, or 303 to the login.
func listed(t *testing.T, srv *httptest.Server, ck *http.Cookie) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/console/", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	if res.StatusCode == http.StatusSeeOther {
		require.Equal(t, "/console/login", res.Header.Get("Location"))
	}
	return res.StatusCode
}

// Removing an approver's line ends their sessions for good: putting the
// line back revives none (a fresh login works). The rows go with the
// reload of the first replica that sees it, so a replica that has not
// reloaded yet refuses the session too. Other approvers' sessions go on.
func TestRemovingAnApproverEndsTheirSessionsForGood(t *testing.T) {
	t.Parallel()
	s := newSessions(t)
	ctx := context.Background()
	one, two := console.New(s.options(time.Now)), console.New(s.options(time.Now))
	srvOne, srvTwo := serveHandler(t, one), serveHandler(t, two)
	alice, bob := login(t, srvOne, s.alice), login(t, srvTwo, s.bob)
	require.Equal(t, http.StatusOK, listed(t, srvOne, alice))

	without := s.approvers[1:]
	one.SetApprovers(ctx, without)
	require.Equal(t, http.StatusSeeOther, listed(t, srvOne, alice), "removed")
	require.Equal(t, http.StatusSeeOther, listed(t, srvTwo, alice), "on the replica that has not reloaded yet")
	two.SetApprovers(ctx, without)

	one.SetApprovers(ctx, s.approvers)
	two.SetApprovers(ctx, s.approvers)
	for _, srv := range []*httptest.Server{srvOne, srvTwo} {
		require.Equal(t, http.StatusSeeOther, listed(t, srv, alice), "the line put back revives no session")
		require.Equal(t, http.StatusOK, listed(t, srv, bob), "bob's session goes on")
	}
	require.Equal(t, http.StatusOK, listed(t, srvTwo, login(t, srvTwo, s.alice)), "a fresh login works")
}

// An expired key's sessions end with it for good: a later expires= put on
// the line lets the key log in again, but revives no session it opened.
// A key's session lasts no longer than the key.
func TestAnExpiredKeysSessionsStayEndedWhenItIsExtended(t *testing.T) {
	t.Parallel()
	c := &clock{}
	alice := randomKey(t)
	parse := func(expires time.Time) []console.Approver {
		a, err := console.ParseApprovers(strings.NewReader("alice approve " + hashOf(alice) + " expires=" + expires.UTC().Format(time.RFC3339)))
		require.NoError(t, err)
		return a
	}
	h := bareHandler(t, parse(c.Now().Add(time.Hour)), c)
	rec := loginAs(h, "192.0.2.1", alice)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	session := rec.Result().Cookies()[0]
	require.LessOrEqual(t, session.MaxAge, 3600, "the cookie lasts no longer than the key")
	require.True(t, decides(t, h, session))

	c.Advance(time.Hour)
	require.False(t, decides(t, h, session), "expired")
	h.SetApprovers(context.Background(), parse(c.Now().Add(365*24*time.Hour)))
	require.False(t, decides(t, h, session), "a later expires= revives no session")
	rec = loginAs(h, "192.0.2.1", alice)
	require.Equal(t, http.StatusSeeOther, rec.Code, "the key logs in again")
	require.True(t, decides(t, h, rec.Result().Cookies()[0]))
}

// serveHandler serves h, mounted as serve mounts the console.
func serveHandler(t *testing.T, h *console.Handler) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(console.Path, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}
