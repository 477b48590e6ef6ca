package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// ClaimOutcome is what claiming a delivery key found.
type ClaimOutcome int

const (
	// Claimed: the caller holds the key and must send.
	Claimed ClaimOutcome = iota + 1
	// AlreadySent: an earlier execution sent and recorded it; do nothing.
	AlreadySent
	// HeldElsewhere: another live execution holds the key; try again later.
	HeldElsewhere
	// AlreadyFailed: an earlier execution recorded a permanent failure.
	AlreadyFailed
	// Refused: the reminder is finished in the mirror (cancelled, expired,
	// failed, or sent under another key); its own delivery must not go out.
	// Nothing was claimed.
	Refused
)

// Claim asks for the right to make one delivery.
type Claim struct {
	Key        string
	ReminderID string
	Purpose    reminder.Purpose
	// Owner identifies the attempt; only it may release the claim early.
	Owner string
	// LeaseFor is how long the claim holds if its owner dies without a word:
	// the rest of the attempt and the time its record may take after. The
	// lease is counted on the database's clock, not the worker's.
	LeaseFor time.Duration
}

// Target is what a claimed delivery needs to be sent.
type Target struct {
	Reminder        reminder.Reminder
	State           reminder.State
	Kind            string
	WindowStart     time.Time
	Message         reminder.Message
	EscalationEmail string
	// EndpointDisabled: the webhook answered 410 Gone before; send nothing.
	EndpointDisabled bool
}

// ClaimResult is the outcome of a claim, with what to send when Claimed.
type ClaimResult struct {
	Outcome           ClaimOutcome
	Attempts          int
	ProviderMessageID string
	Target            Target
}

// The claim and the read of what to send share one round trip. A reminder's
// own delivery is refused when its row is finished (cancelled, expired,
// failed, or sent under another key). Otherwise a new key is inserted; an
// existing 'sending' key is taken over once its lease has lapsed (its holder
// died, or released it knowing nothing was sent); a 'sent' or 'failed' key is
// left alone (attempts comes back NULL and the caller looks at why).
const claimDelivery = `
WITH refused AS (
    SELECT 1 FROM reminders
     WHERE id = $2 AND $3 = 'reminder'
       AND (state IN ('cancelled', 'expired', 'failed') OR (state IN ('sent', 'delivered', 'undeliverable') AND delivery_key <> $1))
), claim AS (
    INSERT INTO deliveries (delivery_key, reminder_id, purpose, status, claimed_by, lease_until)
    SELECT $1, $2, $3, 'sending', $4, now() + make_interval(secs => $5)
     WHERE NOT EXISTS (SELECT 1 FROM refused)
    ON CONFLICT (delivery_key) DO UPDATE
       SET attempts = deliveries.attempts + 1,
           claimed_by = excluded.claimed_by,
           lease_until = excluded.lease_until
     WHERE deliveries.status = 'sending' AND deliveries.lease_until < now()
    RETURNING attempts
)
SELECT r.shipment_id, r.update_id, r.subscriber_id, r.channel,
       coalesce(r.email, ''), coalesce(r.webhook_url, ''), coalesce(r.webhook_secret, ''),
       r.due_at, r.state, u.kind, u.window_start, u.subject, u.body,
       coalesce(u.escalation_email, ''),
       EXISTS (SELECT 1 FROM disabled_endpoints d
                WHERE d.url_sha256 = encode(sha256(convert_to(r.webhook_url, 'UTF8')), 'hex')),
       (SELECT attempts FROM claim),
       EXISTS (SELECT 1 FROM refused)
  FROM reminders r
  JOIN updates u USING (shipment_id, update_id)
 WHERE r.id = $2`

// ClaimDelivery claims a delivery key before the provider is called, so that
// a second execution for the same key finds it and sends nothing.
func (s *Store) ClaimDelivery(ctx context.Context, c Claim) (ClaimResult, error) {
	var (
		res         ClaimResult
		t           = &res.Target
		r           = &t.Reminder
		channel     string
		state       string
		windowStart *time.Time
		attempts    *int
		refused     bool
	)
	r.ID = c.ReminderID
	err := s.pool.QueryRow(ctx, claimDelivery, c.Key, c.ReminderID, string(c.Purpose), c.Owner, c.LeaseFor.Seconds()).Scan(
		&r.ShipmentID, &r.UpdateID, &r.SubscriberID, &channel,
		&r.Email, &r.WebhookURL, &r.WebhookSecret,
		&r.DueAt, &state, &t.Kind, &windowStart, &t.Message.Subject, &t.Message.Text,
		&t.EscalationEmail, &t.EndpointDisabled, &attempts, &refused)
	if errors.Is(err, pgx.ErrNoRows) || isForeignKeyViolation(err) {
		return ClaimResult{}, fmt.Errorf("error claiming delivery: %w: %s", ErrNotFound, c.ReminderID)
	}
	if err != nil {
		return ClaimResult{}, fmt.Errorf("error claiming delivery: %w", err)
	}
	r.Channel, t.State = reminder.Channel(channel), reminder.State(state)
	if r.WebhookSecret, err = s.openSecret(r.WebhookSecret, r.ID); err != nil {
		return ClaimResult{}, err
	}
	if windowStart != nil {
		t.WindowStart = *windowStart
	}
	if refused {
		res.Outcome = Refused
		return res, nil
	}
	if attempts != nil {
		res.Outcome, res.Attempts = Claimed, *attempts
		return res, nil
	}
	// Not claimed: find out why.
	var status string
	var providerID *string
	err = s.pool.QueryRow(ctx, `
SELECT status, provider_message_id, attempts FROM deliveries WHERE delivery_key = $1`, c.Key).
		Scan(&status, &providerID, &res.Attempts)
	if err != nil {
		return ClaimResult{}, fmt.Errorf("error reading delivery claim: %w", err)
	}
	if providerID != nil {
		res.ProviderMessageID = *providerID
	}
	switch status {
	case "sent":
		res.Outcome = AlreadySent
	case "failed":
		res.Outcome = AlreadyFailed
	default:
		res.Outcome = HeldElsewhere
	}
	return res, nil
}

// ReleaseDelivery gives up a claim whose owner knows nothing was sent (the
// provider refused for now, or the attempt was cancelled before the call),
// so the next attempt takes it over at once instead of waiting out the lease.
func (s *Store) ReleaseDelivery(ctx context.Context, key, owner string) error {
	_, err := s.pool.Exec(ctx, `
UPDATE deliveries SET lease_until = now()
 WHERE delivery_key = $1 AND status = 'sending' AND claimed_by = $2`, key, owner)
	if err != nil {
		return fmt.Errorf("error releasing delivery claim: %w", err)
	}
	return nil
}

// Marking a delivery sent, moving its reminder to 'sent' (for a reminder's own
// delivery) and appending the event are one statement, so the mirror never
// shows a sent delivery without its event. It returns the reminder when the
// record made it delivered: a webhook (its 2xx), or an email SendGrid
// reported delivered before the send was recorded.
const recordSent = `
WITH d AS (
    UPDATE deliveries
       SET status = 'sent', provider_message_id = nullif($2, ''), finished_at = now()
     WHERE delivery_key = $1 AND status = 'sending'
    RETURNING reminder_id, purpose, attempts
), r AS (
    UPDATE reminders
       SET state = reminder_state_after_send(channel, delivered_at, undeliverable_at),
           sent_at = now(),
           delivered_at = CASE WHEN channel = 'webhook' THEN coalesce(delivered_at, now()) ELSE delivered_at END,
           awaiting_outcome_since = CASE WHEN channel = 'email' AND delivered_at IS NULL AND undeliverable_at IS NULL
                                         THEN now() END,
           updated_at = now()
     WHERE id IN (SELECT reminder_id FROM d WHERE purpose = 'reminder')
       AND state IN ('scheduled', 'awaiting_approval')
    RETURNING id, state, channel, due_at, delivered_at
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT reminder_id,
           CASE purpose WHEN 'reminder' THEN 'sent' ELSE purpose || '_sent' END,
           jsonb_build_object('delivery_key', $1::text, 'provider_message_id', nullif($2, ''), 'attempts', attempts) || $3
      FROM d
    UNION ALL
    -- A webhook's 2xx is its delivery; an email may have been reported
    -- delivered (or bounced) before its send was recorded.
    SELECT id, state, jsonb_build_object('delivery_key', $1::text, 'by',
           CASE channel WHEN 'webhook' THEN 'the receiver answered 2xx' ELSE 'the provider reported it before the send was recorded' END)
      FROM r WHERE state <> 'sent'
)
SELECT id, channel, due_at, delivered_at FROM r WHERE state = 'delivered'`

// RecordSent records that the provider accepted the delivery; detail is
// added to its event. It returns the reminder if the record made it
// delivered (nil otherwise), for the delivery SLO.
func (s *Store) RecordSent(ctx context.Context, key, providerMessageID string, detail map[string]any) (*DeliveredReminder, error) {
	var d DeliveredReminder
	var channel string
	err := s.pool.QueryRow(ctx, recordSent, key, providerMessageID, jsonDetail(detail)).
		Scan(&d.ReminderID, &channel, &d.DueAt, &d.DeliveredAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("error recording delivery sent: %w", err)
	}
	d.Channel = reminder.Channel(channel)
	return &d, nil
}

// WasDelivered reports whether the reminder's own notification reached its
// provider at any due time, and the provider did not bounce or drop it:
// only then is there anything to compensate (a notice to an address that
// bounced would bounce too).
func (s *Store) WasDelivered(ctx context.Context, reminderID string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM deliveries
                WHERE reminder_id = $1 AND purpose = 'reminder' AND status = 'sent')
   AND NOT EXISTS (SELECT 1 FROM reminders WHERE id = $1 AND state = 'undeliverable')`, reminderID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("error reading deliveries: %w", err)
	}
	return ok, nil
}

// EscalationContact returns the escalation address of a reminder's update
// ("" when it names none) and the reminder's state.
func (s *Store) EscalationContact(ctx context.Context, reminderID string) (string, reminder.State, error) {
	var contact, state string
	err := s.pool.QueryRow(ctx, `
SELECT coalesce(u.escalation_email, ''), r.state
  FROM reminders r JOIN updates u USING (shipment_id, update_id)
 WHERE r.id = $1`, reminderID).Scan(&contact, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("error reading escalation contact: %w: %s", ErrNotFound, reminderID)
	}
	if err != nil {
		return "", "", fmt.Errorf("error reading escalation contact: %w", err)
	}
	return contact, reminder.State(state), nil
}

// DisableEndpoint stops all deliveries to a webhook URL that answered 410
// Gone, and notes it on the reminder's trail.
func (s *Store) DisableEndpoint(ctx context.Context, reminderID, url, reason string) error {
	_, err := s.pool.Exec(ctx, `
WITH d AS (
    INSERT INTO disabled_endpoints (url_sha256, reminder_id, reason)
    VALUES (encode(sha256(convert_to($2, 'UTF8')), 'hex'), $1, $3)
    ON CONFLICT DO NOTHING
    RETURNING reminder_id
)
INSERT INTO reminder_events (reminder_id, type, detail)
SELECT reminder_id, 'endpoint_disabled', jsonb_build_object('reason', $3::text) FROM d`, reminderID, url, reason)
	if err != nil {
		return fmt.Errorf("error disabling webhook endpoint: %w", err)
	}
	return nil
}

// RecordDeliveryFailed records a permanent failure of the delivery: the
// provider refused it for good. The reminder's own state is the workflow's to
// change.
func (s *Store) RecordDeliveryFailed(ctx context.Context, key, reason string) error {
	_, err := s.pool.Exec(ctx, `
WITH d AS (
    UPDATE deliveries SET status = 'failed', finished_at = now()
     WHERE delivery_key = $1 AND status = 'sending'
    RETURNING reminder_id, purpose, attempts
)
INSERT INTO reminder_events (reminder_id, type, detail)
SELECT reminder_id, 'delivery_failed',
       jsonb_build_object('delivery_key', $1::text, 'purpose', purpose, 'reason', $2::text, 'attempts', attempts)
  FROM d`, key, reason)
	if err != nil {
		return fmt.Errorf("error recording delivery failure: %w", err)
	}
	return nil
}
