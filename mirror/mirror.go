// Package mirror is shipnotify's PostgreSQL store: every reminder's state, its
// append-only audit trail, and the delivery claims that make notification
// idempotent. Temporal holds the timers; the mirror is the schedule of record
// that the cancellation, escalation, reporting and export paths read.
package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipnotify/shipnotify/reminder"
)

// ErrNotFound is returned when a reminder is not in the mirror.
var ErrNotFound = errors.New("not found in the mirror")

// Store reads and writes the mirror through a pgx pool.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a store over pool. The pool's size bounds the store's
// concurrency; size it to the worker's activity concurrency.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool}
}

// Pool is the store's pool, for health checks and migrations.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// NewReminder is a planned reminder with the id of the workflow that will run it.
type NewReminder struct {
	reminder.Reminder
	WorkflowID string
}

// One statement writes the update, every reminder of its fan-out and their
// "scheduled" events. ON CONFLICT DO NOTHING makes a repeated schedule a
// no-op; RETURNING names the reminders that are new.
const insertUpdate = `
WITH upd AS (
    INSERT INTO updates (shipment_id, update_id, kind, window_start, subject, body, escalation_email)
    VALUES ($1, $2, $3, $4, $5, $6, $16)
    ON CONFLICT DO NOTHING
), ins AS (
    INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email,
                           webhook_url, webhook_secret, due_at, delivery_key, workflow_id,
                           state, approval_timeout, approval_expire_after)
    SELECT r.id, $1, $2, r.subscriber_id, r.channel, r.email, r.webhook_url, r.webhook_secret,
           r.due_at, r.delivery_key, r.workflow_id, r.state,
           make_interval(secs => r.approval_timeout), make_interval(secs => r.approval_expire_after)
      FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
                  $13::timestamptz[], $14::text[], $15::text[], $17::text[], $18::float8[], $19::float8[])
           AS r(id, subscriber_id, channel, email, webhook_url, webhook_secret, due_at, delivery_key,
                workflow_id, state, approval_timeout, approval_expire_after)
    ON CONFLICT DO NOTHING
    RETURNING id, due_at, delivery_key, state
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT id, 'scheduled', jsonb_build_object('due_at', due_at, 'delivery_key', delivery_key, 'state', state)
      FROM ins
)
SELECT id FROM ins`

// InsertUpdate writes an update and its reminders in one statement and
// reports which reminder ids were new. Rows that already existed are left as
// they are.
func (s *Store) InsertUpdate(ctx context.Context, u reminder.Update, rems []NewReminder) (map[string]bool, error) {
	n := len(rems)
	ids, subs, channels := make([]string, n), make([]string, n), make([]string, n)
	emails, urls, secrets := make([]*string, n), make([]*string, n), make([]*string, n)
	dues, keys, wfids := make([]time.Time, n), make([]string, n), make([]string, n)
	states, timeouts, expires := make([]string, n), make([]*float64, n), make([]*float64, n)
	for i, r := range rems {
		ids[i], subs[i], channels[i] = r.ID, r.SubscriberID, string(r.Channel)
		emails[i], urls[i], secrets[i] = nullable(r.Email), nullable(r.WebhookURL), nullable(r.WebhookSecret)
		dues[i], keys[i], wfids[i] = r.DueAt, r.DeliveryKey(), r.WorkflowID
		states[i] = string(r.InitialState())
		if r.Approval.Required {
			t, x := r.Approval.Timeout.Seconds(), r.Approval.ExpireAfter.Seconds()
			timeouts[i], expires[i] = &t, &x
		}
	}
	var windowStart *time.Time
	if !u.WindowStart.IsZero() {
		windowStart = &u.WindowStart
	}
	rows, err := s.pool.Query(ctx, insertUpdate,
		u.ShipmentID, u.UpdateID, u.Kind, windowStart, u.Message.Subject, u.Message.Text,
		ids, subs, channels, emails, urls, secrets, dues, keys, wfids,
		nullable(u.EscalationEmail), states, timeouts, expires)
	if err != nil {
		return nil, fmt.Errorf("error inserting update: %w", err)
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error inserting update: %w", err)
	}
	out := make(map[string]bool, len(inserted))
	for _, id := range inserted {
		out[id] = true
	}
	return out, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Unstarted returns up to limit reminders created before the given time
// whose workflow Temporal never accepted, oldest first, as the reconciler
// needs them to start it.
func (s *Store) Unstarted(ctx context.Context, createdBefore time.Time, limit int) ([]NewReminder, error) {
	rows, _ := s.pool.Query(ctx, `
SELECT id, shipment_id, update_id, subscriber_id, channel, due_at, workflow_id,
       approval_timeout, approval_expire_after
  FROM reminders
 WHERE workflow_started_at IS NULL AND created_at < $1
   AND state IN ('scheduled', 'awaiting_approval')
 ORDER BY created_at, id
 LIMIT $2`, createdBefore, limit)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (NewReminder, error) {
		var r NewReminder
		var channel string
		var timeout, expire *time.Duration
		err := row.Scan(&r.ID, &r.ShipmentID, &r.UpdateID, &r.SubscriberID, &channel, &r.DueAt, &r.WorkflowID, &timeout, &expire)
		r.Channel = reminder.Channel(channel)
		if timeout != nil && expire != nil {
			r.Approval = reminder.Approval{Required: true, Timeout: *timeout, ExpireAfter: *expire}
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing unstarted reminders: %w", err)
	}
	return out, nil
}

// MarkStarted records that Temporal accepted the workflows of these
// reminders; rows never marked are the reconciler's to start.
func (s *Store) MarkStarted(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `
UPDATE reminders SET workflow_started_at = now()
 WHERE id = ANY($1) AND workflow_started_at IS NULL`, ids)
	if err != nil {
		return fmt.Errorf("error marking workflows started: %w", err)
	}
	return nil
}

// Transition moves a reminder to state (unless it already is in a terminal
// state) and appends an event of type with detail. It reports whether the
// state changed. Events are appended either way, so the trail shows late
// arrivals too.
func (s *Store) Transition(ctx context.Context, reminderID string, to reminder.State, eventType string, detail map[string]any) (bool, error) {
	var changed bool
	err := s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE reminders SET state = $2, updated_at = now()
     WHERE id = $1 AND state NOT IN ('sent', 'failed', 'cancelled', 'expired') AND state <> $2
    RETURNING id
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT id, $3, $4 FROM reminders WHERE id = $1
)
SELECT EXISTS (SELECT 1 FROM r)`, reminderID, string(to), eventType, jsonDetail(detail)).Scan(&changed)
	if err != nil {
		return false, fmt.Errorf("error recording %s for reminder: %w", eventType, err)
	}
	return changed, nil
}

// Reschedule moves a reminder to a new due time and delivery key and
// appends the "rescheduled" event, unless the reminder is finished.
func (s *Store) Reschedule(ctx context.Context, reminderID string, due time.Time, key string, detail map[string]any) error {
	_, err := s.pool.Exec(ctx, `
WITH r AS (
    UPDATE reminders SET due_at = $2, delivery_key = $3, updated_at = now()
     WHERE id = $1 AND state IN ('scheduled', 'awaiting_approval')
    RETURNING id
)
INSERT INTO reminder_events (reminder_id, type, detail)
SELECT id, 'rescheduled', $4 FROM r`, reminderID, due, key, jsonDetail(detail))
	if err != nil {
		return fmt.Errorf("error rescheduling reminder: %w", err)
	}
	return nil
}

// WindowStart returns an update's delivery window start (zero if it has none).
func (s *Store) WindowStart(ctx context.Context, shipmentID, updateID string) (time.Time, error) {
	var ws *time.Time
	err := s.pool.QueryRow(ctx, `SELECT window_start FROM updates WHERE shipment_id = $1 AND update_id = $2`,
		shipmentID, updateID).Scan(&ws)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("error reading update %s/%s: %w", shipmentID, updateID, ErrNotFound)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("error reading update: %w", err)
	}
	if ws == nil {
		return time.Time{}, nil
	}
	return *ws, nil
}

// SetWindowStart records an update's moved delivery window.
func (s *Store) SetWindowStart(ctx context.Context, shipmentID, updateID string, t time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE updates SET window_start = $3 WHERE shipment_id = $1 AND update_id = $2`,
		shipmentID, updateID, t)
	if err != nil {
		return fmt.Errorf("error moving the delivery window: %w", err)
	}
	return nil
}

func jsonDetail(d map[string]any) map[string]any {
	if d == nil {
		return map[string]any{}
	}
	return d
}

func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}
