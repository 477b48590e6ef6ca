package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/mirror"
)

// After every horizontal run the benchmark checks from outside, against
// the mirror and what the stand-ins received, that nothing was lost or
// doubled beyond what the product documents: the mail sink's journal for
// the reminders, the tracker's receiver for the status events, the
// provider events the mail sink posted against what serve recorded.

// runSnapshot is what one run's check reads, once the run is quiet.
type runSnapshot struct {
	// Keys are the run's reminders' delivery keys, by reminder id, and
	// States their mirror states.
	Keys   map[string]string
	States map[string]string
	// Accepted is how often the mail sink accepted each of those keys,
	// and FirstAccepted when it first did.
	Accepted      map[string]int
	FirstAccepted map[string]time.Time
	// Outbox is the status outbox's rows for the run's reminders.
	Outbox []outboxRow
	// Received is every status event the tracker's receiver took for the
	// run's reminders, in arrival order.
	Received []statusReceipt
	// Posted is how often each provider event (sg_event_id) for the run's
	// reminders was posted to serve, and Acknowledged those a post of
	// which serve answered 2xx.
	Posted       map[string]int
	Acknowledged map[string]bool
	// Applied is the run's rows in provider_events, and Trail the
	// provider_* events on its reminders' trails: one each per event
	// applied once.
	Applied, Trail int
	// Held are the delivery keys whose claims were held (status sending)
	// when a worker was killed, and ServeClaimed the status events the
	// killed serve replica had claimed and not recorded: the windows in
	// which a repeat is documented.
	Held         map[string]bool
	ServeClaimed map[string]bool
}

// outboxRow is one status event for the tracker's endpoint.
type outboxRow struct {
	EventID    string
	ReminderID string
	Seq        int
	Status     string
}

// statusReceipt is one status event the tracker received.
type statusReceipt struct {
	EventID    string
	ReminderID string
	Seq        int
	At         time.Time
}

// RunCheck is what a run's check found. Violations are broken promises;
// everything else is counted so the reader sees what the promises held
// against.
type RunCheck struct {
	Reminders int `json:"reminders"`
	// Delivered are the reminders the mirror ends delivered (SendGrid's
	// delivered event applied); Lost the keys the mail sink never took.
	Delivered int `json:"delivered"`
	Lost      int `json:"lost"`
	// Twice are keys the mail sink took more than once: InWindow those
	// whose claim was held at a worker's kill (the documented window),
	// BeyondWindow the rest.
	Twice        int `json:"keys_twice"`
	InWindow     int `json:"twice_in_window"`
	BeyondWindow int `json:"twice_beyond_window"`
	HeldAtKill   int `json:"claims_held_at_kill"`
	// StatusEvents are the outbox's events for the run's reminders;
	// Reached those the tracker received at least once; Repeated those it
	// received more than once, RepeatedClaimed of them claimed by the
	// killed serve (at least once is documented: the receiver
	// deduplicates on webhook-id), RepeatedUnclaimed the rest.
	StatusEvents      int `json:"status_events"`
	Reached           int `json:"status_events_reached"`
	Undelivered       int `json:"status_events_undelivered"`
	Repeated          int `json:"status_events_repeated"`
	RepeatedClaimed   int `json:"status_events_repeated_claimed"`
	RepeatedUnclaimed int `json:"status_events_repeated_unclaimed"`
	ClaimedAtKill     int `json:"status_events_claimed_at_kill"`
	OutOfOrder        int `json:"status_events_out_of_order"`
	// ProviderEvents are the distinct events the mail sink posted to
	// serve for the run's mails; Reposted those posted more than once (a
	// retry after a cut or refused post); Applied the rows serve kept.
	ProviderEvents int `json:"provider_events"`
	Reposted       int `json:"provider_events_reposted"`
	Unacknowledged int `json:"provider_events_unacknowledged"`
	Applied        int `json:"provider_events_applied"`
	Trail          int `json:"provider_events_on_trail"`
	// Violations are the broken promises, each with its count.
	Violations []string `json:"violations,omitempty"`
}

// checkRun applies the promises to a run's snapshot.
func checkRun(s runSnapshot) RunCheck {
	c := RunCheck{Reminders: len(s.Keys), HeldAtKill: len(s.Held), ClaimedAtKill: len(s.ServeClaimed)}
	violate := func(n int, format string, args ...any) {
		if n > 0 {
			c.Violations = append(c.Violations, fmt.Sprintf("%d ", n)+fmt.Sprintf(format, args...))
		}
	}
	notDelivered := 0
	for id, key := range s.Keys {
		if s.States[id] == "delivered" {
			c.Delivered++
		} else {
			notDelivered++
		}
		switch n := s.Accepted[key]; {
		case n == 0:
			c.Lost++
		case n > 1:
			c.Twice++
			if s.Held[key] {
				c.InWindow++
			} else {
				c.BeyondWindow++
			}
		}
	}
	violate(c.Lost, "reminder(s) lost: the mail sink never took their key")
	violate(c.BeyondWindow, "key(s) taken more than once whose claim was not held at a kill")
	violate(notDelivered, "reminder(s) not delivered in the mirror (SendGrid's delivered event not applied)")

	events := map[string]outboxRow{}
	for _, o := range s.Outbox {
		events[o.EventID] = o
		if o.Status != "delivered" {
			c.Undelivered++
		}
	}
	c.StatusEvents = len(events)
	got := map[string]int{}
	first := map[string]time.Time{}
	unknown := 0
	for _, r := range s.Received {
		if _, ok := events[r.EventID]; !ok {
			unknown++
			continue
		}
		if got[r.EventID]++; got[r.EventID] == 1 {
			first[r.EventID] = r.At
		}
	}
	for id, n := range got {
		c.Reached++
		if n > 1 {
			c.Repeated++
			if s.ServeClaimed[id] {
				c.RepeatedClaimed++
			} else {
				c.RepeatedUnclaimed++
			}
		}
	}
	c.OutOfOrder = outOfOrder(s.Outbox, first)
	violate(c.StatusEvents-c.Reached, "status event(s) in the outbox never reached the tracker")
	violate(c.Undelivered, "status event(s) not delivered in the outbox")
	violate(unknown, "status event(s) received that the outbox does not hold")
	violate(c.RepeatedUnclaimed, "status event(s) received more than once that the killed serve had not claimed")
	violate(c.OutOfOrder, "reminder(s) whose status events first arrived out of order")

	c.ProviderEvents, c.Applied, c.Trail = len(s.Posted), s.Applied, s.Trail
	for id, n := range s.Posted {
		if n > 1 {
			c.Reposted++
		}
		if !s.Acknowledged[id] {
			c.Unacknowledged++
		}
	}
	if c.Applied != c.ProviderEvents {
		c.Violations = append(c.Violations, fmt.Sprintf("%d provider events posted, %d kept by serve", c.ProviderEvents, c.Applied))
	}
	if c.Trail != c.Applied {
		c.Violations = append(c.Violations, fmt.Sprintf("%d provider events kept, %d on the trail (each is applied once)", c.Applied, c.Trail))
	}
	slices.Sort(c.Violations)
	return c
}

// outOfOrder counts reminders whose events first arrived in another order
// than their sequence: serve posts a reminder's next event only once the
// one before is delivered.
func outOfOrder(rows []outboxRow, first map[string]time.Time) int {
	byReminder := map[string][]outboxRow{}
	for _, o := range rows {
		byReminder[o.ReminderID] = append(byReminder[o.ReminderID], o)
	}
	n := 0
	for _, evs := range byReminder {
		slices.SortFunc(evs, func(a, b outboxRow) int { return a.Seq - b.Seq })
		var last time.Time
		for _, e := range evs {
			at, ok := first[e.EventID]
			if !ok {
				continue
			}
			if at.Before(last) {
				n++
				break
			}
			last = at
		}
	}
	return n
}

// runReminders reads the run's reminders (their shipments start with
// prefix): delivery keys and states.
func runReminders(ctx context.Context, store *mirror.Store, prefix string) (keys, states map[string]string, err error) {
	rows, _ := store.Pool().Query(ctx, `SELECT id, delivery_key, state FROM reminders WHERE starts_with(shipment_id, $1)`, prefix)
	keys, states = map[string]string{}, map[string]string{}
	var id, key, state string
	if _, err := pgx.ForEachRow(rows, []any{&id, &key, &state}, func() error {
		keys[id], states[id] = key, state
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("error reading the run's reminders: %w", err)
	}
	return keys, states, nil
}

// runQuiet reports whether every one of the run's reminders is delivered
// and no status event of theirs waits, and how many are not yet.
func runQuiet(ctx context.Context, store *mirror.Store, prefix string) (notDelivered, waiting int, err error) {
	err = store.Pool().QueryRow(ctx, `
SELECT (SELECT count(*) FROM reminders WHERE starts_with(shipment_id, $1) AND state <> 'delivered'),
       (SELECT count(*) FROM status_outbox o JOIN reminders r ON r.id = o.reminder_id
         WHERE starts_with(r.shipment_id, $1) AND o.status = 'pending')`, prefix).Scan(&notDelivered, &waiting)
	if err != nil {
		return 0, 0, fmt.Errorf("error reading whether the run is quiet: %w", err)
	}
	return notDelivered, waiting, nil
}

// waitQuiet waits, up to within, until the run is quiet: its provider
// events applied and its status events delivered (a killed serve's claims
// lapse only after their lease).
func waitQuiet(ctx context.Context, store *mirror.Store, prefix string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		nd, w, err := runQuiet(ctx, store, prefix)
		if err == nil && nd == 0 && w == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("after %s, %d reminder(s) not delivered and %d status event(s) waiting", within, nd, w)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// readSnapshot reads what a run's check needs: the mirror's rows for the
// run's reminders and what the stand-ins took for them.
func readSnapshot(ctx context.Context, store *mirror.Store, ids *opaque.Keys, prefix string, mail *sink.MailSink, tracker *sink.WebhookSink, kill *KillRecord) (runSnapshot, error) {
	s := runSnapshot{Accepted: map[string]int{}, FirstAccepted: map[string]time.Time{}, Posted: map[string]int{},
		Acknowledged: map[string]bool{}, Held: map[string]bool{}, ServeClaimed: map[string]bool{}}
	var err error
	if s.Keys, s.States, err = runReminders(ctx, store, prefix); err != nil {
		return s, err
	}
	byKey := make(map[string]bool, len(s.Keys))
	for _, k := range s.Keys {
		byKey[k] = true
	}
	for _, m := range mail.Mails() {
		k := m.CustomArgs["delivery_key"]
		if !byKey[k] {
			continue
		}
		if s.Accepted[k]++; s.Accepted[k] == 1 || m.Received.Before(s.FirstAccepted[k]) {
			s.FirstAccepted[k] = m.Received
		}
	}
	rows, _ := store.Pool().Query(ctx, `
SELECT o.event_id, o.reminder_id, o.seq, o.status FROM status_outbox o JOIN reminders r ON r.id = o.reminder_id
 WHERE starts_with(r.shipment_id, $1)`, prefix)
	var o outboxRow
	if _, err := pgx.ForEachRow(rows, []any{&o.EventID, &o.ReminderID, &o.Seq, &o.Status}, func() error {
		// The tracker was posted the sealed id, which the rows are matched by.
		var err error
		o.EventID, err = ids.OutboxEventID(o.EventID)
		s.Outbox = append(s.Outbox, o)
		return err
	}); err != nil {
		return s, fmt.Errorf("error reading the status outbox: %w", err)
	}
	for _, h := range tracker.Hooks() {
		var ev struct {
			Data struct {
				ReminderID string `json:"reminder_id"`
				Sequence   int    `json:"sequence"`
			} `json:"data"`
		}
		if json.Unmarshal(h.Body, &ev) != nil {
			continue
		}
		if _, ours := s.Keys[ev.Data.ReminderID]; ours {
			s.Received = append(s.Received, statusReceipt{EventID: h.ID, ReminderID: ev.Data.ReminderID, Seq: ev.Data.Sequence, At: h.Received})
		}
	}
	for _, b := range mail.PostedEvents() {
		ok := b.Err == nil && b.Status >= http.StatusOK && b.Status < http.StatusMultipleChoices
		for _, e := range b.Events {
			if _, ours := s.Keys[e.CustomArgs["reminder_id"]]; !ours {
				continue
			}
			s.Posted[e.SGEventID]++
			if ok {
				s.Acknowledged[e.SGEventID] = true
			}
		}
	}
	err = store.Pool().QueryRow(ctx, `
SELECT (SELECT count(*) FROM provider_events p JOIN reminders r ON r.id = p.reminder_id WHERE starts_with(r.shipment_id, $1)),
       (SELECT count(*) FROM reminder_events e JOIN reminders r ON r.id = e.reminder_id
         WHERE starts_with(r.shipment_id, $1) AND starts_with(e.type, 'provider_'))`, prefix).Scan(&s.Applied, &s.Trail)
	if err != nil {
		return s, fmt.Errorf("error counting the provider events: %w", err)
	}
	if kill != nil {
		for _, k := range kill.HeldClaims {
			s.Held[k] = true
		}
		for _, id := range kill.ServeClaims {
			s.ServeClaimed[id] = true
		}
	}
	return s, nil
}

// acceptedWindow is the middle of a run's drain as the provider saw it:
// when the 10th and the 90th percentile of its keys were first accepted.
func acceptedWindow(first map[string]time.Time) (from, to time.Time, ok bool) {
	if len(first) < 2 {
		return time.Time{}, time.Time{}, false
	}
	at := make([]time.Time, 0, len(first))
	for _, t := range first {
		at = append(at, t)
	}
	s := sortedTimes(at)
	from, to = quantile(s, 0.1), quantile(s, 0.9)
	return from, to, to.After(from)
}
