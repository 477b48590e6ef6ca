package sink

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// EventOptions says where the mail sink posts its Event Webhook events and
// what becomes of each recipient. An address in more than one list takes
// the first of Drop, Bounce, Defer.
type EventOptions struct {
	URL string
	Key *EventKey
	// Bounce, Drop and Defer are recipient addresses.
	Bounce, Drop, Defer []string
	// DropUnsubscribed are addresses on the account's unsubscribe list:
	// their mail is dropped with the reason "Unsubscribed Address".
	DropUnsubscribed []string
	// Unsubscribe and SpamReport are addresses whose recipient, once the
	// mail is delivered, unsubscribes (SendGrid's subscription tracking or
	// the List-Unsubscribe header) or reports it as spam.
	Unsubscribe, SpamReport []string
	// DeliverAfterDefer follows a deferral with a delivery.
	DeliverAfterDefer bool
	// FlushEvery is how often accumulated events are posted, and how long
	// a failed post waits before its retry; 100ms when zero.
	FlushEvery time.Duration
	// OnPosted, when set, sees every post and its answer, on the emitter's
	// goroutine (or Replay's caller).
	OnPosted func(events []Event, status int, err error)
}

// PostedBatch is one post of events the mail sink made, with its answer.
type PostedBatch struct {
	Events []Event
	// Body is exactly what was posted.
	Body []byte
	// Status is the receiver's answer, 0 when err is set.
	Status int
	Err    error
	// Attempt is 1 for a batch's first post and counts SendGrid's retries.
	Attempt int
	// Replay marks a post made by Replay.
	Replay bool
	Posted time.Time
}

// The outcomes the sink reports, in SendGrid's words.
const (
	bounceReason   = "550 5.1.1 The email account that you tried to reach does not exist."
	bounceStatus   = "5.1.1"
	dropReason     = "Bounced Address"
	dropOptedOut   = "Unsubscribed Address"
	dropStatus     = "5.0.0"
	deferResponse  = "421 4.7.0 Try again later"
	deliveredReply = "250 OK"
	// eventAttempts is how often a batch is posted before it is given up;
	// SendGrid retries a failing receiver too.
	eventAttempts = 4
)

// emitter turns accepted mail into events and posts them in batches, in
// order, from one goroutine.
type emitter struct {
	posted *recorder[PostedBatch]

	mu                     sync.Mutex
	opts                   EventOptions
	bounce, drop, deferred map[string]bool
	dropOptOut, optOut     map[string]string
	pending                []Event
	cancel                 context.CancelFunc
	done                   chan struct{}
	stopped                bool
}

func newEmitter() *emitter { return &emitter{posted: newRecorder[PostedBatch]()} }

// EmitEvents makes the sink post SendGrid Event Webhook events for every
// message it accepts from now on, as SendGrid would, so a receiver can be
// tested against realistic traffic. Call it before traffic; calling it again
// replaces the options.
func (s *MailSink) EmitEvents(o EventOptions) {
	if o.URL == "" || o.Key == nil {
		panic("sink: EmitEvents needs a URL and a Key")
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = 100 * time.Millisecond
	}
	// Copies, so the caller's slices can change without a race.
	o.Bounce, o.Drop, o.Defer = slices.Clone(o.Bounce), slices.Clone(o.Drop), slices.Clone(o.Defer)
	o.DropUnsubscribed = slices.Clone(o.DropUnsubscribed)
	o.Unsubscribe, o.SpamReport = slices.Clone(o.Unsubscribe), slices.Clone(o.SpamReport)
	e := s.events
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opts = o
	e.bounce, e.drop, e.deferred = addressSet(o.Bounce), addressSet(o.Drop), addressSet(o.Defer)
	e.dropOptOut, e.optOut = map[string]string{}, map[string]string{}
	for _, a := range o.DropUnsubscribed {
		e.dropOptOut[a] = dropOptedOut
	}
	for _, a := range o.SpamReport {
		e.optOut[a] = EventSpamReport
	}
	for _, a := range o.Unsubscribe {
		e.optOut[a] = EventUnsubscribe
	}
	if e.cancel != nil || e.stopped {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan struct{})
	go e.run(ctx)
}

// PostedEvents returns every post of events the sink made, in order.
func (s *MailSink) PostedEvents() []PostedBatch { return s.events.posted.snapshot() }

// WaitPosted blocks until cond holds over the posts made, or ctx ends.
func (s *MailSink) WaitPosted(ctx context.Context, cond func([]PostedBatch) bool) ([]PostedBatch, error) {
	return s.events.posted.wait(ctx, cond)
}

// Replay posts the last posted batch again, byte for byte, freshly signed,
// as SendGrid does when it retries a batch: a receiver must not apply it
// twice.
func (s *MailSink) Replay(ctx context.Context) (status int, err error) {
	e := s.events
	e.mu.Lock()
	o := e.opts
	e.mu.Unlock()
	batches := e.posted.snapshot()
	if len(batches) == 0 || o.Key == nil {
		return 0, errors.New("error replaying events: none posted yet")
	}
	last := batches[len(batches)-1]
	status, err = postSigned(ctx, o.URL, o.Key, last.Body)
	e.record(o, PostedBatch{Events: last.Events, Body: last.Body, Status: status, Err: err, Attempt: 1, Replay: true})
	if err != nil {
		return 0, fmt.Errorf("error replaying events: %w", err)
	}
	return status, nil
}

// queue adds m's events, if the sink emits any.
func (e *emitter) queue(m Mail) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel == nil || e.stopped {
		return
	}
	ts := m.Received.Unix()
	for i, to := range m.To {
		ev := func(kind string) Event {
			return Event{
				Email:       to,
				Timestamp:   ts,
				Event:       kind,
				SGEventID:   eventID(),
				SGMessageID: fmt.Sprintf("%s.recvd-sink-%X-%d.0", m.MessageID, ts, i),
				SMTPID:      fmt.Sprintf("<%s@ismtpd-sink>", m.MessageID),
				CustomArgs:  maps.Clone(m.CustomArgs),
			}
		}
		// SendGrid drops a message to a suppressed address before
		// processing it, so a drop comes alone.
		if reason, opted := e.dropOptOut[to]; e.drop[to] || opted {
			d := ev(EventDropped)
			d.Reason, d.Status = dropReason, dropStatus
			if opted {
				d.Reason = reason
			}
			e.pending = append(e.pending, d)
			continue
		}
		e.pending = append(e.pending, ev(EventProcessed))
		switch {
		case e.bounce[to]:
			b := ev(EventBounce)
			b.Reason, b.Status, b.Type, b.BounceClassification = bounceReason, bounceStatus, "bounce", "Invalid Address"
			e.pending = append(e.pending, b)
		case e.deferred[to]:
			d := ev(EventDeferred)
			d.Response, d.Attempt = deferResponse, "1"
			e.pending = append(e.pending, d)
			if e.opts.DeliverAfterDefer {
				d := ev(EventDelivered)
				d.Response = deliveredReply
				e.pending = append(e.pending, d)
			}
		default:
			d := ev(EventDelivered)
			d.Response = deliveredReply
			e.pending = append(e.pending, d)
			if kind, ok := e.optOut[to]; ok {
				e.pending = append(e.pending, ev(kind))
			}
		}
	}
}

// run flushes what accumulated every FlushEvery until ctx ends.
func (e *emitter) run(ctx context.Context) {
	defer close(e.done)
	for {
		e.mu.Lock()
		every := e.opts.FlushEvery
		e.mu.Unlock()
		if !waitFor(ctx, every) {
			return
		}
		e.flush(ctx)
	}
}

// flush posts the pending events as one batch, retrying a failed post.
func (e *emitter) flush(ctx context.Context) {
	e.mu.Lock()
	batch, o := e.pending, e.opts
	e.pending = nil
	e.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	body, err := encodeEvents(batch)
	if err != nil {
		e.record(o, PostedBatch{Events: batch, Err: err, Attempt: 1})
		return
	}
	for attempt := 1; ; attempt++ {
		status, err := postSigned(ctx, o.URL, o.Key, body)
		e.record(o, PostedBatch{Events: batch, Body: body, Status: status, Err: err, Attempt: attempt})
		if err == nil && status >= 200 && status < 300 {
			return
		}
		if attempt == eventAttempts || !waitFor(ctx, o.FlushEvery) {
			return
		}
	}
}

func (e *emitter) record(o EventOptions, b PostedBatch) {
	b.Posted = time.Now()
	e.posted.add(b)
	if o.OnPosted != nil {
		o.OnPosted(b.Events, b.Status, b.Err)
	}
}

// stop ends the emitter, abandoning a post in flight and unposted events.
func (e *emitter) stop() {
	e.mu.Lock()
	e.stopped = true
	cancel, done := e.cancel, e.done
	e.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// waitFor waits d, reporting false if ctx ended first.
func waitFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func addressSet(addrs []string) map[string]bool {
	set := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		set[a] = true
	}
	return set
}

// eventID is a unique sg_event_id; SendGrid's are opaque base64 too.
func eventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
