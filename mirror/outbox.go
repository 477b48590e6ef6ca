package mirror

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipnotify/shipnotify/reminder"
)

// The status outbox (migration 00023): the status events the database
// writes with each trail event, one row per endpoint of the reminder's
// tenant that takes it, and the endpoints serve registers. The relay
// (internal/statusevents) claims rows, posts them and records here what
// came of each.
//
// Only the database writes a status_outbox row: the trigger
// reminder_events_status (migration 00023), run for every row inserted
// into reminder_events, in that row's transaction. No Go code here (or
// anywhere) inserts one, and the runtime role may not: this file only
// reads the rows and records what the relay made of them. A new status
// event is a change to reminder/status.go StatusOf and to its SQL twin
// reminder_status_event (docs/development.md, "Rules written twice").

// StatusEndpoint is a tracker's endpoint as serve's configuration names
// it; the mirror keeps a hash of its URL, never the URL or the secret.
type StatusEndpoint struct {
	Name   string
	Tenant string
	Events []reminder.StatusType
	URL    string
}

// urlHash is what the mirror keeps of an endpoint's URL.
func urlHash(url string) string {
	h := sha256.Sum256([]byte(url))
	return hex.EncodeToString(h[:])
}

// RegisterStatusEndpoints makes eps the endpoints status events are
// written for: each is added or brought up to date (a new URL is a new
// destination, so it clears a disabling 410), and every endpoint not among
// them is retired, so no event is written for it any more (its rows
// already written stay, and are given up in time). An endpoint moved to
// another tenant gives up at once the rows its old tenant's reminders
// owed it (GiveUpStrandedStatusEvents): no relay would post them, and an
// event goes only to its own tenant's endpoints. Every serve replica
// registers at its start; they should name the same endpoints (a replica
// that names an endpoint for another tenant posts it nothing of the
// tenant the mirror names: the claim is by tenant too).
func (s *Store) RegisterStatusEndpoints(ctx context.Context, eps []StatusEndpoint) error {
	return s.registerStatusEndpoints(ctx, eps, true)
}

// AddStatusEndpoints adds eps, or brings them up to date, as
// RegisterStatusEndpoints does, and leaves the other endpoints as they are:
// the demo's tracker beside whatever serve registered.
func (s *Store) AddStatusEndpoints(ctx context.Context, eps []StatusEndpoint) error {
	return s.registerStatusEndpoints(ctx, eps, false)
}

// RetireStatusEndpoints retires the endpoints names: no event is written
// for them any more.
func (s *Store) RetireStatusEndpoints(ctx context.Context, names []string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE status_endpoints SET retired_at = now() WHERE retired_at IS NULL AND name = ANY ($1)`, names); err != nil {
		return fmt.Errorf("error retiring status endpoints: %w", err)
	}
	return nil
}

func (s *Store) registerStatusEndpoints(ctx context.Context, eps []StatusEndpoint, retireOthers bool) error {
	names, tenants, events, hashes := make([]string, len(eps)), make([]string, len(eps)), make([]string, len(eps)), make([]string, len(eps))
	for i, e := range eps {
		types := make([]string, len(e.Events))
		for j, t := range e.Events {
			types[j] = string(t)
		}
		names[i], tenants[i], events[i], hashes[i] = e.Name, e.Tenant, strings.Join(types, ","), urlHash(e.URL)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
INSERT INTO status_endpoints AS e (name, tenant, events, url_sha256)
SELECT n, t, string_to_array(ev, ','), h FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS x(n, t, ev, h)
ON CONFLICT (name) DO UPDATE
   SET tenant = excluded.tenant, events = excluded.events, url_sha256 = excluded.url_sha256, retired_at = NULL,
       disabled_at = CASE WHEN e.url_sha256 = excluded.url_sha256 THEN e.disabled_at END,
       disabled_reason = CASE WHEN e.url_sha256 = excluded.url_sha256 THEN e.disabled_reason END`,
			names, tenants, events, hashes); err != nil {
			return err
		}
		if _, err := giveUpStranded(ctx, tx, names); err != nil {
			return err
		}
		if !retireOthers {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE status_endpoints SET retired_at = now() WHERE retired_at IS NULL AND name <> ALL ($1)`, names)
		return err
	})
	if err != nil {
		return fmt.Errorf("error registering status endpoints: %w", err)
	}
	return nil
}

// StatusEvent is one outbox row as the relay posts it.
type StatusEvent struct {
	ID         int64
	Endpoint   string
	ReminderID string
	Seq        int
	// EventID is the event's stable id (webhook-id).
	EventID string
	Type    reminder.StatusType
	// Payload is the body to post, as the database rendered it.
	Payload   []byte
	Attempts  int
	CreatedAt time.Time
}

// ClaimStatusEventsQuery takes an endpoint's next rows, unless it is
// disabled or backing off (a check made once, before any row is read): the
// oldest pending rows that are due, not held by a live claim, first of
// their reminder (a reminder's next row waits until the one before is
// delivered or given up), and of the tenant whose configuration of the
// endpoint will post them: a relay posts a row only to its own tenant's
// endpoint, whatever the mirror's registration says meanwhile (an
// endpoint moved to another tenant, replicas that read different files).
// The row's tenant is the one its body names (data.tenant, absent for the
// default tenant), which the trigger wrote from its reminder and no role
// but the owner can change: what is posted is what is checked.
// FOR UPDATE SKIP LOCKED passes over rows another relay is claiming; the
// lease then keeps them from every other relay until it lapses, without
// a transaction held open while they are posted (RenewStatusEvents
// extends it while they are).
const ClaimStatusEventsQuery = `
WITH next AS (
    SELECT o.id FROM status_outbox o
     WHERE o.endpoint = @endpoint AND o.status = 'pending'
       AND EXISTS (SELECT 1 FROM status_endpoints e
                    WHERE e.name = @endpoint AND e.disabled_at IS NULL AND (e.retry_at IS NULL OR e.retry_at <= now()))
       AND o.next_attempt_at <= now()
       AND (o.lease_until IS NULL OR o.lease_until < now())
       AND NOT EXISTS (SELECT 1 FROM status_outbox p
                        WHERE p.reminder_id = o.reminder_id AND p.endpoint = o.endpoint
                          AND p.seq < o.seq AND p.status = 'pending')
       AND coalesce(o.payload #>> '{data,tenant}', '') = @tenant
     ORDER BY o.id
     LIMIT @limit
       FOR UPDATE OF o SKIP LOCKED
)
UPDATE status_outbox o
   SET claimed_by = @owner, lease_until = now() + make_interval(secs => @lease), attempts = o.attempts + 1
  FROM next WHERE o.id = next.id
RETURNING o.id, o.endpoint, o.reminder_id, o.seq, o.event_id, o.type, o.payload::text, o.attempts, o.created_at`

// StatusClaim is what a relay claims: up to Limit of Endpoint's rows of
// Tenant (as stored, "" the default), for Owner, for Lease.
type StatusClaim struct {
	Endpoint, Tenant, Owner string
	Lease                   time.Duration
	Limit                   int
}

// Args are the claim as ClaimStatusEventsQuery's parameters.
func (c StatusClaim) Args() pgx.NamedArgs {
	return pgx.NamedArgs{"endpoint": c.Endpoint, "tenant": c.Tenant, "owner": c.Owner, "lease": c.Lease.Seconds(), "limit": c.Limit}
}

// ClaimStatusEvents claims c's rows (see ClaimStatusEventsQuery), in the
// order they were written.
func (s *Store) ClaimStatusEvents(ctx context.Context, c StatusClaim) ([]StatusEvent, error) {
	rows, _ := s.pool.Query(ctx, ClaimStatusEventsQuery, c.Args())
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StatusEvent, error) {
		var e StatusEvent
		var typ, payload string
		err := row.Scan(&e.ID, &e.Endpoint, &e.ReminderID, &e.Seq, &e.EventID, &typ, &payload, &e.Attempts, &e.CreatedAt)
		e.Type, e.Payload = reminder.StatusType(typ), []byte(payload)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("error claiming status events: %w", err)
	}
	// RETURNING keeps no order: the queue's is the ids'.
	slices.SortFunc(out, func(a, b StatusEvent) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// RenewStatusEvents extends owner's lease on the rows ids it still holds
// (pending, claimed by it, lapsed or not: a lapsed row no other relay has
// claimed is still only its) to lease from now, and returns those ids; a
// row not among them is no longer owner's to post.
func (s *Store) RenewStatusEvents(ctx context.Context, owner string, ids []int64, lease time.Duration) ([]int64, error) {
	rows, _ := s.pool.Query(ctx, `
UPDATE status_outbox SET lease_until = now() + make_interval(secs => $3)
 WHERE id = ANY ($1) AND claimed_by = $2 AND status = 'pending'
RETURNING id`, ids, owner, lease.Seconds())
	held, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("error renewing the lease on status events: %w", err)
	}
	return held, nil
}

// ReleaseStatusEvents lets go of owner's rows ids that it claimed and never
// posted: another relay may take them at once, and the claim's attempt is
// not counted.
func (s *Store) ReleaseStatusEvents(ctx context.Context, owner string, ids []int64) error {
	_, err := s.pool.Exec(ctx, `
UPDATE status_outbox SET claimed_by = NULL, lease_until = NULL, attempts = greatest(attempts - 1, 0)
 WHERE id = ANY ($1) AND claimed_by = $2 AND status = 'pending'`, ids, owner)
	if err != nil {
		return fmt.Errorf("error releasing status events: %w", err)
	}
	return nil
}

// StatusDelivered records rows ids delivered (the receiver answered 2xx)
// and ends the endpoint's run of failures, if any. A post that completed
// is recorded whoever holds the row now: a relay whose lease lapsed while
// it posted, and whose row another relay took over (and may be posting
// again, under the same id), still tells what happened; and a row given
// up meanwhile was delivered after all. A row already delivered stays as
// it is.
func (s *Store) StatusDelivered(ctx context.Context, endpoint string, ids []int64) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
UPDATE status_outbox SET status = 'delivered', finished_at = now(), last_status = NULL, last_error = NULL,
       claimed_by = NULL, lease_until = NULL
 WHERE id = ANY ($1) AND status IN ('pending', 'given_up')`, ids); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
UPDATE status_endpoints SET failures = 0, failing_since = NULL, retry_at = NULL WHERE name = $1 AND failures > 0`, endpoint)
		return err
	})
	if err != nil {
		return fmt.Errorf("error recording status events delivered: %w", err)
	}
	return nil
}

// StatusRefused records that the receiver refused owner's row for itself
// (a 4xx that is no fault of the endpoint's): the row waits until retry,
// and the endpoint's other rows go on. Unlike a delivery, a refusal is
// recorded only while owner still holds the row: it lets the row go and
// sets when it is next due, which must not cut short another relay's
// claim, nor put back a row delivered meanwhile. (So do the records of a
// failing or gone endpoint's rows; the endpoint's own state is recorded
// whoever holds them.)
func (s *Store) StatusRefused(ctx context.Context, id int64, owner string, status int, detail string, retry time.Duration) error {
	_, err := s.pool.Exec(ctx, `
UPDATE status_outbox SET last_status = nullif($3, 0), last_error = $4, next_attempt_at = now() + make_interval(secs => $5),
       claimed_by = NULL, lease_until = NULL
 WHERE id = $1 AND claimed_by = $2 AND status = 'pending'`, id, owner, status, detail, retry.Seconds())
	if err != nil {
		return fmt.Errorf("error recording a refused status event: %w", err)
	}
	return nil
}

// EndpointFailure is an attempt that failed for the endpoint's sake: no
// answer, a 5xx or 429, a refused destination.
type EndpointFailure struct {
	Status int
	Detail string
	// RetryAfter is the wait the receiver asked for (0: none).
	RetryAfter time.Duration
}

// StatusEndpointFailed records a failure of endpoint's: owner's rows ids
// are let go (their attempts counted), and the endpoint waits before any
// of its rows is posted again, f.RetryAfter if the receiver asked for one,
// else a backoff from base doubling with each failure in the run, at most
// ceiling, spread by jitter in [0, 1) ±20%. It returns the wait.
func (s *Store) StatusEndpointFailed(ctx context.Context, endpoint, owner string, ids []int64, f EndpointFailure,
	base, ceiling time.Duration, jitter float64) (time.Duration, error) {
	var wait float64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
UPDATE status_outbox SET last_status = nullif($3, 0), last_error = $4, claimed_by = NULL, lease_until = NULL
 WHERE id = ANY ($1) AND claimed_by = $2 AND status = 'pending'`, ids, owner, f.Status, f.Detail); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
UPDATE status_endpoints
   SET failures = failures + 1, failing_since = coalesce(failing_since, now()),
       retry_at = now() + make_interval(secs => CASE WHEN $2 > 0 THEN $2
                                                    ELSE least($4, $3 * power(2, least(failures, 30))) * (0.8 + 0.4 * $5) END)
 WHERE name = $1
RETURNING extract(epoch FROM retry_at - now())::float8`,
			endpoint, f.RetryAfter.Seconds(), base.Seconds(), ceiling.Seconds(), jitter).Scan(&wait)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("error recording a failing status endpoint: %w: endpoint %s", ErrNotFound, endpoint)
	}
	if err != nil {
		return 0, fmt.Errorf("error recording a failing status endpoint: %w", err)
	}
	return seconds(wait), nil
}

// StatusEndpointGone disables endpoint, which answered 410 Gone: no event
// is written or posted for it until an operator retries it (or its URL
// changes). owner's rows ids are let go and wait, pending, with the rest.
func (s *Store) StatusEndpointGone(ctx context.Context, endpoint, owner string, ids []int64, reason string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
UPDATE status_outbox SET last_status = 410, last_error = $3, claimed_by = NULL, lease_until = NULL
 WHERE id = ANY ($1) AND claimed_by = $2 AND status = 'pending'`, ids, owner, reason); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
UPDATE status_endpoints SET disabled_at = coalesce(disabled_at, now()), disabled_reason = coalesce(disabled_reason, $2)
 WHERE name = $1`, endpoint, reason)
		return err
	})
	if err != nil {
		return fmt.Errorf("error disabling a status endpoint: %w", err)
	}
	return nil
}

// GiveUpStatusEvents gives up the rows still pending after age: a
// reminder's next row may then go. It returns how many it gave up.
func (s *Store) GiveUpStatusEvents(ctx context.Context, age time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE status_outbox SET status = 'given_up', finished_at = now(), claimed_by = NULL, lease_until = NULL,
       last_error = coalesce(last_error || '; ', '') || 'given up: undelivered after ' || $2
 WHERE status = 'pending' AND created_at < now() - make_interval(secs => $1)
   AND (lease_until IS NULL OR lease_until < now())`, age.Seconds(), age.String())
	if err != nil {
		return 0, fmt.Errorf("error giving up status events: %w", err)
	}
	return tag.RowsAffected(), nil
}

// strandedReason is what a row given up because its endpoint moved to
// another tenant says (`shipnotify outbox list` shows it).
const strandedReason = "given up: its endpoint now belongs to another tenant, " +
	"and an event goes only to its own tenant's endpoints (shipnotify outbox retry posts it if the endpoint is moved back)"

// GiveUpStrandedStatusEvents gives up the pending rows whose reminder is
// not of their endpoint's tenant (the endpoint was moved to another tenant
// after they were written; a row's tenant is its body's, as the claim
// reads it), saying so; it returns how many it gave up.
// No relay posts them (the claim is by tenant), and their reminders' next
// rows may go. Registration does it for the endpoints it registers; the
// relay's sweep for every endpoint, for rows a transaction wrote while the
// move was committing.
func (s *Store) GiveUpStrandedStatusEvents(ctx context.Context) (int64, error) {
	n, err := giveUpStranded(ctx, s.pool, nil)
	if err != nil {
		return 0, fmt.Errorf("error giving up status events of another tenant: %w", err)
	}
	return n, nil
}

// giveUpStranded is GiveUpStrandedStatusEvents for the endpoints names
// (nil: every endpoint).
func giveUpStranded(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, names []string) (int64, error) {
	tag, err := q.Exec(ctx, `
UPDATE status_outbox o
   SET status = 'given_up', finished_at = now(), claimed_by = NULL, lease_until = NULL,
       last_error = coalesce(o.last_error || '; ', '') || $2
  FROM status_endpoints e
 WHERE o.status = 'pending' AND e.name = o.endpoint AND coalesce(o.payload #>> '{data,tenant}', '') <> e.tenant
   AND ($1::text[] IS NULL OR e.name = ANY ($1))`, names, strandedReason)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// StatusEndpointState is a registered endpoint and its queue.
type StatusEndpointState struct {
	Name         string                `json:"name"`
	Tenant       string                `json:"tenant,omitempty"`
	Events       []reminder.StatusType `json:"events"`
	RegisteredAt time.Time             `json:"registered_at"`
	RetiredAt    *time.Time            `json:"retired_at,omitempty"`
	DisabledAt   *time.Time            `json:"disabled_at,omitempty"`
	// DisabledReason says what disabled it (the 410's excerpt).
	DisabledReason string `json:"disabled_reason,omitempty"`
	// Failures counts the current run of failed attempts; RetryAt is when
	// the endpoint is next tried.
	Failures int        `json:"failures"`
	RetryAt  *time.Time `json:"retry_at,omitempty"`
	// Pending and GivenUp count its rows; OldestPending is the age of the
	// oldest pending one (0 when none).
	Pending       int64         `json:"pending"`
	GivenUp       int64         `json:"given_up"`
	OldestPending time.Duration `json:"oldest_pending_ns"`
}

// StatusEndpointsQuery reads every registered endpoint with its queue:
// its pending and given-up rows counted from their partial indexes, its
// oldest pending row the first of its queue.
const StatusEndpointsQuery = `
SELECT e.name, e.tenant, e.events, e.registered_at, e.retired_at, e.disabled_at, coalesce(e.disabled_reason, ''),
       e.failures, e.retry_at,
       (SELECT count(*) FROM status_outbox o WHERE o.endpoint = e.name AND o.status = 'pending'),
       (SELECT count(*) FROM status_outbox o WHERE o.endpoint = e.name AND o.status = 'given_up'),
       coalesce((SELECT extract(epoch FROM now() - o.created_at) FROM status_outbox o
                  WHERE o.endpoint = e.name AND o.status = 'pending' ORDER BY o.id LIMIT 1), 0)::float8
  FROM status_endpoints e ORDER BY e.name`

// StatusEndpoints is every registered endpoint with its queue, by name:
// what `shipnotify outbox list` prints and serve's gauges serve.
func (s *Store) StatusEndpoints(ctx context.Context) ([]StatusEndpointState, error) {
	rows, _ := s.pool.Query(ctx, StatusEndpointsQuery)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (StatusEndpointState, error) {
		var e StatusEndpointState
		var events []string
		var oldest float64
		err := row.Scan(&e.Name, &e.Tenant, &events, &e.RegisteredAt, &e.RetiredAt, &e.DisabledAt, &e.DisabledReason,
			&e.Failures, &e.RetryAt, &e.Pending, &e.GivenUp, &oldest)
		for _, t := range events {
			e.Events = append(e.Events, reminder.StatusType(t))
		}
		e.OldestPending = seconds(oldest)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading status endpoints: %w", err)
	}
	return out, nil
}

// OutboxFilter selects outbox rows; zero fields select every row not
// delivered.
type OutboxFilter struct {
	Endpoint   string
	ReminderID string
	// Status is pending, delivered or given_up ("" pending and given up).
	Status string
	// Limit caps the rows (0: no cap).
	Limit int
}

// OutboxStatuses are the statuses an outbox row may have.
var OutboxStatuses = []string{"pending", "delivered", "given_up"}

// OutboxRow is an outbox row as an operator sees it.
type OutboxRow struct {
	ID            int64               `json:"id"`
	Endpoint      string              `json:"endpoint"`
	ReminderID    string              `json:"reminder_id"`
	Seq           int                 `json:"sequence"`
	EventID       string              `json:"event_id"`
	Type          reminder.StatusType `json:"type"`
	Status        string              `json:"status"`
	Attempts      int                 `json:"attempts"`
	CreatedAt     time.Time           `json:"created_at"`
	NextAttemptAt time.Time           `json:"next_attempt_at"`
	LastStatus    *int                `json:"last_status,omitempty"`
	LastError     string              `json:"last_error,omitempty"`
	FinishedAt    *time.Time          `json:"finished_at,omitempty"`
}

// OutboxRows lists the rows f selects, oldest first.
func (s *Store) OutboxRows(ctx context.Context, f OutboxFilter) ([]OutboxRow, error) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.Status == "" {
		conds = append(conds, "status IN ('pending', 'given_up')")
	} else {
		add("status = ?", f.Status)
	}
	if f.Endpoint != "" {
		add("endpoint = ?", f.Endpoint)
	}
	if f.ReminderID != "" {
		add("reminder_id = ?", f.ReminderID)
	}
	q := `SELECT id, endpoint, reminder_id, seq, event_id, type, status, attempts, created_at, next_attempt_at,
       last_status, coalesce(last_error, ''), finished_at
  FROM status_outbox WHERE ` + strings.Join(conds, " AND ") + ` ORDER BY id`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += " LIMIT $" + strconv.Itoa(len(args))
	}
	rows, _ := s.pool.Query(ctx, q, args...)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxRow, error) {
		var r OutboxRow
		var typ string
		err := row.Scan(&r.ID, &r.Endpoint, &r.ReminderID, &r.Seq, &r.EventID, &typ, &r.Status, &r.Attempts,
			&r.CreatedAt, &r.NextAttemptAt, &r.LastStatus, &r.LastError, &r.FinishedAt)
		r.Type = reminder.StatusType(typ)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing the status outbox: %w", err)
	}
	return out, nil
}

// RetryOptions choose what RetryOutbox puts back: rows by id, or every row
// of an endpoint (which it also enables again, and tries at once).
type RetryOptions struct {
	IDs      []int64
	Endpoint string
}

// RetryResult is what RetryOutbox did.
type RetryResult struct {
	// Requeued rows were given up and are pending again; Hastened rows
	// were pending and waiting, and are due now.
	Requeued int64 `json:"requeued"`
	Hastened int64 `json:"hastened"`
	// Enabled: the endpoint was disabled (a 410) and is enabled again.
	Enabled bool `json:"enabled"`
}

// RetryOutbox puts rows given up back in the queue and makes waiting ones
// due now, keeping their event ids, so a replay is deduplicated by the
// receiver like any retry. For an endpoint, it also ends a disabling 410
// and the current backoff. A row given up before a later row of its
// reminder went is delivered after it: receivers order by sequence.
func (s *Store) RetryOutbox(ctx context.Context, o RetryOptions) (RetryResult, error) {
	var res RetryResult
	which, arg := `id = ANY ($1)`, any(o.IDs)
	if o.Endpoint != "" {
		which, arg = `endpoint = $1`, o.Endpoint
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if o.Endpoint != "" {
			var disabled bool
			err := tx.QueryRow(ctx, `
WITH old AS (SELECT name, disabled_at IS NOT NULL AS disabled FROM status_endpoints WHERE name = $1 FOR UPDATE)
UPDATE status_endpoints e SET disabled_at = NULL, disabled_reason = NULL, failures = 0, failing_since = NULL, retry_at = NULL
  FROM old WHERE e.name = old.name
RETURNING old.disabled`, o.Endpoint).Scan(&disabled)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: no status endpoint %s is registered", ErrNotFound, o.Endpoint)
			}
			if err != nil {
				return err
			}
			res.Enabled = disabled
		}
		tag, err := tx.Exec(ctx, `
UPDATE status_outbox SET status = 'pending', finished_at = NULL, next_attempt_at = now()
 WHERE `+which+` AND status = 'given_up'`, arg)
		if err != nil {
			return err
		}
		res.Requeued = tag.RowsAffected()
		tag, err = tx.Exec(ctx, `
UPDATE status_outbox SET next_attempt_at = now()
 WHERE `+which+` AND status = 'pending' AND next_attempt_at > now()`, arg)
		res.Hastened = tag.RowsAffected()
		return err
	})
	if err != nil {
		return RetryResult{}, fmt.Errorf("error retrying status events: %w", err)
	}
	return res, nil
}
