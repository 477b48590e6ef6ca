package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// A digest is the reminders of one tenant's address on one channel that go
// out at the same boundary of their digest interval (reminder.DigestAt),
// sent as one message. No row stands for it before its send: its members
// are the pending reminders that meet at the boundary, and the first
// member whose attempt runs leads it.
//
//  1. ClaimDigest: under the digest's lock (an advisory lock on its
//     address and goes-out time, held by the claim's transaction, so two
//     members' attempts never lead two halves of it), the attempt claims
//     its own key as any claim does and, when it holds it, every other
//     member's key that is free (never claimed, released, or lapsed with
//     its wait for evidence over and no evidence), under its own owner and
//     lease, marked digest_of the leader. A member whose attempt comes
//     later finds its key held (HeldElsewhere), then sent.
//  2. SealDigest, after the wait for the rate cap's slot: the members still
//     sendable (scheduled, with no cancel asked for) are sealed under the
//     digest's key (reminder.DigestKey of their keys), on their deliveries
//     and their rows; the others' claims are released. From the seal on,
//     a member's cancel waits for the send's outcome, and a reschedule is
//     refused: the message may be on its way.
//  3. The leader sends one message; RecordSent of its key records every
//     member sent under the one provider message id (recordSent), and a
//     failure settles every member's claim as it settles one
//     (ownersClaims).
//
// A member's cancel before the seal takes it out (withdrawFromDigest); a
// provider's event for the digest's key is applied to each member's own
// key (digestEvents).

// DigestMember is one reminder a sealed digest sends: what its part of the
// message says.
type DigestMember struct {
	ReminderID, ShipmentID, UpdateID, SubscriberID string
	DeliveryKey                                    string
	Kind                                           string
	WindowStart                                    time.Time
	DueAt                                          time.Time
	Message                                        reminder.Message
}

// Digest is a sealed digest: its key and its members, in the order the
// message lists them (by due time, then shipment).
type Digest struct {
	Key     string
	Members []DigestMember
}

// digestLock takes the digest's lock for the claim's transaction: one
// address of one tenant and channel, at one goes-out time.
const digestLock = `
SELECT pg_advisory_xact_lock(hashtextextended(
           'digest|' || tenant || '|' || channel || '|' || coalesce(email, webhook_url, '') || '|' ||
           coalesce(goes_out_at, due_at)::text, 0))
  FROM reminders WHERE id = @reminder_id AND digest_every IS NOT NULL`

// claimMembers claims, for the leader @reminder_id's attempt (@owner), the
// keys of the other members of its digest that are free, at most @max.
// Members are locked as they are claimed (a cancel or a reschedule
// writing one at this moment is passed over: it goes on its own later).
var claimMembers = `
WITH l AS (
    SELECT * FROM reminders WHERE id = @reminder_id
), m AS (
    SELECT r.id, r.delivery_key FROM reminders r, l
     WHERE r.digest_every IS NOT NULL AND r.id <> l.id
       AND r.tenant = l.tenant AND r.channel = l.channel
       AND coalesce(r.email, r.webhook_url, '') = coalesce(l.email, l.webhook_url, '')
       AND coalesce(r.goes_out_at, r.due_at) = coalesce(l.goes_out_at, l.due_at)
       AND r.state = 'scheduled' AND r.cancel_requested_at IS NULL
     ORDER BY r.delivery_key
     LIMIT @max
       FOR UPDATE OF r SKIP LOCKED
), claim AS (
    INSERT INTO deliveries AS d (delivery_key, reminder_id, purpose, status, claimed_by, lease_until, digest_of)
    SELECT delivery_key, id, 'reminder', 'sending', @owner, now() + make_interval(secs => @lease_secs), @reminder_id FROM m
    ON CONFLICT (delivery_key) DO UPDATE
       SET attempts = d.attempts + 1, status = 'sending', claimed_by = excluded.claimed_by,
           lease_until = excluded.lease_until, digest_of = excluded.digest_of, digest_key = NULL,
           maybe_sent_at = CASE WHEN d.status = 'sending' THEN ` + sentUntil("d") + ` ELSE d.maybe_sent_at END,
           maybe_sent_reason = CASE WHEN d.status = 'sending' THEN '` + reasonLapsed + `' ELSE d.maybe_sent_reason END
     WHERE d.status = 'released'
        OR (d.status IN ('sending', 'maybe_sent') AND d.lease_until < now()
            AND ` + sentUntil("d") + ` + ` + evidenceWait("@evidence_wait_secs") + ` <= now()
            AND NOT EXISTS (SELECT 1 FROM reminder_events e
                             WHERE e.reminder_id = d.reminder_id AND starts_with(e.type, 'provider_')
                               AND e.detail->>'delivery_key' = d.delivery_key))
    RETURNING 1
), leader AS (
    UPDATE deliveries SET digest_of = @reminder_id, digest_key = NULL
     WHERE delivery_key = @key AND claimed_by = @owner AND status = 'sending'
    RETURNING reminder_id
), unsealed AS (
    -- A digest an earlier attempt sealed (and may have sent) no longer
    -- holds the leader: the seal to come names the one it is in now.
    UPDATE reminders SET digest_key = NULL WHERE id IN (SELECT reminder_id FROM leader)
)
SELECT count(*) FROM claim`

// ClaimDigest claims a digest member's key as ClaimDelivery does, under
// its digest's lock, and, when it holds the key, the keys of the digest's
// other members (at most reminder.MaxDigestMembers in all). members is how
// many it claimed beside its own; 0 leaves a claim like any other.
func (s *Store) ClaimDigest(ctx context.Context, c Claim) (res ClaimResult, members int, err error) {
	var row claimRow
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, digestLock, c.args()); err != nil {
			return fmt.Errorf("error locking a digest: %w", err)
		}
		if row, err = scanClaim(tx.QueryRow(ctx, claimDelivery, c.args()), c); err != nil {
			return err
		}
		if row.attempts == nil || row.refused || row.suppressed {
			return nil
		}
		args := c.args()
		args["max"] = reminder.MaxDigestMembers - 1
		if err := tx.QueryRow(ctx, claimMembers, args).Scan(&members); err != nil {
			return fmt.Errorf("error claiming a digest's members: %w", err)
		}
		return nil
	})
	if err != nil {
		return ClaimResult{}, 0, err
	}
	res, err = s.settleClaim(ctx, c, row)
	return res, members, err
}

// sealMembers locks the claims the leader's attempt holds and their
// members' rows, and reads them: the leader's own, and the members still
// under the key that was claimed, with whether each is still sendable.
const sealMembers = `
SELECT r.id, r.shipment_id, r.update_id, r.subscriber_id, r.delivery_key, u.kind, u.window_start, r.due_at,
       u.subject, u.body, d.delivery_key = $2 OR (r.state = 'scheduled' AND r.cancel_requested_at IS NULL)
  FROM deliveries d
  JOIN reminders r ON r.id = d.reminder_id AND r.delivery_key = d.delivery_key
  JOIN updates u ON u.tenant = r.tenant AND u.shipment_id = r.shipment_id AND u.update_id = r.update_id
 WHERE d.claimed_by = $1 AND d.status = 'sending' AND (d.delivery_key = $2 OR d.digest_of IS NOT NULL)
 ORDER BY r.id
   FOR UPDATE OF d, r`

// SealDigest seals the digest the attempt owner leads from its key (the
// leader's own): the members still sendable are sealed under the digest's
// key, and the claims of the rest are released. The leader's own claim is
// kept whatever its row says (its attempt looked for its own cancel). A
// digest of the leader alone is no digest: nothing is sealed, and the
// result has no key.
func (s *Store) SealDigest(ctx context.Context, key, owner string) (Digest, error) {
	var dg Digest
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		dg = Digest{}
		rows, _ := tx.Query(ctx, sealMembers, owner, key)
		var (
			m           DigestMember
			windowStart *time.Time
			sendable    bool
		)
		_, err := pgx.ForEachRow(rows, []any{&m.ReminderID, &m.ShipmentID, &m.UpdateID, &m.SubscriberID, &m.DeliveryKey, &m.Kind,
			&windowStart, &m.DueAt, &m.Message.Subject, &m.Message.Text, &sendable}, func() error {
			if windowStart != nil {
				m.WindowStart = *windowStart
			} else {
				m.WindowStart = time.Time{}
			}
			if sendable {
				dg.Members = append(dg.Members, m)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("error reading a digest's members: %w", err)
		}
		var keys, ids []string
		if len(dg.Members) > 1 {
			for _, m := range dg.Members {
				keys, ids = append(keys, m.DeliveryKey), append(ids, m.ReminderID)
			}
			dg.Key = reminder.DigestKey(keys)
		} else {
			keys, dg.Members = []string{key}, nil
		}
		_, err = tx.Exec(ctx, `
WITH sealed AS (
    UPDATE deliveries SET digest_key = $3
     WHERE claimed_by = $1 AND status = 'sending' AND delivery_key = ANY($2) AND $3 <> ''
), members AS (
    UPDATE reminders SET digest_key = $3 WHERE id = ANY($4) AND $3 <> ''
)
UPDATE deliveries SET status = 'released', lease_until = now()
 WHERE claimed_by = $1 AND status = 'sending' AND digest_of IS NOT NULL AND delivery_key <> ALL($2)`,
			owner, keys, dg.Key, ids)
		if err != nil {
			return fmt.Errorf("error sealing a digest: %w", err)
		}
		return nil
	})
	if err != nil {
		return Digest{}, err
	}
	slices.SortStableFunc(dg.Members, func(a, b DigestMember) int {
		return cmp.Or(a.DueAt.Compare(b.DueAt), cmp.Compare(a.ShipmentID, b.ShipmentID), cmp.Compare(a.ReminderID, b.ReminderID))
	})
	return dg, nil
}

// leaveDigest is the CTE of a reschedule ($1 the reminder, r the row it
// moved) that takes the reminder out of a digest not yet sealed: another
// member's attempt claimed its key at the old time, and leaves it be.
// (A sealed one refuses the move: digest_key IS NULL in its WHERE.)
const leaveDigest = `leave AS (
    UPDATE deliveries SET status = 'released', lease_until = now()
     WHERE reminder_id = $1 AND purpose = 'reminder' AND status = 'sending'
       AND digest_of IS NOT NULL AND digest_of <> $1 AND digest_key IS NULL AND EXISTS (SELECT 1 FROM r)
)`

// withdrawFromDigest readies a digest member's cancel (CancelDuringSend):
// under its row's lock, which a digest's seal takes too, it marks the
// cancel asked for (no digest claims it after) and releases a claim
// another member's attempt holds on its key and has not sealed, so the
// cancel is a plain one. A sealed claim still live means the message may
// be on its way: ErrDigestSending, to be asked again once the send is
// recorded or its lease lapses (then the cancel meets a send, and its
// notice follows). A reminder with no digest is left alone.
func (s *Store) withdrawFromDigest(ctx context.Context, reminderID string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var digest bool
		err := tx.QueryRow(ctx, `SELECT digest_every IS NOT NULL FROM reminders WHERE id = $1 FOR UPDATE`, reminderID).Scan(&digest)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !digest {
			return nil
		}
		if err != nil {
			return fmt.Errorf("error reading a digest member: %w", err)
		}
		var sealed *time.Time
		err = tx.QueryRow(ctx, `
WITH asked AS (
    UPDATE reminders SET cancel_requested_at = coalesce(cancel_requested_at, now())
     WHERE id = $1 AND state IN `+sqlPending+`
), released AS (
    UPDATE deliveries SET status = 'released', lease_until = now()
     WHERE reminder_id = $1 AND purpose = 'reminder' AND status = 'sending'
       AND digest_of IS NOT NULL AND digest_of <> $1 AND digest_key IS NULL
)
SELECT max(lease_until) FROM deliveries
 WHERE reminder_id = $1 AND purpose = 'reminder' AND status = 'sending'
   AND digest_of IS NOT NULL AND digest_of <> $1 AND digest_key IS NOT NULL AND lease_until > now()`, reminderID).Scan(&sealed)
		if err != nil {
			return fmt.Errorf("error taking a reminder out of a digest: %w", err)
		}
		if sealed != nil {
			return fmt.Errorf("%w: its outcome is awaited, at the latest until %s", ErrDigestSending, sealed.UTC().Format(time.RFC3339))
		}
		return nil
	})
}

// ErrDigestSending: a digest that holds the reminder is being sent.
var ErrDigestSending = errors.New("a digest with the reminder is being sent")

// ErrInDigest refuses a reschedule of a reminder sealed into a digest
// whose send is under way: the message may already carry it.
var ErrInDigest = errors.New("the reminder is being sent in a digest")
