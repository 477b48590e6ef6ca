// Package soak runs shipnotify under a seeded random workload and random
// faults, through its binary (the CLI and the HTTP API), on real parts: a
// file-backed Temporal dev server and a PostgreSQL cluster of its own, two
// workers and two serve replicas behind a balancer, and local stand-ins
// for SendGrid (posting its signed Event Webhook events to serve), a
// customer's webhook receiver and the trackers' status endpoints of two
// tenants. After the workload it quiesces the system and checks, from
// outside, what the mirror, the engine and the stand-ins' journals say
// against the operations' answers (Check). `make soak` runs it; the same
// seed asks the same operations and faults.
package soak

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/balancer"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// The tenants the workload schedules for: the default tenant (stored as
// "") and one other, each with status endpoints of its own, so an event
// that reaches the other tenant's endpoint shows.
const (
	TenantDefault = ""
	TenantAcme    = "acme"
)

// Tenants are the workload's tenants, in the order it draws them.
var Tenants = []string{TenantDefault, TenantAcme}

// tenantName is how a tenant is written on the command line.
func tenantName(tenant string) string {
	if tenant == "" {
		return "default"
	}
	return tenant
}

// RateCap is the provider's rate cap (SHIPNOTIFY_WORKER_SENDS_PER_SECOND)
// the workers are restarted with partway through the run: about the
// workload's mean rate of sends, so its bursts wait for slots.
const RateCap = 3.0

// Tracker is one of the trackers' status endpoints: its registration and
// the receiver that stands in for it.
type Tracker struct {
	Name   string
	Tenant string
	// Events are the types it takes (nil: every one).
	Events []string
	Sink   *sink.WebhookSink
	secret string
}

// line is the tracker's line in the status endpoints file.
func (tr *Tracker) line() string {
	l := fmt.Sprintf("%s %s/status %s", tr.Name, tr.Sink.URL(), tr.secret)
	if tr.Events != nil {
		l += " events=" + strings.Join(tr.Events, ",")
	}
	if tr.Tenant != "" {
		l += " tenant=" + tr.Tenant
	}
	return l
}

// Env is the system under the soak: the parts it starts, kills, freezes
// and restarts, and the stand-ins whose journals it reads.
type Env struct {
	T      testing.TB
	Bin    string
	Server *testenv.DevServer
	PG     *testenv.Cluster
	Stack  *testenv.Stack
	// Workers and Serves are the product's processes.
	Workers []*testenv.Process
	Serves  []*testenv.Process
	// ServeURLs are the serve replicas' base URLs; Balancer reaches
	// whichever answers, as a load balancer in front of them would.
	ServeURLs []string
	// opsURLs are where each replica answers /healthz.
	opsURLs  []string
	Balancer *httptest.Server
	// APIKeys are each tenant's key (every scope but admin for the other
	// tenant), by tenant.
	APIKeys map[string]string
	// Trackers are the status endpoints: two of the default tenant (one
	// taking every event, one a few types), one of the other.
	Trackers []*Tracker
	// env is the environment every product process runs with; the rate
	// cap's deploy changes it while the workload reads it.
	mu  sync.Mutex
	env []string
}

// Start builds the system and starts every part.
func Start(t testing.TB) *Env {
	t.Helper()
	e := &Env{T: t, Bin: testenv.Binary(t), APIKeys: map[string]string{}}
	e.PG = testenv.StartCluster(t)
	e.Server = testenv.StartDevServer(t)
	e.Stack = testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true, TemporalAddress: e.Server.Address, DatabaseURL: e.PG.URL})
	var lines []string
	for _, tenant := range Tenants {
		scopes := api.Scopes
		if tenant != TenantDefault {
			scopes = []api.Scope{api.ScopeSchedule, api.ScopeOperate, api.ScopeApprove, api.ScopeRead}
		}
		secret, key, err := api.NewKey("soak-"+tenantName(tenant), scopes)
		if err != nil {
			t.Fatal(err)
		}
		if key.Tenant, err = reminder.ParseTenant("tenant", tenant); err != nil {
			t.Fatal(err)
		}
		e.APIKeys[tenant] = secret
		lines = append(lines, key.Line())
	}
	eventKey, err := sink.NewEventKey()
	if err != nil {
		t.Fatal(err)
	}
	// A key verifies before anything runs, as serve will.
	if _, err := sendgridevents.ParseVerificationKey(eventKey.PublicKey()); err != nil {
		t.Fatal(err)
	}
	endpoints := e.startTrackers()
	e.env = e.Stack.Env(
		"SHIPNOTIFY_API_KEYS="+strings.Join(lines, ";"),
		// A tracker's bursts are not throttled here: the soak asks fast.
		"SHIPNOTIFY_API_RATE=1000", "SHIPNOTIFY_API_BURST=1000",
		"SHIPNOTIFY_SENDGRID_EVENT_KEY="+eventKey.PublicKey(),
		"SHIPNOTIFY_UNCONFIRMED_SEND_WAIT="+testenv.EventsEvidenceWait.String(),
		"SHIPNOTIFY_STATUS_ENDPOINTS_FILE="+endpoints,
		"SHIPNOTIFY_LOG_LEVEL=warn",
	)
	for range 2 {
		e.Workers = append(e.Workers, testenv.StartProcess(t, e.env, e.Bin, "worker"))
	}
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		ops := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		e.ServeURLs = append(e.ServeURLs, "http://"+addr)
		e.opsURLs = append(e.opsURLs, "http://"+ops)
		// The second replica starts plain reminders with the start delay
		// (SHIPNOTIFY_DELAYED_START), so the API's reminders take both
		// paths, as during a rollout that turns it on, and the checker
		// holds both to every promise.
		delayed := "SHIPNOTIFY_DELAYED_START=" + strconv.FormatBool(i == 1)
		e.Serves = append(e.Serves, testenv.StartProcess(t, e.ProcessEnv("SHIPNOTIFY_API_ADDR="+addr, "SHIPNOTIFY_METRICS_ADDR="+ops, delayed),
			e.Bin, "serve"))
	}
	e.Balancer = httptest.NewServer(balancer.New(e.ServeURLs))
	t.Cleanup(e.Balancer.Close)
	e.Stack.Mail.EmitEvents(sink.EventOptions{URL: e.Balancer.URL + sendgridevents.Path, Key: eventKey, FlushEvery: 200 * time.Millisecond})
	e.waitServing()
	return e
}

// startTrackers starts the status endpoints' receivers and writes the
// endpoints file every serve replica reads; it returns the file's path.
func (e *Env) startTrackers() string {
	t := e.T
	t.Helper()
	// The ops endpoint takes what an operations team acts on; the others
	// every type.
	ops := []string{"sent", "delivered", "undeliverable", "failed", "cancelled", "expired", "escalated", "suppressed"}
	for _, tr := range []*Tracker{
		{Name: "tracker", Tenant: TenantDefault},
		{Name: "tracker-ops", Tenant: TenantDefault, Events: ops},
		{Name: "acme-tracker", Tenant: TenantAcme},
	} {
		tr.secret = webhook.NewSecret()
		s, err := sink.StartWebhook("", tr.secret)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		port := s.Port()
		s.Peer = func(remoteAddr string) string { return e.replicaOf(remoteAddr, port) }
		tr.Sink = s
		e.Trackers = append(e.Trackers, tr)
	}
	var b strings.Builder
	b.WriteString("# name url secret [events=…] [tenant=…]: the soak's trackers\n")
	for _, tr := range e.Trackers {
		b.WriteString(tr.line() + "\n")
	}
	path := filepath.Join(t.TempDir(), "status-endpoints")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Env returns the environment of the product's processes, with extra.
func (e *Env) ProcessEnv(extra ...string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append(e.env[:len(e.env):len(e.env)], extra...)
}

// RateCapOn restarts the workers one at a time (SIGTERM, as a rolling
// deploy does, then a start) with the provider's rate cap on; every later
// start of a worker keeps it.
func (e *Env) RateCapOn() {
	e.T.Helper()
	env := e.ProcessEnv("SHIPNOTIFY_WORKER_SENDS_PER_SECOND=" + strconv.FormatFloat(RateCap, 'f', -1, 64))
	e.mu.Lock()
	e.env = env
	e.mu.Unlock()
	for _, w := range e.Workers {
		w.SetEnv(env)
		if w.Alive() {
			w.Stop()
		}
		w.Start()
	}
}

// waitServing waits until a serve replica answers its health check.
func (e *Env) waitServing() {
	e.T.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if e.Serving() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.T.Fatalf("no serve replica answered in a minute:\n%s", e.Serves[0].Log())
}

// Serving reports whether every serve replica answers /healthz on its ops
// address.
func (e *Env) Serving() bool {
	for _, u := range e.opsURLs {
		resp, err := http.Get(u + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}
