package mirror

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/reminder"
)

// ApprovalContext is what an approver reads before deciding a reminder:
// the message, who it goes to, the approval's deadlines and who asked.
type ApprovalContext struct {
	Subject, Text string
	// Recipient is the subscriber's address in full (an email, a webhook's
	// URL, another channel's address): whoever shows it masks it.
	Recipient string
	// EscalatesAt and ExpiresAt are the approval's deadlines, counted from
	// the workflow's start as the workflow counts them (to within the
	// moment between its start and the mirror's note of it); zero for a
	// reminder that never needed approval.
	EscalatesAt, ExpiresAt time.Time
	// Escalated: the escalation contact has been told.
	Escalated bool
	// ScheduledBy is the API key that scheduled it ("" when none did).
	ScheduledBy string
}

const selectApprovalContexts = `
SELECT r.id, u.subject, u.body, coalesce(r.email, r.webhook_url, r.address, ''),
       coalesce(r.workflow_started_at, r.created_at) + r.approval_timeout,
       coalesce(r.workflow_started_at, r.created_at) + r.approval_expire_after,
       EXISTS (SELECT 1 FROM reminder_events e WHERE e.reminder_id = r.id AND e.type = 'escalation_sent'),
       coalesce((SELECT e.detail->>'key' FROM reminder_events e
                  WHERE e.reminder_id = r.id AND e.type = 'scheduled' ORDER BY e.id LIMIT 1), '')
  FROM reminders r
  JOIN updates u ON u.tenant = r.tenant AND u.shipment_id = r.shipment_id AND u.update_id = r.update_id
 WHERE r.tenant = $1 AND r.id = ANY($2)`

// ApprovalContexts reads the approval context of tenant's reminders ids;
// an id of another tenant, or of none, is left out.
func (s *Store) ApprovalContexts(ctx context.Context, tenant string, ids []string) (map[string]ApprovalContext, error) {
	out := make(map[string]ApprovalContext, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, _ := s.pool.Query(ctx, selectApprovalContexts, tenant, ids)
	var id string
	var c ApprovalContext
	var escalates, expires *time.Time
	_, err := pgx.ForEachRow(rows, []any{&id, &c.Subject, &c.Text, &c.Recipient, &escalates, &expires, &c.Escalated, &c.ScheduledBy}, func() error {
		if escalates != nil && expires != nil {
			c.EscalatesAt, c.ExpiresAt = *escalates, *expires
		}
		out[id] = c
		c = ApprovalContext{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error reading approval contexts: %w", err)
	}
	return out, nil
}

// CountCap is where Count stops counting: past it a list says "more
// than", and the count never scans a tenant's whole history.
const CountCap = 10_000

// Count counts the reminders f matches (its keyset and Limit aside), up to
// CountCap; more reports that there are more than that.
func (s *Store) Count(ctx context.Context, f Filter) (n int, more bool, err error) {
	f.AfterID, f.AfterDueAt, f.Limit = "", time.Time{}, 0
	where, args := f.sql()
	args = append(args, CountCap+1)
	q := fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM reminders%s LIMIT $%d) capped`, where, len(args))
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("error counting reminders: %w", err)
	}
	return min(n, CountCap), n > CountCap, nil
}

// Overview is a tenant's reminders at a glance.
type Overview struct {
	// ByState counts the tenant's reminders in each state (those the
	// mirror still keeps: retention prunes finished ones).
	ByState map[reminder.State]int
	// From is the first day (UTC midnight) of DuePerDay; DuePerDay[i]
	// counts the reminders yet to be sent that are due on day i.
	From      time.Time
	DuePerDay []int
}

// Overview counts tenant's reminders by state, and those yet to be sent
// by due day (UTC) for days days from the day of from.
func (s *Store) Overview(ctx context.Context, tenant string, from time.Time, days int) (Overview, error) {
	y, m, d := from.UTC().Date()
	o := Overview{ByState: map[reminder.State]int{}, From: time.Date(y, m, d, 0, 0, 0, 0, time.UTC), DuePerDay: make([]int, days)}
	rows, _ := s.pool.Query(ctx, `SELECT state, count(*) FROM reminders WHERE tenant = $1 GROUP BY state`, tenant)
	var state string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		o.ByState[reminder.State(state)] = n
		return nil
	}); err != nil {
		return Overview{}, fmt.Errorf("error counting reminders by state: %w", err)
	}
	var day int
	rows, _ = s.pool.Query(ctx, `
SELECT floor(extract(epoch FROM due_at - $2::timestamptz) / 86400)::int AS day, count(*)
  FROM reminders
 WHERE tenant = $1 AND state IN `+sqlPending+` AND due_at >= $2 AND due_at < $3
 GROUP BY day`, tenant, o.From, o.From.AddDate(0, 0, days))
	if _, err := pgx.ForEachRow(rows, []any{&day, &n}, func() error {
		if day >= 0 && day < days {
			o.DuePerDay[day] = n
		}
		return nil
	}); err != nil {
		return Overview{}, fmt.Errorf("error counting reminders by due day: %w", err)
	}
	return o, nil
}
