package mirror

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// ProviderEvent is one report of the mail provider about a delivery it
// accepted (one SendGrid Event Webhook event).
type ProviderEvent struct {
	// ID is the provider's event id (SendGrid's sg_event_id): a repeated id
	// changes nothing.
	ID          string
	DeliveryKey string
	Outcome     reminder.ProviderOutcome
	// At is the provider's timestamp of the event.
	At time.Time
	// Reason is a reason code (an SMTP status, SendGrid's drop reason),
	// never an address or a message's text.
	Reason string
	// MessageID is the provider's id of the message ("" unknown): what its
	// 202 would have answered.
	MessageID string
}

// AppliedEvents is what applying a batch of provider events did, by
// outcome: Applied events were new and recorded; Duplicate ones were
// applied before (their id was seen); Unknown ones name no delivery
// shipnotify made and were dropped.
type AppliedEvents struct {
	Applied, Duplicate, Unknown map[reminder.ProviderOutcome]int
	// Escalations is how many escalations the batch newly owes.
	Escalations int
	// Delivered are the reminders the batch moved to delivered.
	Delivered []DeliveredReminder
}

// Count adds up one of the maps.
func Count(m map[reminder.ProviderOutcome]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// DeliveredReminder is a reminder that reached its subscriber: the delivery
// SLO is DeliveredAt minus DueAt.
type DeliveredReminder struct {
	ReminderID  string
	Channel     reminder.Channel
	DueAt       time.Time
	DeliveredAt time.Time
}

// outcomeRow is a reminder's outcome columns, locked while a batch applies.
type outcomeRow struct {
	id, deliveryKey, tenant   string
	email                     string
	state                     reminder.State
	channel                   reminder.Channel
	dueAt                     time.Time
	outcome                   *string
	outcomeAt, deliveredAt    *time.Time
	undeliverableAt, awaiting *time.Time
	changed                   bool
	// deliveredNow: this batch moved it from sent to delivered.
	deliveredNow bool
}

// reported is what the provider has reported of the row's delivery.
func (r *outcomeRow) reported() reminder.Reported {
	return reminder.Reported{Delivered: r.deliveredAt != nil, Undeliverable: r.undeliverableAt != nil}
}

// newer reports whether an event at with outcome o is the latest report.
func (r *outcomeRow) newer(at time.Time, o reminder.ProviderOutcome) bool {
	if r.outcomeAt == nil || at.After(*r.outcomeAt) {
		return true
	}
	return at.Equal(*r.outcomeAt) && o.Rank() >= reminder.ProviderOutcome(*r.outcome).Rank()
}

type knownKey struct {
	reminderID string
	purpose    reminder.Purpose
}

// ApplyProviderEvents records a batch of provider events, in one
// transaction: each new event (by id) is appended to its reminder's audit
// trail with the provider's timestamp and reason code; a reminder's own
// delivery takes the last outcome reported, moves sent → delivered on
// delivered and to undeliverable on a bounce or drop, and owes an
// escalation for a bounce or drop (due at once) or a deferral (due
// deferAfter after it, settled if it is delivered first). An event for a
// delivery shipnotify never made is counted and dropped; a repeated event
// changes nothing. Events of other deliveries of a reminder (its
// escalation, its cancellation notice) are recorded on its trail only.
func (s *Store) ApplyProviderEvents(ctx context.Context, events []ProviderEvent, deferAfter time.Duration) (AppliedEvents, error) {
	res := AppliedEvents{Applied: map[reminder.ProviderOutcome]int{}, Duplicate: map[reminder.ProviderOutcome]int{}, Unknown: map[reminder.ProviderOutcome]int{}}
	if len(events) == 0 {
		return res, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		events, err := digestEvents(ctx, tx, events)
		if err != nil {
			return err
		}
		known, err := knownKeys(ctx, tx, events)
		if err != nil {
			return err
		}
		fresh, err := firstSeen(ctx, tx, events, known)
		if err != nil {
			return err
		}
		var applied []ProviderEvent
		for _, e := range events {
			switch _, ok := known[e.DeliveryKey]; {
			case !ok:
				res.Unknown[e.Outcome]++
			case fresh[e.ID]:
				delete(fresh, e.ID) // a repeat within the batch is a duplicate
				applied = append(applied, e)
				res.Applied[e.Outcome]++
			default:
				res.Duplicate[e.Outcome]++
			}
		}
		if len(applied) == 0 {
			return nil
		}
		rows, err := lockOutcomeRows(ctx, tx, applied, known)
		if err != nil {
			return err
		}
		w := outcomeWrites{deferAfter: deferAfter}
		// In the provider's order: the last report wins, whatever the
		// order the batches came in.
		slices.SortStableFunc(applied, func(a, b ProviderEvent) int {
			return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Outcome.Rank(), b.Outcome.Rank()))
		})
		for _, e := range applied {
			k := known[e.DeliveryKey]
			w.apply(e, k, rows[k.reminderID])
		}
		for _, r := range rows {
			// (A row delivered and then bounced in one batch was delivered
			// all the same, but is no longer: it is not counted.)
			if r.deliveredNow && r.state == reminder.Delivered {
				res.Delivered = append(res.Delivered, DeliveredReminder{
					ReminderID: r.id, Channel: r.channel, DueAt: r.dueAt, DeliveredAt: *r.deliveredAt})
			}
		}
		res.Escalations, err = w.write(ctx, tx, rows)
		return err
	})
	if err != nil {
		return AppliedEvents{}, fmt.Errorf("error applying provider events: %w", err)
	}
	return res, nil
}

// digestEvents applies an event for a digest's key to each member's own
// key: one event per member, its id the event's and the member's key (so a
// repeat of the event is a repeat for every member). Other events pass as
// they are.
func digestEvents(ctx context.Context, tx pgx.Tx, events []ProviderEvent) ([]ProviderEvent, error) {
	var keys []string
	for _, e := range events {
		if strings.HasPrefix(e.DeliveryKey, reminder.DigestKeyPrefix) {
			keys = append(keys, e.DeliveryKey)
		}
	}
	if len(keys) == 0 {
		return events, nil
	}
	rows, _ := tx.Query(ctx, `SELECT digest_key, delivery_key FROM deliveries WHERE digest_key = ANY($1) ORDER BY delivery_key`, keys)
	members := map[string][]string{}
	var digest, key string
	if _, err := pgx.ForEachRow(rows, []any{&digest, &key}, func() error {
		members[digest] = append(members[digest], key)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("error reading a digest's members: %w", err)
	}
	out := make([]ProviderEvent, 0, len(events))
	for _, e := range events {
		ms, ok := members[e.DeliveryKey]
		if !ok {
			out = append(out, e)
			continue
		}
		for _, m := range ms {
			me := e
			me.ID, me.DeliveryKey = e.ID+"/"+m, m
			out = append(out, me)
		}
	}
	return out, nil
}

// knownKeys finds the deliveries the events name.
func knownKeys(ctx context.Context, tx pgx.Tx, events []ProviderEvent) (map[string]knownKey, error) {
	keys := make([]string, 0, len(events))
	for _, e := range events {
		keys = append(keys, e.DeliveryKey)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	rows, _ := tx.Query(ctx, `SELECT delivery_key, reminder_id, purpose FROM deliveries WHERE delivery_key = ANY($1)`, keys)
	known := map[string]knownKey{}
	var key, id, purpose string
	_, err := pgx.ForEachRow(rows, []any{&key, &id, &purpose}, func() error {
		known[key] = knownKey{reminderID: id, purpose: reminder.Purpose(purpose)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error reading deliveries: %w", err)
	}
	return known, nil
}

// firstSeen records the ids of the events of known deliveries and returns
// those seen for the first time.
func firstSeen(ctx context.Context, tx pgx.Tx, events []ProviderEvent, known map[string]knownKey) (map[string]bool, error) {
	var seen []ProviderEvent
	for _, e := range events {
		if _, ok := known[e.DeliveryKey]; ok {
			seen = append(seen, e)
		}
	}
	// In id order: two batches sharing ids lock them in one order, never
	// in opposite orders (a deadlock).
	slices.SortFunc(seen, func(a, b ProviderEvent) int { return cmp.Compare(a.ID, b.ID) })
	var ids, reminderIDs []string
	for _, e := range seen {
		ids, reminderIDs = append(ids, e.ID), append(reminderIDs, known[e.DeliveryKey].reminderID)
	}
	fresh := map[string]bool{}
	if len(ids) == 0 {
		return fresh, nil
	}
	rows, _ := tx.Query(ctx, `
INSERT INTO provider_events (event_id, reminder_id)
SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id`, ids, reminderIDs)
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { fresh[id] = true; return nil }); err != nil {
		return nil, fmt.Errorf("error recording provider event ids: %w", err)
	}
	return fresh, nil
}

// lockOutcomeRows reads and locks, in id order (so two batches never
// deadlock), the reminders the events are about.
func lockOutcomeRows(ctx context.Context, tx pgx.Tx, events []ProviderEvent, known map[string]knownKey) (map[string]*outcomeRow, error) {
	ids := make([]string, 0, len(events))
	for _, e := range events {
		ids = append(ids, known[e.DeliveryKey].reminderID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	rows, _ := tx.Query(ctx, `
SELECT id, state, channel, delivery_key, due_at, provider_outcome, provider_outcome_at,
       delivered_at, undeliverable_at, awaiting_outcome_since, tenant, coalesce(email, '')
  FROM reminders WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
	out := map[string]*outcomeRow{}
	for rows.Next() {
		r := &outcomeRow{}
		var state, channel string
		if err := rows.Scan(&r.id, &state, &channel, &r.deliveryKey, &r.dueAt, &r.outcome, &r.outcomeAt,
			&r.deliveredAt, &r.undeliverableAt, &r.awaiting, &r.tenant, &r.email); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading reminders: %w", err)
		}
		r.state, r.channel = reminder.State(state), reminder.Channel(channel)
		out[r.id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading reminders: %w", err)
	}
	return out, nil
}

// outcomeWrites gathers a batch's writes, made in a few statements.
type outcomeWrites struct {
	deferAfter time.Duration
	// The audit trail's rows.
	evReminder, evType []string
	evDetail           []map[string]any
	// Escalations owed, and reminders whose pending deferral is settled.
	escReminder, escReason, escDetail []string
	escDue                            []time.Time
	settle                            []string
	// Suppressions: the addresses that opted out, by their reminder.
	supReminder, supReason, supEvent []string
}

func (w *outcomeWrites) apply(e ProviderEvent, k knownKey, r *outcomeRow) {
	if r == nil {
		return // pruned since its delivery was read: nothing to record it on
	}
	detail := map[string]any{"delivery_key": e.DeliveryKey, "event_id": e.ID, "provider_at": e.At.UTC().Format(time.RFC3339)}
	if e.Reason != "" {
		detail["reason"] = e.Reason
	}
	if e.MessageID != "" {
		detail["provider_message_id"] = e.MessageID
	}
	w.evReminder, w.evType = append(w.evReminder, k.reminderID), append(w.evType, "provider_"+string(e.Outcome))
	w.evDetail = append(w.evDetail, detail)
	if e.Outcome.OptsOut(e.Reason) && k.purpose != reminder.PurposeEscalation && r.email != "" {
		// The subscriber's own address (its reminder or its notice) opted
		// out; an escalation goes to the tracker's contact instead.
		w.supReminder, w.supEvent = append(w.supReminder, r.id), append(w.supEvent, e.ID)
		w.supReason = append(w.supReason, string(e.Outcome))
	}
	if k.purpose != reminder.PurposeReminder || r.deliveryKey != e.DeliveryKey {
		// Another delivery of the reminder (its escalation, its notice, or
		// its own under an earlier due time): on the trail only.
		detail["purpose"] = string(k.purpose)
		return
	}
	r.changed = true
	if r.newer(e.At, e.Outcome) {
		o, at := string(e.Outcome), e.At
		r.outcome, r.outcomeAt = &o, &at
	}
	effect := e.Outcome.Effect(e.Reason, r.reported(), r.state.Stands())
	if effect.Delivered || effect.Undeliverable {
		at := e.At
		if effect.Delivered {
			r.deliveredAt = &at
		} else {
			r.undeliverableAt = &at
		}
	}
	if effect.Settles {
		w.settle = append(w.settle, r.id)
	}
	switch effect.Escalation {
	case reminder.ReasonUndeliverable:
		w.owe(r.id, effect.Escalation, e.At,
			fmt.Sprintf("SendGrid reported %s (%s) at %s", e.Outcome, cmp.Or(e.Reason, "no reason code"), e.At.UTC().Format(time.RFC3339)))
	case reminder.ReasonDeliveryDeferred:
		w.owe(r.id, effect.Escalation, e.At.Add(w.deferAfter),
			fmt.Sprintf("SendGrid deferred it at %s (%s) and had not delivered it %s later",
				e.At.UTC().Format(time.RFC3339), cmp.Or(e.Reason, "no reason code"), w.deferAfter))
	}
	if r.reported().Final() {
		r.awaiting = nil
	}
	if effect.Suppressed && r.state.CanBecome(reminder.Suppressed) {
		// Dropped because the address opted out: not a delivery failure.
		// A reminder still pending is one whose send is not yet recorded
		// (the drop came first): it ends suppressed all the same, and the
		// record, finding it so, is a sent_late note.
		detail["state"] = string(reminder.Suppressed)
		r.state, r.awaiting = reminder.Suppressed, nil
	}
	if r.state.Handed() {
		if to := reminder.StateAfterSend(r.channel, r.deliveredAt != nil, r.undeliverableAt != nil); to != r.state {
			detail["state"] = string(to)
			r.deliveredNow = r.deliveredNow || to == reminder.Delivered
			r.state = to
		}
	}
}

func (w *outcomeWrites) owe(reminderID, reason string, due time.Time, detail string) {
	w.escReminder, w.escReason = append(w.escReminder, reminderID), append(w.escReason, reason)
	w.escDue, w.escDetail = append(w.escDue, due), append(w.escDetail, detail)
}

// write makes the batch's writes and returns how many escalations it
// newly owes.
func (w *outcomeWrites) write(ctx context.Context, tx pgx.Tx, rows map[string]*outcomeRow) (int, error) {
	var (
		ids, states, outcomes             []string
		outcomeAt, delivered, undeliv, aw []*time.Time
	)
	for _, r := range rows {
		if !r.changed {
			continue
		}
		ids, states = append(ids, r.id), append(states, string(r.state))
		outcomes, outcomeAt = append(outcomes, *r.outcome), append(outcomeAt, r.outcomeAt)
		delivered, undeliv, aw = append(delivered, r.deliveredAt), append(undeliv, r.undeliverableAt), append(aw, r.awaiting)
	}
	if len(ids) > 0 {
		_, err := tx.Exec(ctx, `
UPDATE reminders r
   SET state = u.state, provider_outcome = u.outcome, provider_outcome_at = u.outcome_at,
       delivered_at = u.delivered_at, undeliverable_at = u.undeliverable_at,
       awaiting_outcome_since = u.awaiting, updated_at = now()
  FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[])
       AS u(id, state, outcome, outcome_at, delivered_at, undeliverable_at, awaiting)
 WHERE r.id = u.id`, ids, states, outcomes, outcomeAt, delivered, undeliv, aw)
		if err != nil {
			return 0, fmt.Errorf("error recording outcomes: %w", err)
		}
	}
	_, err := tx.Exec(ctx, `
INSERT INTO reminder_events (reminder_id, type, detail)
SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[])`, w.evReminder, w.evType, w.evDetail)
	if err != nil {
		return 0, fmt.Errorf("error recording provider events: %w", err)
	}
	if len(w.settle) > 0 {
		_, err := tx.Exec(ctx, `
UPDATE outcome_escalations SET settled_at = now()
 WHERE (reminder_id, reason) IN (
        -- A row an escalation pass holds is being started: passed over, so a
        -- batch never waits on Temporal; its notice finds the reminder no
        -- longer deferred and sends nothing.
        SELECT reminder_id, reason FROM outcome_escalations
         WHERE reminder_id = ANY($1) AND reason = 'delivery_deferred' AND started_at IS NULL AND settled_at IS NULL
           FOR UPDATE SKIP LOCKED)`, w.settle)
		if err != nil {
			return 0, fmt.Errorf("error settling deferred escalations: %w", err)
		}
	}
	if len(w.supReminder) > 0 {
		// The first report of an opt-out is kept; one after a lift
		// suppresses the address again.
		_, err := tx.Exec(ctx, `
INSERT INTO suppressions AS s (tenant, address_sha256, reason, reminder_id, event_id)
SELECT DISTINCT ON (r.tenant, suppression_address(r.email)) r.tenant, suppression_address(r.email), o.reason, r.id, o.event_id
  FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS o(reminder_id, reason, event_id, n)
  JOIN reminders r ON r.id = o.reminder_id
 ORDER BY r.tenant, suppression_address(r.email), o.n
ON CONFLICT (tenant, address_sha256) DO UPDATE
   SET reason = excluded.reason, reminder_id = excluded.reminder_id, event_id = excluded.event_id,
       suppressed_at = now(), lifted_at = NULL, lifted_by = NULL
 WHERE s.lifted_at IS NOT NULL`, w.supReminder, w.supReason, w.supEvent)
		if err != nil {
			return 0, fmt.Errorf("error recording suppressions: %w", err)
		}
	}
	if len(w.escReminder) == 0 {
		return 0, nil
	}
	// A deferral owed after the same batch settled it is not owed.
	tag, err := tx.Exec(ctx, `
INSERT INTO outcome_escalations (reminder_id, reason, due_at, detail)
SELECT e.* FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[]) AS e(reminder_id, reason, due_at, detail)
 WHERE e.reason <> 'delivery_deferred' OR e.reminder_id <> ALL (coalesce($5::text[], '{}'))
ON CONFLICT (reminder_id, reason) DO NOTHING`, w.escReminder, w.escReason, w.escDue, w.escDetail, w.settle)
	if err != nil {
		return 0, fmt.Errorf("error recording escalations owed: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// OwedEscalation is an escalation a provider's outcome gave, due now.
type OwedEscalation struct {
	ReminderID   string
	ShipmentID   string
	UpdateID     string
	SubscriberID string
	Reason       string
	Detail       string
	DueAt        time.Time
}

// StartDueEscalations takes up to limit escalations that are due, calls
// start for each and marks those it started, in one transaction that
// holds them (others pass them over), so two servers never start one
// twice at once; start must be idempotent all the same (a crash after it
// and before the commit starts it again). An escalation of a reminder
// cancelled, failed, expired or suppressed meanwhile is settled instead. It returns
// how many it started and the error that stopped it: after a failed start
// the rest stay owed for the next pass.
func (s *Store) StartDueEscalations(ctx context.Context, limit int, start func(context.Context, OwedEscalation) error) (int, error) {
	var started int
	var startErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		started, startErr = 0, nil
		rows, _ := tx.Query(ctx, `
SELECT e.reminder_id, r.shipment_id, r.update_id, r.subscriber_id, e.reason, e.detail, e.due_at, r.state
  FROM outcome_escalations e JOIN reminders r ON r.id = e.reminder_id
 WHERE e.due_at <= now() AND e.started_at IS NULL AND e.settled_at IS NULL
 ORDER BY e.due_at
 LIMIT $1
   FOR UPDATE OF e SKIP LOCKED`, limit)
		var owed, moot []OwedEscalation
		var o OwedEscalation
		var state string
		_, err := pgx.ForEachRow(rows, []any{&o.ReminderID, &o.ShipmentID, &o.UpdateID, &o.SubscriberID, &o.Reason, &o.Detail, &o.DueAt, &state}, func() error {
			if reminder.State(state).Stands() {
				owed = append(owed, o)
			} else {
				moot = append(moot, o)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("error reading escalations owed: %w", err)
		}
		var done []OwedEscalation
		for _, o := range owed {
			if err := start(ctx, o); err != nil {
				// Temporal is likely away for the rest too: leave them owed.
				// This one waits a minute, so a row that alone keeps failing
				// does not stand before the others.
				startErr = err
				if err := setEscalations(ctx, tx, escPutOff, []OwedEscalation{o}); err != nil {
					return err
				}
				break
			}
			done = append(done, o)
		}
		if err := setEscalations(ctx, tx, escSettled, moot); err != nil {
			return err
		}
		if err := setEscalations(ctx, tx, escStarted, done); err != nil {
			return err
		}
		started = len(done)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return started, startErr
}

// What a pass does to an escalation row: put it off a minute (its start
// failed), settle it (its reminder was finished another way), mark it
// started.
const (
	escPutOff  = `due_at = now() + interval '1 minute'`
	escSettled = `settled_at = now()`
	escStarted = `started_at = now()`
)

// setEscalations applies set to the rows of es.
func setEscalations(ctx context.Context, tx pgx.Tx, set string, es []OwedEscalation) error {
	if len(es) == 0 {
		return nil
	}
	ids, reasons := make([]string, len(es)), make([]string, len(es))
	for i, e := range es {
		ids[i], reasons[i] = e.ReminderID, e.Reason
	}
	_, err := tx.Exec(ctx, `
UPDATE outcome_escalations e SET `+set+`
  FROM unnest($1::text[], $2::text[]) AS d(reminder_id, reason)
 WHERE e.reminder_id = d.reminder_id AND e.reason = d.reason`, ids, reasons)
	if err != nil {
		return fmt.Errorf("error updating escalations owed (%s): %w", set, err)
	}
	return nil
}

// NextEscalationDue is when the next owed escalation falls due (ok false
// when none is owed).
func (s *Store) NextEscalationDue(ctx context.Context) (next time.Time, ok bool, err error) {
	var at *time.Time
	err = s.pool.QueryRow(ctx, `
SELECT min(due_at) FROM outcome_escalations WHERE started_at IS NULL AND settled_at IS NULL`).Scan(&at)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("error reading escalations owed: %w", err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return *at, true, nil
}
