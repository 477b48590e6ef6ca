package bench

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// eventsStep is one run of the events workload: its batches are those of
// reminders [first, first+batches·BatchSize/2), except a replay's, which are
// its round's delivered batches again.
type eventsStep struct {
	round       int
	mix         string
	concurrency int
	batches     int
	first       int
}

// key names the step's statements in the tracer: the warm-up apart.
func (s eventsStep) key() string {
	if s.round == 0 {
		return "warm-up"
	}
	return s.mix + "/c=" + strconv.Itoa(s.concurrency)
}

type eventsPlan struct {
	steps     []eventsStep
	reminders int
}

func (p eventsPlan) maxConcurrency() int {
	c := 1
	for _, s := range p.steps {
		c = max(c, s.concurrency)
	}
	return c
}

// planEvents orders the runs: a warm-up of one batch per connection the
// highest concurrency uses, then o.Runs rounds of the delivered mix at each
// concurrency and the bounce mix at the first, alternately in order and
// reversed (so a mirror that slows as it grows favours none), each round
// ending with the replay of its delivered batches at the first
// concurrency.
func planEvents(o EventsOptions) eventsPlan {
	var p eventsPlan
	perBatch := o.BatchSize / 2
	add := func(s eventsStep) {
		if s.mix != MixReplay {
			s.first = p.reminders
			p.reminders += s.batches * perBatch
		}
		p.steps = append(p.steps, s)
	}
	warm := slices.Max(o.Concurrency)
	add(eventsStep{round: 0, mix: MixDelivered, concurrency: warm, batches: warm})
	first := o.Concurrency[0]
	for round := 1; round <= o.Runs; round++ {
		var steps []eventsStep
		for i, c := range o.Concurrency {
			steps = append(steps, eventsStep{round: round, mix: MixDelivered, concurrency: c, batches: o.Batches})
			if i == 0 {
				steps = append(steps, eventsStep{round: round, mix: MixBounce, concurrency: c, batches: o.Batches})
			}
		}
		if round%2 == 0 {
			slices.Reverse(steps)
		}
		for _, s := range steps {
			add(s)
		}
		add(eventsStep{round: round, mix: MixReplay, concurrency: first, batches: o.Batches})
	}
	return p
}

// eventsSeed is the sent email reminders the batches report on, the i-th
// derived from i alone: shipments of ten subscribers, one update each, every
// reminder sent a quarter of an hour ago and awaiting its outcome.
type eventsSeed struct {
	n    int
	sent time.Time
}

func newEventsSeed(now time.Time, n int) eventsSeed {
	return eventsSeed{n: n, sent: reminder.NormalizeTime(now.Add(-15 * time.Minute))}
}

// seeded is one reminder's identity.
type seeded struct {
	shipment, subscriber, id, key, email, messageID string
}

func (s eventsSeed) reminder(i int) seeded {
	r := seeded{shipment: fmt.Sprintf("EVT-%07d", i/10), subscriber: fmt.Sprintf("sub-%d", i%10+1)}
	r.id = reminder.ID("", r.shipment, "u-1", r.subscriber)
	r.key = reminder.DeliveryKey(r.id, r.subscriber, s.due())
	r.email = r.subscriber + "@" + r.shipment + ".example"
	sum := sha256.Sum256([]byte(r.key))
	r.messageID = base64.RawURLEncoding.EncodeToString(sum[:16])
	return r
}

func (s eventsSeed) due() time.Time { return s.sent.Add(-300 * time.Millisecond) }

var eventsReminderCols = []string{"id", "shipment_id", "update_id", "subscriber_id", "channel", "email",
	"due_at", "requested_due_at", "state", "delivery_key", "workflow_id", "workflow_started_at", "sent_at",
	"awaiting_outcome_since", "created_at", "updated_at"}

// load writes the reminders, their updates and their deliveries with COPY,
// a chunk a transaction, then analyses the tables as autovacuum would have.
func (s eventsSeed) load(ctx context.Context, pool *pgxpool.Pool) error {
	created := s.sent.Add(-24 * time.Hour)
	due := s.due()
	for lo := 0; lo < s.n; lo += fleetChunk {
		hi := min(lo+fleetChunk, s.n)
		var updates, reminders, deliveries [][]any
		for i := lo; i < hi; i++ {
			r := s.reminder(i)
			if i%10 == 0 {
				window := reminder.NormalizeTime(due.Add(24 * time.Hour))
				updates = append(updates, []any{r.shipment, "u-1", "out_for_delivery", window, window,
					"Your parcel: out for delivery", "Your delivery window starts at the time shown.", nil, created})
			}
			reminders = append(reminders, []any{r.id, r.shipment, "u-1", r.subscriber, string(reminder.Email), r.email,
				due, due, string(reminder.Sent), r.key, workflows.ReminderWorkflowID(reminder.ID("", r.shipment, "u-1", r.subscriber)), created.Add(50 * time.Millisecond), s.sent,
				s.sent, created, s.sent})
			deliveries = append(deliveries, []any{r.key, r.id, string(reminder.PurposeReminder), "sent", "bench-worker",
				due.Add(30 * time.Second), 1, r.messageID, due, s.sent})
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for _, t := range []struct {
				table string
				cols  []string
				rows  [][]any
			}{
				{"updates", updateCols, updates}, {"reminders", eventsReminderCols, reminders}, {"deliveries", deliveryCols, deliveries},
			} {
				if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.table}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
					return fmt.Errorf("error copying %s: %w", t.table, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("error seeding the sent reminders: %w", err)
		}
	}
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) updates, reminders, deliveries, reminder_tallies"); err != nil {
		return fmt.Errorf("error analysing the seeded reminders: %w", err)
	}
	return nil
}

// eventsBatch is one signed post's body and what it carries.
type eventsBatch struct {
	body   []byte
	events int
	// ids are the events' sg_event_ids.
	ids []string
	// delivered and bounced count the reminders the batch finishes.
	delivered, bounced int
}

// The events' SendGrid words: a delivery's and a bounce's, as the mail
// sink's emitter writes them.
const (
	deliveredResponse = "250 2.0.0 OK  1764590000 4fb4d7f45d1cf-4a2e4c3b9dasi1234567a.42 - gsmtp"
	bounceReason      = "550 5.1.1 The email account that you tried to reach does not exist."
)

// build makes every step's batches before the first is posted (so the
// posting's CPU is the benchmark's only work meanwhile), a replay's being
// its round's delivered batches again, and the ledger of what they carry.
func (s eventsSeed) build(plan eventsPlan, o EventsOptions) ([][]eventsBatch, *eventsLedger, error) {
	built := make([][]eventsBatch, len(plan.steps))
	led := newEventsLedger()
	replayed := map[int][]eventsBatch{}
	for i, st := range plan.steps {
		if st.mix == MixReplay {
			built[i] = replayed[st.round]
			continue
		}
		batches, err := s.batches(st, o)
		if err != nil {
			return nil, nil, err
		}
		for _, b := range batches {
			led.add(b)
		}
		if st.mix == MixDelivered && st.concurrency == o.Concurrency[0] {
			replayed[st.round] = batches
		}
		built[i] = batches
	}
	return built, led, nil
}

// batches builds a step's batches: per reminder its processed event, then
// (a second later) its delivered event, or for the bounce mix's share a
// bounce, each event with the custom args the product sends.
func (s eventsSeed) batches(st eventsStep, o EventsOptions) ([]eventsBatch, error) {
	perBatch := o.BatchSize / 2
	out := make([]eventsBatch, 0, st.batches)
	for b := range st.batches {
		batch := eventsBatch{ids: make([]string, 0, o.BatchSize)}
		events := make([]sink.Event, 0, o.BatchSize)
		for j := range perBatch {
			r := s.reminder(st.first + b*perBatch + j)
			ev := func(kind string, at time.Time) sink.Event {
				id := eventID()
				batch.ids = append(batch.ids, id)
				return sink.Event{
					Email: r.email, Timestamp: at.Unix(), Event: kind, SGEventID: id,
					SGMessageID: fmt.Sprintf("%s.recvd-bench-%X-%d.0", r.messageID, s.sent.Unix(), j),
					SMTPID:      "<" + r.messageID + "@ismtpd-bench>",
					CustomArgs: map[string]string{"delivery_key": r.key, "reminder_id": r.id, "shipment_id": r.shipment,
						"purpose": string(reminder.PurposeReminder)},
				}
			}
			events = append(events, ev(sink.EventProcessed, s.sent.Add(time.Second)))
			if st.mix == MixBounce && bounces(j, o.BounceShare) {
				e := ev(sink.EventBounce, s.sent.Add(2*time.Second))
				e.Reason, e.Status, e.Type, e.BounceClassification = bounceReason, "5.1.1", "bounce", "Invalid Address"
				events = append(events, e)
				batch.bounced++
				continue
			}
			e := ev(sink.EventDelivered, s.sent.Add(2*time.Second))
			e.Response = deliveredResponse
			events = append(events, e)
			batch.delivered++
		}
		body, err := json.Marshal(events)
		if err != nil {
			return nil, fmt.Errorf("error encoding a batch of events: %w", err)
		}
		batch.body, batch.events = body, len(events)
		out = append(out, batch)
	}
	return out, nil
}

// bounces spreads share of a batch's reminders evenly: the j-th bounces
// when it brings the count of bounces to the next whole number.
func bounces(j int, share float64) bool {
	return int(float64(j+1)*share) > int(float64(j)*share)
}

// eventID is a fresh sg_event_id; SendGrid's are opaque base64 too.
func eventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
