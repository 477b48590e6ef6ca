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

// Run as the runtime role, as production runs, the real paths write the
// trail the database holds them to (migration 00019): a decision writes
// its approved or rejected event with its move, the send its sent, and a
// cancel after the send a cancelled_late note beside its notice. Every
// reminder so finished is prunable once old.
func TestTheRuntimeRolesPathsKeepTheTrail(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{RuntimeRole: true})
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Second), reminder.Email, reminder.Email)
	u.Approval.Required = true
	u.EscalationEmail = escalationContact
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	approved, rejected := results[0], results[1]

	outs, err := s.Starter.Decide(ctx, starter.Selection{ReminderID: approved.ReminderID}, true,
		starter.Actor{By: "alice", Reason: "customer confirmed"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusApproved, outs[0].Status, outs[0].Error)
	outs, err = s.Starter.Decide(ctx, starter.Selection{ReminderID: rejected.ReminderID}, false, starter.Actor{By: "bob"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRejected, outs[0].Status, outs[0].Error)
	require.Equal(t, reminder.Sent, waitFor(t, s, approved.WorkflowID).State)
	require.Equal(t, reminder.Cancelled, waitFor(t, s, rejected.WorkflowID).State)
	events, err := s.Mirror.Events(ctx, approved.ReminderID)
	require.NoError(t, err)
	require.Equal(t, "approved", events[1].Type)
	require.Equal(t, "alice", events[1].Detail["by"])

	outs, err = s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker", Reason: "order withdrawn"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusCompensated, outcomesByID(outs)[approved.ReminderID].Status)
	require.Equal(t, []string{"scheduled", "approved", "sent", "cancelled_late", "cancellation_sent"},
		eventTypes(t, s, approved.ReminderID))
	require.Equal(t, []string{"scheduled", "rejected"}, eventTypes(t, s, rejected.ReminderID))

	ageMirror(t, s)
	stats, err := mirror.New(s.DB.Pool).Prune(ctx, mirror.PruneOptions{OlderThan: 90 * 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, map[reminder.State]int64{reminder.Sent: 1, reminder.Cancelled: 1}, stats.ByState)
}
