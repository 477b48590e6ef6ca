package mirror

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// Row is a reminder as the mirror holds it, without its recipient's address
// or secret, so it can be printed and exported. It is no wire format: the
// API and the CLI's --json map it into internal/api's Reminder, an export
// or prune archive writes exportColumns (format.go), so a field added here
// reaches neither until it is mapped there (docs/development.md).
type Row struct {
	ID string
	// Tenant owns the reminder; "" is the default tenant.
	Tenant       string
	ShipmentID   string
	UpdateID     string
	SubscriberID string
	Channel      reminder.Channel
	DueAt        time.Time
	// RequestedDueAt is the due time first asked for; moving the update's
	// window recomputes DueAt from it.
	RequestedDueAt    time.Time
	State             reminder.State
	DeliveryKey       string
	WorkflowID        string
	WorkflowStartedAt *time.Time
	SentAt            *time.Time
	// CancelRequestedAt: a cancel was asked for while the reminder was
	// pending; its workflow had not finished it when the caller stopped waiting.
	CancelRequestedAt *time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
	// ProviderOutcome is what the mail provider last reported of the
	// reminder's own delivery, at ProviderOutcomeAt by the provider's
	// clock; "" while it has reported nothing (a webhook never has one).
	ProviderOutcome   reminder.ProviderOutcome
	ProviderOutcomeAt *time.Time
	// DeliveredAt is when the subscriber got it: the provider's delivered
	// report, or the webhook receiver's 2xx.
	DeliveredAt *time.Time
	// LastChange is the reminder's latest status event: the change that
	// put it in a page of the change feed (Store.Changes); nil elsewhere.
	LastChange *LastChange
	// GoesOutAt is when it goes out: DueAt, or the opening of Window,
	// its send window (nil: none), that DueAt takes.
	GoesOutAt time.Time
	Window    *reminder.SendWindow
	// Digest is the interval it is gathered over with its address's other
	// reminders (0: it goes out alone); DigestKey, once a digest's send is
	// sealed with it, that digest's key.
	Digest    time.Duration
	DigestKey string
}

// rowColumns are Row's columns. List's due window reads them all from the
// covering index reminders_due_at_list_idx: a column added here goes into
// its INCLUDE too (a migration), or that read goes back to the heap.
const rowColumns = `id, shipment_id, update_id, subscriber_id, channel, due_at, requested_due_at, state,
       delivery_key, workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at,
       provider_outcome, provider_outcome_at, delivered_at, tenant, goes_out_at, send_window,
       digest_every, digest_key`

func scanRow(row pgx.CollectableRow) (Row, error) {
	var r Row
	err := scanRowAnd(row, &r)
	return r, err
}

// scanRowAnd scans rowColumns into r, then the columns after them into
// more.
func scanRowAnd(row pgx.Row, r *Row, more ...any) error {
	var channel, state string
	var outcome *string
	var window []byte
	var goesOut *time.Time
	var digest *time.Duration
	var digestKey *string
	err := row.Scan(append([]any{&r.ID, &r.ShipmentID, &r.UpdateID, &r.SubscriberID, &channel, &r.DueAt, &r.RequestedDueAt, &state,
		&r.DeliveryKey, &r.WorkflowID, &r.WorkflowStartedAt, &r.SentAt, &r.CancelRequestedAt, &r.CreatedAt, &r.UpdatedAt,
		&outcome, &r.ProviderOutcomeAt, &r.DeliveredAt, &r.Tenant, &goesOut, &window, &digest, &digestKey}, more...)...)
	if digest != nil {
		r.Digest = *digest
	}
	if digestKey != nil {
		r.DigestKey = *digestKey
	}
	r.Channel, r.State = reminder.Channel(channel), reminder.State(state)
	if outcome != nil {
		r.ProviderOutcome = reminder.ProviderOutcome(*outcome)
	}
	r.GoesOutAt = r.DueAt
	if goesOut != nil {
		r.GoesOutAt = *goesOut
	}
	if err == nil {
		r.Window, err = windowOf(window)
	}
	return err
}

// Get returns one reminder.
func (s *Store) Get(ctx context.Context, id string) (Row, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+rowColumns+` FROM reminders WHERE id = $1`, id)
	r, err := pgx.CollectExactlyOneRow(rows, scanRow)
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, fmt.Errorf("error reading reminder %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("error reading reminder: %w", err)
	}
	return r, nil
}

// Event is one entry of a reminder's audit trail.
type Event struct {
	ID     int64
	Type   string
	At     time.Time
	Detail map[string]any
}

// Events returns a reminder's audit trail, oldest first.
func (s *Store) Events(ctx context.Context, reminderID string) ([]Event, error) {
	rows, _ := s.pool.Query(ctx, `
SELECT id, type, at, detail FROM reminder_events WHERE reminder_id = $1 ORDER BY id`, reminderID)
	events, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Event])
	if err != nil {
		return nil, fmt.Errorf("error reading events: %w", err)
	}
	// One form for every time a reader sees: PostgreSQL's jsonb writes a
	// timestamptz as +00:00, Go as Z.
	for i := range events {
		events[i].At = events[i].At.UTC()
		for k, v := range events[i].Detail {
			events[i].Detail[k] = utcTimes(v)
		}
	}
	return events, nil
}

// utcTimes is v with every string that is an RFC 3339 time written in UTC
// with Z, inside maps and lists too.
func utcTimes(v any) any {
	switch v := v.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UTC().Format(time.RFC3339Nano)
		}
	case map[string]any:
		for k, x := range v {
			v[k] = utcTimes(x)
		}
	case []any:
		for i, x := range v {
			v[i] = utcTimes(x)
		}
	}
	return v
}

// Filter selects reminders; zero fields select everything of the default
// tenant. State may be Pending. Due bounds are half-open: DueFrom <= due_at < DueTo.
type Filter struct {
	// Tenant selects one tenant's reminders ("" the default tenant's),
	// unless AnyTenant selects every tenant's: an operator's view.
	Tenant     string
	AnyTenant  bool
	ShipmentID string
	UpdateID   string
	State      reminder.State
	DueFrom    time.Time
	DueTo      time.Time
	// GoesOutFrom and GoesOutTo bound when reminders go out (their send
	// window's opening, else their due time), half-open likewise: what is
	// owed on a day counts by these.
	GoesOutFrom time.Time
	GoesOutTo   time.Time
	// DigestKey selects the members of one digest, by its key.
	DigestKey string
	// AfterDueAt and AfterID, when AfterID is set, continue a listing past
	// the row at (AfterDueAt, AfterID) in List's (due_at, id) order: keyset
	// pagination. A page starts where the last one ended however deep it
	// lies, and rows added or finished meanwhile neither repeat nor skip a
	// row of the pages, as an offset would.
	AfterDueAt time.Time
	AfterID    string
	// Limit caps the rows returned; 0 means no cap.
	Limit int
}

// List returns the reminders matching f, ordered by due time, then id (so
// reminders due at one instant, as a burst's are, keep a total order).
func (s *Store) List(ctx context.Context, f Filter) ([]Row, error) {
	q, args := ListQuery(f)
	rows, _ := s.pool.Query(ctx, q, args...)
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("error listing reminders: %w", err)
	}
	return out, nil
}

// ListQuery is the statement List (and, without a limit, Export) runs for
// f, with its arguments, for EXPLAIN: the benchmark shows its plans.
func ListQuery(f Filter) (string, []any) {
	where, args := f.sql()
	q := `SELECT ` + rowColumns + ` FROM reminders` + where + ` ORDER BY due_at, id`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += " LIMIT $" + strconv.Itoa(len(args))
	}
	return q, args
}

func (f Filter) sql() (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1))
	}
	if !f.AnyTenant {
		add("tenant = ?", f.Tenant)
	}
	if f.ShipmentID != "" {
		add("shipment_id = ?", f.ShipmentID)
	}
	if f.UpdateID != "" {
		add("update_id = ?", f.UpdateID)
	}
	switch f.State {
	case "":
	case Pending:
		conds = append(conds, "state IN "+sqlPending)
	default:
		add("state = ?", string(f.State))
	}
	if !f.DueFrom.IsZero() {
		add("due_at >= ?", f.DueFrom)
	}
	if !f.DueTo.IsZero() {
		add("due_at < ?", f.DueTo)
	}
	if f.DigestKey != "" {
		add("digest_key = ?", f.DigestKey)
	}
	if !f.GoesOutFrom.IsZero() {
		add("coalesce(goes_out_at, due_at) >= ?", f.GoesOutFrom)
	}
	if !f.GoesOutTo.IsZero() {
		add("coalesce(goes_out_at, due_at) < ?", f.GoesOutTo)
	}
	if f.AfterID != "" {
		// The keyset. PostgreSQL derives due_at >= the cursor's from the
		// row comparison, so the due_at indexes start at the cursor.
		args = append(args, f.AfterDueAt, f.AfterID)
		conds = append(conds, "(due_at, id) > ($"+strconv.Itoa(len(args)-1)+", $"+strconv.Itoa(len(args))+")")
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// Decision is the approval decision a reminder's trail records.
type Decision struct {
	Approved bool
	// By is who decided, as they said; Key the credential it came with.
	By, Key string
	At      time.Time
}

// Decisions are the latest approval decisions of the reminders ids that
// have one, by reminder.
func (s *Store) Decisions(ctx context.Context, ids []string) (map[string]Decision, error) {
	out := map[string]Decision{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, _ := s.pool.Query(ctx, `
SELECT DISTINCT ON (reminder_id) reminder_id, type = 'approved', coalesce(detail->>'by', ''), coalesce(detail->>'key', ''), at
  FROM reminder_events
 WHERE reminder_id = ANY($1) AND type IN ('approved', 'rejected')
 ORDER BY reminder_id, id DESC`, ids)
	var id string
	var d Decision
	_, err := pgx.ForEachRow(rows, []any{&id, &d.Approved, &d.By, &d.Key, &d.At}, func() error {
		out[id] = d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error reading decisions: %w", err)
	}
	return out, nil
}
