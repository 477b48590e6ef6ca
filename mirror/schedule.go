package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// NewReminder is a planned reminder with the id of the workflow that will run it.
type NewReminder struct {
	reminder.Reminder
	WorkflowID string
	// CreatedAt is when the row was written (zero before it is): a
	// workflow under WorkflowID that started before then is not its own.
	CreatedAt time.Time
}

// Stored is an update as the mirror holds it once ScheduleUpdate returns:
// what was first asked for, and where each reminder stands now.
type Stored struct {
	// Inserted is true when this call wrote the update. When false the
	// update was there already and this call wrote nothing.
	Inserted bool
	// Requested is the update as first submitted (its window start as
	// asked, not as since moved); Subscribers is left empty.
	Requested reminder.Update
	// Reminders are the update's reminders in subscriber id order.
	Reminders []StoredReminder
}

// StoredReminder is one reminder of a stored update.
type StoredReminder struct {
	// Requested is the reminder as first planned: recipient, approval
	// policy, and the due time as asked.
	Requested  reminder.Reminder
	WorkflowID string
	// State, DueAt and DeliveryKey are the reminder's now: a reschedule
	// moves the due time and the key.
	State       reminder.State
	DueAt       time.Time
	DeliveryKey string
	// WorkflowStarted: Temporal accepted the reminder's workflow once.
	WorkflowStarted bool
	CreatedAt       time.Time
}

// Startable reports whether the reminder's workflow may be started: only a
// reminder still pending whose workflow never started. A finished one (sent,
// cancelled while its start failed) is never started again, even when
// Temporal's retention has forgotten its workflow.
func (r StoredReminder) Startable() bool {
	return !r.WorkflowStarted && (r.State == reminder.Scheduled || r.State == reminder.AwaitingApproval)
}

// NewReminder is the stored reminder as its workflow starts: the current
// due time, the requested approval policy.
func (r StoredReminder) NewReminder() NewReminder {
	rem := r.Requested
	rem.DueAt = r.DueAt
	return NewReminder{Reminder: rem, WorkflowID: r.WorkflowID, CreatedAt: r.CreatedAt}
}

const insertUpdateRow = `
INSERT INTO updates (shipment_id, update_id, kind, window_start, requested_window_start, subject, body, escalation_email, tenant,
                     template_id, template_data)
VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT DO NOTHING
RETURNING true`

// One statement writes every reminder of a new update's fan-out and their
// "scheduled" events.
const insertReminders = `
WITH ins AS (
    INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email,
                           webhook_url, webhook_secret, address, due_at, requested_due_at, delivery_key, workflow_id,
                           state, approval_timeout, approval_expire_after, tenant,
                           subscriber_name, time_zone, locale, send_window, goes_out_at, digest_every)
    SELECT r.id, $1, $2, r.subscriber_id, r.channel, r.email, r.webhook_url, r.webhook_secret, r.address,
           r.due_at, r.due_at, r.delivery_key, r.workflow_id, r.state,
           make_interval(secs => r.approval_timeout), make_interval(secs => r.approval_expire_after), $16,
           r.subscriber_name, r.time_zone, r.locale, r.send_window::jsonb, r.goes_out_at,
           make_interval(secs => r.digest_every)
      FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                  $9::timestamptz[], $10::text[], $11::text[], $12::text[], $13::float8[], $14::float8[],
                  $15::text[], $17::text[], $18::text[], $19::text[], $21::text[], $22::timestamptz[], $23::float8[])
           AS r(id, subscriber_id, channel, email, webhook_url, webhook_secret, due_at, delivery_key,
                workflow_id, state, approval_timeout, approval_expire_after, address,
                subscriber_name, time_zone, locale, send_window, goes_out_at, digest_every)
    RETURNING id, due_at, delivery_key, state, goes_out_at
)
INSERT INTO reminder_events (reminder_id, type, detail)
SELECT id, 'scheduled', jsonb_build_object('due_at', due_at, 'delivery_key', delivery_key, 'state', state)
                        || CASE WHEN goes_out_at IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('goes_out_at', goes_out_at) END
                        || CASE WHEN $20::text = '' THEN '{}'::jsonb ELSE jsonb_build_object('key', $20::text) END
  FROM ins`

const selectStoredUpdate = `
SELECT kind, requested_window_start, subject, body, coalesce(escalation_email, ''),
       coalesce(template_id, ''), template_data
  FROM updates WHERE tenant = $1 AND shipment_id = $2 AND update_id = $3`

const selectStoredReminders = `
SELECT id, subscriber_id, channel, coalesce(email, ''), coalesce(webhook_url, ''), coalesce(webhook_secret, ''),
       coalesce(address, ''), requested_due_at, approval_timeout, approval_expire_after,
       workflow_id, state, due_at, delivery_key, workflow_started_at IS NOT NULL, created_at,
       coalesce(subscriber_name, ''), coalesce(time_zone, ''), coalesce(locale, ''), send_window, digest_every
  FROM reminders WHERE tenant = $1 AND shipment_id = $2 AND update_id = $3
 ORDER BY subscriber_id`

// ScheduleUpdate writes a new update and its reminders, or, when the update
// is known already, writes nothing. Either way it returns the update as
// stored, read in the same transaction, so the caller compares a
// resubmission with what was first asked for and starts workflows from the
// stored rows, never from the request. Two callers racing with the same
// update are serialised by its primary key: the second reads the first's.
func (s *Store) ScheduleUpdate(ctx context.Context, u reminder.Update, rems []NewReminder) (Stored, error) {
	var out Stored
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var windowStart *time.Time
		if !u.WindowStart.IsZero() {
			windowStart = &u.WindowStart
		}
		err := tx.QueryRow(ctx, insertUpdateRow, u.ShipmentID, u.UpdateID, u.Kind, windowStart,
			u.Message.Subject, u.Message.Text, nullable(u.EscalationEmail), u.Tenant,
			nullable(u.Message.TemplateID), templateData(u.Message.TemplateData)).Scan(&out.Inserted)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if out.Inserted {
			args, err := s.reminderColumns(u, rems)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, insertReminders, args...); err != nil {
				return err
			}
		}
		out.Requested, out.Reminders, err = s.readStored(ctx, tx, u.Tenant, u.ShipmentID, u.UpdateID)
		return err
	})
	if err != nil {
		return Stored{}, fmt.Errorf("error scheduling update: %w", err)
	}
	return out, nil
}

// StoredUpdate is the update tenant holds under shipmentID and updateID as
// ScheduleUpdate would return it, writing nothing; found is false when
// there is none. The API reads it before looking webhook hosts up, so a
// resubmission is compared without a lookup.
func (s *Store) StoredUpdate(ctx context.Context, tenant, shipmentID, updateID string) (out Stored, found bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out.Requested, out.Reminders, err = s.readStored(ctx, tx, tenant, shipmentID, updateID)
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Stored{}, false, nil
	case err != nil:
		return Stored{}, false, fmt.Errorf("error reading a stored update: %w", err)
	}
	return out, true, nil
}

// reminderColumns turns reminders into insertReminders' arguments, webhook
// secrets sealed.
func (s *Store) reminderColumns(u reminder.Update, rems []NewReminder) ([]any, error) {
	n := len(rems)
	ids, subs, channels := make([]string, n), make([]string, n), make([]string, n)
	emails, urls, secrets, addresses := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	dues, keys, wfids := make([]time.Time, n), make([]string, n), make([]string, n)
	states, timeouts, expires := make([]string, n), make([]*float64, n), make([]*float64, n)
	names, zones, locales := make([]*string, n), make([]*string, n), make([]*string, n)
	windows, goesOut, digests := make([]*string, n), make([]*time.Time, n), make([]*float64, n)
	for i, r := range rems {
		if r.Window != nil {
			b, err := json.Marshal(r.Window)
			if err != nil {
				return nil, fmt.Errorf("error encoding a send window: %w", err)
			}
			windows[i] = new(string(b))
		}
		if r.Digest > 0 {
			digests[i] = new(r.Digest.Seconds())
		}
		if r.Window != nil || r.Digest > 0 {
			goesOut[i] = new(r.GoesOutAt())
		}
		ids[i], subs[i], channels[i] = r.ID, r.SubscriberID, string(r.Channel)
		secret, err := s.sealSecret(r.WebhookSecret, r.ID)
		if err != nil {
			return nil, err
		}
		emails[i], urls[i], secrets[i], addresses[i] = nullable(r.Email), nullable(r.WebhookURL), nullable(secret), nullable(r.Address)
		dues[i], keys[i], wfids[i] = r.DueAt, r.DeliveryKey(), r.WorkflowID
		states[i] = string(r.InitialState())
		names[i], zones[i], locales[i] = nullable(r.Name), nullable(r.TimeZone), nullable(r.Locale)
		if r.Approval.Required {
			t, x := r.Approval.Timeout.Seconds(), r.Approval.ExpireAfter.Seconds()
			timeouts[i], expires[i] = &t, &x
		}
	}
	return []any{u.ShipmentID, u.UpdateID, ids, subs, channels, emails, urls, secrets, dues, keys, wfids,
		states, timeouts, expires, addresses, u.Tenant, names, zones, locales, u.ScheduledBy, windows, goesOut, digests}, nil
}

func (s *Store) readStored(ctx context.Context, tx pgx.Tx, tenant, shipmentID, updateID string) (reminder.Update, []StoredReminder, error) {
	u := reminder.Update{Tenant: tenant, ShipmentID: shipmentID, UpdateID: updateID}
	var windowStart *time.Time
	err := tx.QueryRow(ctx, selectStoredUpdate, tenant, shipmentID, updateID).
		Scan(&u.Kind, &windowStart, &u.Message.Subject, &u.Message.Text, &u.EscalationEmail,
			&u.Message.TemplateID, &u.Message.TemplateData)
	if err != nil {
		return u, nil, err
	}
	if windowStart != nil {
		u.WindowStart = *windowStart
	}
	rows, _ := tx.Query(ctx, selectStoredReminders, tenant, shipmentID, updateID)
	rems, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StoredReminder, error) {
		var r StoredReminder
		q := &r.Requested
		q.Tenant, q.ShipmentID, q.UpdateID = tenant, shipmentID, updateID
		var channel, state string
		var timeout, expire *time.Duration
		var window []byte
		var digest *time.Duration
		err := row.Scan(&q.ID, &q.SubscriberID, &channel, &q.Email, &q.WebhookURL, &q.WebhookSecret,
			&q.Address, &q.DueAt, &timeout, &expire, &r.WorkflowID, &state, &r.DueAt, &r.DeliveryKey, &r.WorkflowStarted, &r.CreatedAt,
			&q.Name, &q.TimeZone, &q.Locale, &window, &digest)
		if digest != nil {
			q.Digest = *digest
		}
		q.Channel, r.State = reminder.Channel(channel), reminder.State(state)
		q.Approval = approvalOf(timeout, expire)
		if err == nil {
			q.Window, err = windowOf(window)
		}
		return r, err
	})
	if err != nil {
		return u, nil, err
	}
	for i := range rems {
		q := &rems[i].Requested
		if q.WebhookSecret, err = s.openSecret(q.WebhookSecret, q.ID); err != nil {
			return u, nil, err
		}
	}
	return u, rems, nil
}

func approvalOf(timeout, expire *time.Duration) reminder.Approval {
	if timeout == nil || expire == nil {
		return reminder.Approval{}
	}
	return reminder.Approval{Required: true, Timeout: *timeout, ExpireAfter: *expire}
}

// templateData is the caller's template data for its jsonb column: NULL
// when there is none.
func templateData(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
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
SELECT `+newReminderColumns+`
  FROM reminders
 WHERE workflow_started_at IS NULL AND created_at < $1
   AND state IN `+sqlPending+`
 ORDER BY created_at, id
 LIMIT $2`, createdBefore, limit)
	out, err := pgx.CollectRows(rows, scanNewReminder)
	if err != nil {
		return nil, fmt.Errorf("error listing unstarted reminders: %w", err)
	}
	return out, nil
}

// newReminderColumns are what a reminder's workflow starts from.
const newReminderColumns = `id, shipment_id, update_id, subscriber_id, channel, due_at, workflow_id,
       approval_timeout, approval_expire_after, tenant, created_at, send_window, digest_every`

func scanNewReminder(row pgx.CollectableRow) (NewReminder, error) {
	var r NewReminder
	var channel string
	var timeout, expire *time.Duration
	var window []byte
	var digest *time.Duration
	err := row.Scan(&r.ID, &r.ShipmentID, &r.UpdateID, &r.SubscriberID, &channel, &r.DueAt, &r.WorkflowID, &timeout, &expire, &r.Tenant,
		&r.CreatedAt, &window, &digest)
	if digest != nil {
		r.Digest = *digest
	}
	r.Channel = reminder.Channel(channel)
	r.Approval = approvalOf(timeout, expire)
	if err == nil {
		r.Window, err = windowOf(window)
	}
	return r, err
}

// windowOf reads a send_window column (NULL: none).
func windowOf(raw []byte) (*reminder.SendWindow, error) {
	if raw == nil {
		return nil, nil
	}
	var w reminder.SendWindow
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("error reading a send window: %w", err)
	}
	return &w, nil
}

// goesOutAt is the goes_out_at a write of due time due puts in reminder
// id's row: when its send window opens for due, at its digest's boundary,
// NULL (due itself) for a reminder with neither. A row's window and digest
// never change once written, so they are read apart from the write.
func (s *Store) goesOutAt(ctx context.Context, id string, due time.Time) (*time.Time, error) {
	var raw []byte
	var digest *time.Duration
	err := s.pool.QueryRow(ctx, `SELECT send_window, digest_every FROM reminders WHERE id = $1`, id).Scan(&raw, &digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading a send window: %w", err)
	}
	w, err := windowOf(raw)
	if err != nil || w == nil && digest == nil {
		return nil, err
	}
	var every time.Duration
	if digest != nil {
		every = *digest
	}
	return new(reminder.GoesOutAt(due, w, every)), nil
}

// StartedRow is a reminder's row as marking its workflow started found it.
type StartedRow struct {
	State reminder.State
	DueAt time.Time
	// DeliveryKey is the row's key at DueAt, as the mirror holds it.
	DeliveryKey string
}

// MarkStarted records that Temporal accepted the workflows of these
// reminders (rows never marked are the reconciler's to start) and returns
// each row's state, due time and delivery key. A row a cancel finished while its workflow
// was being started comes back cancelled: the caller must cancel the new
// workflow; one a window move moved meanwhile (RescheduleUnstarted) comes
// back with its new due time: the caller must move the new workflow. The
// row lock this update takes orders it against CancelUnstarted and
// RescheduleUnstarted, so one of each two always sees the other.
func (s *Store) MarkStarted(ctx context.Context, ids []string) (map[string]StartedRow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, _ := s.pool.Query(ctx, `
UPDATE reminders SET workflow_started_at = coalesce(workflow_started_at, now())
 WHERE id = ANY($1)
RETURNING id, state, due_at, delivery_key`, ids)
	out := map[string]StartedRow{}
	var id, state, key string
	var due time.Time
	_, err := pgx.ForEachRow(rows, []any{&id, &state, &due, &key}, func() error {
		out[id] = StartedRow{State: reminder.State(state), DueAt: due, DeliveryKey: key}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error marking workflows started: %w", err)
	}
	return out, nil
}

// RescheduleUnstarted moves a pending reminder whose workflow never started
// to a new due time and delivery key, and reports whether it did; its
// workflow will start from the row. It does nothing to a reminder whose
// workflow was marked started meanwhile: that one moves through its
// workflow.
func (s *Store) RescheduleUnstarted(ctx context.Context, reminderID string, due time.Time, key string, detail map[string]any) (bool, error) {
	var moved bool
	goesOut, err := s.goesOutAt(ctx, reminderID, due)
	if err != nil {
		return false, fmt.Errorf("error rescheduling reminder: %w", err)
	}
	err = s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE reminders SET due_at = $2, delivery_key = $3, goes_out_at = $5, updated_at = now()
     WHERE id = $1 AND state IN `+sqlPending+` AND workflow_started_at IS NULL AND digest_key IS NULL
    RETURNING id
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT id, 'rescheduled', $4 FROM r
), `+leaveDigest+`
SELECT EXISTS (SELECT 1 FROM r)`, reminderID, due, key, jsonDetail(detail), goesOut).Scan(&moved)
	if err != nil {
		return false, fmt.Errorf("error rescheduling reminder: %w", err)
	}
	return moved, nil
}

// CancelUnstarted cancels a pending reminder whose workflow never started,
// and reports whether it did. It does nothing to a reminder whose workflow
// was marked started meanwhile: that one is cancelled through its workflow.
func (s *Store) CancelUnstarted(ctx context.Context, reminderID string, detail map[string]any) (bool, error) {
	var changed bool
	err := s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE reminders SET state = 'cancelled', updated_at = now()
     WHERE id = $1 AND state IN `+sqlIntoCancel+` AND workflow_started_at IS NULL
    RETURNING id
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT id, 'cancelled', $2 FROM r
)
SELECT EXISTS (SELECT 1 FROM r)`, reminderID, jsonDetail(detail)).Scan(&changed)
	if err != nil {
		return false, fmt.Errorf("error cancelling reminder: %w", err)
	}
	return changed, nil
}
