// Package sink stands in for the third-party services shipnotify talks to: a
// mail API that speaks SendGrid's v3 /v3/mail/send and can post the signed
// Event Webhook events SendGrid would, and a customer's webhook receiver that
// checks Standard Webhooks signatures with the official library. Both are
// real HTTP servers on loopback, record what they accept, and can be told to
// fail, so tests and the demo drive the real clients.
package sink

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// recorder keeps what a sink received and wakes waiters on every change.
type recorder[T any] struct {
	mu      sync.Mutex
	items   []T
	changed chan struct{}
	// script holds the statuses to answer with next, before accepting again.
	script []Answer
	// gate, when not nil, holds requests about to be accepted until it is
	// closed; held counts those waiting at it.
	gate chan struct{}
	held int
}

// Answer is a scripted failure: the status and headers to answer one
// request with instead of accepting it.
type Answer struct {
	Status  int
	Headers map[string]string
}

func newRecorder[T any]() *recorder[T] {
	return &recorder[T]{changed: make(chan struct{})}
}

func (r *recorder[T]) add(item T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, item)
	r.notify()
}

// notify wakes the waiters; r.mu is held.
func (r *recorder[T]) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// hold closes the gate: requests about to be accepted wait, unanswered,
// until release is called (calling it again does nothing).
func (r *recorder[T]) hold() (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gate := make(chan struct{})
	r.gate = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.gate == gate {
				r.gate = nil
			}
			close(gate)
		})
	}
}

// pass waits at the gate, if it is closed.
func (r *recorder[T]) pass() {
	r.mu.Lock()
	gate := r.gate
	if gate == nil {
		r.mu.Unlock()
		return
	}
	r.held++
	r.notify()
	r.mu.Unlock()
	<-gate
	r.mu.Lock()
	r.held--
	r.mu.Unlock()
}

// waiting is how many requests wait at the gate.
func (r *recorder[T]) waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

func (r *recorder[T]) snapshot() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.items...)
}

// next pops the next scripted answer, if any.
func (r *recorder[T]) next() (Answer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.script) == 0 {
		return Answer{}, false
	}
	a := r.script[0]
	r.script = r.script[1:]
	return a, true
}

// clearFailures drops the scripted answers not yet given.
func (r *recorder[T]) clearFailures() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = nil
}

func (r *recorder[T]) fail(answers ...Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = append(r.script, answers...)
}

// wait blocks until cond holds over everything received, or ctx ends.
func (r *recorder[T]) wait(ctx context.Context, cond func([]T) bool) ([]T, error) {
	for {
		r.mu.Lock()
		items := append([]T(nil), r.items...)
		changed := r.changed
		r.mu.Unlock()
		if cond(items) {
			return items, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return items, ctx.Err()
		}
	}
}

// server is the HTTP part both sinks share.
type server struct {
	srv *http.Server
	ln  net.Listener
}

func listen(addr string, h http.Handler) (*server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *server) url() string { return "http://" + s.ln.Addr().String() }

func (s *server) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

func writeAnswer(w http.ResponseWriter, a Answer) {
	for k, v := range a.Headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	_, _ = w.Write([]byte(`{"errors":[{"message":"scripted failure"}]}`))
}
