package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/reminder"
)

// PruneMinAge is the youngest age Prune accepts, and the audit trail's
// trigger the youngest it lets go (migration 00006 holds the same 4 days):
// the notify activity's retry budget (72 h), which bounds a compensation or
// escalation notice still running on a finished reminder, plus a day.
const PruneMinAge = budget.NotifyRetries + 24*time.Hour

// DefaultPruneBatch is reminders per prune transaction: small enough that
// each transaction holds its row locks for milliseconds.
const DefaultPruneBatch = 1000

// ErrPruneTooYoung is returned for an age under PruneMinAge.
var ErrPruneTooYoung = errors.New("prune: an age under " + PruneMinAge.String() + " could take a reminder whose workflow still runs a notice")

// PruneOptions configure Prune.
type PruneOptions struct {
	// OlderThan is the age: a reminder goes once it is finished (sent,
	// delivered, undeliverable, failed, cancelled, expired), due, and
	// unchanged for at least this long, its trail records its finish,
	// and none of its events and deliveries is younger.
	OlderThan time.Duration
	// Batch is reminders per transaction; 0 means DefaultPruneBatch.
	Batch int
	// Updates also removes the update rows a batch leaves with no
	// reminder. Kept, such a row makes a resubmission of its update a
	// changed update (refused, nothing sent); removed, the resubmission is
	// a new update, scheduled and sent again. It holds the message text and
	// escalation address.
	Updates bool
	// DryRun counts what would go; nothing is locked or deleted.
	DryRun bool
	// Archive receives each batch's reminders inside its transaction,
	// before they are deleted; if it fails, the batch is not deleted.
	Archive func([]Row) error
	// Pause is a rest between batches, to leave PostgreSQL to the
	// deliveries on a busy mirror.
	Pause time.Duration
	// OnBatch, when set, is told the running totals after each batch.
	OnBatch func(PruneStats)
}

// PruneStats counts what Prune removed (or, dry, would remove).
type PruneStats struct {
	Reminders  int64                    `json:"reminders"`
	ByState    map[reminder.State]int64 `json:"by_state"`
	Events     int64                    `json:"events"`
	Deliveries int64                    `json:"deliveries"`
	// StatusEvents are the status outbox's rows: delivered to the
	// tracker's endpoints, or given up.
	StatusEvents int64 `json:"status_events"`
	// Updates are update rows left with no reminder, removed with their
	// last when asked (a dry run does not count them).
	Updates int64 `json:"updates"`
	// Skipped are old finished reminders kept this time: one of their
	// deliveries is 'sending' or recent, an event is recent, another
	// transaction held them, or they name a disabled webhook endpoint.
	Skipped int64         `json:"skipped"`
	Batches int           `json:"batches"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Rows is every row removed, over all tables.
func (s PruneStats) Rows() int64 {
	return s.Reminders + s.Events + s.Deliveries + s.StatusEvents + s.Updates
}

// Prune's statements. A candidate is finished, due and unchanged for the
// age ($1, seconds), and its trail holds an event that records its move
// into the state it is in (reminder.EventReaches; the database takes such
// an event from the runtime role only with its move, migration 00019), so
// a row moved by hand with no event never goes. Candidates are taken in
// (due_at, id) order past a cursor, so no run reads a row twice.
// A run locks them through reminders_prune_candidates (migrations 00006
// and 00019: the same query, FOR UPDATE SKIP LOCKED, so a row another
// transaction holds is passed over, never waited for); a dry run reads
// them with pruneCandidates, locking nothing.
var (
	lockPruneCandidates = `SELECT id, due_at FROM reminders_prune_candidates($1, $2, $3, $4)`
	pruneCandidates     = `
SELECT id, due_at FROM reminders r
 WHERE due_at < now() - make_interval(secs => $1)
   AND (due_at, id) > ($2, $3)
   AND state IN ` + sqlFinal + `
   AND updated_at < now() - make_interval(secs => $1)
   AND EXISTS (SELECT 1 FROM reminder_events e WHERE e.reminder_id = r.id
                  AND reminder_event_reaches(e.type, e.detail, r.state))
 ORDER BY due_at, id
 LIMIT $4`
	// pruneDoomed re-reads the candidates once locked, in a snapshot taken
	// after the lock: no delivery or event can be added to them any more,
	// so none added meanwhile is missed. A reminder keeps its rows while a
	// delivery is 'sending' (however old: its send may not be recorded),
	// while anything of it is younger than the age, while it names a
	// disabled webhook endpoint (that row would lose its reason), while
	// a provider's outcome owes an escalation not yet started or started
	// within the age (its notice may not have claimed its key yet), and
	// while a status event of it waits to be posted to a tracker's endpoint
	// (the relay gives one up after statusevents.GiveUpAfter, under the age).
	pruneDoomed = `
SELECT ` + rowColumns + ` FROM reminders r
 WHERE r.id = ANY($2)
   AND r.state IN ` + sqlFinal + `
   AND r.updated_at < now() - make_interval(secs => $1)
   AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.reminder_id = r.id
                      AND (d.status = 'sending' OR d.created_at >= now() - make_interval(secs => $1)
                           OR d.finished_at >= now() - make_interval(secs => $1)))
   AND NOT EXISTS (SELECT 1 FROM reminder_events e WHERE e.reminder_id = r.id
                      AND e.at >= now() - make_interval(secs => $1))
   AND NOT EXISTS (SELECT 1 FROM disabled_endpoints x WHERE x.reminder_id = r.id)
   AND NOT EXISTS (SELECT 1 FROM outcome_escalations o WHERE o.reminder_id = r.id
                      AND ((o.started_at IS NULL AND o.settled_at IS NULL)
                           OR o.started_at >= now() - make_interval(secs => $1)))
   AND NOT EXISTS (SELECT 1 FROM status_outbox s WHERE s.reminder_id = r.id AND s.status = 'pending')`
	// The update rows the batch leaves without a reminder. One another
	// transaction holds (a resubmission of the update, say) is waited for,
	// up to pruneLockTimeout.
	pruneUpdates = `
DELETE FROM updates u
 USING (SELECT DISTINCT * FROM unnest($1::text[], $2::text[], $3::text[])) AS x(shipment_id, update_id, tenant)
 WHERE u.shipment_id = x.shipment_id AND u.update_id = x.update_id AND u.tenant = x.tenant
   AND NOT EXISTS (SELECT 1 FROM reminders r WHERE r.tenant = u.tenant
                      AND r.shipment_id = u.shipment_id AND r.update_id = u.update_id)`
)

// pruneLockTimeout bounds how long a batch waits for a row lock (only a
// delivery or update row being written at that moment can make it wait);
// past it the batch is skipped and its reminders stay for the next run.
const pruneLockTimeout = 2 * time.Second

// Prune removes finished reminders older than o.OlderThan with their
// events and deliveries (and, asked, the update rows they leave empty), in
// batches of o.Batch reminders, each in a short transaction of its own that
// marks itself as prune's (SET LOCAL shipnotify.prune = 'on', the one way
// the audit trail's trigger lets events go). It runs until no candidate is
// left or ctx ends, and returns what it removed.
func (s *Store) Prune(ctx context.Context, o PruneOptions) (PruneStats, error) {
	stats := PruneStats{ByState: map[reminder.State]int64{}}
	if o.OlderThan < PruneMinAge {
		return stats, ErrPruneTooYoung
	}
	if o.Batch <= 0 {
		o.Batch = DefaultPruneBatch
	}
	begin := time.Now()
	var cursor pruneCursor // the zero time sorts before every due time
	for {
		n, err := s.pruneBatch(ctx, o, &cursor, &stats)
		stats.Elapsed = time.Since(begin)
		if err != nil {
			return stats, err
		}
		if n == 0 {
			return stats, nil
		}
		stats.Batches++
		if o.OnBatch != nil {
			o.OnBatch(stats)
		}
		if o.Pause > 0 {
			t := time.NewTimer(o.Pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return stats, ctx.Err()
			case <-t.C:
			}
		}
	}
}

// pruneCursor is the (due_at, id) of the last candidate taken.
type pruneCursor struct {
	due time.Time
	id  string
}

// pruneBatch takes the next batch of candidates past the cursor and
// removes (or counts) what may go; it returns how many candidates it took.
func (s *Store) pruneBatch(ctx context.Context, o PruneOptions, cursor *pruneCursor, stats *PruneStats) (int, error) {
	age := o.OlderThan.Seconds()
	var taken int
	// The batch's counts join the totals only once it has committed.
	batch := &PruneStats{ByState: map[reminder.State]int64{}}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('shipnotify.prune', 'on', true),
       set_config('lock_timeout', $1, true), set_config('statement_timeout', '60s', true)`,
			fmt.Sprint(pruneLockTimeout.Milliseconds())); err != nil {
			return fmt.Errorf("error starting a prune batch: %w", err)
		}
		q := lockPruneCandidates
		if o.DryRun {
			q = pruneCandidates
		}
		var ids []string
		rows, _ := tx.Query(ctx, q, age, cursor.due, cursor.id, o.Batch)
		var id string
		var due time.Time
		if _, err := pgx.ForEachRow(rows, []any{&id, &due}, func() error {
			ids = append(ids, id)
			cursor.due, cursor.id = due, id
			return nil
		}); err != nil {
			return fmt.Errorf("error finding reminders to prune: %w", err)
		}
		taken = len(ids)
		if taken == 0 {
			return nil
		}
		rows, _ = tx.Query(ctx, pruneDoomed, age, ids)
		doomed, err := pgx.CollectRows(rows, scanRow)
		if err != nil {
			return fmt.Errorf("error reading reminders to prune: %w", err)
		}
		batch.Skipped = int64(taken - len(doomed))
		if len(doomed) == 0 {
			return nil
		}
		if o.DryRun {
			return countDoomed(ctx, tx, doomed, batch)
		}
		if o.Archive != nil {
			if err := o.Archive(doomed); err != nil {
				return fmt.Errorf("error archiving reminders before pruning them: %w", err)
			}
		}
		return deleteDoomed(ctx, tx, doomed, o.Updates, batch)
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available
		stats.Skipped += int64(taken)
		return taken, nil
	case err != nil:
		return taken, err
	}
	stats.add(*batch)
	return taken, nil
}

func (s *PruneStats) add(b PruneStats) {
	s.Reminders += b.Reminders
	s.Events += b.Events
	s.Deliveries += b.Deliveries
	s.StatusEvents += b.StatusEvents
	s.Updates += b.Updates
	s.Skipped += b.Skipped
	for st, n := range b.ByState {
		s.ByState[st] += n
	}
}

// deleteDoomed removes the reminders' events first (the trigger checks
// each event's reminder, which must still be there), then their
// deliveries, the reminders, and, when asked, the update rows left empty,
// counting into the batch's stats.
func deleteDoomed(ctx context.Context, tx pgx.Tx, doomed []Row, updates bool, stats *PruneStats) error {
	ids := make([]string, len(doomed))
	shipmentIDs, updateIDs, tenants := make([]string, len(doomed)), make([]string, len(doomed)), make([]string, len(doomed))
	for i, r := range doomed {
		ids[i], shipmentIDs[i], updateIDs[i], tenants[i] = r.ID, r.ShipmentID, r.UpdateID, r.Tenant
	}
	tag, err := tx.Exec(ctx, `DELETE FROM reminder_events WHERE reminder_id = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("error pruning events: %w", err)
	}
	stats.Events = tag.RowsAffected()
	if tag, err = tx.Exec(ctx, `DELETE FROM deliveries WHERE reminder_id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("error pruning deliveries: %w", err)
	}
	stats.Deliveries = tag.RowsAffected()
	// What the provider reported: the event ids kept against repeats (long
	// past SendGrid's retries) and the escalations it gave.
	if _, err = tx.Exec(ctx, `DELETE FROM provider_events WHERE reminder_id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("error pruning provider events: %w", err)
	}
	if _, err = tx.Exec(ctx, `DELETE FROM outcome_escalations WHERE reminder_id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("error pruning escalations: %w", err)
	}
	// The status events posted (or given up); the reminders' places in
	// the change feed go with them (ON DELETE CASCADE).
	if tag, err = tx.Exec(ctx, `DELETE FROM status_outbox WHERE reminder_id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("error pruning status events: %w", err)
	}
	stats.StatusEvents = tag.RowsAffected()
	rows, _ := tx.Query(ctx, `DELETE FROM reminders WHERE id = ANY($1) RETURNING state`, ids)
	var state string
	if _, err := pgx.ForEachRow(rows, []any{&state}, func() error {
		stats.ByState[reminder.State(state)]++
		stats.Reminders++
		return nil
	}); err != nil {
		return fmt.Errorf("error pruning reminders: %w", err)
	}
	if updates {
		if tag, err = tx.Exec(ctx, pruneUpdates, shipmentIDs, updateIDs, tenants); err != nil {
			return fmt.Errorf("error pruning updates: %w", err)
		}
		stats.Updates = tag.RowsAffected()
	}
	return nil
}

// countDoomed counts, without deleting, the events and deliveries
// deleteDoomed would remove with the reminders. Update rows are not
// counted: whether one is left empty depends on batches not yet taken.
func countDoomed(ctx context.Context, tx pgx.Tx, doomed []Row, stats *PruneStats) error {
	ids := make([]string, len(doomed))
	for i, r := range doomed {
		ids[i] = r.ID
	}
	var events, deliveries int64
	err := tx.QueryRow(ctx, `
SELECT (SELECT count(*) FROM reminder_events WHERE reminder_id = ANY($1)),
       (SELECT count(*) FROM deliveries WHERE reminder_id = ANY($1)),
       (SELECT count(*) FROM status_outbox WHERE reminder_id = ANY($1))`, ids).Scan(&events, &deliveries, &stats.StatusEvents)
	if err != nil {
		return fmt.Errorf("error counting what prune would remove: %w", err)
	}
	stats.Events, stats.Deliveries = events, deliveries
	for _, r := range doomed {
		stats.ByState[r.State]++
		stats.Reminders++
	}
	return nil
}
