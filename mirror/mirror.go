// Package mirror is shipnotify's PostgreSQL store: every reminder's state, its
// append-only audit trail, and the delivery claims that make notification
// idempotent. Temporal holds the timers; the mirror is the schedule of record
// that the cancellation, escalation, reporting and export paths read.
//
// Its exported names serve shipnotify's own packages and may change in any
// release, except New, SealSecretsWith and Row: the starter's wiring calls
// the first two and Starter.Get returns Row, so they are part of the Go
// contract (docs/architecture.md, "Where the code lives").
package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipnotify/shipnotify/fairqueue"
	"github.com/shipnotify/shipnotify/reminder"
)

// ErrNotFound is returned when a reminder is not in the mirror.
var ErrNotFound = errors.New("not found in the mirror")

// Store reads and writes the mirror through a pgx pool.
type Store struct {
	pool   *pgxpool.Pool
	sealer Sealer
	// updateLocks are the connections LockUpdate may hold, shared among
	// tenants in turn.
	updateLocks *fairqueue.Queue
}

// New returns a store over pool. The pool's size bounds the store's
// concurrency; size it to the worker's activity concurrency.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, updateLocks: fairqueue.New(maxUpdateLocks, maxUpdateLocks/2)}
}

// Pool is the store's pool, for health checks and migrations.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Transition moves a reminder to state, if the state machine lets it
// (reminder.Into; to empty is a note), and appends an event of type with
// detail. It reports whether the state changed. Events are appended either
// way, so the trail shows late arrivals too: a move's event whose move was
// not made is written as a note, reminder.LateEvent (cancelled_late), since
// the database takes a move's event only with its move.
func (s *Store) Transition(ctx context.Context, reminderID string, to reminder.State, eventType string, detail map[string]any) (bool, error) {
	var changed bool
	// The event reads r, so it is written after the move it follows.
	err := s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE reminders SET state = $2, updated_at = now()
     WHERE id = $1 AND state = ANY($5::text[])
    RETURNING id
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT id, CASE WHEN EXISTS (SELECT 1 FROM r) THEN $3 ELSE $6 END, $4 FROM reminders WHERE id = $1
)
SELECT EXISTS (SELECT 1 FROM r)`, reminderID, string(to), eventType, jsonDetail(detail), statesText(reminder.Into(to)),
		reminder.LateEvent(eventType)).Scan(&changed)
	if err != nil {
		return false, fmt.Errorf("error recording %s for reminder: %w", eventType, err)
	}
	return changed, nil
}

// RefusedError is a state change the mirror did not make because the
// reminder was not in a state it may leave by that change: the answer,
// never a silent success.
type RefusedError struct {
	// State is the state the reminder is in.
	State reminder.State
}

func (e *RefusedError) Error() string {
	return "refused: the reminder is " + string(e.State) + " in the mirror"
}

// TransitionFrom moves a reminder from one of the states from to to and
// appends an event of type with detail, in one statement, only if it was
// in one of them: a change that would leave another state (a decision on
// a reminder that expired meanwhile, an expiry of one just approved) is
// refused with a *RefusedError naming the state it found, and writes
// nothing. Repeating a change that was taken (its answer lost) finds the
// reminder in to and answers as taken, writing nothing more.
func (s *Store) TransitionFrom(ctx context.Context, reminderID string, from []reminder.State, to reminder.State, eventType string, detail map[string]any) error {
	var state *string
	var changed bool
	err := s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE reminders SET state = $3, updated_at = now()
     WHERE id = $1 AND state = ANY($2::text[])
    RETURNING state
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT $1, $4, $5 FROM r
)
SELECT coalesce((SELECT state FROM r), (SELECT state FROM reminders WHERE id = $1)), EXISTS (SELECT 1 FROM r)`,
		reminderID, statesText(from), string(to), eventType, jsonDetail(detail)).Scan(&state, &changed)
	switch {
	case err != nil:
		return fmt.Errorf("error recording %s for reminder: %w", eventType, err)
	case state == nil:
		return fmt.Errorf("error recording %s for reminder: %w: %s", eventType, ErrNotFound, reminderID)
	case changed || reminder.State(*state) == to:
		return nil
	}
	return &RefusedError{State: reminder.State(*state)}
}

// Cancel moves a pending reminder to cancelled and appends an event of type
// with detail either way (as a note, reminder.LateEvent, when it did not
// move); it returns the state the row is in after: cancelled, or the final
// state it had reached.
func (s *Store) Cancel(ctx context.Context, reminderID, eventType string, detail map[string]any) (reminder.State, error) {
	var state *string
	err := s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE reminders SET state = 'cancelled', updated_at = now()
     WHERE id = $1 AND state IN `+sqlIntoCancel+`
    RETURNING state
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT id, CASE WHEN EXISTS (SELECT 1 FROM r) THEN $2 ELSE $4 END, $3 FROM reminders WHERE id = $1
)
SELECT coalesce((SELECT state FROM r), (SELECT state FROM reminders WHERE id = $1))`,
		reminderID, eventType, jsonDetail(detail), reminder.LateEvent(eventType)).Scan(&state)
	if err != nil {
		return "", fmt.Errorf("error recording %s for reminder: %w", eventType, err)
	}
	if state == nil {
		return "", fmt.Errorf("error recording %s for reminder: %w: %s", eventType, ErrNotFound, reminderID)
	}
	return reminder.State(*state), nil
}

// Reschedule moves a pending reminder to a new due time and delivery key
// and appends the "rescheduled" event. It is idempotent: a retry of a write
// that was taken (its answer lost) finds the key in place and appends
// nothing. A reminder no longer pending is refused with a *RefusedError,
// and nothing moves.
func (s *Store) Reschedule(ctx context.Context, reminderID string, due time.Time, key string, detail map[string]any) error {
	var state *string
	var moved bool
	goesOut, err := s.goesOutAt(ctx, reminderID, due)
	if err != nil {
		return fmt.Errorf("error rescheduling reminder: %w", err)
	}
	var inDigest bool
	err = s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE reminders SET due_at = $2, delivery_key = $3, goes_out_at = $5, updated_at = now()
     WHERE id = $1 AND state IN `+sqlPending+` AND delivery_key <> $3 AND digest_key IS NULL
    RETURNING id
), ev AS (
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT id, 'rescheduled', $4 FROM r
), `+leaveDigest+`
SELECT (SELECT state FROM reminders WHERE id = $1), EXISTS (SELECT 1 FROM r),
       coalesce((SELECT digest_key IS NOT NULL AND delivery_key <> $3 FROM reminders WHERE id = $1), false)`,
		reminderID, due, key, jsonDetail(detail), goesOut).Scan(&state, &moved, &inDigest)
	switch {
	case err != nil:
		return fmt.Errorf("error rescheduling reminder: %w", err)
	case state == nil:
		return fmt.Errorf("error rescheduling reminder: %w: %s", ErrNotFound, reminderID)
	case !moved && inDigest && reminder.State(*state).Pending():
		return fmt.Errorf("error rescheduling reminder: %w", ErrInDigest)
	case moved || reminder.State(*state).Pending():
		return nil
	}
	return &RefusedError{State: reminder.State(*state)}
}

// RequestCancel notes on a pending reminder that a cancel was asked for and
// not yet finished by its workflow (which records "cancelled" when it is).
func (s *Store) RequestCancel(ctx context.Context, reminderID string, detail map[string]any) error {
	_, err := s.pool.Exec(ctx, `
WITH r AS (
    UPDATE reminders SET cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
     WHERE id = $1 AND state IN `+sqlPending+`
    RETURNING id
)
INSERT INTO reminder_events (reminder_id, type, detail)
SELECT id, 'cancel_requested', $2 FROM r`, reminderID, jsonDetail(detail))
	if err != nil {
		return fmt.Errorf("error recording the cancel request: %w", err)
	}
	return nil
}

// Window returns an update's delivery window start as first requested and
// as it stands now (zero when the update has none).
func (s *Store) Window(ctx context.Context, tenant, shipmentID, updateID string) (requested, current time.Time, err error) {
	var req, cur *time.Time
	err = s.pool.QueryRow(ctx, `
SELECT requested_window_start, window_start FROM updates WHERE shipment_id = $1 AND update_id = $2 AND tenant = $3`,
		shipmentID, updateID, tenant).Scan(&req, &cur)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, time.Time{}, fmt.Errorf("error reading update %s/%s: %w", shipmentID, updateID, ErrNotFound)
	}
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("error reading update: %w", err)
	}
	if req != nil {
		requested = *req
	}
	if cur != nil {
		current = *cur
	}
	return requested, current, nil
}

// maxUpdateLocks bounds the connections that hold an update's lock at
// once, on their own beside the pool: a move holds its lock for minutes of
// Temporal calls, and those connections must never be the pool's, which
// the move's own reads and writes, and everything else, need.
const maxUpdateLocks = 8

// lockKeepalive are the server's TCP keepalives on an update lock's
// connection: a peer silent for 10 s is probed every 5 s, and dropped
// after 3 probes unanswered, which ends its session and its lock.
var lockKeepalive = map[string]string{
	"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3",
}

// LockUpdate serialises the operations that move an update's window: it
// holds a session advisory lock, on a connection of its own outside the
// pool (at most maxUpdateLocks of them at once, and half of them for one
// tenant; a further mover waits for one, holding nothing, and the tenants
// waiting are served in turn, so one tenant's eight moves do not hold
// another's one), until unlock is called or the session ends with the
// process. However many moves run, the pool stays the pool's.
//
// The lock's bounds: a waiter waits at most until ctx ends (the API's
// request deadline); a holder that exits drops it with its connection at
// once; a holder whose host dies or is cut off drops it when PostgreSQL's
// keepalives on that connection go unanswered (lockKeepalive, about 25 s)
// rather than after the kernel's two hours. A holder that is only frozen
// (SIGSTOP, a GC pause) still answers keepalives and keeps the lock until
// it thaws: its move is under way, and the next waits for it.
func (s *Store) LockUpdate(ctx context.Context, tenant, shipmentID, updateID string) (unlock func(), err error) {
	release, err := s.updateLocks.Acquire(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("error locking update: %w", err)
	}
	cfg := s.pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	maps.Copy(cfg.RuntimeParams, lockKeepalive)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		release()
		return nil, fmt.Errorf("error locking update: %w", err)
	}
	// The default tenant's key is the one it had before tenancy, so a
	// serve of the last release and one of this hold the same lock.
	const key = `hashtextextended('shipnotify update ' || $1 || '/' || $2, 0)`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`, reminder.TenantShipment(tenant, shipmentID), updateID); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		release()
		return nil, fmt.Errorf("error locking update: %w", err)
	}
	return func() {
		// Closing the session drops the lock.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
		release()
	}, nil
}

// SetWindowStart records an update's moved delivery window.
func (s *Store) SetWindowStart(ctx context.Context, tenant, shipmentID, updateID string, t time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE updates SET window_start = $3 WHERE shipment_id = $1 AND update_id = $2 AND tenant = $4`,
		shipmentID, updateID, t, tenant)
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
