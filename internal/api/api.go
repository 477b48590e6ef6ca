// Package api is shipnotify's tracker API: JSON over HTTP on the starter and
// the mirror, for trackers written in any language. It schedules updates,
// cancels, reschedules and decides as the CLI does, and reads reminders with
// keyset pagination. Every route needs an API key with the route's scope;
// errors are RFC 9457 problems. The contract is openapi.json, embedded and
// served at /v1/openapi.json.
package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/internal/clientip"
	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// OpenAPI is the API's contract, an OpenAPI 3.1 document (openapi.json
// beside this file). A test validates every request and answer of the
// suite against it.
//
//go:embed openapi.json
var OpenAPI []byte

// Defaults of Options.
const (
	// DefaultRequestTimeout bounds one request. It is longer than the
	// starter's bounded waits (a cancel waits 20 s for a workflow, a
	// reschedule or decision 60 s), so an operation answers with its
	// outcomes rather than a timeout.
	DefaultRequestTimeout = budget.APIRequest
	// DefaultRate and DefaultBurst are each key's request budget.
	DefaultRate  = 20
	DefaultBurst = 40
	// StatusQueryTimeout bounds asking a reminder's workflow for its live
	// status: with no worker running nobody answers, and the mirror's
	// account is still worth returning.
	StatusQueryTimeout = 5 * time.Second
	// MaxBodyBytes is the largest request body: the update document limit.
	MaxBodyBytes = 1 << 20
)

// Options configure the API.
type Options struct {
	// Starter schedules and operates; its Mirror and Temporal client also
	// serve the reads.
	Starter *starter.Starter
	// Keys are the API keys accepted; none means every request is 401.
	// SetKeys replaces them while the API serves.
	Keys []Key
	// DefaultTenant is the default tenant's name, as keys' tenant=
	// attributes and ?tenant= write it (empty means
	// reminder.DefaultTenantName).
	DefaultTenant string
	// Rate and Burst are each key's token bucket (requests a second, and
	// how many may come at once). Rate 0 means DefaultRate; rate.Inf turns
	// the limit off (the benchmark, which measures the API's own cost).
	Rate  rate.Limit
	Burst int
	// ReminderRate and ReminderBurst are each key's and each tenant's
	// reminder bucket: an update is charged its reminders and webhook host
	// lookups (chargeUpdate). Rate 0 means rate.Inf: no charge.
	ReminderRate  rate.Limit
	ReminderBurst int
	// Clients finds a request's client behind the proxies the operator
	// trusts (the zero Resolver: the peer), for the failed-key throttle.
	Clients clientip.Resolver
	// RequestTimeout bounds each request (0 means DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Metrics, when set, receives the request counts and durations.
	Metrics prometheus.Registerer
	// Logger gets one line per failed request (nil: discarded). Keys and
	// request bodies are never logged.
	Logger *slog.Logger
	// Now is the clock keys expire by (nil means time.Now).
	Now func() time.Time
	// IDs seal the event ids and feed cursors callers see, which would
	// otherwise count every tenant's events (nil means
	// opaque.Development(), as with SHIPNOTIFY_ID_KEY unset).
	IDs *opaque.Keys
}

// API is the tracker API, an http.Handler for /v1/.
type API struct {
	st   *starter.Starter
	keys atomic.Pointer[keyring]
	// setKeys keeps two SetKeys from each dropping the other's limiters.
	setKeys sync.Mutex
	limit   rate.Limit
	burst   int
	// reminderLimit and reminderBurst are the reminder buckets', and
	// tenantReminders the tenants' own.
	reminderLimit   rate.Limit
	reminderBurst   int
	tenantReminders *reminderBuckets
	clients         clientip.Resolver
	now             func() time.Time
	// defaultTenant is the default tenant's name.
	defaultTenant string
	ids           *opaque.Keys
	timeout       time.Duration
	log           *slog.Logger
	mux           *http.ServeMux
	metrics       *requestMetrics
	// failed counts each client address's keys that were not valid.
	failed *failures
	// patterns are the routes, for the tests that hold them and the
	// OpenAPI document in step.
	patterns []string
	scopes   map[string]Scope
}

// New returns the API over o.Starter.
func New(o Options) (*API, error) {
	if o.Starter == nil || o.Starter.Mirror == nil || o.Starter.Temporal == nil {
		return nil, errors.New("api: a connected starter is required")
	}
	a := &API{
		st: o.Starter, limit: o.Rate, burst: o.Burst, now: o.Now,
		timeout: o.RequestTimeout, log: o.Logger, mux: http.NewServeMux(), scopes: map[string]Scope{},
		failed: newFailures(),
	}
	if a.timeout <= 0 {
		a.timeout = DefaultRequestTimeout
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.limit == 0 {
		a.limit = DefaultRate
	}
	if a.burst <= 0 {
		a.burst = DefaultBurst
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.reminderLimit, a.reminderBurst = o.ReminderRate, max(o.ReminderBurst, 1)
	if a.reminderLimit == 0 {
		a.reminderLimit = rate.Inf
	}
	a.tenantReminders = newReminderBuckets(a.reminderLimit, a.reminderBurst)
	a.clients = o.Clients
	if a.ids = o.IDs; a.ids == nil {
		a.ids = opaque.Development()
	}
	a.defaultTenant = o.DefaultTenant
	if a.defaultTenant == "" {
		a.defaultTenant = reminder.DefaultTenantName
	}
	a.SetKeys(o.Keys)
	if o.Metrics != nil {
		m, err := newRequestMetrics(o.Metrics)
		if err != nil {
			return nil, err
		}
		a.metrics = m
	}
	a.routes()
	return a, nil
}

func (a *API) routes() {
	a.mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		// It takes no parameter, and says so as every route does.
		if p := checkQuery(r.URL.RawQuery, nil); p != nil {
			writeProblem(w, p)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(OpenAPI)
	})
	a.patterns = append(a.patterns, "GET /v1/openapi.json")

	a.handle("POST /v1/updates", ScopeSchedule, a.postUpdate)

	a.handle("POST /v1/shipments/{shipment}/cancel", ScopeOperate, a.cancelShipment)
	a.handle("POST /v1/shipments/{shipment}/updates/{update}/reschedule", ScopeOperate, a.rescheduleUpdate)
	a.handle("POST /v1/shipments/{shipment}/updates/{update}/reminders/{subscriber}/reschedule", ScopeOperate, a.rescheduleReminder)

	a.handle("POST /v1/shipments/{shipment}/updates/{update}/approve", ScopeApprove, a.decideUpdate(true))
	a.handle("POST /v1/shipments/{shipment}/updates/{update}/reject", ScopeApprove, a.decideUpdate(false))
	a.handle("POST /v1/shipments/{shipment}/updates/{update}/reminders/{subscriber}/approve", ScopeApprove, a.decideReminder(true))
	a.handle("POST /v1/shipments/{shipment}/updates/{update}/reminders/{subscriber}/reject", ScopeApprove, a.decideReminder(false))

	a.handle("GET /v1/reminders", ScopeRead, a.listReminders, listParams...)
	a.handle("GET /v1/shipments/{shipment}/updates/{update}/reminders/{subscriber}", ScopeRead, a.getReminder)

	a.handle("GET /v1/suppressions", ScopeRead, a.listSuppressions, suppressionParams...)
	a.handle("POST /v1/suppressions/lift", ScopeOperate, a.liftSuppression)
}

// SetKeys replaces the keys the API accepts, for every request that starts
// after it (serve calls it when the keys file changes). A key whose name
// remains keeps its rate limiter, so a reload does not refill its bucket.
func (a *API) SetKeys(keys []Key) {
	a.setKeys.Lock()
	defer a.setKeys.Unlock()
	ring := &keyring{keys: slices.Clone(keys), limiters: map[string]*rate.Limiter{},
		reminders: map[string]*rate.Limiter{}, tenants: map[string]string{}}
	old := a.keys.Load()
	for _, k := range keys {
		ring.tenants[k.Name] = k.Tenant.ID(a.defaultTenant)
		if old != nil && old.limiters[k.Name] != nil {
			ring.limiters[k.Name], ring.reminders[k.Name] = old.limiters[k.Name], old.reminders[k.Name]
		} else {
			ring.limiters[k.Name] = rate.NewLimiter(a.limit, a.burst)
			ring.reminders[k.Name] = rate.NewLimiter(a.reminderLimit, a.reminderBurst)
		}
	}
	a.keys.Store(ring)
}

// Patterns are the routes the API serves, as ServeMux patterns.
func (a *API) Patterns() []string { return append([]string(nil), a.patterns...) }

// RouteScopes is the scope each route's key needs, by pattern (the
// document's one route without a key has none).
func (a *API) RouteScopes() map[string]Scope { return maps.Clone(a.scopes) }

// handlerFunc serves one route for an authenticated key; a returned error
// becomes the problem answer (a *Problem as it is, anything else 500 or 504).
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *caller) error

// wildcard finds a route pattern's path wildcards ({shipment}).
var wildcard = regexp.MustCompile(`\{(\w+)\}`)

// handle registers a route that needs scope and takes the query parameters
// params beside tenant (which every keyed route takes): the key is
// checked, then its rate, then the query (checkQuery), then the handler
// runs under the request's deadline. A POST runs on a context the client's
// disconnecting does not cancel: an operation once begun is carried
// through (within the deadline), never left half-done because a
// connection dropped.
func (a *API) handle(pattern string, scope Scope, h handlerFunc, params ...string) {
	a.patterns = append(a.patterns, pattern)
	a.scopes[pattern] = scope
	params = append([]string{"tenant"}, params...)
	post := strings.HasPrefix(pattern, "POST ")
	var ids []string // the pattern's path wildcards: each an id
	for _, m := range wildcard.FindAllStringSubmatch(pattern, -1) {
		ids = append(ids, m[1])
	}
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		ring := a.keys.Load()
		k, p := a.authenticate(r, ring, scope)
		if p == nil {
			p = a.allow(w, ring, k)
		}
		if p == nil {
			p = checkQuery(r.URL.RawQuery, params)
		}
		var c *caller
		if p == nil {
			c, p = a.callerOf(r, ring, k)
		}
		if p != nil {
			a.fail(w, r, k, p)
			return
		}
		for _, name := range ids {
			// Outside the ids' charset a path names nothing: 400,
			// naming the parameter, and never asked of the mirror (a
			// NUL or invalid UTF-8 is its error).
			if !reminder.IsID(r.PathValue(name)) {
				a.fail(w, r, k, invalidParameter(name, "not an id (letters, digits, '.', '_', '-', at most 64)"))
				return
			}
		}
		ctx := r.Context()
		if post {
			ctx = context.WithoutCancel(ctx)
		}
		ctx, cancel := context.WithTimeout(ctx, a.timeout)
		defer cancel()
		r = r.WithContext(ctx)
		if post {
			// A body said to be too large is refused unread; one that
			// turns out so (chunked) is cut at the limit, and the server
			// closes that connection rather than reading the rest.
			if r.ContentLength > MaxBodyBytes {
				a.fail(w, r, k, bodyProblem(&http.MaxBytesError{Limit: MaxBodyBytes}))
				return
			}
			inner := w
			if sw, ok := w.(*statusWriter); ok {
				inner = sw.ResponseWriter
			}
			r.Body = http.MaxBytesReader(inner, r.Body, MaxBodyBytes)
		}
		if err := h(w, r, c); err != nil {
			a.fail(w, r, k, a.problemFor(ctx, err))
		}
	})
}

// checkQuery refuses a query string that is malformed, or names a
// parameter not in params, more than once, or with no value: a misspelt
// or empty filter never lists everything, and a parameter a route does not
// take (dry_run=1) never reads as honoured. The problem names the first
// such parameter, in the order given, never its value.
func checkQuery(raw string, params []string) *Problem {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return typed(TypeInvalidParameter, http.StatusBadRequest, "Invalid parameter", "the query string is malformed")
	}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue // a&&b: an empty pair names nothing
		}
		name, _, _ := strings.Cut(pair, "=")
		name, _ = url.QueryUnescape(name) // ParseQuery unescaped it already
		vs := q[name]
		switch {
		case !slices.Contains(params, name):
			return invalidParameter(queryName(name), "unknown parameter")
		case len(vs) > 1:
			return invalidParameter(name, "given more than once")
		case vs[0] == "":
			return invalidParameter(name, "empty: give a value, or leave the parameter out")
		}
	}
	return nil
}

// queryName is an unknown parameter's name as a problem may say it: as it
// is when plain, quoted (and cut) otherwise.
func queryName(name string) string {
	if plainKey.MatchString(name) {
		return name
	}
	return fmt.Sprintf("%.40q", name)
}

// ServeHTTP serves the API, counting each request by route and status. An
// unknown path or method gets a problem too.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	// The route is the API's own pattern, never one a mux in front of it
	// matched (serve's used to count every unmatched request as "/v1/").
	route := "unmatched"
	if p := r.URL.Path; p != cleanPath(p) {
		// The mux would redirect it to its clean form, in HTML; a client
		// that built such a path has a bug to hear of, not a redirect.
		writeProblem(sw, problem(http.StatusNotFound,
			"no such route: the path is not in its clean form (a doubled '/', or a '.' or '..' segment); the routes are in /v1/openapi.json"))
	} else if _, pattern := a.mux.Handler(r); pattern == "" {
		a.unmatched(sw, r)
	} else {
		route = pattern
		a.mux.ServeHTTP(sw, r)
	}
	if a.metrics != nil {
		a.metrics.observe(route, sw.status(), time.Since(start))
	}
}

// cleanPath is p as the mux cleans it before matching: rooted, with no
// doubled '/' and no '.' or '..' segment, and its trailing '/' kept.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}

// unmatched answers a request no route takes with the mux's status (404,
// 405 with its Allow header, or a redirect to a cleaned path), as a problem.
func (a *API) unmatched(w http.ResponseWriter, r *http.Request) {
	h, _ := a.mux.Handler(r)
	cw := &captureWriter{header: w.Header()}
	h.ServeHTTP(cw, r)
	switch cw.code {
	case http.StatusNotFound:
		writeProblem(w, problem(http.StatusNotFound, "no such route; the routes are in /v1/openapi.json"))
	case http.StatusMethodNotAllowed:
		writeProblem(w, problem(http.StatusMethodNotAllowed, "the route does not take this method; Allow lists those it does"))
	default:
		w.WriteHeader(cw.code)
	}
}

// fail writes p, and logs it if the server is at fault. The log names the
// key (its name, never the key), the route and the status.
func (a *API) fail(w http.ResponseWriter, r *http.Request, k *Key, p *Problem) {
	if p.Status >= 500 {
		name := ""
		if k != nil {
			name = k.Name
		}
		a.log.ErrorContext(r.Context(), "request failed", "route", r.Pattern, "status", p.Status, "key", name, "error", p.cause)
	}
	writeProblem(w, p)
}

// authenticate finds the request's key in ring and checks its scope: no
// key, an unknown one, one not of the form NewKey makes or an expired one
// is 401 with a Bearer challenge (an unknown one or one of another form
// is 429 once the client has sent too many: failedKey); a key without
// scope is 403.
func (a *API) authenticate(r *http.Request, ring *keyring, scope Scope) (*Key, *Problem) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		p := problem(http.StatusUnauthorized, "an API key is required: Authorization: Bearer <key>")
		p.header = http.Header{"Www-Authenticate": {`Bearer realm="shipnotify"`}}
		return nil, p
	}
	if !IsGeneratedKey(token) {
		// Only a hash is configured, so a weak key's strength shows only
		// here: it is refused before it is hashed, whatever the keys hold
		// (as the console refuses it).
		p := problem(http.StatusUnauthorized, "the API key is not valid: a key is snk_ and 43 characters, as shipnotify api-key makes it; "+
			"a key of another form is refused even if its hash is configured")
		p.header = http.Header{"Www-Authenticate": {`Bearer realm="shipnotify", error="invalid_token"`}}
		return nil, a.failedKey(r, p)
	}
	k := ring.find(token)
	if k == nil {
		p := problem(http.StatusUnauthorized, "the API key is not valid")
		p.header = http.Header{"Www-Authenticate": {`Bearer realm="shipnotify", error="invalid_token"`}}
		return nil, a.failedKey(r, p)
	}
	if k.Expired(a.now()) {
		// Its name, never the key: the holder learns which key to renew.
		p := problem(http.StatusUnauthorized, fmt.Sprintf("the API key %s expired at %s; ask for a new one",
			k.Name, k.Expires.UTC().Format(time.RFC3339)))
		p.header = http.Header{"Www-Authenticate": {`Bearer realm="shipnotify", error="invalid_token", error_description="the key expired"`}}
		return k, p
	}
	if !k.Allows(scope) {
		p := problem(http.StatusForbidden, fmt.Sprintf("the API key %s lacks the %s scope this route needs", k.Name, scope))
		p.header = http.Header{"Www-Authenticate": {fmt.Sprintf(`Bearer realm="shipnotify", error="insufficient_scope", scope="%s"`, scope)}}
		return k, p
	}
	return k, nil
}

// failedKey counts a key that is none of ours against the request's
// client: within its failures the answer is p (401); past them, 429 with
// Retry-After. An expired key is ours, and its holder is better told so
// than throttled, so it is not counted.
func (a *API) failedKey(r *http.Request, p *Problem) *Problem {
	delay := a.failed.fail(a.client(r), a.now())
	if delay == 0 {
		return p
	}
	secs := retryAfter(delay)
	p = problem(http.StatusTooManyRequests, fmt.Sprintf(
		"too many keys that are not valid came from this client; retry after %d s (a valid key is answered meanwhile)", secs))
	p.header = http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}}
	return p
}

// allow spends one of the key's tokens, or answers 429 with Retry-After:
// the whole seconds until a token is back. Either way the answer says
// where the key stands (rateLimitHeaders).
func (a *API) allow(w http.ResponseWriter, ring *keyring, k *Key) *Problem {
	l := ring.limiters[k.Name]
	if l == nil {
		return nil
	}
	now := a.now()
	res := l.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	defer rateLimitHeaders(w.Header(), l, now)
	if res.OK() && delay == 0 {
		return nil
	}
	res.CancelAt(now)
	if !res.OK() {
		delay = 0
	}
	return overLimit(k, "", delay)
}

// rateLimitPolicy names the one policy in the RateLimit fields.
const rateLimitPolicy = `"per-key"`

// rateLimitHeaders writes the IETF draft's RateLimit-Policy and RateLimit
// fields (draft-ietf-httpapi-ratelimit-headers) for a key's token bucket,
// so a client can pace itself instead of meeting 429: the policy is the
// bucket (q requests, refilled over w seconds), and RateLimit what is
// left of it now (r) and the seconds until it is full again (t).
func rateLimitHeaders(h http.Header, l *rate.Limiter, now time.Time) {
	if l.Limit() == rate.Inf || l.Limit() <= 0 {
		return
	}
	burst := l.Burst()
	perSecond := float64(l.Limit())
	window := int64(math.Ceil(float64(burst) / perSecond))
	tokens := max(l.TokensAt(now), 0)
	remaining := int64(math.Floor(tokens))
	reset := int64(math.Ceil((float64(burst) - tokens) / perSecond))
	if remaining == 0 {
		reset = max(reset, 1)
	}
	h.Set("RateLimit-Policy", fmt.Sprintf("%s;q=%d;w=%d", rateLimitPolicy, burst, max(window, 1)))
	h.Set("RateLimit", fmt.Sprintf("%s;r=%d;t=%d", rateLimitPolicy, remaining, reset))
}

// overLimit is the 429 for a key over its rate limit, Retry-After the whole
// seconds of delay (at least one).
func overLimit(k *Key, what string, delay time.Duration) *Problem {
	secs := retryAfter(delay)
	p := problem(http.StatusTooManyRequests, fmt.Sprintf("the API key %s is over its rate limit%s; retry after %d s", k.Name, what, secs))
	p.header = http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}}
	return p
}

// retryAfter is delay as Retry-After gives it: whole seconds, at least one.
func retryAfter(delay time.Duration) int64 {
	return max(int64((delay+time.Second-1)/time.Second), 1)
}

// problemFor turns a handler's error into the answer: a *Problem as it is,
// a deadline 504, anything else 500 (its text goes to the log only).
func (a *API) problemFor(ctx context.Context, err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		p = problem(http.StatusGatewayTimeout,
			"the request took longer than the server's request timeout; read the reminders back to see what changed")
	} else {
		p = problem(http.StatusInternalServerError, "the server could not complete the request; its log has the detail")
	}
	p.cause = err
	return p
}

// statusWriter remembers the status written, for the metrics.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// captureWriter takes the mux's own answer to an unmatched request, keeping
// its headers (Allow, Location) and status and dropping its text body.
type captureWriter struct {
	header http.Header
	code   int
}

func (w *captureWriter) Header() http.Header { return w.header }
func (w *captureWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *captureWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(b), nil
}

// requestMetrics count requests and time them by route and status.
type requestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRequestMetrics(reg prometheus.Registerer) (*requestMetrics, error) {
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shipnotify_api_requests_total",
			Help: "API requests by route (the route's pattern, never the raw path) and status.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shipnotify_api_request_duration_seconds",
			Help:    "API request duration by route and status.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 90},
		}, []string{"route", "status"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("error registering the API's metrics: %w", err)
		}
	}
	return m, nil
}

func (m *requestMetrics) observe(route string, status int, took time.Duration) {
	code := strconv.Itoa(status)
	m.requests.WithLabelValues(route, code).Inc()
	m.duration.WithLabelValues(route, code).Observe(took.Seconds())
}
