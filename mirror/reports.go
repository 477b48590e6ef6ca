package mirror

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// Gauges are the mirror's numbers for monitoring.
type Gauges struct {
	ByState map[reminder.State]int64
	// OldestOverdue is how far past its due time the oldest reminder is
	// that is scheduled, due, and not yet sent; 0 when none is.
	OldestOverdue time.Duration
	// OldestUnconfirmed is how long ago the provider accepted the oldest
	// email it has not yet reported delivered, bounced or dropped; 0 when
	// none is waiting. The delivery side's OldestOverdue.
	OldestUnconfirmed time.Duration
}

// The gauges' queries, exported for EXPLAIN: reminders by state, how late
// the oldest reminder is that is due, scheduled and not yet sent, and how
// long the oldest email accepted without a final outcome has waited (NULL
// when none is). The counts are the tallies the reminders' triggers keep
// (migration 00006; only they write reminder_tallies): counting the table
// itself took seconds at ten million rows. The unconfirmed age is the first entry of the partial index
// reminders_awaiting_outcome_idx (migration 00007).
const (
	CountByStateQuery      = `SELECT state, sum(n)::bigint FROM reminder_tallies GROUP BY state HAVING sum(n) <> 0`
	OldestOverdueQuery     = `SELECT now() - min(coalesce(goes_out_at, due_at)) FROM reminders WHERE state = 'scheduled' AND coalesce(goes_out_at, due_at) < now()`
	OldestUnconfirmedQuery = `SELECT now() - min(awaiting_outcome_since) FROM reminders WHERE awaiting_outcome_since IS NOT NULL`
)

// GaugesStatementTimeout bounds each statement Gauges runs: counting a
// large mirror must not hold a connection the deliveries need.
const GaugesStatementTimeout = 5 * time.Second

// Gauges reads reminders by state (the triggers' tallies, a few dozen
// rows), the oldest overdue undelivered reminder, counted from when it was
// to go out (a reminder waiting for its send window is not overdue; the
// first entry of the partial index on the pending reminders' goes-out
// time, migration 00025) and the oldest email awaiting its
// outcome (the first entry of a partial index), in one read-only
// transaction on one connection, each statement bounded by
// GaugesStatementTimeout. Callers read it periodically, not per scrape
// (see metrics.WatchMirror).
func (s *Store) Gauges(ctx context.Context) (Gauges, error) {
	g := Gauges{ByState: map[reminder.State]int64{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('statement_timeout', $1, true)",
			strconv.FormatInt(GaugesStatementTimeout.Milliseconds(), 10)); err != nil {
			return fmt.Errorf("error setting the statement timeout: %w", err)
		}
		rows, _ := tx.Query(ctx, CountByStateQuery)
		var state string
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
			g.ByState[reminder.State(state)] = n
			return nil
		}); err != nil {
			return fmt.Errorf("error counting reminders: %w", err)
		}
		var err error
		if g.OldestOverdue, err = readOldestOverdue(ctx, tx); err != nil {
			return err
		}
		g.OldestUnconfirmed, err = readAge(ctx, tx, OldestUnconfirmedQuery, "the oldest unconfirmed reminder")
		return err
	})
	if err != nil {
		return Gauges{}, err
	}
	return g, nil
}

// OldestOverdue is how far past its due time the oldest reminder is that is
// scheduled, due, and not yet sent (0 when none is): the gauges' query, for
// operators' tools and the benchmark.
func (s *Store) OldestOverdue(ctx context.Context) (time.Duration, error) {
	return readOldestOverdue(ctx, s.pool)
}

type queryRower interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

func readOldestOverdue(ctx context.Context, q queryRower) (time.Duration, error) {
	return readAge(ctx, q, OldestOverdueQuery, "the oldest overdue reminder")
}

// readAge runs one of the gauges' age queries; NULL (none) is 0.
func readAge(ctx context.Context, q queryRower, query, what string) (time.Duration, error) {
	var age *time.Duration
	if err := q.QueryRow(ctx, query).Scan(&age); err != nil {
		return 0, fmt.Errorf("error reading %s: %w", what, err)
	}
	if age == nil {
		return 0, nil
	}
	return *age, nil
}

// Pending is a Filter state that selects the reminders not yet finished:
// scheduled or awaiting approval.
const Pending reminder.State = "pending"

// Export streams every reminder matching f, ordered by due time, to fn, one
// row at a time: memory stays flat however large the schedule of record is.
func (s *Store) Export(ctx context.Context, f Filter, fn func(Row) error) error {
	f.Limit = 0
	q, args := ListQuery(f)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("error exporting reminders: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return fmt.Errorf("error exporting reminders: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error exporting reminders: %w", err)
	}
	return nil
}
