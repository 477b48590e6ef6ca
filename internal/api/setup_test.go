package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// testEnv is the API over a real stack (the dev server, a private
// PostgreSQL schema, a worker on a private task queue), served through the
// handler and server `shipnotify serve` listens with, and reached through
// the contract-checking transport.
type testEnv struct {
	*testenv.Stack
	api    *api.API
	server *httptest.Server
	client *http.Client
	// keys are the test's API keys by name: tracker (schedule, read),
	// operator (operate), approver (approve), reader (read) and admin (all).
	keys map[string]string
	reg  *prometheus.Registry
	// logs is what the API logged.
	logs *testenv.SyncBuffer
}

var testKeys = map[string][]api.Scope{
	"tracker":  {api.ScopeSchedule, api.ScopeRead},
	"operator": {api.ScopeOperate},
	"approver": {api.ScopeApprove},
	"reader":   {api.ScopeRead},
	"admin":    api.Scopes,
	// Two tenants' keys, each with every scope but admin.
	"acme":   {api.ScopeSchedule, api.ScopeOperate, api.ScopeApprove, api.ScopeRead},
	"globex": {api.ScopeSchedule, api.ScopeOperate, api.ScopeApprove, api.ScopeRead},
}

// testTenants are the tenants of the test keys that are not the default's.
var testTenants = map[string]string{"acme": "acme", "globex": "globex"}

type setupOption func(*testenv.StackOptions, *api.Options)

func withoutWorker(so *testenv.StackOptions, _ *api.Options) { so.NoWorker = true }

// withDelayedStart starts the stack's plain reminders with a start delay
// (SHIPNOTIFY_DELAYED_START=true).
func withDelayedStart(so *testenv.StackOptions, _ *api.Options) { so.DelayedStart = true }

func setup(t *testing.T, opts ...setupOption) *testEnv {
	t.Helper()
	loadContract(t)
	var so testenv.StackOptions
	// The tests send bursts; the rate limit has its own test.
	o := api.Options{Rate: rate.Inf}
	for _, opt := range opts {
		opt(&so, &o)
	}
	e := &testEnv{Stack: testenv.NewStackWith(t, so), keys: map[string]string{}, reg: prometheus.NewRegistry(), logs: &testenv.SyncBuffer{}}
	t.Cleanup(func() { e.terminateAll(t) })
	for name, scopes := range testKeys {
		secret, k, err := api.NewKey(name, scopes)
		require.NoError(t, err)
		k.Tenant, err = reminder.ParseTenant("tenant", testTenants[name])
		require.NoError(t, err)
		e.keys[name] = secret
		o.Keys = append(o.Keys, k)
	}
	o.Starter, o.Metrics = e.Starter, e.reg
	o.Logger = slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	e.api, err = api.New(o)
	require.NoError(t, err)
	// Served as `shipnotify serve` serves it: the handler it listens with
	// (api.NewRoot) under the server it makes (api.NewServer), so every
	// answer here is one a tracker gets.
	e.server = httptest.NewUnstartedServer(nil)
	e.server.Config = api.NewServer(api.NewRoot(e.api), 0)
	e.server.Start()
	t.Cleanup(e.server.Close)
	e.client = &http.Client{Transport: checkedTransport{t: t, base: http.DefaultTransport}, Timeout: 2 * time.Minute}
	return e
}

// terminateAll ends the workflows of every reminder the test scheduled, so
// the shared dev server is not left with timers due days ahead.
func (e *testEnv) terminateAll(t *testing.T) {
	rows, err := e.Mirror.List(context.Background(), mirror.Filter{AnyTenant: true})
	if err != nil {
		t.Logf("listing reminders to terminate: %v", err)
		return
	}
	for _, r := range rows {
		_ = e.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
	}
}

// response is an answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// problem decodes a problem answer, checking its media type.
func (r response) problem(t *testing.T) api.Problem {
	t.Helper()
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "%s", r.body)
	var p api.Problem
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.Equal(t, r.status, p.Status)
	return p
}

// decode reads a JSON answer into v.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	require.Equal(t, "application/json", r.header.Get("Content-Type"), "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, v), "%s", r.body)
}

// request describes one call; body is sent as JSON (a string or []byte as
// it is).
type request struct {
	method, path string
	key          string // a key's name in testEnv.keys, or "" for none
	rawAuth      string // an Authorization header to send instead
	body         any
	contentType  string
	expect       expectation
}

func (e *testEnv) send(t *testing.T, rq request) response {
	t.Helper()
	var body io.Reader
	switch b := rq.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	case io.Reader:
		body = b
	default:
		j, err := json.Marshal(b)
		require.NoError(t, err)
		body = bytes.NewReader(j)
	}
	ctx := expecting(t.Context(), rq.expect)
	req, err := http.NewRequestWithContext(ctx, rq.method, e.server.URL+rq.path, body)
	require.NoError(t, err)
	if body != nil {
		ct := rq.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	switch {
	case rq.rawAuth != "":
		req.Header.Set("Authorization", rq.rawAuth)
	case rq.key != "":
		secret, ok := e.keys[rq.key]
		require.True(t, ok, "no key %q", rq.key)
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// do is send for a conforming request.
func (e *testEnv) do(t *testing.T, method, path, key string, body any) response {
	t.Helper()
	return e.send(t, request{method: method, path: path, key: key, body: body})
}

// mirrorCount counts the rows the mirror holds: updates, reminders and events.
func (e *testEnv) mirrorCount(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, e.DB.Pool.QueryRow(t.Context(),
		`SELECT (SELECT count(*) FROM updates) + (SELECT count(*) FROM reminders) + (SELECT count(*) FROM reminder_events)`).Scan(&n))
	return n
}

// update is a valid update document for this test: unique shipment id,
// its webhook subscriber pointed at the stack's receiver.
func (e *testEnv) update(t *testing.T) map[string]any {
	u := testenv.ValidUpdate(time.Now())
	u["shipment_id"] = testenv.ID(t, "SHP")
	hook := u["subscribers"].([]any)[2].(map[string]any)
	hook["url"], hook["secret"] = e.Hooks.URL()+"/in", e.HookSecret
	return u
}
