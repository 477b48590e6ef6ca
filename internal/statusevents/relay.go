package statusevents

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/internal/budget"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/webhook"
)

// Defaults of a Relay.
const (
	// DefaultEvery is how often an endpoint's queue is looked at when the
	// last look found nothing to post: how late, at most, an event leaves
	// after it was committed.
	DefaultEvery = 500 * time.Millisecond
	// DefaultBatch is the rows one pass claims for an endpoint.
	DefaultBatch = 100
	// DefaultConcurrency is the posts in flight to one endpoint at once.
	DefaultConcurrency = 8
	// DefaultBaseBackoff is a failing endpoint's first wait; each failure
	// in a row doubles it, up to DefaultMaxBackoff.
	DefaultBaseBackoff = time.Second
	DefaultMaxBackoff  = delivery.MaxBackoff
	// GiveUpAfter is how long an event may stay undelivered: then it is
	// given up (`shipnotify outbox retry` puts it back), so its
	// reminder's next event may go, and prune may take the reminder
	// (mirror.PruneMinAge is above it).
	GiveUpAfter = budget.NotifyRetries
	// Lease is how long a claimed row is the relay's: one post's timeout
	// and a margin for its record. A relay that dies holding rows leaves
	// them to another once it lapses (posted again, under the same id).
	Lease = webhook.Timeout + 30*time.Second
	// giveUpEvery is how often the relay gives up the rows past
	// GiveUpAfter.
	giveUpEvery = time.Minute
)

// Relay posts the status outbox's rows to the endpoints it knows, signed,
// through the webhook guard, in order per reminder. Any number of relays
// (serve replicas) may run: each claims rows FOR UPDATE SKIP LOCKED under
// a lease, so a row is posted by one relay at a time, and again only if a
// relay died before recording it (the receiver deduplicates on the id).
//
// What a receiver answers decides what follows: a 2xx delivers the row; a
// 410 Gone disables the endpoint; another 4xx (400, 409, 413, 415, 422) is
// the receiver's refusal of that event, which waits and is tried again
// while the endpoint's other reminders go on; anything else (no answer,
// 5xx, 429, 408, 401, 403, 404, a redirect, a refused destination) is the
// endpoint failing, and all its rows wait, Retry-After if it said one
// (held to delivery.MinRetryAfter..MaxRetryAfter), else a backoff doubling
// from BaseBackoff to MaxBackoff. A row still undelivered after
// GiveUpAfter is given up.
type Relay struct {
	Store     *mirror.Store
	Endpoints []Endpoint
	// Sender posts; its guard is the subscriber webhooks' (the same
	// transport refuses every connection to a forbidden address).
	Sender *webhook.Sender
	// Every, Batch, Concurrency, BaseBackoff, MaxBackoff and Lease: 0
	// means the default.
	Every                   time.Duration
	Batch, Concurrency      int
	BaseBackoff, MaxBackoff time.Duration
	Lease                   time.Duration
	// Owner names the relay in its claims (default: host, pid and a
	// random suffix).
	Owner   string
	Metrics *metrics.StatusEvents
	Logger  *slog.Logger

	once sync.Once
}

// defaults fills in what was left zero, once.
func (r *Relay) defaults() { r.once.Do(r.fill) }

func (r *Relay) fill() {
	if r.Every <= 0 {
		r.Every = DefaultEvery
	}
	if r.Batch <= 0 {
		r.Batch = DefaultBatch
	}
	if r.Concurrency <= 0 {
		r.Concurrency = DefaultConcurrency
	}
	if r.BaseBackoff <= 0 {
		r.BaseBackoff = DefaultBaseBackoff
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = DefaultMaxBackoff
	}
	if r.Lease <= 0 {
		r.Lease = Lease
	}
	if r.Owner == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		r.Owner = host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b)
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
}

// Run relays until ctx ends: a loop per endpoint, and the give-up sweep.
func (r *Relay) Run(ctx context.Context) {
	r.defaults()
	var wg sync.WaitGroup
	for _, ep := range r.Endpoints {
		wg.Go(func() { r.runEndpoint(ctx, ep) })
	}
	wg.Go(func() { r.runGiveUp(ctx) })
	wg.Wait()
}

func (r *Relay) runEndpoint(ctx context.Context, ep Endpoint) {
	for {
		n, err := r.Pass(ctx, ep)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.Logger.Warn("error relaying status events; trying again", "endpoint", ep.Name, "error", err)
		}
		if n == r.Batch && err == nil {
			continue // more are waiting
		}
		t := time.NewTimer(r.Every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (r *Relay) runGiveUp(ctx context.Context) {
	for {
		if n, err := r.Store.GiveUpStatusEvents(ctx, GiveUpAfter); err != nil && ctx.Err() == nil {
			r.Logger.Warn("error giving up old status events", "error", err)
		} else if n > 0 {
			r.Logger.Warn("status events given up: undelivered for too long (shipnotify outbox list)", "events", n, "after", GiveUpAfter.String())
			r.Metrics.GivenUp(int(n))
		}
		t := time.NewTimer(giveUpEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// outcome is what posting one row came to.
type outcome struct {
	ev  mirror.StatusEvent
	err *delivery.Error
}

// Pass claims ep's next rows, posts them, and records what came of each;
// it returns how many it claimed.
func (r *Relay) Pass(ctx context.Context, ep Endpoint) (int, error) {
	r.defaults()
	evs, err := r.Store.ClaimStatusEvents(ctx, ep.Name, r.Owner, r.Lease, r.Batch)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	outs := make([]outcome, len(evs))
	sem := make(chan struct{}, r.Concurrency)
	var wg sync.WaitGroup
	for i, ev := range evs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outs[i] = outcome{ev: ev, err: r.post(ctx, ep, ev)}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		// Stopping: what was delivered is recorded; the rest lapse, to
		// be posted again under their ids.
		return len(evs), r.recordDelivered(context.WithoutCancel(ctx), ep, outs)
	}
	return len(evs), r.record(ctx, ep, outs)
}

func (r *Relay) post(ctx context.Context, ep Endpoint, ev mirror.StatusEvent) *delivery.Error {
	_, err := r.Sender.Send(ctx, webhook.Message{URL: ep.URL, Secret: ep.Secret, ID: ev.EventID, Body: ev.Payload})
	if err == nil {
		return nil
	}
	var derr *delivery.Error
	if !errors.As(err, &derr) {
		derr = &delivery.Error{Channel: "status endpoint", Detail: err.Error()}
	}
	return derr
}

// record writes what the pass came to: the rows delivered, then the
// refusals, and a failing or gone endpoint last.
func (r *Relay) record(ctx context.Context, ep Endpoint, outs []outcome) error {
	if err := r.recordDelivered(ctx, ep, outs); err != nil {
		return err
	}
	var fault *delivery.Error
	var faulted, gone []int64
	for _, o := range outs {
		switch {
		case o.err == nil:
		case o.err.Status == http.StatusGone:
			gone = append(gone, o.ev.ID)
		case refusedForItself(o.err.Status):
			r.Metrics.Posted(ep.Name, "refused")
			wait := r.backoff(o.ev.Attempts)
			r.Logger.Warn("a status endpoint refused an event; it waits and is tried again", "endpoint", ep.Name,
				"event_id", o.ev.EventID, "reminder_id", o.ev.ReminderID, "status", o.err.Status, "detail", o.err.Detail, "wait", wait)
			if err := r.Store.StatusRefused(ctx, o.ev.ID, r.Owner, o.err.Status, o.err.Error(), wait); err != nil {
				return err
			}
		default:
			faulted = append(faulted, o.ev.ID)
			if fault == nil {
				fault = o.err
			}
		}
	}
	if len(gone) > 0 {
		r.Metrics.Posted(ep.Name, "gone")
		r.Logger.Warn("a status endpoint answered 410 Gone: it is disabled (shipnotify outbox retry --endpoint enables it again)",
			"endpoint", ep.Name)
		return r.Store.StatusEndpointGone(ctx, ep.Name, r.Owner, append(gone, faulted...), "answered 410 Gone")
	}
	if fault == nil {
		return nil
	}
	r.Metrics.Posted(ep.Name, "failed")
	f := mirror.EndpointFailure{Status: fault.Status, Detail: fault.Error(), RetryAfter: fault.RetryAfter}
	wait, err := r.Store.StatusEndpointFailed(ctx, ep.Name, r.Owner, faulted, f, r.BaseBackoff, r.MaxBackoff, mrand.Float64())
	if err != nil {
		return err
	}
	args := []any{"endpoint", ep.Name, "status", fault.Status, "error", fault.Error(), "events", len(faulted), "wait", wait}
	if fault.OperatorDetail != "" {
		args = append(args, "operator_detail", fault.OperatorDetail)
	}
	r.Logger.Warn("a status endpoint is failing; its events wait", args...)
	return nil
}

func (r *Relay) recordDelivered(ctx context.Context, ep Endpoint, outs []outcome) error {
	var ids []int64
	for _, o := range outs {
		if o.err == nil {
			ids = append(ids, o.ev.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := r.Store.StatusDelivered(ctx, ep.Name, r.Owner, ids); err != nil {
		return err
	}
	r.Metrics.PostedN(ep.Name, "delivered", len(ids))
	return nil
}

// refusedForItself reports whether a status is the receiver refusing one
// event (its content), not the endpoint failing: the endpoint's other
// events go on.
func refusedForItself(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// backoff is a refused row's wait after attempts: BaseBackoff doubling,
// at most MaxBackoff, spread ±20%.
func (r *Relay) backoff(attempts int) time.Duration {
	d := r.BaseBackoff << min(max(attempts-1, 0), 30)
	if d <= 0 || d > r.MaxBackoff {
		d = r.MaxBackoff
	}
	return time.Duration(float64(d) * (0.8 + 0.4*mrand.Float64()))
}
