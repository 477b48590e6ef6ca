package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// ClaimVerdict is what claiming a delivery key found.
type ClaimVerdict int

const (
	// Claimed: the caller holds the key and must send.
	Claimed ClaimVerdict = iota + 1
	// AlreadySent: an earlier execution sent and recorded it; do nothing.
	AlreadySent
	// HeldElsewhere: another live execution holds the key; try again later.
	HeldElsewhere
	// AlreadyFailed: an earlier execution recorded a permanent failure.
	AlreadyFailed
	// Refused: the reminder is finished in the mirror (cancelled, expired,
	// failed, suppressed, or sent under another key), or its address is
	// suppressed, which finished it as suppressed (Target.State says how
	// it ended); its own delivery must not go out. Nothing was claimed.
	Refused
	// Moved: the reminder is pending in the mirror under another key (a
	// window move reached the row and not the workflow, whose key names
	// its old due time). Nothing was claimed; the delivery goes, if at
	// all, at Target.Reminder.DueAt under Target.DeliveryKey, the row's.
	Moved
	// Unconfirmed: an earlier attempt may have sent the key (its call got
	// no answer after the request left, or its claim lapsed with no
	// record), and no provider event has settled it yet. Send nothing;
	// ask again by Until, when the wait for evidence ends.
	Unconfirmed
	// Settled: an earlier attempt's unknown outcome is settled by the
	// provider's own event for the key: it was a send. Record it sent
	// (under ProviderMessageID, the event's, when it carried one); send
	// nothing again.
	Settled
	// NoticeSuppressed: a cancellation notice's address opted out of the
	// tenant's mail since the reminder reached it. Nothing was claimed;
	// send nothing.
	NoticeSuppressed
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
	// EvidenceWait is how long a maybe-sent email waits for the provider's
	// events before it is sent again under the same key; 0 sends it again
	// at once. A webhook never waits: its receiver's answer is the only
	// evidence, and it deduplicates on the key (webhook-id).
	EvidenceWait time.Duration
}

// args names the claim's parameters for its statements (claimDelivery,
// notClaimed and the fragments they share); a statement that does not
// use a name ignores it.
func (c Claim) args() pgx.NamedArgs {
	return pgx.NamedArgs{
		"key":                c.Key,
		"reminder_id":        c.ReminderID,
		"purpose":            string(c.Purpose),
		"owner":              c.Owner,
		"lease_secs":         c.LeaseFor.Seconds(),
		"evidence_wait_secs": c.EvidenceWait.Seconds(),
	}
}

// Target is what a claimed delivery needs to be sent.
type Target struct {
	Reminder reminder.Reminder
	State    reminder.State
	// DeliveryKey is the key the row holds for the reminder's own
	// delivery: the claim's key, or, when Moved, the one it moved to.
	DeliveryKey     string
	Kind            string
	WindowStart     time.Time
	Message         reminder.Message
	EscalationEmail string
	// EndpointDisabled: the webhook answered 410 Gone before; send nothing.
	EndpointDisabled bool
}

// ClaimResult is a claim's verdict, with what to send when Claimed.
type ClaimResult struct {
	Verdict           ClaimVerdict
	Attempts          int
	ProviderMessageID string
	Target            Target
	// MaybeSentBefore, when Claimed, is when an earlier attempt may have
	// sent the key (zero if none may have): this send may be its second.
	MaybeSentBefore time.Time
	// Until, when Unconfirmed, is when the wait for evidence ends; when
	// HeldElsewhere, when the holder's lease lapses.
	Until time.Time
	// HeldByDigest, when HeldElsewhere: the holder is a digest's leader,
	// sending this key with its own (an attempt at most away).
	HeldByDigest bool
}

// The claim and the read of what to send share one round trip. A reminder's
// own delivery is refused when its row is finished (cancelled, expired,
// failed, suppressed), or holds another key (sent under it, or moved to it
// while pending: a window move that reached the mirror and not the
// workflow, whose key names its old due time; ClaimDelivery says Moved,
// with the row's due time and key), or when it is pending and
// its email address is suppressed for its tenant (ClaimDelivery then moves
// it to suppressed); its cancellation notice, not yet begun, is not claimed
// when the address is suppressed now. Otherwise a new key is inserted; an
// existing key is taken over when its last holder released it knowing
// nothing was sent, or when it may have been sent (maybe_sent, or a
// 'sending' claim whose lease lapsed) and the wait for the provider's
// evidence (@evidence_wait_secs, for email) has passed with no event for
// the key, counted from the latest moment it may have gone out (sentUntil): a
// lapsed claim's holder may have sent it until its lease lapsed, however
// long an earlier attempt's wait has been over.
// A 'sent' or 'failed' key is left alone; attempts comes back NULL and the
// caller looks at why. A lapsed claim taken over at once (a webhook, or no
// evidence wait) is said so: ClaimDelivery leaves send_unconfirmed on the
// trail before anything is sent, so the audit says why the key may arrive
// twice.
var claimDelivery = `
WITH prior AS (
    SELECT status FROM deliveries WHERE delivery_key = @key
), suppressed AS (
    SELECT 1 FROM reminders r JOIN suppressions s ON s.tenant = r.tenant AND s.address_sha256 = suppression_address(r.email)
     WHERE r.id = @reminder_id AND r.channel = 'email' AND s.lifted_at IS NULL
       AND ((@purpose = 'reminder' AND r.state IN ` + sqlPending + `)
            -- A notice not begun: one an attempt may have sent is settled as any key is.
            OR (@purpose = 'cancellation' AND NOT EXISTS (SELECT 1 FROM prior WHERE status <> 'released')))
), refused AS (
    SELECT 1 FROM reminders
     WHERE id = @reminder_id AND @purpose = 'reminder'
       AND (state IN ` + sqlUnsentFinal + ` OR delivery_key <> @key OR EXISTS (SELECT 1 FROM suppressed))
), claim AS (
    INSERT INTO deliveries (delivery_key, reminder_id, purpose, status, claimed_by, lease_until)
    SELECT @key, @reminder_id, @purpose, 'sending', @owner, now() + make_interval(secs => @lease_secs)
     WHERE NOT EXISTS (SELECT 1 FROM refused) AND NOT EXISTS (SELECT 1 FROM suppressed)
    ON CONFLICT (delivery_key) DO UPDATE
       SET attempts = deliveries.attempts + 1,
           status = 'sending',
           claimed_by = excluded.claimed_by,
           lease_until = excluded.lease_until,
           -- A lapsed claim's holder may have sent, until its lease lapsed:
           -- the row keeps saying so, from then.
           maybe_sent_at = CASE WHEN deliveries.status = 'sending'
                                THEN ` + sentUntil("deliveries") + `
                                ELSE deliveries.maybe_sent_at END,
           maybe_sent_reason = CASE WHEN deliveries.status = 'sending'
                                    THEN '` + reasonLapsed + `'
                                    ELSE deliveries.maybe_sent_reason END
     WHERE deliveries.status = 'released'
        OR (deliveries.status IN ('sending', 'maybe_sent') AND deliveries.lease_until < now()
            AND ` + sentUntil("deliveries") + ` + ` + evidenceWait("@evidence_wait_secs") + ` <= now()
            AND NOT ` + evidenceExists + `)
    RETURNING attempts, maybe_sent_at
)
SELECT r.shipment_id, r.update_id, r.subscriber_id, r.channel,
       coalesce(r.email, ''), coalesce(r.webhook_url, ''), coalesce(r.webhook_secret, ''), coalesce(r.address, ''),
       r.due_at, r.state, r.delivery_key, u.kind, u.window_start, u.subject, u.body,
       coalesce(u.escalation_email, ''), coalesce(u.template_id, ''), u.template_data,
       coalesce(r.subscriber_name, ''), coalesce(r.time_zone, ''), coalesce(r.locale, ''),
       EXISTS (SELECT 1 FROM disabled_endpoints d
                WHERE d.url_sha256 = encode(sha256(convert_to(r.webhook_url, 'UTF8')), 'hex')),
       (SELECT attempts FROM claim),
       (SELECT maybe_sent_at FROM claim),
       EXISTS (SELECT 1 FROM refused),
       EXISTS (SELECT 1 FROM suppressed),
       coalesce((SELECT status FROM prior) = 'sending' AND EXISTS (SELECT 1 FROM claim), false)
  FROM reminders r
  JOIN updates u USING (tenant, shipment_id, update_id)
 WHERE r.id = @reminder_id`

// noteLapsedTakeover puts on the trail that the attempt before this claim
// died holding it and may have sent the key, as markLapsed does for a claim
// that waits for evidence. If it fails, the claim is this owner's and the
// retry (another owner) finds it held until its lease lapses: nothing is
// sent unsaid.
func (s *Store) noteLapsedTakeover(ctx context.Context, c Claim, attempts int) error {
	_, err := s.pool.Exec(ctx, `
INSERT INTO reminder_events (reminder_id, type, detail)
VALUES (@reminder_id, 'send_unconfirmed',
        jsonb_build_object('delivery_key', @key::text, 'purpose', @purpose::text, 'reason', @reason::text, 'attempts', @attempts::int))`,
		pgx.NamedArgs{"reminder_id": c.ReminderID, "key": c.Key, "purpose": string(c.Purpose), "reason": reasonLapsed, "attempts": attempts})
	if err != nil {
		return fmt.Errorf("error recording an unconfirmed send: %w", err)
	}
	return nil
}

// evidenceWait is the wait for evidence a key's channel takes: an email's
// (escalations go by email), none for a webhook. @reminder_id is the
// reminder, @purpose the purpose, and param the evidence wait in seconds.
func evidenceWait(param string) string {
	return `(SELECT CASE WHEN @purpose = 'escalation' OR channel = 'email' THEN make_interval(secs => ` + param + `)
                ELSE interval '0' END FROM reminders WHERE id = @reminder_id)`
}

// sentUntil is the latest moment the key of the claim d may have gone out:
// a 'sending' claim's holder may call the provider until its lease lapses
// (a resend after an unconfirmed send, say, whose worker died mid-call),
// so its wait for evidence is counted from then, not from the earlier
// attempt's maybe_sent_at; a maybe_sent key went out, if at all, by when
// it was marked.
func sentUntil(d string) string {
	return `(CASE WHEN ` + d + `.status = 'sending' THEN greatest(` + d + `.lease_until, ` + d + `.maybe_sent_at)
             ELSE coalesce(` + d + `.maybe_sent_at, ` + d + `.lease_until) END)`
}

// SQL fragments of the claim and its follow-up read (@key the key,
// @reminder_id the reminder).
const (
	// evidenceExists: the provider reported on the key (processed,
	// delivered, deferred, bounce, dropped...), so it has the message.
	evidenceExists = `EXISTS (SELECT 1 FROM reminder_events e
                WHERE e.reminder_id = @reminder_id AND starts_with(e.type, 'provider_') AND e.detail->>'delivery_key' = @key)`
	reasonLapsed = "its claim lapsed with no record: the attempt may have sent it"
	// bounced: the provider reported the reminder's own delivery bounced
	// or dropped (undeliverable, or undeliverable_at on a row whose send
	// was not yet recorded): it reached no one. Reads reminders' columns.
	bounced = `(state = 'undeliverable' OR undeliverable_at IS NOT NULL)`
)

// ClaimDelivery claims a delivery key before the provider is called, so that
// a second execution for the same key finds it and sends nothing. A key an
// earlier attempt may have sent is settled first: by the provider's event
// for it (recorded sent, nothing sent again), or, once the evidence wait
// passes without one, claimed to be sent again under the same key.
func (s *Store) ClaimDelivery(ctx context.Context, c Claim) (ClaimResult, error) {
	row, err := scanClaim(s.pool.QueryRow(ctx, claimDelivery, c.args()), c)
	if err != nil {
		return ClaimResult{}, err
	}
	return s.settleClaim(ctx, c, row)
}

// claimRow is what the claim statement read: the result so far, and what
// settleClaim makes of it.
type claimRow struct {
	res                             ClaimResult
	attempts                        *int
	maybeSent                       *time.Time
	refused, suppressed, tookLapsed bool
}

// scanClaim reads the claim statement's row (on the pool, or on the
// transaction of a digest's claim).
func scanClaim(row pgx.Row, c Claim) (claimRow, error) {
	var (
		cr          claimRow
		t           = &cr.res.Target
		r           = &t.Reminder
		channel     string
		state       string
		windowStart *time.Time
	)
	r.ID = c.ReminderID
	err := row.Scan(
		&r.ShipmentID, &r.UpdateID, &r.SubscriberID, &channel,
		&r.Email, &r.WebhookURL, &r.WebhookSecret, &r.Address,
		&r.DueAt, &state, &t.DeliveryKey, &t.Kind, &windowStart, &t.Message.Subject, &t.Message.Text,
		&t.EscalationEmail, &t.Message.TemplateID, &t.Message.TemplateData,
		&r.Name, &r.TimeZone, &r.Locale, &t.EndpointDisabled, &cr.attempts, &cr.maybeSent, &cr.refused, &cr.suppressed, &cr.tookLapsed)
	if errors.Is(err, pgx.ErrNoRows) || isForeignKeyViolation(err) {
		return claimRow{}, fmt.Errorf("error claiming delivery: %w: %s", ErrNotFound, c.ReminderID)
	}
	if err != nil {
		return claimRow{}, fmt.Errorf("error claiming delivery: %w", err)
	}
	r.Channel, t.State = reminder.Channel(channel), reminder.State(state)
	if windowStart != nil {
		t.WindowStart = *windowStart
	}
	return cr, nil
}

// settleClaim makes the claim's verdict of what its statement read.
func (s *Store) settleClaim(ctx context.Context, c Claim, cr claimRow) (ClaimResult, error) {
	res := cr.res
	t := &res.Target
	var err error
	if t.Reminder.WebhookSecret, err = s.openSecret(t.Reminder.WebhookSecret, c.ReminderID); err != nil {
		return ClaimResult{}, err
	}
	if cr.suppressed && c.Purpose == reminder.PurposeCancellation {
		res.Verdict = NoticeSuppressed
		return res, nil
	}
	if cr.suppressed {
		if t.State, err = s.suppress(ctx, c.ReminderID); err != nil {
			return ClaimResult{}, err
		}
	}
	if cr.refused {
		res.Verdict = Refused
		if t.State.Pending() && c.Purpose == reminder.PurposeReminder && t.DeliveryKey != c.Key {
			res.Verdict = Moved
		}
		return res, nil
	}
	if cr.attempts != nil {
		res.Verdict, res.Attempts = Claimed, *cr.attempts
		if cr.maybeSent != nil {
			res.MaybeSentBefore = *cr.maybeSent
		}
		if cr.tookLapsed {
			// Its own statement, so a claim never waits on the audit
			// trail unless it has something to say there.
			if err := s.noteLapsedTakeover(ctx, c, *cr.attempts-1); err != nil {
				return ClaimResult{}, err
			}
		}
		return res, nil
	}
	return s.whyNotClaimed(ctx, c, res)
}

// notClaimed reads a key the claim did not take: its status, whether its
// lease lapsed, how long its wait for evidence has left, and the provider's
// message id from the first event for it, if one came.
var notClaimed = `
SELECT d.status, coalesce(d.provider_message_id, ''), d.attempts, d.lease_until < now(), d.digest_of IS NOT NULL,
       greatest(extract(epoch FROM d.lease_until - now()), 0)::float8,
       greatest(extract(epoch FROM ` + sentUntil("d") + ` + ` + evidenceWait("@evidence_wait_secs") + ` - now()), 0)::float8,
       ` + evidenceExists + `,
       coalesce((SELECT e.detail->>'provider_message_id' FROM reminder_events e
                  WHERE e.reminder_id = @reminder_id AND starts_with(e.type, 'provider_') AND e.detail->>'delivery_key' = @key
                    AND e.detail ? 'provider_message_id'
                  ORDER BY e.id LIMIT 1), '')
  FROM deliveries d WHERE d.delivery_key = @key`

func (s *Store) whyNotClaimed(ctx context.Context, c Claim, res ClaimResult) (ClaimResult, error) {
	var (
		status, providerID, evidenceID string
		lapsed, digest, evidence       bool
		lease, left                    float64
	)
	err := s.pool.QueryRow(ctx, notClaimed, c.args()).
		Scan(&status, &providerID, &res.Attempts, &lapsed, &digest, &lease, &left, &evidence, &evidenceID)
	if err != nil {
		return ClaimResult{}, fmt.Errorf("error reading delivery claim: %w", err)
	}
	res.ProviderMessageID = providerID
	unconfirmed := status == "maybe_sent" || status == "sending" && lapsed
	switch {
	case status == "sent":
		res.Verdict = AlreadySent
	case status == "failed":
		res.Verdict = AlreadyFailed
	case unconfirmed && evidence:
		res.Verdict, res.ProviderMessageID = Settled, evidenceID
	case unconfirmed:
		if status == "sending" {
			if err := s.markLapsed(ctx, c.Key); err != nil {
				return ClaimResult{}, err
			}
		}
		res.Verdict = Unconfirmed
		res.Until = time.Now().Add(seconds(left))
	default:
		// Held by a live attempt (until its lease lapses), or released
		// and taken by another attempt a moment ago.
		res.Verdict = HeldElsewhere
		res.Until = time.Now().Add(seconds(lease))
		res.HeldByDigest = digest
	}
	return res, nil
}

// ownersClaims are the claims an attempt holds (key and owner name the
// statement's parameters for its key and its owner): its key's, and, when
// it leads a digest, its members' (an attempt's owner is its own, so the
// claims digest_of marks under it are its digest's). Every write that
// settles an attempt's claim settles them all.
func ownersClaims(key, owner string) string {
	return `(delivery_key = ` + key + ` OR digest_of IS NOT NULL) AND claimed_by = ` + owner
}

// DeliveryStatus is the status of a key's delivery ("" when none).
func (s *Store) DeliveryStatus(ctx context.Context, key string) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, `SELECT status FROM deliveries WHERE delivery_key = $1`, key).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("error reading a delivery: %w", err)
	}
	return status, nil
}

// ReleaseDelivery gives up a claim whose owner knows nothing was sent (the
// provider answered with a refusal for now, the connection was never made,
// or the attempt was cancelled before the call), so the next attempt takes
// it over at once instead of waiting out the lease.
func (s *Store) ReleaseDelivery(ctx context.Context, key, owner string) error {
	_, err := s.pool.Exec(ctx, `
WITH released AS (
    UPDATE deliveries SET status = 'released', lease_until = now()
     WHERE `+ownersClaims("$1", "$2")+` AND status = 'sending'
    RETURNING reminder_id, digest_key
)
-- A digest that never went out no longer holds its members.
UPDATE reminders r SET digest_key = NULL
  FROM released d WHERE r.id = d.reminder_id AND r.digest_key = d.digest_key`, key, owner)
	if err != nil {
		return fmt.Errorf("error releasing delivery claim: %w", err)
	}
	return nil
}

// markMaybeSent marks the 'sending' claims where matches as maybe sent:
// since and reason are SQL expressions over the row ($2 is the reason
// given), and a 'send_unconfirmed' event is appended for each.
func (s *Store) markMaybeSent(ctx context.Context, where, since, reason string, args ...any) error {
	_, err := s.pool.Exec(ctx, `
WITH d AS (
    UPDATE deliveries
       SET status = 'maybe_sent', maybe_sent_at = `+since+`,
           maybe_sent_reason = `+reason+`, lease_until = least(lease_until, now())
     WHERE status = 'sending' AND `+where+`
    RETURNING delivery_key, reminder_id, purpose, attempts, maybe_sent_reason
)
INSERT INTO reminder_events (reminder_id, type, detail)
SELECT reminder_id, 'send_unconfirmed',
       jsonb_build_object('delivery_key', delivery_key, 'purpose', purpose, 'reason', maybe_sent_reason, 'attempts', attempts)
  FROM d`, args...)
	if err != nil {
		return fmt.Errorf("error recording an unconfirmed send: %w", err)
	}
	return nil
}

// MarkMaybeSent records that the owner's call got no answer after its
// request may have reached the provider: the key stays claimed (it is never
// released as "nothing was sent") until the provider's evidence settles it
// or the evidence wait passes, counted from now. The trail says so.
func (s *Store) MarkMaybeSent(ctx context.Context, key, owner, reason string) error {
	return s.markMaybeSent(ctx, ownersClaims("$1", "$3"), `now()`, `$2`, key, reason, owner)
}

// AbandonClaims records the claims of a reminder's own delivery that their
// attempts left without a word (no record, no release) as maybe sent, once
// no attempt of it can still run (its workflow ended or was cancelled). A
// reminder cancelled after such a send is compensated, and prune is not
// held back by a claim nothing will ever finish.
func (s *Store) AbandonClaims(ctx context.Context, reminderID string) error {
	return s.markMaybeSent(ctx, `reminder_id = $1 AND purpose = 'reminder'`, `greatest(maybe_sent_at, least(lease_until, now()))`,
		`$2`, reminderID, "its attempt ended without a record or a release")
}

// markLapsed records a claim whose lease lapsed with no word from its holder
// as maybe sent, from when the lease lapsed: its holder may have sent until
// then, after any earlier attempt's unconfirmed send.
func (s *Store) markLapsed(ctx context.Context, key string) error {
	return s.markMaybeSent(ctx, `delivery_key = $1 AND lease_until < now()`, `greatest(maybe_sent_at, lease_until)`,
		`$2`, key, reasonLapsed)
}

// Marking a delivery sent, moving its reminder to 'sent' (for a reminder's own
// delivery) and appending the event are one statement, so the mirror never
// shows a sent delivery without its event. The reminder's own send is
// 'sent' when it moved the reminder and 'sent_late' (a note) when the
// reminder had finished first (cancelled during the send): the database
// takes a move's event only with its move, and the event reads r, so it is
// written after the move. It returns the reminder when the record made it
// delivered: a webhook (its 2xx), or an email SendGrid reported delivered
// before the send was recorded.
var recordSent = `
WITH digest AS (
    SELECT digest_key FROM deliveries WHERE delivery_key = $1 AND digest_key IS NOT NULL
), d AS (
    UPDATE deliveries
       SET status = 'sent', provider_message_id = nullif($2, ''), finished_at = now()
     WHERE (delivery_key = $1 OR digest_key = (SELECT digest_key FROM digest))
       AND status IN ('sending', 'maybe_sent')
    RETURNING delivery_key, reminder_id, purpose, attempts, maybe_sent_at, digest_key
), r AS (
    UPDATE reminders
       SET state = reminder_state_after_send(channel, delivered_at, undeliverable_at),
           sent_at = now(),
           delivered_at = CASE WHEN channel = 'webhook' THEN coalesce(delivered_at, now()) ELSE delivered_at END,
           awaiting_outcome_since = CASE WHEN channel = 'email' AND delivered_at IS NULL AND undeliverable_at IS NULL
                                         THEN now() END,
           updated_at = now()
     WHERE id IN (SELECT reminder_id FROM d WHERE purpose = 'reminder')
       AND state IN ` + sqlIntoSent + `
    RETURNING id, state, channel, due_at, delivered_at, delivery_key
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT reminder_id,
           CASE WHEN purpose <> 'reminder' THEN purpose || '_sent'
                WHEN reminder_id IN (SELECT id FROM r) THEN 'sent' ELSE 'sent_late' END,
           jsonb_build_object('delivery_key', delivery_key, 'provider_message_id', nullif($2, ''), 'attempts', attempts)
           -- A send after an unconfirmed one: the key may have gone out twice.
           || CASE WHEN maybe_sent_at IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('maybe_sent_before', maybe_sent_at) END
           || CASE WHEN digest_key IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('digest_key', digest_key, 'digest_size', (SELECT count(*) FROM d)) END
           || $3
      FROM d
    UNION ALL
    -- A webhook's 2xx is its delivery; an email may have been reported
    -- delivered (or bounced) before its send was recorded.
    SELECT id, state, jsonb_build_object('delivery_key', delivery_key, 'by',
           CASE channel WHEN 'webhook' THEN 'the receiver answered 2xx' ELSE 'the provider reported it before the send was recorded' END)
      FROM r WHERE state <> 'sent'
)
SELECT id, channel, due_at, delivered_at FROM r WHERE state = 'delivered'`

// RecordSent records that the provider accepted the delivery; detail is
// added to its event. A digest's member key records every member of its
// digest, under the one provider message id. It returns the reminders the
// record made delivered (a webhook's), for the delivery SLO.
func (s *Store) RecordSent(ctx context.Context, key, providerMessageID string, detail map[string]any) ([]DeliveredReminder, error) {
	rows, _ := s.pool.Query(ctx, recordSent, key, providerMessageID, jsonDetail(detail))
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeliveredReminder, error) {
		var d DeliveredReminder
		var channel string
		err := row.Scan(&d.ReminderID, &channel, &d.DueAt, &d.DeliveredAt)
		d.Channel = reminder.Channel(channel)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("error recording delivery sent: %w", err)
	}
	return out, nil
}

// WasDelivered reports whether the reminder's own notification reached its
// provider at any due time, or may have (an unconfirmed send, or a claim
// its attempt left without a word: an ambiguous outcome is a send), and the
// provider did not bounce or drop it: only then is there anything to
// compensate (a notice to an address that bounced would bounce too). It is
// asked once no attempt of the reminder's own delivery runs, and says what
// CancelDuringSend decided: a reminder it found sent gets the notice.
func (s *Store) WasDelivered(ctx context.Context, reminderID string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM deliveries
                WHERE reminder_id = $1 AND purpose = 'reminder' AND status IN ('sent', 'maybe_sent', 'sending'))
   AND NOT EXISTS (SELECT 1 FROM reminders WHERE id = $1 AND `+bounced+`)`, reminderID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("error reading deliveries: %w", err)
	}
	return ok, nil
}

// sentBeforeCancel moves a pending reminder whose own delivery may have
// reached the provider (sent, or maybe sent) and did not bounce into the
// state a recorded send gives it, with its "sent" event (and "delivered",
// if the provider reported that before), as recordSent does. The event
// says why: the send was never confirmed, and since when it may have gone.
// A webhook's maybe-sent is sent, not delivered: no receiver answered 2xx.
var sentBeforeCancel = `
WITH d AS (
    SELECT delivery_key, attempts, maybe_sent_at, maybe_sent_reason FROM deliveries
     WHERE reminder_id = $1 AND purpose = 'reminder' AND status IN ('sent', 'maybe_sent')
     ORDER BY maybe_sent_at DESC NULLS LAST LIMIT 1
), r AS (
    UPDATE reminders
       SET state = CASE WHEN channel = 'email' THEN reminder_state_after_send(channel, delivered_at, undeliverable_at)
                        ELSE 'sent' END,
           sent_at = coalesce((SELECT maybe_sent_at FROM d), now()),
           awaiting_outcome_since = CASE WHEN channel = 'email' AND delivered_at IS NULL THEN now() END,
           updated_at = now()
     WHERE id = $1 AND state IN ` + sqlIntoSent + ` AND NOT ` + bounced + ` AND EXISTS (SELECT 1 FROM d)
    RETURNING id, state
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT r.id, 'sent', jsonb_build_object('delivery_key', d.delivery_key, 'attempts', d.attempts,
               'unconfirmed', coalesce(d.maybe_sent_reason, 'its send was not recorded'), 'maybe_sent_at', d.maybe_sent_at,
               'by', 'a cancel met a send that may have reached the provider: an ambiguous send is a send')
      FROM r, d
    UNION ALL
    SELECT r.id, r.state, jsonb_build_object('delivery_key', d.delivery_key, 'by', 'the provider reported it before the send was recorded')
      FROM r, d WHERE r.state <> 'sent'
)
SELECT EXISTS (SELECT 1 FROM r)`

// CancelDuringSend records a cancel that met a send which did not report
// one (it was stopped, failed, or its outcome is unknown), once no attempt
// of the reminder's own delivery runs: a claim one left without a word is
// marked maybe sent (AbandonClaims). An ambiguous send is a send: a pending
// reminder whose own delivery may have reached the provider, and did not
// bounce, ends as a sent one does (sentBeforeCancel) and the cancel is the
// note after it (cancelled_late), as for a reminder sent before its cancel;
// its notice goes (WasDelivered). Otherwise it is a plain cancel (Cancel).
// It returns the state the row is in after.
func (s *Store) CancelDuringSend(ctx context.Context, reminderID, eventType string, detail map[string]any) (reminder.State, error) {
	if err := s.withdrawFromDigest(ctx, reminderID); err != nil {
		return "", err
	}
	if err := s.AbandonClaims(ctx, reminderID); err != nil {
		return "", err
	}
	var sent bool
	if err := s.pool.QueryRow(ctx, sentBeforeCancel, reminderID).Scan(&sent); err != nil {
		return "", fmt.Errorf("error recording a send the cancel met: %w", err)
	}
	return s.Cancel(ctx, reminderID, eventType, detail)
}

// EscalationContact returns the escalation address of a reminder's update
// ("" when it names none) and the reminder's state, as committed: a batch
// of provider events applying to the reminder right now (it holds the row)
// is waited for, so an escalation never decides on the state of the moment
// before the batch that delivered it commits.
func (s *Store) EscalationContact(ctx context.Context, reminderID string) (string, reminder.State, error) {
	var contact, state string
	err := s.pool.QueryRow(ctx, `
SELECT coalesce(u.escalation_email, ''), r.state
  FROM reminders r JOIN updates u USING (tenant, shipment_id, update_id)
 WHERE r.id = $1
   FOR SHARE OF r`, reminderID).Scan(&contact, &state)
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
// provider refused it for good. Only the claim's owner records it: a
// superseded attempt (its worker froze past its lease, and another took the
// key over) leaves the claim and the trail to the holder. The reminder's own
// state is the workflow's to change.
func (s *Store) RecordDeliveryFailed(ctx context.Context, key, owner, reason string) error {
	_, err := s.pool.Exec(ctx, `
WITH d AS (
    UPDATE deliveries SET status = 'failed', finished_at = now()
     WHERE `+ownersClaims("$1", "$3")+` AND status = 'sending'
    RETURNING delivery_key, reminder_id, purpose, attempts, digest_key
)
INSERT INTO reminder_events (reminder_id, type, detail)
SELECT reminder_id, 'delivery_failed',
       jsonb_build_object('delivery_key', delivery_key, 'purpose', purpose, 'reason', $2::text, 'attempts', attempts)
       || CASE WHEN digest_key IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('digest_key', digest_key) END
  FROM d`, key, reason, owner)
	if err != nil {
		return fmt.Errorf("error recording delivery failure: %w", err)
	}
	return nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// suppress finishes a pending reminder whose address is suppressed: it
// becomes suppressed, with the event that says so. It returns the state
// the row is in after, which another path may have finished first.
func (s *Store) suppress(ctx context.Context, reminderID string) (reminder.State, error) {
	err := s.TransitionFrom(ctx, reminderID, reminder.PendingStates, reminder.Suppressed, string(reminder.Suppressed),
		map[string]any{"reason": "the address is suppressed for its tenant: it unsubscribed or reported spam"})
	var refused *RefusedError
	if errors.As(err, &refused) {
		return refused.State, nil
	}
	if err != nil {
		return "", err
	}
	return reminder.Suppressed, nil
}
