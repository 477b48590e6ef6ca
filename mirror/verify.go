package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// PendingBeforeQuery is PendingBefore's statement, exported for EXPLAIN. The
// partial index on the pending reminders' ids (migration 00006) makes a page
// read only pending rows, however many finished ones the mirror holds.
var PendingBeforeQuery = `
SELECT ` + rowColumns + ` FROM reminders
 WHERE state IN ` + sqlPending + ` AND updated_at < $1 AND id > $2
 ORDER BY id
 LIMIT $3`

// PendingBefore returns up to limit pending reminders (scheduled or awaiting
// approval) last changed before the given time, with ids after afterID, in
// id order: a keyset page, so checking millions of rows never holds them all.
func (s *Store) PendingBefore(ctx context.Context, before time.Time, afterID string, limit int) ([]Row, error) {
	rows, _ := s.pool.Query(ctx, PendingBeforeQuery, before, afterID, limit)
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("error listing pending reminders: %w", err)
	}
	return out, nil
}

// ByWorkflowIDs returns the reminders run by these workflows, by workflow
// id; a workflow the mirror has no row for is absent from the map.
func (s *Store) ByWorkflowIDs(ctx context.Context, workflowIDs []string) (map[string]Row, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+rowColumns+` FROM reminders WHERE workflow_id = ANY($1)`, workflowIDs)
	list, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("error reading reminders by workflow id: %w", err)
	}
	out := make(map[string]Row, len(list))
	for _, r := range list {
		out[r.WorkflowID] = r
	}
	return out, nil
}

// StartOf returns a reminder as its workflow would start from the mirror
// now: its current due time and its requested approval policy.
func (s *Store) StartOf(ctx context.Context, reminderID string) (NewReminder, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+newReminderColumns+` FROM reminders WHERE id = $1`, reminderID)
	r, err := pgx.CollectExactlyOneRow(rows, scanNewReminder)
	if errors.Is(err, pgx.ErrNoRows) {
		return NewReminder{}, fmt.Errorf("error reading reminder %s: %w", reminderID, ErrNotFound)
	}
	if err != nil {
		return NewReminder{}, fmt.Errorf("error reading reminder: %w", err)
	}
	return r, nil
}

// DeliverySent reports whether the reminder's own delivery under key was
// recorded as accepted by its provider.
func (s *Store) DeliverySent(ctx context.Context, reminderID, key string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM deliveries
                WHERE delivery_key = $1 AND reminder_id = $2 AND purpose = 'reminder' AND status = 'sent')`,
		key, reminderID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("error reading delivery: %w", err)
	}
	return ok, nil
}

// Repair is a correction `reconcile --verify` makes to a row so that it
// says what Temporal says.
type Repair struct {
	ReminderID string
	// From and Seen are the row's state and updated_at as verify read
	// them: a row that changed since is left alone.
	From reminder.State
	Seen time.Time
	// To is the state the row takes (sent also sets sent_at).
	To reminder.State
	// DueAt and DeliveryKey, when set, are the due time and key the row takes.
	DueAt       time.Time
	DeliveryKey string
	// Detail is added to the "repaired" event.
	Detail map[string]any
}

// One statement moves the row and appends its "repaired" event, only if the
// row is still as it was read: two verifiers, or a verifier and a workflow,
// never both move it, and a repair repeated changes nothing.
const repairRow = `
WITH r AS (
    UPDATE reminders
       SET state = CASE WHEN $4 = 'sent' THEN reminder_state_after_send(channel, delivered_at, undeliverable_at) ELSE $4 END,
           due_at = coalesce($5, due_at),
           goes_out_at = CASE WHEN $5::timestamptz IS NULL THEN goes_out_at ELSE $8 END,
           delivery_key = coalesce(nullif($6, ''), delivery_key),
           sent_at = CASE WHEN $4 = 'sent' THEN coalesce(sent_at, now()) ELSE sent_at END,
           -- As recording the send sets them: a webhook's send is its
           -- delivery; an email awaits its provider's outcome.
           delivered_at = CASE WHEN $4 = 'sent' AND channel = 'webhook' THEN coalesce(delivered_at, now()) ELSE delivered_at END,
           awaiting_outcome_since = CASE WHEN $4 = 'sent' AND channel = 'email' AND delivered_at IS NULL AND undeliverable_at IS NULL
                                         THEN coalesce(awaiting_outcome_since, now()) ELSE awaiting_outcome_since END,
           updated_at = now()
     WHERE id = $1 AND state = $2 AND updated_at = $3
    RETURNING id
)
INSERT INTO reminder_events (reminder_id, type, detail)
SELECT id, 'repaired', $7 FROM r`

// Repair applies r and reports whether the row was still as seen (and so
// was changed).
func (s *Store) Repair(ctx context.Context, r Repair) (bool, error) {
	var due *time.Time
	if !r.DueAt.IsZero() {
		due = &r.DueAt
	}
	detail := map[string]any{"from": string(r.From), "to": string(r.To)}
	for k, v := range r.Detail {
		detail[k] = v
	}
	var goesOut *time.Time
	if due != nil {
		var err error
		if goesOut, err = s.goesOutAt(ctx, r.ReminderID, *due); err != nil {
			return false, fmt.Errorf("error repairing reminder: %w", err)
		}
	}
	tag, err := s.pool.Exec(ctx, repairRow, r.ReminderID, string(r.From), r.Seen, string(r.To), due, r.DeliveryKey, detail, goesOut)
	if err != nil {
		return false, fmt.Errorf("error repairing reminder: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}
