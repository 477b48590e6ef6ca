package codec

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"html"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
)

// Bounds of the codec server. A request body holds a batch of payloads (the
// Web UI sends one event's worth); Temporal refuses payloads over 2 MiB by
// default, so 4 MiB leaves room without letting a caller make us buffer
// more.
const (
	MaxRequestBytes      = 4 << 20
	DefaultMaxConcurrent = 16
	DefaultQueueWait     = 5 * time.Second
)

// Timeouts of the codec server's http.Server: a slow or idle client cannot
// hold a connection and its goroutine for long.
const (
	ServerReadHeaderTimeout = 5 * time.Second
	ServerReadTimeout       = 30 * time.Second
	ServerWriteTimeout      = 30 * time.Second
	ServerIdleTimeout       = 2 * time.Minute
)

// The browser's way to present the token. The Temporal Web UI cannot send a
// fixed Authorization header to a codec server; what it can do is send the
// browser's cookies with its requests (TEMPORAL_CODEC_INCLUDE_CREDENTIALS).
// So a person opens the codec server's /login once, types the token, and
// gets a cookie that stands for it: HttpOnly (no page's script reads it),
// SameSite=Strict (only pages of the same site, such as the Web UI on
// localhost, send it), derived from the token rather than the token itself.
const (
	// CookieName is the cookie /login sets.
	CookieName = "shipnotify_codec"
	// CookieMaxAge is how long a login lasts.
	CookieMaxAge = 12 * time.Hour
	// LoginPath is the page that sets it.
	LoginPath = "/login"
)

// cookieValue is what the cookie carries for token: a hash of it, so the
// cookie, which the browser also sends to the site's other ports, does not
// carry the token anywhere else.
func cookieValue(token string) string {
	sum := sha256.Sum256([]byte("shipnotify codec server cookie\x00" + token))
	return hex.EncodeToString(sum[:])
}

// ErrTokenRequired is Server refusing to listen without a token: anyone
// who reaches it could decrypt every history, and encrypt a payload any
// worker would take as ours. On loopback a development setup may waive it
// (InsecureLoopback); beyond loopback nothing waives it.
var ErrTokenRequired = errors.New("a token is required (on loopback, unless waived for development)")

// ServerOptions configure the codec server.
type ServerOptions struct {
	// Origins may call the server from a browser (the Temporal Web UI's
	// origin, e.g. http://localhost:8233).
	Origins []string
	// Token, when set, must come as "Authorization: Bearer <token>".
	// Server requires one, unless it listens on loopback with
	// InsecureLoopback.
	Token string
	// InsecureLoopback serves loopback without a token, for a developer's
	// machine (the demo, the dev scripts): any local process may then
	// decrypt and encrypt payloads.
	InsecureLoopback bool
	// Hosts are the names a request's Host header may carry besides
	// loopback names and the listen address's host: the names the server
	// is reached by. Any other Host is refused, so a web page cannot
	// reach it by rebinding its own name to our address (DNS rebinding).
	Hosts []string
	// MaxConcurrent bounds the requests served at once; 0 means
	// DefaultMaxConcurrent.
	MaxConcurrent int
	// QueueWait is how long a request waits for a free slot before it is
	// answered 503; 0 means DefaultQueueWait.
	QueueWait time.Duration

	// listenHost is the host of the address Server listens on.
	listenHost string
}

// Handler serves /encode and /decode for the Temporal Web UI and CLI
// (Temporal's remote codec protocol), with CORS for the UI's origin. It is
// not an oracle for whoever reaches it: it answers only requests naming an
// allowed Host, posting application/json of at most MaxRequestBytes, with
// the bearer token when one is set (compared in constant time) or the
// cookie its LoginPath sets for a browser, and serves a bounded number at
// once.
func (c *Codec) Handler(o ServerOptions) http.Handler {
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.QueueWait <= 0 {
		o.QueueWait = DefaultQueueWait
	}
	hosts := map[string]bool{}
	for _, h := range append(slices.Clone(o.Hosts), o.listenHost) {
		if h = hostOnly(h); h != "" && !isWildcard(h) {
			hosts[h] = true
		}
	}
	var wantToken, wantCookie [sha256.Size]byte
	if o.Token != "" {
		wantToken = sha256.Sum256([]byte("Bearer " + o.Token))
		wantCookie = sha256.Sum256([]byte(cookieValue(o.Token)))
	}
	slots := make(chan struct{}, o.MaxConcurrent)
	codec := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := hostOnly(r.Host); !hosts[h] && !isLoopbackName(h) {
			http.Error(w, "host not allowed", http.StatusMisdirectedRequest)
			return
		}
		if r.URL.Path == LoginPath {
			login(w, r, o.Token)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(o.Origins, origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Set("Access-Control-Max-Age", "600")
			h.Add("Vary", "Origin")
		}
		switch r.Method {
		case http.MethodOptions:
			w.WriteHeader(http.StatusNoContent)
			return
		case http.MethodPost:
		default:
			w.Header().Set("Allow", "POST, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if o.Token != "" {
			// Hashing first makes the comparison constant-time in the
			// length too.
			got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
			var gotCookie [sha256.Size]byte
			if c, err := r.Cookie(CookieName); err == nil {
				gotCookie = sha256.Sum256([]byte(c.Value))
			}
			if subtle.ConstantTimeCompare(got[:], wantToken[:]) != 1 && subtle.ConstantTimeCompare(gotCookie[:], wantCookie[:]) != 1 {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		// A browser sends application/json only after a CORS preflight,
		// which only the configured origins pass.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			http.Error(w, "want Content-Type: application/json", http.StatusUnsupportedMediaType)
			return
		}
		if r.ContentLength > MaxRequestBytes {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if !acquire(r.Context(), slots, o.QueueWait) {
			w.Header().Set("Retry-After", strconv.Itoa(1))
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		defer func() { <-slots }()
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		codec.ServeHTTP(w, r)
	})
}

// login serves LoginPath: a form for the token, and on a POST of the
// right one the cookie the Web UI's requests then carry.
func login(w http.ResponseWriter, r *http.Request, token string) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
	page := func(status int, msg string) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>shipnotify codec server</title></head><body>`+
			`<h1>shipnotify codec server</h1><p>`+html.EscapeString(msg)+`</p>`)
		if token != "" {
			_, _ = io.WriteString(w, `<form method="post" action="`+LoginPath+`"><label>Token <input type="password" name="token" autocomplete="off" required></label> `+
				`<button type="submit">Sign in</button></form>`)
		}
		_, _ = io.WriteString(w, `</body></html>`)
	}
	switch {
	case token == "":
		page(http.StatusOK, "This codec server needs no token here: the Web UI decodes without signing in.")
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		page(http.StatusOK, "Sign in with the codec server's token (SHIPNOTIFY_CODEC_SERVER_TOKEN) so the Temporal Web UI in this browser can decode payloads.")
	case r.Method != http.MethodPost:
		h.Set("Allow", "GET, HEAD, POST")
		page(http.StatusMethodNotAllowed, "Method not allowed.")
	default:
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		got := sha256.Sum256([]byte(r.PostFormValue("token")))
		want := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			page(http.StatusUnauthorized, "That is not the token. Ask whoever runs this codec server for SHIPNOTIFY_CODEC_SERVER_TOKEN.")
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: CookieName, Value: cookieValue(token), Path: "/", MaxAge: int(CookieMaxAge / time.Second),
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		page(http.StatusOK, "Signed in: the Temporal Web UI in this browser now decodes payloads. Go back to it and reload.")
	}
}

// acquire takes a slot, waiting at most wait.
func acquire(ctx context.Context, slots chan struct{}, wait time.Duration) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case slots <- struct{}{}:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	return false
}

// Server is an HTTP server for Handler on addr, with timeouts. It refuses
// (ErrTokenRequired) to serve an address beyond loopback without a token.
// The host of addr is an allowed Host.
func (c *Codec) Server(addr string, o ServerOptions) (*http.Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if o.Token == "" && !(o.InsecureLoopback && isLoopbackName(hostOnly(host))) {
		return nil, ErrTokenRequired
	}
	o.listenHost = host
	// The kubelet's probes name the pod's address as Host, which the
	// codec's own check refuses: /healthz answers any Host, and says only
	// that the process serves.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.Handle("/", c.Handler(o))
	return &http.Server{
		Addr:              addr,
		Handler:           mux,
		ReadHeaderTimeout: ServerReadHeaderTimeout,
		ReadTimeout:       ServerReadTimeout,
		WriteTimeout:      ServerWriteTimeout,
		IdleTimeout:       ServerIdleTimeout,
	}, nil
}

// hostOnly is a Host header's or address's host, lower case, without port
// or IPv6 brackets.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}

// isLoopbackName: "localhost" or a loopback IP literal (127.0.0.0/8, ::1).
func isLoopbackName(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// isWildcard: an address that listens on every interface ("" or
// unspecified), which names no host a request could carry.
func isWildcard(h string) bool {
	if h == "" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsUnspecified()
}
