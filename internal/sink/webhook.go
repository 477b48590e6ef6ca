package sink

import (
	"context"
	"fmt"
	"io"
	"net"
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
	// AnswerIn is how long after Received the receiver answered, or was
	// to answer (its caller may have gone first), when it takes requests
	// at once and answers late (AnswerAfter); NeverAnswered: it held the
	// request until its caller gave up.
	AnswerIn time.Duration
	// Peer names who sent it (the sink's Peer), "" when it is not set or
	// could not tell.
	Peer string
}

// NeverAnswered is a Hook's AnswerIn when the receiver took the request and
// never answered it.
const NeverAnswered time.Duration = -1

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
	answer   atomic.Pointer[func() time.Duration]
	down     atomic.Bool
	// OnHook, when set before traffic starts, sees each accepted request.
	OnHook func(Hook)
	// Peer, when set before traffic starts, names who sent a request from
	// its remote address, while the request is answered (Hook.Peer).
	Peer func(remoteAddr string) string
}

// maxHold bounds how long a request that is never answered is held when
// its caller does not give up (a caller that is itself frozen).
const maxHold = 2 * time.Minute

// SetDown makes the receiver answer every request 503 and take nothing,
// as a receiver that is down, until SetDown(false).
func (s *WebhookSink) SetDown(down bool) { s.down.Store(down) }

// AnswerAfter makes the receiver take each request that verifies as it
// arrives (recorded then, Received its arrival) and answer it after
// delay() — or, when delay returns NeverAnswered, not at all: it holds the
// request until its caller gives up. A tracker that stores an event at
// once and answers slowly, or hangs: the caller cannot tell whether the
// event was taken. nil answers at once again. Scripted answers (Fail)
// still come first; the latency of SetLatency does not apply.
func (s *WebhookSink) AnswerAfter(delay func() time.Duration) {
	if delay == nil {
		s.answer.Store(nil)
		return
	}
	s.answer.Store(&delay)
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

// Port is the loopback port the receiver listens on.
func (s *WebhookSink) Port() int { return s.srv.ln.Addr().(*net.TCPAddr).Port }

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
	if s.down.Load() {
		writeAnswer(w, Answer{Status: http.StatusServiceUnavailable})
		return
	}
	if late := s.answer.Load(); late != nil {
		s.takeThenAnswer(w, r, body, (*late)())
		return
	}
	if d := time.Duration(s.latency.Load()); d > 0 {
		<-time.After(d)
	}
	s.take(r, body, 0)
	w.WriteHeader(http.StatusNoContent)
}

// take records a request as accepted now.
func (s *WebhookSink) take(r *http.Request, body []byte, answerIn time.Duration) {
	s.pass()
	h := Hook{
		ID:             r.Header.Get(standardwebhooks.HeaderWebhookID),
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Timestamp:      r.Header.Get(standardwebhooks.HeaderWebhookTimestamp),
		Path:           r.URL.Path,
		Body:           body,
		Received:       time.Now(),
		AnswerIn:       answerIn,
	}
	if s.Peer != nil {
		h.Peer = s.Peer(r.RemoteAddr)
	}
	s.add(h)
	if s.OnHook != nil {
		s.OnHook(h)
	}
}

// takeThenAnswer takes the request at once and answers after delay, or
// never (NeverAnswered): then it holds the request until its caller goes.
func (s *WebhookSink) takeThenAnswer(w http.ResponseWriter, r *http.Request, body []byte, delay time.Duration) {
	s.take(r, body, delay)
	hold := delay
	if delay < 0 {
		hold = maxHold
	}
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return // the caller went: it never hears the answer
	case <-t.C:
	}
	if delay < 0 {
		return // held past maxHold: closed without an answer
	}
	w.WriteHeader(http.StatusNoContent)
}
