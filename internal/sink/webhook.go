package sink

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Hook is one webhook request the receiver accepted.
type Hook struct {
	// ID is the webhook-id header: shipnotify's delivery key.
	ID             string
	IdempotencyKey string
	Timestamp      string
	Path           string
	Body           []byte
	Received       time.Time
}

// WebhookSink is a customer's webhook receiver: it verifies each request's
// Standard Webhooks signature with the official library (answering 401 when
// it does not verify), answers 204 and records the request.
type WebhookSink struct {
	*recorder[Hook]
	srv      *server
	verifier *standardwebhooks.Webhook
	requests atomic.Int64
	rejected atomic.Int64
	latency  atomic.Int64
	// OnHook, when set before traffic starts, sees each accepted request.
	OnHook func(Hook)
}

// SetLatency makes every request that verifies take d to be answered; it
// is accepted (recorded) even if its caller has gone by then, as a
// receiver that took the body and answered late would have taken it.
func (s *WebhookSink) SetLatency(d time.Duration) { s.latency.Store(int64(d)) }

// ClearFailures drops the answers Fail scripted and not yet given.
func (s *WebhookSink) ClearFailures() { s.clearFailures() }

// StartWebhook starts a receiver on addr ("" for a free loopback port) that
// verifies signatures made with secret (a "whsec_" Standard Webhooks secret).
func StartWebhook(addr, secret string) (*WebhookSink, error) {
	v, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("error starting webhook sink: %w", err)
	}
	s := &WebhookSink{recorder: newRecorder[Hook](), verifier: v}
	srv, err := listen(addr, http.HandlerFunc(s.receive))
	if err != nil {
		return nil, fmt.Errorf("error starting webhook sink: %w", err)
	}
	s.srv = srv
	return s, nil
}

// URL is the receiver's base URL; any path under it is accepted.
func (s *WebhookSink) URL() string { return s.srv.url() }

// Close stops the receiver.
func (s *WebhookSink) Close() error { return s.srv.close() }

// Hooks returns every accepted request, in arrival order.
func (s *WebhookSink) Hooks() []Hook { return s.snapshot() }

// Requests is how many requests arrived, accepted or not.
func (s *WebhookSink) Requests() int { return int(s.requests.Load()) }

// Rejected is how many requests failed signature verification.
func (s *WebhookSink) Rejected() int { return int(s.rejected.Load()) }

// Hold makes every request about to be accepted wait, unanswered, until
// release is called; then each is accepted, even if its caller has gone.
func (s *WebhookSink) Hold() (release func()) { return s.hold() }

// Held is how many requests wait at Hold's gate.
func (s *WebhookSink) Held() int { return s.waiting() }

// Fail makes the next requests get these answers instead of a 204.
func (s *WebhookSink) Fail(answers ...Answer) { s.fail(answers...) }

// Wait blocks until cond holds over the accepted requests, or ctx ends.
func (s *WebhookSink) Wait(ctx context.Context, cond func([]Hook) bool) ([]Hook, error) {
	return s.wait(ctx, cond)
}

func (s *WebhookSink) receive(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "could not read body", http.StatusBadRequest)
		return
	}
	if err := s.verifier.Verify(body, r.Header); err != nil {
		s.rejected.Add(1)
		http.Error(w, "signature does not verify", http.StatusUnauthorized)
		return
	}
	if a, ok := s.next(); ok {
		writeAnswer(w, a)
		return
	}
	if d := time.Duration(s.latency.Load()); d > 0 {
		<-time.After(d)
	}
	s.pass()
	h := Hook{
		ID:             r.Header.Get(standardwebhooks.HeaderWebhookID),
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Timestamp:      r.Header.Get(standardwebhooks.HeaderWebhookTimestamp),
		Path:           r.URL.Path,
		Body:           body,
		Received:       time.Now(),
	}
	s.add(h)
	if s.OnHook != nil {
		s.OnHook(h)
	}
	w.WriteHeader(http.StatusNoContent)
}
