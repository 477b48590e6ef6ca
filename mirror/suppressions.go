package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Suppression is an address that opted out of one tenant's mail: its
// reminders end suppressed, unsent, until an operator lifts it. The
// mirror keeps the address's SHA-256 only (lower-cased and trimmed), so a
// suppression outlives its reminders without keeping the address.
type Suppression struct {
	Tenant        string
	AddressSHA256 string
	// Reason is unsubscribe, spamreport, dropped (an opt-out drop) or
	// one_click (the List-Unsubscribe link).
	Reason       string
	ReminderID   string
	EventID      string
	SuppressedAt time.Time
	LiftedAt     *time.Time
	LiftedBy     string
}

// SuppressionFilter selects suppressions: one tenant's ("" the default
// tenant's) unless AnyTenant, and lifted ones only with Lifted.
type SuppressionFilter struct {
	Tenant    string
	AnyTenant bool
	// Address, when set, selects that address's suppression.
	Address string
	Lifted  bool
	Limit   int
	// After, when set, starts the list after this row (keyset
	// pagination, in the list's order).
	After *SuppressionPosition
}

// SuppressionPosition is a row's place in the list's order: newest
// first, then by tenant and address hash.
type SuppressionPosition struct {
	SuppressedAt  time.Time
	Tenant        string
	AddressSHA256 string
}

// Suppressions lists suppressions, newest first.
func (s *Store) Suppressions(ctx context.Context, f SuppressionFilter) ([]Suppression, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	args := pgx.NamedArgs{
		"any_tenant": f.AnyTenant, "tenant": f.Tenant, "address": f.Address, "lifted": f.Lifted, "limit": f.Limit,
		"after": f.After != nil, "after_at": time.Time{}, "after_tenant": "", "after_hash": "",
	}
	if f.After != nil {
		args["after_at"], args["after_tenant"], args["after_hash"] = f.After.SuppressedAt, f.After.Tenant, f.After.AddressSHA256
	}
	rows, _ := s.pool.Query(ctx, `
SELECT tenant, address_sha256, reason, reminder_id, coalesce(event_id, ''), suppressed_at, lifted_at, coalesce(lifted_by, '')
  FROM suppressions
 WHERE (@any_tenant OR tenant = @tenant) AND (@address = '' OR address_sha256 = suppression_address(@address))
   AND (@lifted OR lifted_at IS NULL)
   AND (NOT @after OR suppressed_at < @after_at
        OR (suppressed_at = @after_at AND (tenant, address_sha256) > (@after_tenant, @after_hash)))
 ORDER BY suppressed_at DESC, tenant, address_sha256
 LIMIT @limit`, args)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Suppression, error) {
		var x Suppression
		err := row.Scan(&x.Tenant, &x.AddressSHA256, &x.Reason, &x.ReminderID, &x.EventID, &x.SuppressedAt, &x.LiftedAt, &x.LiftedBy)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing suppressions: %w", err)
	}
	return out, nil
}

// ErrNotSuppressed is returned when lifting an address no suppression holds.
var ErrNotSuppressed = errors.New("the address is not suppressed")

// LiftSuppression lifts the suppression of address for tenant, recording
// who lifted it; the next reminder to it is sent. The row stays, lifted,
// so the mirror still shows that the address once opted out. A later
// opt-out suppresses it again; a one-click link issued before lifted_at
// does not (SuppressAddressByLink).
func (s *Store) LiftSuppression(ctx context.Context, tenant, address, by string) error {
	tag, err := s.pool.Exec(ctx, `
UPDATE suppressions SET lifted_at = now(), lifted_by = $3
 WHERE tenant = $1 AND address_sha256 = suppression_address($2) AND lifted_at IS NULL`, tenant, address, by)
	if err != nil {
		return fmt.Errorf("error lifting suppression: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotSuppressed
	}
	return nil
}

// SuppressAddressOf suppresses, for its tenant, the email address of a
// reminder. It reports false when the reminder is not an email one in the
// mirror; an address already suppressed stays as it was.
func (s *Store) SuppressAddressOf(ctx context.Context, reminderID, reason string) (bool, error) {
	res, err := s.suppressAddressOf(ctx, reminderID, reason, nil)
	return res != LinkNoReminder, err
}

// LinkSuppression is what a one-click link's POST came to.
type LinkSuppression int

// What a one-click link's POST came to.
const (
	// LinkNoReminder: the link's reminder is not an email one in the
	// mirror (pruned, or never one); nothing is written.
	LinkNoReminder LinkSuppression = iota
	// LinkSuppressed: the address is suppressed, now or already.
	LinkSuppressed
	// LinkOutranked: the address's suppression was lifted after the link
	// was made; the lift stands and nothing is written.
	LinkOutranked
)

// SuppressAddressByLink suppresses, for its tenant, the email address of
// the reminder a one-click List-Unsubscribe link names (it names the
// reminder, never the address), unless an operator lifted that address's
// suppression after the link was issued: a lift outranks every older
// link, or replaying one would undo it. A zero issued (a link of the first
// format, which carries no time) is older than any lift. The lift time is
// the row's lifted_at, which every serve replica reads.
func (s *Store) SuppressAddressByLink(ctx context.Context, reminderID string, issued time.Time) (LinkSuppression, error) {
	return s.suppressAddressOf(ctx, reminderID, "one_click", &issued)
}

// suppressAddressOf suppresses a reminder's address for its tenant; with
// issued, a lift later than it outranks the suppression.
func (s *Store) suppressAddressOf(ctx context.Context, reminderID, reason string, issued *time.Time) (LinkSuppression, error) {
	var found, outranked bool
	err := s.pool.QueryRow(ctx, `
WITH r AS (
    SELECT id, tenant, suppression_address(email) AS address_sha256
      FROM reminders WHERE id = @id AND channel = 'email' AND email IS NOT NULL
), ins AS (
    INSERT INTO suppressions AS s (tenant, address_sha256, reason, reminder_id)
    SELECT tenant, address_sha256, @reason, id FROM r
    ON CONFLICT (tenant, address_sha256) DO UPDATE
       SET reason = excluded.reason, reminder_id = excluded.reminder_id, event_id = NULL,
           suppressed_at = now(), lifted_at = NULL, lifted_by = NULL
     WHERE s.lifted_at IS NOT NULL AND (@issued::timestamptz IS NULL OR s.lifted_at <= @issued::timestamptz)
)
SELECT EXISTS (SELECT 1 FROM r),
       EXISTS (SELECT 1 FROM suppressions s JOIN r USING (tenant, address_sha256) WHERE s.lifted_at > @issued::timestamptz)`,
		pgx.NamedArgs{"id": reminderID, "reason": reason, "issued": issued}).Scan(&found, &outranked)
	switch {
	case err != nil:
		return LinkNoReminder, fmt.Errorf("error suppressing address: %w", err)
	case !found:
		return LinkNoReminder, nil
	case outranked:
		return LinkOutranked, nil
	}
	return LinkSuppressed, nil
}
