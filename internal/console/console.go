// Package console is the approval console: server-rendered HTML for the
// people who approve or reject reminders, and the confirmation pages of the
// one-click links in escalation emails. It runs on the starter (decisions)
// and the mirror (what awaits approval, audit trails); `shipnotify serve`
// mounts it at Path.
//
// Approvers log in with a personal key (only its SHA-256 is configured) and
// get a session cookie naming them, signed with a key only serve holds and
// backed by a row in the mirror that logout deletes; that name is the
// decision's By.
// Every state-changing request is a POST, refused when it comes from
// another origin (http.CrossOriginProtection); a GET never decides.
package console

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shipnotify/shipnotify/internal/clientip"
	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// Path is where the console lives; mount the handler there
// (mux.Handle(console.Path, console.New(...))) at the root of its host.
const Path = "/console/"

// LinkActor is who a decision taken through an escalation email's link is
// recorded as: whoever held the link sent to the update's escalation
// contact. (Never the address itself: no personal data goes to Temporal.)
const LinkActor = "escalation-link"

// DefaultSessionTTL is how long a login lasts.
const DefaultSessionTTL = 12 * time.Hour

// DefaultLimit is how many reminders the list shows.
const DefaultLimit = 100

// Options are what the console needs.
type Options struct {
	// Starter takes decisions (mirror first, then the workflow).
	Starter *starter.Starter
	// Mirror lists what awaits approval and reads audit trails.
	Mirror *mirror.Store
	// Links checks the escalation email's link tokens. Required.
	Links *links.Signer
	// SessionKeys sign session cookies. Required, and sharing no key with
	// Links: the worker holds those, and with the session key could log
	// in as any approver.
	SessionKeys links.Keys
	// Approvers may log in; none means no one can (links still work). An
	// approver sees and decides its own tenant's reminders only.
	// Handler.SetApprovers replaces them while the console serves.
	Approvers []Approver
	// DefaultTenant is the default tenant's name, as approvers' tenant=
	// attributes write it (empty means reminder.DefaultTenantName).
	DefaultTenant string
	// SecureCookie makes the session cookie __Host-, Secure, Path=/
	// (always, when people reach the console over https, even through a
	// TLS-terminating proxy); a request that arrived over TLS gets it
	// anyway.
	SecureCookie bool
	// Clients finds the client a failed login is charged to: the peer, or
	// behind a trusted proxy the client it forwards (the zero Resolver
	// trusts no proxy).
	Clients clientip.Resolver
	// SessionTTL is how long a login lasts (0 means DefaultSessionTTL).
	SessionTTL time.Duration
	// Limit caps the reminders the list shows (0 means DefaultLimit).
	Limit int
	// Now is the clock (nil means time.Now).
	Now func() time.Time
	// Logger gets logins and decisions (ids and names; never a key or a
	// reason). Nil discards.
	Logger *slog.Logger
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// console serves the pages.
type console struct {
	o        Options
	sessions links.Keys
	// results sign the result pages decisions redirect to.
	results links.Keys
	pages   map[string]*template.Template
	log     *slog.Logger
	logins  *throttle
}

// Handler is the console, to be mounted at Path.
type Handler struct {
	base *console
	// served is the console over the approvers in force: each request
	// sees one set whole, and a swap never races a page.
	served atomic.Pointer[http.Handler]

	mu sync.Mutex
	// approvers are the set in force; unended, the approvers whose
	// sessions a swap could not end (the mirror did not answer), tried
	// again at the next swap.
	approvers []Approver
	unended   []string
}

// ServeHTTP serves the console over the approvers in force.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*h.served.Load()).ServeHTTP(w, r)
}

// SetApprovers replaces who may log in, for every request that starts
// after it (serve calls it when the approvers file changes); the
// failed-login throttle carries over. An approver one of whose keys is
// gone is logged out for good: the rows of all their sessions are deleted
// (their other keys' too: a row does not say which key made it), so
// putting the line back revives none. A session is also bound to its
// key's fingerprint, so it is refused from the swap on, before its row
// goes. Each serve replica deletes on its own reload; twice is harmless.
// If the mirror does not answer, that is logged and tried again at the
// next call, which is the one that could put the key back.
func (h *Handler) SetApprovers(ctx context.Context, approvers []Approver) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := *h.base
	c.o.Approvers = slices.Clone(approvers)
	served := c.handler()
	h.served.Store(&served)

	ended := h.unended
	for _, old := range h.approvers {
		if !slices.ContainsFunc(approvers, func(a Approver) bool { return a.Name == old.Name && a.KeyHash == old.KeyHash }) &&
			!slices.Contains(ended, old.Name) {
			ended = append(ended, old.Name)
		}
	}
	h.approvers, h.unended = c.o.Approvers, nil
	for _, name := range ended {
		n, err := c.o.Mirror.EndApproverSessions(ctx, name)
		if err != nil {
			c.log.Error("console: ending a removed approver's sessions failed; trying again at the next reload",
				"approver", name, "error", err)
			h.unended = append(h.unended, name)
			continue
		}
		c.log.Info("console: a removed approver's sessions ended", "approver", name, "sessions", n)
	}
}

// New returns the console's handler, to be mounted at Path. It panics
// without a Starter, a Mirror, Links or SessionKeys, or with session keys
// the link keys share: a wiring error.
func New(o Options) *Handler {
	if o.Starter == nil || o.Mirror == nil || o.Links == nil || o.Links.Keys.Empty() || o.SessionKeys.Empty() {
		panic("console: Starter, Mirror, Links (with keys) and SessionKeys are required")
	}
	if o.SessionKeys.Shares(o.Links.Keys) {
		panic("console: SessionKeys must share no key with Links")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.Limit <= 0 {
		o.Limit = DefaultLimit
	}
	if o.DefaultTenant == "" {
		o.DefaultTenant = reminder.DefaultTenantName
	}
	c := &console{o: o, sessions: o.SessionKeys.Derive("console-session"), results: o.SessionKeys.Derive("console-result"), pages: parsePages(), log: o.Logger, logins: newThrottle()}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{base: c}
	// The first set ends no one's sessions: there was none before it.
	h.SetApprovers(context.Background(), o.Approvers)
	return h
}

// handler is the console's routes over c's approvers.
func (c *console) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/{$}", c.authed(c.list))
	mux.HandleFunc("GET /console/reminder", c.authed(c.reminder))
	mux.HandleFunc("GET /console/reject", c.authed(c.rejectPage))
	mux.HandleFunc("POST /console/decide", c.authed(c.decide))
	mux.HandleFunc("GET "+resultPath, c.decided)
	mux.HandleFunc("GET /console/overview", c.authed(c.overview))
	mux.HandleFunc("GET "+digestPath+"{key}", c.authed(c.digest))
	mux.HandleFunc("GET /console/login", c.loginPage)
	mux.HandleFunc("POST /console/login", c.login)
	mux.HandleFunc("POST /console/logout", c.logout)
	mux.HandleFunc("GET "+links.Path+"{token}", c.linkPage)
	mux.HandleFunc("POST "+links.Path+"{token}", c.linkDecide)
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.problem(w, r, http.StatusNotFound, "Not found", "There is no such page in the console.")
	})

	// CSRF: a state-changing request from another origin (Sec-Fetch-Site,
	// or an Origin that is not the Host) is refused before any handler runs.
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The route, never the path: a link's path is its token.
		_, route := mux.Handler(r)
		c.log.Warn("console: cross-origin request refused", "route", route)
		c.problem(w, r, http.StatusForbidden, "Refused",
			"This request came from another site, so it was refused and nothing was changed. Use the console's own pages.")
	}))
	return securityHeaders(csrf.Handler(mux))
}

// securityHeaders keeps the pages out of frames, scripts but the
// console's own out (static/console.js: the reader's zone, copy buttons),
// forms posting only to the console, link tokens out of Referer headers,
// and every answer out of caches.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// page is what every template gets.
type page struct {
	Title string
	// Approver is who is logged in ("" on the login and link pages).
	Approver string
	Data     any
	// Times is how the reader sees times (render sets it).
	Times timeStyle
}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		// when, day and short are the reader's: render binds them.
		"when":  timeStyle{}.whenAny,
		"day":   timeStyle{}.Day,
		"short": timeStyle{}.Short,
		"hash":  hash,
		"add":   func(a, b int) int { return a + b },
		"sub":   func(a, b int) int { return a - b },
		"lines": lines,
		"since": since,
		// The reason's limit, one for every interface.
		"maxReason": func() int { return starter.MaxReasonRunes },
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		base := name[len("templates/"):]
		if base == "layout.html" {
			continue
		}
		pages[base] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", name))
	}
	return pages
}

// render writes a page with status, its times in the reader's style; a
// template error is a 500, never half a page.
func (c *console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Times = styleFor(r, c.o.Now())
	var buf bytes.Buffer
	t, err := c.pages[name].Clone()
	if err == nil {
		err = t.Funcs(template.FuncMap{"when": p.Times.whenAny, "day": p.Times.Day, "short": p.Times.Short}).Execute(&buf, p)
	}
	if err != nil {
		c.log.Error("console: rendering a page failed", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// problem renders a page that says what went wrong and that nothing was
// changed by it (or, for the caller's message, what was).
func (c *console) problem(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	c.render(w, r, status, "problem.html", page{Title: title, Approver: c.approverName(r), Data: message})
}

// since says how long something has waited, to the unit that matters.
func since(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd %dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}
