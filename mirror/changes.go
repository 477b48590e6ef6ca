package mirror

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// The change feed (GET /v1/reminders?updated_since=): every reminder in
// the order of its latest status event, which migration 00023 records
// with the event, in its transaction, in reminder_changes. A reminder
// that changes again moves to the feed's end, so a reader that goes on
// from where it stopped sees every change once, in its latest state.
//
// Only the database writes reminder_changes: the trigger
// reminder_events_status (migration 00023), with the status event, in the
// trail event's transaction. This file only reads it.

// Position is a place in the change feed: after the status event whose
// trail id is Event, written by transaction Xact. The zero Position is
// the feed's start.
type Position struct {
	Xact  uint64
	Event int64
}

// LastChange is a reminder's latest status event.
type LastChange struct {
	// Event is the trail event the status event comes from: a number
	// drawn across tenants, which only the API's sealed id shows
	// (opaque.Keys.EventID).
	Event int64
	Type  reminder.StatusType
	At    time.Time
	// Sequence numbers the reminder's status events from 1.
	Sequence int
}

// ChangeFilter selects a page of the feed.
type ChangeFilter struct {
	// Tenant selects one tenant's reminders ("" the default tenant's),
	// unless AnyTenant selects every tenant's.
	Tenant    string
	AnyTenant bool
	// After is where the page starts.
	After Position
	Limit int
}

// Changes returns the reminders whose latest status event comes after
// f.After, in feed order, each with its LastChange, and the position after
// the last one (f.After when there is none). It hands out only the changes
// of transactions older than its snapshot's xmin: every transaction below
// it has ended, and every transaction still to commit has an id at or
// above it, so no change can later appear behind a position it has passed
// (ids are taken before commit, and commits come in any order: one that
// committed late below a position already read would be missed for good).
// A change shows once the transactions that began before it have ended.
func (s *Store) Changes(ctx context.Context, f ChangeFilter) ([]Row, Position, error) {
	q, args := ChangesQuery(f)
	var out []Row
	last := f.After
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, q, args...)
		var err error
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Row, error) {
			var r Row
			var c LastChange
			var event int64
			var typ, xact string
			if err := scanRowAnd(row, &r, &event, &typ, &c.At, &c.Sequence, &xact); err != nil {
				return r, err
			}
			x, err := strconv.ParseUint(xact, 10, 64)
			if err != nil {
				return r, fmt.Errorf("error reading a change's transaction %q: %w", xact, err)
			}
			c.Event, c.Type = event, reminder.StatusType(typ)
			r.LastChange, last = &c, Position{Xact: x, Event: event}
			return r, nil
		})
		return err
	})
	if err != nil {
		return nil, Position{}, fmt.Errorf("error reading changes: %w", err)
	}
	return out, last, nil
}

// ChangesQuery is the statement Changes runs for f, with its arguments, for
// EXPLAIN: a page reads the feed's position index from f.After on.
func ChangesQuery(f ChangeFilter) (string, []any) {
	args := []any{strconv.FormatUint(f.After.Xact, 10), f.After.Event}
	where := ""
	if !f.AnyTenant {
		args = append(args, f.Tenant)
		where = "c.tenant = $3 AND "
	}
	args = append(args, f.Limit)
	return `
SELECT ` + qualified(rowColumns, "r") + `, c.event_id, c.type, c.at, c.seq, c.xact::text
  FROM reminder_changes c JOIN reminders r ON r.id = c.reminder_id
 WHERE ` + where + `(c.xact, c.event_id) > ($1::xid8, $2)
   AND c.xact < pg_snapshot_xmin(pg_current_snapshot())
 ORDER BY c.xact, c.event_id
 LIMIT $` + strconv.Itoa(len(args)), args
}

// ChangesHead is the feed's present: a page from it holds only the
// changes still to come.
func (s *Store) ChangesHead(ctx context.Context) (Position, error) {
	var xmin string
	if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&xmin); err != nil {
		return Position{}, fmt.Errorf("error reading the feed's head: %w", err)
	}
	x, err := strconv.ParseUint(xmin, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("error reading the feed's head %q: %w", xmin, err)
	}
	return Position{Xact: x}, nil
}

// StatusEventID is the id of the status event a trail event makes, as
// migration 00023 writes it in the outbox. It counts across tenants, so
// no tenant sees it: the relay posts, and the API shows, the event's
// sealed id (opaque.Keys.EventID) instead.
func StatusEventID(trailEventID int64) string { return "evt_" + strconv.FormatInt(trailEventID, 10) }

// qualified prefixes each of a column list's names with table.
func qualified(columns, table string) string {
	names := strings.Split(columns, ",")
	for i, n := range names {
		names[i] = table + "." + strings.TrimSpace(n)
	}
	return strings.Join(names, ", ")
}
