package console

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/clientip"
	"github.com/shipnotify/shipnotify/reminder"
)

// Approver is one person who may log in: a name (recorded as the
// decision's By) and the SHA-256 of their key. The key itself is never
// kept.
type Approver struct {
	Name    string
	KeyHash [sha256.Size]byte
	// Tenant is the tenant whose reminders the approver sees and decides,
	// parsed once with the approver's line (the zero Tenant is the default).
	Tenant reminder.Tenant
	// Expires is when the key stops logging in, and its sessions end
	// (zero: never).
	Expires time.Time
}

// ApproveScope is the scope a key needs to log in to the console.
const ApproveScope = string(api.ScopeApprove)

// namePattern keeps names opaque ids: no '@', so an address can never
// become a decision's By and reach Temporal.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ParseApprovers reads the keys file the API reads (SHIPNOTIFY_API_KEYS_FILE
// has the same format): one `name scope[,scope…] sha256hex [attribute=value…]`
// a line (the attributes are api.ParseAttributes'), # for comments. Keys
// with the approve scope log in to the console as name; the others are the
// API's business and are skipped, though checked: the file is refused
// whole or taken whole. A name may hold several keys (rotation); a key hash
// may appear once. An error names the line, never a hash.
func ParseApprovers(r io.Reader) ([]Approver, error) {
	var out []Approver
	seen := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, fmt.Errorf("line %d: want `name scope[,scope…] sha256hex [expires=…] [tenant=…]`", n)
		}
		name, scopeList, hash := fields[0], fields[1], fields[2]
		if !namePattern.MatchString(name) {
			return nil, fmt.Errorf("line %d: the name may hold only letters, digits, '.', '_' and '-' (at most 64; never an address)", n)
		}
		if api.IsGeneratedKey(name) {
			return nil, fmt.Errorf("line %d: the name is a key (the key itself goes to its holder only; run shipnotify api-key)", n)
		}
		approves := false
		for s := range strings.SplitSeq(scopeList, ",") {
			if !slices.Contains(api.Scopes, api.Scope(s)) {
				// Never repeated: it may be a key pasted into the wrong column.
				return nil, fmt.Errorf("line %d: key %s: a scope is unknown (want %s)", n, name, scopeNames())
			}
			approves = approves || s == ApproveScope
		}
		sum, err := hex.DecodeString(hash)
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("line %d: want the key's SHA-256 as 64 hex digits, not the key", n)
		}
		attrs, err := api.ParseAttributes(fields[3:])
		if err != nil {
			return nil, fmt.Errorf("line %d: key %s: %w", n, name, err)
		}
		a := Approver{Name: name, KeyHash: [sha256.Size]byte(sum), Tenant: attrs.Tenant, Expires: attrs.Expires}
		if seen[a.KeyHash] {
			return nil, fmt.Errorf("line %d: the same key is listed twice", n)
		}
		seen[a.KeyHash] = true
		if approves {
			out = append(out, a)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("error reading the keys file: %w", err)
	}
	return out, nil
}

// scopeNames lists the scopes a line may name, for its error.
func scopeNames() string {
	names := make([]string, len(api.Scopes))
	for i, s := range api.Scopes {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// maxKey bounds what the login form reads as a key.
const maxKey = 512

// approverFor finds whose key this is, comparing the key's hash with every
// approver's in constant time (no early exit: the time taken says nothing
// about which, or whether, one matched).
func (c *console) approverFor(key string) (Approver, bool) {
	sum := sha256.Sum256([]byte(key))
	var found Approver
	ok := 0
	for _, a := range c.o.Approvers {
		if subtle.ConstantTimeCompare(sum[:], a.KeyHash[:]) == 1 {
			found, ok = a, 1
		}
	}
	return found, ok == 1 && key != ""
}

// The session cookie: base64url("2|name|expiry|key fingerprint|session
// id") "." base64url(HMAC), the HMAC under a key derived from
// SHIPNOTIFY_SESSION_KEY, which only serve holds (the worker holds the
// link key, and the approvers' hashes are no secret). The fingerprint (the
// first 8 bytes of the key's SHA-256) ends a session when its key is
// removed or replaced; the session id (random) names the session's row in
// the mirror, which logout deletes, so a copy of the cookie ends with it.
const (
	cookieName     = "shipnotify_console"
	hostCookieName = "__Host-shipnotify_console"
	sessionPurpose = "shipnotify session\x00"
	sessionVersion = "2"
)

func fingerprint(a Approver) string { return hex.EncodeToString(a.KeyHash[:8]) }

// sessionHash is what the mirror keeps of a session id: the table alone
// makes no cookie.
func sessionHash(id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return sum[:]
}

func (c *console) sessionValue(a Approver, expires time.Time, id string) string {
	payload := strings.Join([]string{sessionVersion, a.Name, strconv.FormatInt(expires.Unix(), 10), fingerprint(a), id}, "|")
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(c.sessions.Sign(sessionPurpose+payload))
}

var errNoSession = errors.New("no valid session")

// sessionClaim is what a session cookie says, once its MAC checks out.
type sessionClaim struct {
	name, fingerprint, id string
}

// claim reads the request's session cookie: signed with the session key,
// of this version, unexpired, and expiring no later than a login made now
// would. Only the cookie name setSession uses for the request is read:
// over https a plain or __Secure- cookie, which a network attacker or a
// sibling site could plant, logs no one in.
func (c *console) claim(r *http.Request) (sessionClaim, bool) {
	ck, err := r.Cookie(c.cookieName(r))
	if err != nil {
		return sessionClaim{}, false
	}
	enc, sig, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return sessionClaim{}, false
	}
	payload, err1 := base64.RawURLEncoding.Strict().DecodeString(enc)
	sum, err2 := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err1 != nil || err2 != nil || !c.sessions.Verify(sessionPurpose+string(payload), sum) {
		return sessionClaim{}, false
	}
	parts := strings.Split(string(payload), "|")
	if len(parts) != 5 || parts[0] != sessionVersion || parts[4] == "" {
		return sessionClaim{}, false
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	now := c.o.Now()
	if err != nil || !now.Before(time.Unix(exp, 0)) || time.Unix(exp, 0).After(now.Add(c.o.SessionTTL)) {
		return sessionClaim{}, false
	}
	return sessionClaim{name: parts[1], fingerprint: parts[3], id: parts[4]}, true
}

// session returns who the request's cookie names, if its claim holds, its
// key is still configured and its row is still in the mirror (no logout
// ended it). The error is errNoSession, or the mirror's.
func (c *console) session(r *http.Request) (Approver, error) {
	cl, ok := c.claim(r)
	if !ok {
		return Approver{}, errNoSession
	}
	for _, a := range c.o.Approvers {
		if a.Name == cl.name && fingerprint(a) == cl.fingerprint {
			live, err := c.o.Mirror.ConsoleSessionLive(r.Context(), sessionHash(cl.id), a.Name)
			if err != nil {
				return Approver{}, err
			}
			if !live {
				return Approver{}, errNoSession
			}
			return a, nil
		}
	}
	return Approver{}, errNoSession
}

// current is who the request's session names, unless their key has
// expired since: an expired approver's sessions end with it.
func (c *console) current(r *http.Request) (Approver, error) {
	a, err := c.session(r)
	if err == nil && api.Expired(a.Expires, c.o.Now()) {
		return Approver{}, errNoSession
	}
	return a, err
}

// approverName is the logged-in approver's name, or "".
func (c *console) approverName(r *http.Request) string {
	a, err := c.current(r)
	if err != nil {
		return ""
	}
	return a.Name
}

func (c *console) secure(r *http.Request) bool { return c.o.SecureCookie || r.TLS != nil }

// cookieName is the session cookie's name for r: __Host- over https, which
// a browser takes only from a secure origin, with Path=/ and no Domain, so
// neither a network attacker nor a sibling subdomain can plant one.
func (c *console) cookieName(r *http.Request) string {
	if c.secure(r) {
		return hostCookieName
	}
	return cookieName
}

func (c *console) setSession(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	ck := &http.Cookie{
		Name: c.cookieName(r), Value: value, Path: Path, MaxAge: maxAge,
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode,
	}
	if ck.Secure {
		// __Host- requires Path=/; the console's pages are under it.
		ck.Path = "/"
	}
	http.SetCookie(w, ck)
}

// authed lets only a logged-in approver through. A page asked for without
// a session goes to the login page; a POST is refused (401) and does
// nothing.
func (c *console) authed(h func(http.ResponseWriter, *http.Request, Approver)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, err := c.current(r)
		if err != nil && !errors.Is(err, errNoSession) {
			c.log.Error("console: checking a session failed", "error", err)
			c.problem(w, r, http.StatusServiceUnavailable, "Unavailable",
				"Your session could not be checked (the mirror did not answer); nothing was changed. Try again.")
			return
		}
		if err != nil {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, Path+"login", http.StatusSeeOther)
				return
			}
			c.problem(w, r, http.StatusUnauthorized, "Log in first",
				"Only a logged-in approver can do this; nothing was changed.")
			return
		}
		h(w, r, a)
	}
}

// noKey is what a person who typed no approver's key is told: whom to
// ask, not how keys are made.
const noKey = "That is not an approver's key. Ask your administrator for a console key: it names you, and lets you approve and reject reminders."

type loginData struct {
	Error     string
	NoneSetUp bool
}

func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login.html", page{Title: "Log in", Data: loginData{NoneSetUp: len(c.o.Approvers) == 0}})
}

// login checks the key and sets the session cookie naming its approver.
// The key is checked before the throttle: a right one logs in whatever
// the throttle says, and only an attempt that fails is throttled.
func (c *console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.problem(w, r, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	now := c.o.Now()
	client := clientip.Unit(c.o.Clients.Client(r))
	// refuse answers a failed attempt: 429 while its client or the
	// approver it names (an expired key's; "" for no one) has no failure
	// left, else 401 with msg, spending one of each.
	refuse := func(approver, why, msg string) {
		if wait := c.logins.wait(client, approver, now); wait > 0 {
			c.log.Warn("console: login throttled", "why", why)
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Round(time.Second)/time.Second)+1))
			c.render(w, r, http.StatusTooManyRequests, "login.html", page{Title: "Log in",
				Data: loginData{Error: "Too many attempts; wait a little and try again.", NoneSetUp: len(c.o.Approvers) == 0}})
			return
		}
		c.logins.failed(client, approver, now)
		c.log.Warn("console: login refused", "why", why)
		c.render(w, r, http.StatusUnauthorized, "login.html", page{Title: "Log in",
			Data: loginData{Error: msg, NoneSetUp: len(c.o.Approvers) == 0}})
	}
	// Only the hash is configured, so a weak key's strength shows only
	// here: it is refused before it is hashed, whatever the file holds.
	if key != "" && !api.IsGeneratedKey(key) {
		refuse("", "weak key", noKey+" (A console key starts snk_ and is 47 characters long; a key of another form "+
			"is refused even if it is configured.)")
		return
	}
	a, ok := c.approverFor(key)
	if !ok || len(key) > maxKey {
		refuse("", "unknown key", noKey)
		return
	}
	if api.Expired(a.Expires, now) {
		refuse(a.Name, "expired key", "That key expired at "+styleFor(r, now).Text(a.Expires)+"; ask your administrator for a new console key.")
		return
	}
	// A session ends by its key's expires= at the latest: written into
	// the cookie, so a later expires= (or a key re-added) revives none.
	ttl := c.o.SessionTTL
	if !a.Expires.IsZero() {
		ttl = min(ttl, a.Expires.Sub(now))
	}
	expires, id := now.Add(ttl).Truncate(time.Second), rand.Text()
	if err := c.o.Mirror.CreateConsoleSession(r.Context(), sessionHash(id), a.Name, expires, now); err != nil {
		c.log.Error("console: recording a session failed", "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable",
			"You could not be logged in (the mirror did not answer). Try again.")
		return
	}
	c.setSession(w, r, c.sessionValue(a, expires, id), int(ttl/time.Second))
	c.log.Info("console: login", "approver", a.Name)
	http.Redirect(w, r, Path, http.StatusSeeOther)
}

// logout ends this session: its row goes, so the cookie and any copy of
// it log no one in, on every serve. The approver's other sessions (other
// browsers) go on.
func (c *console) logout(w http.ResponseWriter, r *http.Request) {
	if cl, ok := c.claim(r); ok {
		if err := c.o.Mirror.EndConsoleSession(r.Context(), sessionHash(cl.id)); err != nil {
			c.log.Error("console: ending a session failed", "error", err)
			c.problem(w, r, http.StatusServiceUnavailable, "Unavailable",
				"You are still logged in: the session could not be ended (the mirror did not answer). Try again.")
			return
		}
		c.log.Info("console: logout", "approver", cl.name)
	}
	c.setSession(w, r, "", -1)
	http.Redirect(w, r, Path+"login", http.StatusSeeOther)
}
