package statusevents

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/internal/opaque"
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
	// Lease is how long a claim, and each renewal of it, keeps a row from
	// every other relay: one post's timeout (webhook.Timeout, 15 s) and
	// 30 s more. A pass renews the lease of the rows it still holds every
	// Lease/5 (9 s) while it posts, and records each post as it
	// completes, so a pass may outlive one lease: 100 rows to a tracker
	// that takes 4 s a post, 8 at once, is 13 rounds, 52 s. The bound
	// behind the renewal: a post starts only while the lease, as last
	// renewed, still covers its whole timeout and one write after it
	// (15 s + 9 s), so a relay that cannot renew (PostgreSQL stalled, its
	// writes held back) stops starting posts 21 s after its last renewal,
	// and goes on if one gets through before the lease lapses. The longest
	// work under a lease is then one post and its record, 24 s of its
	// 45 s. A relay that dies, or freezes past its lease, leaves its rows
	// to another once the lease lapses: they are posted again, under the
	// same ids (the receiver deduplicates), and a post that completed is
	// recorded delivered by whichever relay hears its 2xx.
	Lease = webhook.Timeout + 30*time.Second
	// renewParts is how many renewals a lease's term holds: Lease /
	// renewParts is both the renewal's period and the bound on each of a
	// pass's writes (a stalled write gives way to the next renewal).
	renewParts = 5
	// writeRetry is how soon a pass's write that failed is tried again.
	writeRetry = time.Second
	// giveUpEvery is how often the relay gives up the rows past
	// GiveUpAfter.
	giveUpEvery = time.Minute
)

// Relay posts the status outbox's rows to the endpoints it knows, signed,
// through the webhook guard, in order per reminder, each to its own
// tenant's endpoint only. Any number of relays (serve replicas) may run:
// each claims rows FOR UPDATE SKIP LOCKED under a lease (see Lease: renewed
// while it posts, and bounding what it starts), so a row is posted by one
// relay at a time, and again only if a relay died or stalled past its
// lease before recording it (the receiver deduplicates on the id).
//
// What a receiver answers decides what follows, recorded as each post
// completes: a 2xx delivers the row; a 410 Gone disables the endpoint;
// another 4xx (400, 409, 413, 415, 422) is the receiver's refusal of that
// event, which waits and is tried again while the endpoint's other
// reminders go on; anything else (no answer,
// 5xx, 429, 408, 401, 403, 404, a redirect, a refused destination) is the
// endpoint failing, and all its rows wait, Retry-After if it said one
// (held to delivery.MinRetryAfter..MaxRetryAfter), else a backoff doubling
// from BaseBackoff to MaxBackoff. A failing or gone endpoint's pass starts
// no more posts. A row still undelivered after GiveUpAfter is given up.
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
	// IDs seal each event's id as the tracker sees it: the outbox keeps
	// the trail event's number, which counts every tenant's events (nil
	// means opaque.Development(), as with SHIPNOTIFY_ID_KEY unset).
	IDs *opaque.Keys

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
	if r.IDs == nil {
		r.IDs = opaque.Development()
	}
}

// Run relays until ctx ends: a loop per endpoint, and the give-up sweep
// (rows undelivered for GiveUpAfter, and rows whose endpoint moved to
// another tenant).
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
		if n, err := r.Store.GiveUpStrandedStatusEvents(ctx); err != nil && ctx.Err() == nil {
			r.Logger.Warn("error giving up status events of another tenant", "error", err)
		} else if n > 0 {
			r.Logger.Warn("status events given up: their endpoint now belongs to another tenant (shipnotify outbox list)", "events", n)
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

// Pass claims ep's next rows, posts them, and records what came of each
// as it completes, renewing the lease of the rows it still holds while it
// posts; it returns how many it claimed.
func (r *Relay) Pass(ctx context.Context, ep Endpoint) (int, error) {
	r.defaults()
	if room := r.Lease - r.renewEvery(); room <= r.Sender.Timeout() {
		return 0, fmt.Errorf("error relaying status events: a lease of %s leaves %s for a post, less than its timeout (%s)",
			r.Lease, room, r.Sender.Timeout())
	}
	sent := time.Now()
	evs, err := r.Store.ClaimStatusEvents(ctx, mirror.StatusClaim{
		Endpoint: ep.Name, Tenant: ep.Tenant, Owner: r.Owner, Lease: r.Lease, Limit: r.Batch})
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	p := &pass{r: r, ep: ep, evs: evs, leaseFrom: sent, renewed: make(chan struct{}), lost: map[int64]bool{}}
	return len(evs), p.run(ctx)
}

// renewEvery is how often a pass renews its lease, and how long each of
// its writes may take.
func (r *Relay) renewEvery() time.Duration { return r.Lease / renewParts }

// pass is one claim's rows on their way: posted by dispatch, at most
// Concurrency at once, each only while the lease covers it; recorded and
// renewed by run, one write at a time (serve's pool gives the relay one
// connection an endpoint).
type pass struct {
	r   *Relay
	ep  Endpoint
	evs []mirror.StatusEvent

	mu sync.Mutex
	// leaseFrom is when the last claim or renewal that got through was
	// sent: the rows are the pass's until at least leaseFrom + Lease.
	leaseFrom time.Time
	// renewed is closed by each renewal that gets through.
	renewed chan struct{}
	// lost are rows a renewal found another's (or finished): not posted.
	lost map[int64]bool
	// halt: the endpoint is failing or gone; no more posts start.
	halt bool
}

// run posts the pass's rows (dispatch) and records what came of each as
// it comes, renewing the lease meanwhile (record); once every post has
// ended it settles the rest (settle).
func (p *pass) run(ctx context.Context) error {
	outs := make(chan outcome, len(p.evs))
	unstarted := make(chan []int64, 1)
	go func() { unstarted <- p.dispatch(ctx, outs) }()
	b := &books{held: make(map[int64]bool, len(p.evs))}
	for _, ev := range p.evs {
		b.held[ev.ID] = true
	}
	p.record(ctx, b, outs)
	p.settle(ctx, b, <-unstarted)
	return b.err
}

// books are what a pass has heard and not yet written.
type books struct {
	// held are the rows claimed whose outcome is not yet written: the
	// rows a renewal extends.
	held map[int64]bool
	// delivered are rows a 2xx answered, not yet written.
	delivered []int64
	// faulted and gone are rows whose posts found the endpoint failing
	// (the first such answer is fault) or gone.
	faulted, gone []int64
	fault         *delivery.Error
	// err is the pass's first error.
	err error
}

func (b *books) keep(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// record writes what the posts come to as they end, until every one has
// ended: deliveries at once (those that ended meanwhile in one write),
// refusals at once; and it renews the lease every renewEvery, before
// anything else once it is due.
func (p *pass) record(ctx context.Context, b *books, outs <-chan outcome) {
	nextRenew := time.Now().Add(p.r.renewEvery())
	var nextFlush time.Time
	for {
		if !time.Now().Before(nextRenew) {
			nextRenew = p.renewHeld(ctx, b)
		}
		if len(b.delivered) > 0 && !time.Now().Before(nextFlush) {
			nextFlush = p.flush(ctx, b)
		}
		wake := nextRenew
		if len(b.delivered) > 0 && nextFlush.Before(wake) {
			wake = nextFlush
		}
		got, open := receive(outs, wake)
		for _, o := range got {
			p.take(ctx, b, o)
		}
		if !open {
			return
		}
	}
}

// receive waits until an outcome comes or wake, and returns every outcome
// there is by then, and whether more may come.
func receive(outs <-chan outcome, wake time.Time) ([]outcome, bool) {
	t := time.NewTimer(time.Until(wake))
	defer t.Stop()
	var got []outcome
	select {
	case o, ok := <-outs:
		if !ok {
			return nil, false
		}
		got = append(got, o)
	case <-t.C:
		return nil, true
	}
	for {
		select {
		case o, ok := <-outs:
			if !ok {
				return got, false
			}
			got = append(got, o)
		default:
			return got, true
		}
	}
}

// take books one post's outcome, writing a refusal at once.
func (p *pass) take(ctx context.Context, b *books, o outcome) {
	switch {
	case o.err == nil:
		b.delivered = append(b.delivered, o.ev.ID)
	case ctx.Err() != nil:
		// Stopping, the post cut short: its lease lapses, and it is
		// posted again under its id.
		delete(b.held, o.ev.ID)
	case o.err.Status == http.StatusGone:
		b.gone = append(b.gone, o.ev.ID)
		p.stopStarting()
	case refusedForItself(o.err.Status):
		delete(b.held, o.ev.ID)
		b.keep(p.refused(ctx, o))
	default:
		b.faulted = append(b.faulted, o.ev.ID)
		if b.fault == nil {
			b.fault = o.err
		}
		p.stopStarting()
	}
}

// renewHeld renews the lease of the rows held, and returns when to renew
// next: a renewal's period on, or soon if this one failed.
func (p *pass) renewHeld(ctx context.Context, b *books) time.Time {
	next := time.Now().Add(p.r.renewEvery())
	if len(b.held) == 0 {
		return next
	}
	if err := p.renew(ctx, b.held); err != nil {
		b.keep(err)
		return time.Now().Add(writeRetry)
	}
	return next
}

// flush writes the deliveries booked, and returns when to try again if it
// failed.
func (p *pass) flush(ctx context.Context, b *books) time.Time {
	err := p.write(ctx, func(ctx context.Context) error { return p.r.Store.StatusDelivered(ctx, p.ep.Name, b.delivered) })
	if err != nil {
		b.keep(err)
		return time.Now().Add(writeRetry)
	}
	p.r.Metrics.PostedN(p.ep.Name, "delivered", len(b.delivered))
	for _, id := range b.delivered {
		delete(b.held, id)
	}
	b.delivered = nil
	return time.Time{}
}

// settle ends a pass whose posts have all ended: deliveries not yet
// written are tried again for up to a lease (once, when stopping), then
// a failing or gone endpoint is recorded, and the rows never posted are
// let go.
func (p *pass) settle(ctx context.Context, b *books, unstarted []int64) {
	until := time.Now().Add(p.r.Lease)
	for len(b.delivered) > 0 {
		next := p.flush(ctx, b)
		if len(b.delivered) == 0 || ctx.Err() != nil || time.Now().After(until) {
			break
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if len(b.delivered) > 0 {
		p.r.Logger.Warn("status events posted and not recorded: another relay posts them again once their lease lapses",
			"endpoint", p.ep.Name, "events", len(b.delivered), "error", b.err)
	}
	b.keep(p.endpointFailed(ctx, b.fault, b.faulted, b.gone))
	if len(unstarted) > 0 {
		b.keep(p.write(ctx, func(ctx context.Context) error { return p.r.Store.ReleaseStatusEvents(ctx, p.r.Owner, unstarted) }))
	}
}

// dispatch posts the pass's rows in order, at most Concurrency at once,
// each only while the pass may start it (mayStart), sending what came of
// each to outs, which it closes once every post has ended; it returns the
// rows it never started and that are still the pass's.
func (p *pass) dispatch(ctx context.Context, outs chan<- outcome) []int64 {
	sem := make(chan struct{}, p.r.Concurrency)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(outs)
	}()
	for i, ev := range p.evs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil || !p.mayStart(ctx) {
			var rest []int64
			for _, ev := range p.evs[i:] {
				if !p.isLost(ev.ID) {
					rest = append(rest, ev.ID)
				}
			}
			return rest
		}
		if p.isLost(ev.ID) {
			<-sem
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			outs <- outcome{ev: ev, err: p.r.post(ctx, p.ep, ev)}
		})
	}
	return nil
}

// mayStart reports whether a post may start now: the endpoint has not
// failed in this pass, and the lease as last renewed covers the post's
// whole timeout and one write after it. Short of that it waits for a
// renewal, and gives up if none gets through before the lease lapses.
func (p *pass) mayStart(ctx context.Context) bool {
	need := p.r.Sender.Timeout() + p.r.renewEvery()
	for {
		p.mu.Lock()
		halt, from, renewed := p.halt, p.leaseFrom, p.renewed
		p.mu.Unlock()
		if halt {
			return false
		}
		left := time.Until(from.Add(p.r.Lease))
		if left >= need {
			return true
		}
		if left <= 0 {
			p.r.Logger.Warn("a status relay could not renew its lease in time: it leaves the rest of its rows to the next pass",
				"endpoint", p.ep.Name)
			return false
		}
		t := time.NewTimer(left)
		select {
		case <-renewed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	}
}

func (p *pass) isLost(id int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost[id]
}

func (p *pass) stopStarting() {
	p.mu.Lock()
	p.halt = true
	p.mu.Unlock()
}

// write runs one of the pass's writes, bounded by the renewal's period; a
// relay that is stopping still records what it heard.
func (p *pass) write(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.r.renewEvery())
	defer cancel()
	return f(ctx)
}

// renew extends the lease of the rows held; a row it no longer holds
// leaves held and is not posted.
func (p *pass) renew(ctx context.Context, held map[int64]bool) error {
	ids := make([]int64, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	sent := time.Now()
	var still []int64
	err := p.write(ctx, func(ctx context.Context) error {
		var err error
		still, err = p.r.Store.RenewStatusEvents(ctx, p.r.Owner, ids, p.r.Lease)
		return err
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.leaseFrom = sent
	close(p.renewed)
	p.renewed = make(chan struct{})
	if len(still) < len(ids) {
		keep := make(map[int64]bool, len(still))
		for _, id := range still {
			keep[id] = true
		}
		for _, id := range ids {
			if !keep[id] {
				p.lost[id] = true
				delete(held, id)
			}
		}
	}
	p.mu.Unlock()
	if n := len(ids) - len(still); n > 0 {
		p.r.Logger.Warn("a status relay's lease lapsed on rows another relay took or finished: it does not post them",
			"endpoint", p.ep.Name, "events", n)
	}
	return nil
}

// refused records the receiver's refusal of one event: it waits, and is
// tried again.
func (p *pass) refused(ctx context.Context, o outcome) error {
	r := p.r
	r.Metrics.Posted(p.ep.Name, "refused")
	wait := r.backoff(o.ev.Attempts)
	r.Logger.Warn("a status endpoint refused an event; it waits and is tried again", "endpoint", p.ep.Name,
		"event_id", o.ev.EventID, "reminder_id", o.ev.ReminderID, "status", o.err.Status, "detail", o.err.Detail, "wait", wait)
	return p.write(ctx, func(ctx context.Context) error {
		return r.Store.StatusRefused(ctx, o.ev.ID, r.Owner, o.err.Status, o.err.Error(), wait)
	})
}

// endpointFailed records a gone endpoint (410), or a failing one, with the
// rows whose posts said so.
func (p *pass) endpointFailed(ctx context.Context, fault *delivery.Error, faulted, gone []int64) error {
	r, ep := p.r, p.ep
	if len(gone) > 0 {
		r.Metrics.Posted(ep.Name, "gone")
		r.Logger.Warn("a status endpoint answered 410 Gone: it is disabled (shipnotify outbox retry --endpoint enables it again)",
			"endpoint", ep.Name)
		return p.write(ctx, func(ctx context.Context) error {
			return r.Store.StatusEndpointGone(ctx, ep.Name, r.Owner, append(gone, faulted...), "answered 410 Gone")
		})
	}
	if fault == nil {
		return nil
	}
	r.Metrics.Posted(ep.Name, "failed")
	f := mirror.EndpointFailure{Status: fault.Status, Detail: fault.Error(), RetryAfter: fault.RetryAfter}
	var wait time.Duration
	err := p.write(ctx, func(ctx context.Context) error {
		var err error
		wait, err = r.Store.StatusEndpointFailed(ctx, ep.Name, r.Owner, faulted, f, r.BaseBackoff, r.MaxBackoff, mrand.Float64())
		return err
	})
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

func (r *Relay) post(ctx context.Context, ep Endpoint, ev mirror.StatusEvent) *delivery.Error {
	id, body, err := r.sealed(ev)
	if err != nil {
		return &delivery.Error{Channel: "status endpoint", Detail: err.Error()}
	}
	_, err = r.Sender.Send(ctx, webhook.Message{URL: ep.URL, Secret: ep.Secret, ID: id, Body: body})
	if err == nil {
		return nil
	}
	var derr *delivery.Error
	if !errors.As(err, &derr) {
		derr = &delivery.Error{Channel: "status endpoint", Detail: err.Error()}
	}
	return derr
}

// sealed is the event as the tracker sees it: its id (webhook-id and the
// body's id) sealed, the same on every attempt, where the outbox has the
// trail event's number (evt_4902) that the trigger wrote.
func (r *Relay) sealed(ev mirror.StatusEvent) (string, []byte, error) {
	id, err := r.IDs.OutboxEventID(ev.EventID)
	if err != nil {
		return "", nil, fmt.Errorf("error sealing an event's id: %w", err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(ev.Payload, &body); err != nil {
		return "", nil, fmt.Errorf("error reading event %s: %w", ev.EventID, err)
	}
	body["id"], _ = json.Marshal(id)
	b, err := json.Marshal(body)
	if err != nil {
		return "", nil, fmt.Errorf("error writing event %s: %w", ev.EventID, err)
	}
	return id, b, nil
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
