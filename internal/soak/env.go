// Package soak runs shipnotify under a seeded random workload and random
// faults, through its binary (the CLI and the HTTP API), on real parts: a
// file-backed Temporal dev server and a PostgreSQL cluster of its own, two
// workers and two serve replicas behind a balancer, and local stand-ins
// for SendGrid (posting its signed Event Webhook events to serve) and a
// customer's webhook receiver. After the workload it quiesces the system
// and checks, from outside, what the mirror, the engine and the sinks'
// journals say against the operations' answers (Check). `make soak` runs
// it; the same seed asks the same operations and faults.
package soak

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/balancer"
	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/testenv"
)

// Env is the system under the soak: the parts it starts, kills and
// restarts, and the stand-ins whose journals it reads.
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
	// APIKey is the tracker's key, with every scope.
	APIKey string
	// env is the environment every product process runs with.
	env []string
}

// Start builds the system and starts every part.
func Start(t testing.TB) *Env {
	t.Helper()
	e := &Env{T: t, Bin: testenv.Binary(t)}
	e.PG = testenv.StartCluster(t)
	e.Server = testenv.StartDevServer(t)
	e.Stack = testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true, TemporalAddress: e.Server.Address, DatabaseURL: e.PG.URL})
	secret, key, err := api.NewKey("soak", api.Scopes)
	if err != nil {
		t.Fatal(err)
	}
	e.APIKey = secret
	eventKey, err := sink.NewEventKey()
	if err != nil {
		t.Fatal(err)
	}
	// A key verifies before anything runs, as serve will.
	if _, err := sendgridevents.ParseVerificationKey(eventKey.PublicKey()); err != nil {
		t.Fatal(err)
	}
	e.env = e.Stack.Env(
		"SHIPNOTIFY_API_KEYS="+key.Line(),
		// A tracker's bursts are not throttled here: the soak asks fast.
		"SHIPNOTIFY_API_RATE=1000", "SHIPNOTIFY_API_BURST=1000",
		"SHIPNOTIFY_SENDGRID_EVENT_KEY="+eventKey.PublicKey(),
		"SHIPNOTIFY_UNCONFIRMED_SEND_WAIT="+testenv.EventsEvidenceWait.String(),
		"SHIPNOTIFY_LOG_LEVEL=warn",
	)
	for range 2 {
		e.Workers = append(e.Workers, testenv.StartProcess(t, e.env, e.Bin, "worker"))
	}
	for range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		ops := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		e.ServeURLs = append(e.ServeURLs, "http://"+addr)
		e.opsURLs = append(e.opsURLs, "http://"+ops)
		e.Serves = append(e.Serves, testenv.StartProcess(t, e.ProcessEnv("SHIPNOTIFY_API_ADDR="+addr, "SHIPNOTIFY_METRICS_ADDR="+ops),
			e.Bin, "serve"))
	}
	e.Balancer = httptest.NewServer(balancer.New(e.ServeURLs))
	t.Cleanup(e.Balancer.Close)
	e.Stack.Mail.EmitEvents(sink.EventOptions{URL: e.Balancer.URL + sendgridevents.Path, Key: eventKey, FlushEvery: 200 * time.Millisecond})
	e.waitServing()
	return e
}

// Env returns the environment of the product's processes, with extra.
func (e *Env) ProcessEnv(extra ...string) []string {
	return append(e.env[:len(e.env):len(e.env)], extra...)
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
