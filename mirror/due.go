package mirror

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DueSpan is when a tenant's reminders yet to be sent go out (their send
// window's opening, else their due time): how many
// there are, and the earliest and latest due time (zero when none).
type DueSpan struct {
	N           int
	First, Last time.Time
}

// PendingDueSpan reads the span of the tenant's pending reminders' due
// times, so a chart of them can cover what is pending and no more.
func (s *Store) PendingDueSpan(ctx context.Context, tenant string) (DueSpan, error) {
	var sp DueSpan
	var first, last *time.Time
	err := s.pool.QueryRow(ctx, `SELECT count(*), min(coalesce(goes_out_at, due_at)), max(coalesce(goes_out_at, due_at)) FROM reminders WHERE tenant = $1 AND state IN `+sqlPending,
		tenant).Scan(&sp.N, &first, &last)
	if err != nil {
		return DueSpan{}, fmt.Errorf("error reading when pending reminders fall due: %w", err)
	}
	if first != nil && last != nil {
		sp.First, sp.Last = *first, *last
	}
	return sp, nil
}

// PendingDueCounts counts the tenant's pending reminders falling due in
// each of the len(bounds)-1 spans [bounds[i], bounds[i+1]). The bounds
// are the caller's (a reader's local days, weeks or months), ascending.
func (s *Store) PendingDueCounts(ctx context.Context, tenant string, bounds []time.Time) ([]int, error) {
	if len(bounds) < 2 {
		return nil, nil
	}
	out := make([]int, len(bounds)-1)
	rows, _ := s.pool.Query(ctx, `
SELECT width_bucket(coalesce(goes_out_at, due_at), $2::timestamptz[]) AS span, count(*)
  FROM reminders
 WHERE tenant = $1 AND state IN `+sqlPending+` AND coalesce(goes_out_at, due_at) >= $3 AND coalesce(goes_out_at, due_at) < $4
 GROUP BY span`, tenant, bounds, bounds[0], bounds[len(bounds)-1])
	var span, n int
	if _, err := pgx.ForEachRow(rows, []any{&span, &n}, func() error {
		// width_bucket numbers [bounds[0], bounds[1]) as 1.
		if span >= 1 && span <= len(out) {
			out[span-1] = n
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("error counting pending reminders by due span: %w", err)
	}
	return out, nil
}
