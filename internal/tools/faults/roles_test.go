package faults

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// The product runs as a member of shipnotify_runtime — the worker process,
// the starter, a cancel, a reschedule and a verify all work — and that role
// cannot rewrite the audit trail: not disable its append-only trigger, not
// truncate it, not delete or update from it, not delete reminders.
func TestTheRuntimeRoleRunsTheProductButCannotRewriteTheAuditTrail(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true, RuntimeRole: true})
	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	ctx := context.Background()

	u := s.Update(t, time.Now().Add(time.Second), reminder.Email, reminder.Webhook, reminder.Email)
	u.Subscribers[2].DueAt = time.Now().Add(48 * time.Hour)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	waitAll(t, s, results[:2], time.Minute)
	require.Zero(t, s.Hooks.Rejected(), worker.Log())
	out, err := s.Starter.RescheduleReminder(ctx, "", results[2].ReminderID, time.Now().Add(72*time.Hour), starter.Actor{By: "planner"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRescheduled, out.Status, out.Error)
	outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker"})
	require.NoError(t, err)
	require.Len(t, outs, 3)
	divergences, err := s.Starter.Verify(ctx, starter.VerifyOptions{Repair: true})
	require.NoError(t, err)
	require.Empty(t, divergences)

	conn, err := pgx.Connect(ctx, s.DB.RuntimeURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, stmt := range []string{
		`ALTER TABLE reminder_events DISABLE TRIGGER reminder_events_append_only`,
		`TRUNCATE reminder_events`,
		`DELETE FROM reminder_events`,
		`UPDATE reminder_events SET type = 'sent'`,
		`DELETE FROM reminders`,
		`DROP TABLE deliveries`,
	} {
		_, err := conn.Exec(ctx, stmt)
		require.Error(t, err, stmt)
		require.Regexp(t, `permission denied|must be owner`, err.Error(), stmt)
	}
}
