package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// PostgreSQL is down for longer than a local activity's first budget (10 s)
// while one reminder is cancelled and another expires. The workflows keep
// their mirror writes owed and retry them; once PostgreSQL is back, the
// mirror agrees with the engine.
func TestPostgresDownDuringACancelAndAnExpiry(t *testing.T) {
	t.Parallel()
	pg := testenv.StartCluster(t)
	s := testenv.NewStackWith(t, testenv.StackOptions{DatabaseURL: pg.URL})
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	cancelled := emailUpdate(t, 1, due, 0)
	expiring := emailUpdate(t, 1, due, 0)
	expiring.Approval = reminder.Approval{Required: true, Timeout: 3 * time.Second, ExpireAfter: 6 * time.Second}
	expiring.EscalationEmail = "lead@shipper.example"
	var ids []string
	for _, u := range []reminder.Update{cancelled, expiring} {
		results, err := s.Starter.Schedule(ctx, u)
		require.NoError(t, err)
		ids = append(ids, results[0].WorkflowID)
	}

	pg.Stop()
	stopped := time.Now()
	_, err := s.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: ids[0], UpdateName: workflows.UpdateCancel,
		Args:         []any{workflows.CancelRequest{By: "tracker", Reason: "order withdrawn"}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	require.NoError(t, err)
	// The outage is the scenario: it must outlast the old 10 s budget of
	// the mirror writes, and the expiry (6 s) falls inside it.
	<-time.After(time.Until(stopped.Add(25 * time.Second)))
	for _, id := range ids {
		desc, err := s.Temporal.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err)
		require.Nil(t, desc.GetWorkflowExecutionInfo().GetCloseTime(), "still owes its mirror write")
	}
	pg.Start()

	for i, want := range []reminder.State{reminder.Cancelled, reminder.Expired} {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		var res workflows.ReminderResult
		require.NoError(t, s.Temporal.GetWorkflow(wctx, ids[i], "").Get(wctx, &res))
		cancel()
		require.Equal(t, want, res.State)
		id := ids[i][len("reminder/"):]
		row, err := s.Mirror.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, row.State, "the mirror agrees")
	}
	for _, m := range s.Mail.Mails() {
		require.NotEqual(t, string(reminder.PurposeReminder), m.CustomArgs["purpose"], "no reminder was sent")
	}
}
