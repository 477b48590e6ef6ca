package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// fleet generates a carrier's mirror as the product would have written it:
// shipments of one to five updates, each fanned out to the shipment's one to
// six subscribers (about ten reminders a shipment), due times spread evenly
// over [From, To), states as their due time makes them at Now. It is
// deterministic for a Seed, so two runs load the same rows.
type fleet struct {
	// Prefix starts every shipment id, keeping loads apart in one schema.
	Prefix   string
	N        int
	From, To time.Time
	Now      time.Time
	Seed     uint64
	// Trail also writes each reminder's events and delivery rows.
	Trail bool
}

// loaded counts the rows a load wrote, per table.
type loaded struct {
	Shipments  int   `json:"shipments"`
	Updates    int64 `json:"updates"`
	Reminders  int64 `json:"reminders"`
	Events     int64 `json:"events"`
	Deliveries int64 `json:"deliveries"`
}

// fleetChunk is how many reminders one COPY transaction carries: large
// enough that COPY's per-statement cost vanishes, small enough to hold.
const fleetChunk = 50_000

// load writes the fleet with COPY, a chunk of whole updates per transaction.
func (f fleet) load(ctx context.Context, pool *pgxpool.Pool, progress func(done int)) (loaded, error) {
	var total loaded
	g := &fleetGen{f: f, rng: rand.New(rand.NewPCG(f.Seed, 0x5eed))}
	for g.made < f.N {
		c := g.chunk(fleetChunk)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for _, t := range []struct {
				table string
				cols  []string
				rows  [][]any
				n     *int64
			}{
				{"updates", updateCols, c.updates, &total.Updates},
				{"reminders", reminderCols, c.reminders, &total.Reminders},
				{"reminder_events", eventCols, c.events, &total.Events},
				{"deliveries", deliveryCols, c.deliveries, &total.Deliveries},
			} {
				if len(t.rows) == 0 {
					continue
				}
				n, err := tx.CopyFrom(ctx, pgx.Identifier{t.table}, t.cols, pgx.CopyFromRows(t.rows))
				if err != nil {
					return fmt.Errorf("error copying %s: %w", t.table, err)
				}
				*t.n += n
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("error loading the mirror: %w", err)
		}
		total.Shipments = g.shipment
		if progress != nil {
			progress(g.made)
		}
	}
	return total, nil
}

var (
	updateCols   = []string{"shipment_id", "update_id", "kind", "window_start", "requested_window_start", "subject", "body", "escalation_email", "created_at"}
	reminderCols = []string{"id", "shipment_id", "update_id", "subscriber_id", "channel", "email", "webhook_url", "webhook_secret",
		"due_at", "requested_due_at", "state", "delivery_key", "workflow_id", "workflow_started_at", "sent_at",
		"approval_timeout", "approval_expire_after", "created_at", "updated_at"}
	eventCols    = []string{"reminder_id", "type", "at", "detail"}
	deliveryCols = []string{"delivery_key", "reminder_id", "purpose", "status", "claimed_by", "lease_until", "attempts",
		"provider_message_id", "created_at", "finished_at"}
)

type fleetRows struct {
	updates, reminders, events, deliveries [][]any
}

type fleetGen struct {
	f        fleet
	rng      *rand.Rand
	made     int
	shipment int
	stuck    int
}

var updateKinds = []string{"delivery_window", "delayed", "out_for_delivery", "exception", "delivered"}

// chunk generates whole shipments until about n more reminders are made
// (the last update is cut short at f.N).
func (g *fleetGen) chunk(n int) fleetRows {
	var c fleetRows
	stop := min(g.made+n, g.f.N)
	span := g.f.To.Sub(g.f.From)
	for g.made < stop {
		g.shipment++
		shipment := fmt.Sprintf("%s%09d", g.f.Prefix, g.shipment)
		// Shipments come in due order, give or take a day and a half, as
		// a carrier's do: the table's physical order follows time.
		base := g.f.From.Add(time.Duration(float64(span)*float64(g.made)/float64(g.f.N)) +
			time.Duration(g.rng.Int64N(int64(72*time.Hour))) - 36*time.Hour)
		subscribers := 1 + g.rng.IntN(6)
		due := base
		for u := range 1 + g.rng.IntN(5) {
			if g.made >= stop {
				break
			}
			update := fmt.Sprintf("u-%d", u+1)
			kind := updateKinds[u%len(updateKinds)]
			window := reminder.NormalizeTime(due.Add(24 * time.Hour))
			created := g.createdBefore(due)
			c.updates = append(c.updates, []any{shipment, update, kind, window, window,
				"Your parcel: " + kind, "Your delivery window starts at the time shown.", g.escalation(), created})
			for s := range subscribers {
				if g.made >= stop {
					break
				}
				g.reminder(&c, shipment, update, fmt.Sprintf("sub-%d", s+1), due, created)
				g.made++
			}
			due = due.Add(4*time.Hour + time.Duration(g.rng.Int64N(int64(26*time.Hour))))
		}
	}
	return c
}

func (g *fleetGen) escalation() any {
	if g.rng.IntN(4) == 0 {
		return "ops@shipper.example"
	}
	return nil
}

// createdBefore is when an update due at due was submitted: an hour to a
// week ahead, never after now.
func (g *fleetGen) createdBefore(due time.Time) time.Time {
	lead := time.Hour + time.Duration(g.rng.Int64N(int64(7*24*time.Hour)))
	created := due.Add(-lead)
	if created.After(g.f.Now) {
		created = g.f.Now.Add(-time.Duration(g.rng.Int64N(int64(lead))))
	}
	return reminder.NormalizeTime(created)
}

// reminder adds one reminder, with its events and deliveries when the
// fleet keeps a trail.
func (g *fleetGen) reminder(c *fleetRows, shipment, update, sub string, updateDue, created time.Time) {
	rng := g.rng
	id := reminder.ID("", shipment, update, sub)
	// Some subscribers ask to hear an hour or a day before the window.
	due := reminder.NormalizeTime(updateDue.Add(-[]time.Duration{0, time.Hour, 24 * time.Hour}[rng.IntN(3)]))
	requested := due
	if rng.IntN(50) == 0 {
		requested = due.Add(-time.Duration(1+rng.IntN(3)) * 24 * time.Hour)
	}
	key := reminder.DeliveryKey(id, sub, due)
	state, updated := g.state(due, created)
	var email, url, secret any = sub + "@" + shipment + ".example", nil, nil
	channel := reminder.Email
	if rng.IntN(5) == 0 {
		channel, email, url, secret = reminder.Webhook, nil, "https://hooks.example/"+shipment, "whsec_bench"
	}
	var sentAt, approvalTimeout, approvalExpire any
	if state == reminder.Sent {
		sentAt = updated
	}
	if state == reminder.AwaitingApproval || state == reminder.Expired {
		approvalTimeout, approvalExpire = 24*time.Hour, 72*time.Hour
	}
	c.reminders = append(c.reminders, []any{id, shipment, update, sub, string(channel), email, url, secret,
		due, requested, string(state), key, workflows.ReminderWorkflowID(id),
		created.Add(50 * time.Millisecond), sentAt, approvalTimeout, approvalExpire, created, updated})
	if !g.f.Trail {
		return
	}
	event := func(typ string, at time.Time, detail map[string]any) {
		c.events = append(c.events, []any{id, typ, at, detail})
	}
	delivery := func(key, purpose, status string, at time.Time) {
		c.deliveries = append(c.deliveries, []any{key, id, purpose, status, "bench-worker", at.Add(30 * time.Second), 1,
			"msg-" + key[:16], at, at.Add(300 * time.Millisecond)})
	}
	event("scheduled", created, map[string]any{"due_at": requested, "delivery_key": key, "state": "scheduled"})
	if requested != due {
		event("rescheduled", created.Add(time.Hour), map[string]any{"due_at": due, "delivery_key": key})
	}
	switch state {
	case reminder.Sent:
		delivery(key, "reminder", "sent", due)
		event("sent", updated, map[string]any{"delivery_key": key, "attempts": 1})
	case reminder.Failed:
		delivery(key, "reminder", "failed", due)
		event("delivery_failed", updated, map[string]any{"delivery_key": key, "reason": "bounced"})
		event("failed", updated, map[string]any{"reason": "bounced"})
		delivery(reminder.EscalationKey(id, "delivery_failed"), "escalation", "sent", updated)
		event("escalated", updated.Add(time.Second), map[string]any{"reason": "delivery_failed"})
	case reminder.Cancelled, reminder.Expired:
		event(string(state), updated, map[string]any{"by": "tracker"})
	}
}

// state is what a reminder due at due is at the fleet's now: finished once
// due (mostly sent), pending before; a reminder due in the last quarter
// hour is still being drained, so the overdue gauge has something to find.
func (g *fleetGen) state(due, created time.Time) (reminder.State, time.Time) {
	now, rng := g.f.Now, g.rng
	between := func(a, b time.Time) time.Time {
		if !b.After(a) {
			return a
		}
		return reminder.NormalizeTime(a.Add(time.Duration(rng.Int64N(int64(b.Sub(a))))))
	}
	p := rng.IntN(1000)
	switch {
	case due.After(now):
		switch {
		case p < 20:
			return reminder.Cancelled, between(created, now)
		case p < 40:
			return reminder.AwaitingApproval, created
		}
		return reminder.Scheduled, created
	case due.After(now.Add(-15 * time.Minute)):
		return reminder.Scheduled, created
	case due.After(now.Add(-72*time.Hour)) && g.stuck <= g.made/100_000:
		// One in 100,000 is stuck, overdue by hours or days: the
		// oldest-overdue gauge's reason to exist.
		g.stuck++
		return reminder.Scheduled, created
	}
	switch {
	case p < 35:
		return reminder.Cancelled, between(created, due)
	case p < 45:
		// Failed once the notify's retry budget (three days) ran out.
		end := due.Add(72 * time.Hour)
		if end.After(now) {
			end = now
		}
		return reminder.Failed, between(due, end)
	case p < 50:
		return reminder.Expired, between(created, due)
	}
	return reminder.Sent, reminder.NormalizeTime(due.Add(200*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))))
}
