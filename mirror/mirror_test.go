package mirror_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

func insert(t *testing.T, store *mirror.Store, u reminder.Update, now time.Time) mirror.Stored {
	t.Helper()
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	rows := make([]mirror.NewReminder, len(rems))
	for i, r := range rems {
		rows[i] = mirror.NewReminder{Reminder: r, WorkflowID: workflows.ReminderWorkflowID(r.ID)}
	}
	stored, err := store.ScheduleUpdate(context.Background(), u, rows)
	require.NoError(t, err)
	return stored
}

func update(shipment string, due ...time.Time) reminder.Update {
	u := reminder.Update{ShipmentID: shipment, UpdateID: "u-1", Kind: "delivery_window",
		Message: reminder.Message{Subject: "s", Text: "t"}}
	for i, d := range due {
		u.Subscribers = append(u.Subscribers, reminder.Subscriber{
			ID: "sub-" + string(rune('a'+i)), Channel: reminder.Email, Email: "x@y.example", DueAt: d})
	}
	return u
}

func TestInsertUpdateIsIdempotent(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	now := time.Now()
	u := update("SHP-1", now.Add(time.Hour), now.Add(2*time.Hour))

	first := insert(t, store, u, now)
	require.True(t, first.Inserted)
	require.Len(t, first.Reminders, 2)
	second := insert(t, store, u, now)
	require.False(t, second.Inserted, "the second insert adds nothing")
	require.Equal(t, first.Reminders, second.Reminders, "and reads back what the first wrote")
	var reminders, events int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM reminders), (SELECT count(*) FROM reminder_events)`).Scan(&reminders, &events))
	require.Equal(t, 2, reminders)
	require.Equal(t, 2, events, "one scheduled event per reminder")
}

func TestEventsAreAppendOnlyAndStatesChecked(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	insert(t, store, update("SHP-1", time.Now().Add(time.Hour)), time.Now())
	ctx := context.Background()

	_, err := db.Pool.Exec(ctx, `UPDATE reminder_events SET type = 'sent'`)
	require.ErrorContains(t, err, "append-only")
	_, err = db.Pool.Exec(ctx, `DELETE FROM reminder_events`)
	require.ErrorContains(t, err, "append-only")
	_, err = db.Pool.Exec(ctx, `UPDATE reminders SET state = 'lost'`)
	require.ErrorContains(t, err, "reminders_state_check")
}

func TestTransitionStopsAtTerminalStates(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	insert(t, store, update("SHP-1", time.Now().Add(time.Hour)), time.Now())
	ctx := context.Background()
	id := reminder.ID("", "SHP-1", "u-1", "sub-a")

	changed, err := store.Transition(ctx, id, reminder.Failed, "failed", map[string]any{"reason": "400"})
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = store.Transition(ctx, id, reminder.Cancelled, "cancelled", nil)
	require.NoError(t, err)
	require.False(t, changed, "a failed reminder stays failed")
	row, err := store.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, reminder.Failed, row.State)
	events, err := store.Events(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "failed", events[1].Type)
	require.Equal(t, "400", events[1].Detail["reason"])
	require.Equal(t, "cancelled_late", events[2].Type, "late arrivals are still on the trail, as notes")
}

// "What reminders do we owe next Tuesday?"
func TestListDueBetween(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	now := time.Now().UTC().Truncate(time.Hour)
	tuesday := now.Add(7 * 24 * time.Hour)
	insert(t, store, update("SHP-1", tuesday.Add(time.Hour), tuesday.Add(30*time.Hour), now.Add(time.Hour)), now)
	insert(t, store, update("SHP-2", tuesday.Add(2*time.Hour)), now)

	rows, err := store.List(context.Background(), mirror.Filter{DueFrom: tuesday, DueTo: tuesday.Add(24 * time.Hour)})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, "SHP-1", rows[0].ShipmentID)
	require.Equal(t, "SHP-2", rows[1].ShipmentID)

	rows, err = store.List(context.Background(), mirror.Filter{ShipmentID: "SHP-1", State: reminder.Scheduled})
	require.NoError(t, err)
	require.Len(t, rows, 3)
	rows, err = store.List(context.Background(), mirror.Filter{State: reminder.Sent})
	require.NoError(t, err)
	require.Empty(t, rows)
}

// Reading the gauges holds no connection for longer than its statement
// timeout: behind a lock it gives up after GaugesStatementTimeout, however
// long its caller would wait, and the lock's holder is undisturbed.
func TestGaugesGiveUpAfterTheStatementTimeout(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	insert(t, store, update("SHP-1", time.Now().Add(time.Hour)), time.Now())
	g, err := store.Gauges(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), g.ByState[reminder.Scheduled])

	lock, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, "LOCK TABLE reminders IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	began := time.Now()
	wait, cancel := context.WithTimeout(ctx, 3*mirror.GaugesStatementTimeout) // a patient caller
	defer cancel()
	_, err = store.Gauges(wait)
	took := time.Since(began)
	var pgErr *pgconn.PgError
	require.Less(t, took, mirror.GaugesStatementTimeout+5*time.Second, "gave up at the statement timeout")
	require.GreaterOrEqual(t, took, mirror.GaugesStatementTimeout)
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "57014", pgErr.Code, "query_canceled")
}

// An update's lock is bounded both ways: a second mover waits only until
// its own deadline (the API's request deadline), and a holder whose
// connection PostgreSQL drops (its process killed, or its host silent past
// the lock connection's keepalives) frees it for the next at once.
func TestAnUpdateLockIsBoundedForWaiterAndHolder(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	// Advisory locks are the database's, not the schema's: a shipment of
	// this test's own.
	shipment := "SHP-LOCK-" + rand.Text()[:8]
	unlock, err := store.LockUpdate(ctx, "", shipment, "u-1")
	require.NoError(t, err)
	defer unlock()

	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = store.LockUpdate(wctx, "", shipment, "u-1")
	require.ErrorIs(t, err, context.DeadlineExceeded, "a waiter gives up at its deadline")

	other, err := store.LockUpdate(ctx, "", shipment, "u-2")
	require.NoError(t, err, "another update's lock is free")
	other()

	var dropped bool
	require.NoError(t, db.Pool.QueryRow(ctx, `
WITH k AS (SELECT hashtextextended('shipnotify update ' || $1 || '/' || $2, 0) AS key)
SELECT pg_terminate_backend(l.pid) FROM pg_locks l, k
 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
   AND l.classid = ((k.key >> 32) & 4294967295)::oid AND l.objid = (k.key & 4294967295)::oid`,
		reminder.TenantShipment("", shipment), "u-1").Scan(&dropped))
	require.True(t, dropped, "the holder's session is found by its lock")
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	defer lcancel()
	next, err := store.LockUpdate(lctx, "", shipment, "u-1")
	require.NoError(t, err, "the holder's dropped session freed the lock")
	next()
}

// The connections that hold update locks are shared among tenants: a
// tenant moving eight updates at once holds at most half of them, so
// another tenant's one move locks at once instead of waiting for one of
// the eight to finish.
func TestOneTenantsMovesDoNotHoldEveryUpdateLock(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	shipment := "SHP-FAIR-" + rand.Text()[:8]
	acme, globex := "acme-"+rand.Text()[:6], "globex-"+rand.Text()[:6]
	held := make(chan func(), 8)
	for i := range 8 {
		go func() {
			unlock, err := store.LockUpdate(ctx, acme, shipment, fmt.Sprintf("u-%d", i))
			if err != nil {
				t.Errorf("acme's move %d: %v", i, err)
				return
			}
			held <- unlock
		}()
	}
	var acmes []func()
	for range 4 {
		acmes = append(acmes, <-held)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	unlock, err := store.LockUpdate(wctx, globex, shipment, "u-1")
	require.NoError(t, err, "globex's move waited for acme's")
	unlock()
	for _, u := range acmes {
		u()
	}
	for range 4 {
		(<-held)()
	}
}
