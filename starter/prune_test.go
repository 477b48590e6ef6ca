package starter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// ageMirror moves every row of the test's schema 100 days into the past,
// as the owner may (the audit trail's trigger is off only for that), so
// prune finds it old.
func ageMirror(t *testing.T, s *testenv.Stack) {
	t.Helper()
	_, err := s.DB.Pool.Exec(context.Background(), `
ALTER TABLE reminder_events DISABLE TRIGGER reminder_events_append_only;
UPDATE reminder_events SET at = at - interval '100 days';
ALTER TABLE reminder_events ENABLE TRIGGER reminder_events_append_only;
UPDATE reminders SET due_at = due_at - interval '100 days', updated_at = updated_at - interval '100 days';
UPDATE deliveries SET created_at = created_at - interval '100 days', finished_at = finished_at - interval '100 days',
                      lease_until = lease_until - interval '100 days';`)
	require.NoError(t, err)
}

// An update resubmitted after prune removed its reminders is refused as
// changed and sends nothing: prune keeps the update row unless asked.
func TestResubmissionAfterPruneSendsNothing(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now(), reminder.Email, reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	for _, r := range results {
		require.Equal(t, reminder.Sent, waitFor(t, s, r.WorkflowID).State)
	}
	ageMirror(t, s)
	stats, err := s.Mirror.Prune(ctx, mirror.PruneOptions{OlderThan: 90 * 24 * time.Hour})
	require.NoError(t, err)
	require.EqualValues(t, 2, stats.Reminders)

	_, err = s.Starter.Schedule(ctx, u)
	require.ErrorIs(t, err, starter.ErrUpdateChanged)
	require.Equal(t, 2, s.Mail.Requests(), "sent once, before the prune")
}
