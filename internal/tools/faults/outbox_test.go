package faults

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// PostgreSQL killed between a state change and the status event it owes
// the tracker leaves neither, and killed just after they commit keeps
// both: the event is written in the change's transaction (migration
// 00023), so no crash can part them.
func TestPostgresKilledBetweenAChangeAndItsStatusEvent(t *testing.T) {
	t.Parallel()
	pg := testenv.StartCluster(t)
	db := testenv.PostgresAt(t, pg.URL)
	ctx := context.Background()
	store := mirror.New(db.Pool)
	require.NoError(t, store.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{
		{Name: "tracker", Events: reminder.StatusTypes, URL: "https://tracker.example/status"}}))
	u := reminder.Update{ShipmentID: "SHP-kill", UpdateID: "u-1", Kind: "delivery_window", Message: reminder.Message{Subject: "s", Text: "t"},
		Subscribers: []reminder.Subscriber{
			{ID: "a", Channel: reminder.Email, Email: "a@customer.example", DueAt: time.Now().Add(time.Hour)},
			{ID: "b", Channel: reminder.Email, Email: "b@customer.example", DueAt: time.Now().Add(time.Hour)},
		}}
	rems, err := u.Plan(reminder.PlanOptions{Now: time.Now()})
	require.NoError(t, err)
	rows := []mirror.NewReminder{
		{Reminder: rems[0], WorkflowID: workflows.ReminderWorkflowID(rems[0].ID)},
		{Reminder: rems[1], WorkflowID: workflows.ReminderWorkflowID(rems[1].ID)},
	}
	_, err = store.ScheduleUpdate(ctx, u, rows)
	require.NoError(t, err)
	killed, kept := rems[0].ID, rems[1].ID

	// What the mirror holds of a reminder: its state, its trail, its
	// status events and its place in the feed.
	type held struct {
		State   string
		Trail   []string
		Outbox  []string
		Changes int
	}
	read := func(pool *pgxpool.Pool, id string) held {
		t.Helper()
		var h held
		require.NoError(t, pool.QueryRow(ctx, `
SELECT state,
       (SELECT array_agg(type ORDER BY id) FROM reminder_events WHERE reminder_id = $1),
       (SELECT coalesce(array_agg(type ORDER BY id), '{}') FROM status_outbox WHERE reminder_id = $1),
       (SELECT coalesce(max(seq), 0) FROM reminder_changes WHERE reminder_id = $1)
  FROM reminders WHERE id = $1`, id).Scan(&h.State, &h.Trail, &h.Outbox, &h.Changes))
		return h
	}

	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE reminders SET state = 'cancelled', updated_at = now() WHERE id = $1`, killed)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'cancelled', '{"by": "ops"}')`, killed)
	require.NoError(t, err)
	var inTx int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM status_outbox WHERE reminder_id = $1`, killed).Scan(&inTx))
	require.Equal(t, 2, inTx, "the change's event is written in its transaction")
	_, err = store.Cancel(ctx, kept, "cancelled", map[string]any{"by": "ops"})
	require.NoError(t, err, "the other change commits")

	pg.Crash() // before the first transaction's commit, just after the second's
	pg.Start()
	after, err := pgxpool.New(ctx, db.URL)
	require.NoError(t, err)
	defer after.Close()
	require.Equal(t, held{State: "scheduled", Trail: []string{"scheduled"}, Outbox: []string{"scheduled"}, Changes: 1},
		read(after, killed), "killed before its commit: neither the change nor its event")
	require.Equal(t, held{State: "cancelled", Trail: []string{"scheduled", "cancelled"}, Outbox: []string{"scheduled", "cancelled"}, Changes: 2},
		read(after, kept), "killed after it: both")
}
