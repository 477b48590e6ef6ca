package bench

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// eventsLedger is what the batches posted (replays aside, which add
// nothing): what the mirror must hold afterwards.
type eventsLedger struct {
	ids                           []string
	reminders, delivered, bounced int
	// batches and bodyBytes count the bodies built.
	batches, bodyBytes int
}

func newEventsLedger() *eventsLedger { return &eventsLedger{} }

func (l *eventsLedger) add(b eventsBatch) {
	l.ids = append(l.ids, b.ids...)
	l.delivered += b.delivered
	l.bounced += b.bounced
	l.reminders += b.delivered + b.bounced
	l.batches++
	l.bodyBytes += len(b.body)
}

// EventsCheck is what the mirror held after the runs, against what was
// posted.
type EventsCheck struct {
	// Reminders by state: every one delivered, or undeliverable for a
	// bounce; Other counts those in any other state (still sent, say).
	Reminders     int `json:"reminders"`
	Delivered     int `json:"delivered"`
	Undeliverable int `json:"undeliverable"`
	Other         int `json:"other"`
	// EventsPosted is the distinct events posted; ProviderEvents the rows
	// of provider_events, and PostedFound those of them with a posted id.
	EventsPosted   int `json:"events_posted"`
	ProviderEvents int `json:"provider_events"`
	PostedFound    int `json:"posted_found"`
	// TrailEvents are the provider_* rows of reminder_events: one an event.
	TrailEvents int `json:"trail_events"`
	// Escalations are the undeliverable escalations owed: one a bounce.
	Escalations int `json:"escalations_owed"`
	// TalliesAgree: the state tallies (what /metrics reads) add up to the
	// rows' states.
	TalliesAgree bool     `json:"tallies_agree"`
	Problems     []string `json:"problems,omitempty"`
}

// verify reads the mirror and names every count that is not exactly what
// the batches carried.
func (l *eventsLedger) verify(ctx context.Context, pool *pgxpool.Pool) (EventsCheck, error) {
	c := EventsCheck{EventsPosted: len(l.ids)}
	err := pool.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE state = 'delivered'), count(*) FILTER (WHERE state = 'undeliverable'),
       count(*) FILTER (WHERE state NOT IN ('delivered', 'undeliverable'))
  FROM reminders`).Scan(&c.Reminders, &c.Delivered, &c.Undeliverable, &c.Other)
	if err != nil {
		return c, fmt.Errorf("error counting reminders: %w", err)
	}
	err = pool.QueryRow(ctx, `
SELECT (SELECT count(*) FROM provider_events),
       (SELECT count(*) FROM provider_events WHERE event_id = ANY($1)),
       (SELECT count(*) FROM reminder_events WHERE type LIKE 'provider\_%'),
       (SELECT count(*) FROM outcome_escalations
         WHERE reason = 'undeliverable' AND started_at IS NULL AND settled_at IS NULL)`, l.ids).
		Scan(&c.ProviderEvents, &c.PostedFound, &c.TrailEvents, &c.Escalations)
	if err != nil {
		return c, fmt.Errorf("error counting provider events: %w", err)
	}
	rows, _ := pool.Query(ctx, `
SELECT coalesce(r.state, t.state), coalesce(r.n, 0), coalesce(t.n, 0)
  FROM (SELECT state, count(*) AS n FROM reminders GROUP BY state) r
  FULL JOIN (SELECT state, sum(n) AS n FROM reminder_tallies GROUP BY state) t USING (state)`)
	var state string
	var counted, tallied int64
	c.TalliesAgree = true
	_, err = pgx.ForEachRow(rows, []any{&state, &counted, &tallied}, func() error {
		if counted != tallied {
			c.TalliesAgree = false
			c.Problems = append(c.Problems, fmt.Sprintf("the tallies count %d reminders %s, the rows %d", tallied, state, counted))
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("error reading the tallies: %w", err)
	}
	want := func(what string, got, want int) {
		if got != want {
			c.Problems = append(c.Problems, fmt.Sprintf("%s: %d, want %d", what, got, want))
		}
	}
	want("reminders", c.Reminders, l.reminders)
	want("reminders delivered", c.Delivered, l.delivered)
	want("reminders undeliverable", c.Undeliverable, l.bounced)
	want("reminders in another state", c.Other, 0)
	want("provider_events rows", c.ProviderEvents, len(l.ids))
	want("provider_events rows of a posted event", c.PostedFound, len(l.ids))
	want("provider events on the reminders' trails", c.TrailEvents, len(l.ids))
	want("undeliverable escalations owed", c.Escalations, l.bounced)
	return c, nil
}
