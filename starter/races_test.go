package starter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// The races a real tracker and a real deployment create, each on the real
// dev server and PostgreSQL.

func workflowExists(t *testing.T, s *testenv.Stack, workflowID string) bool {
	t.Helper()
	_, err := s.Temporal.DescribeWorkflowExecution(context.Background(), workflowID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false
	}
	require.NoError(t, err)
	return true
}

func countRows(t *testing.T, s *testenv.Stack) (updates, reminders, events int) {
	t.Helper()
	require.NoError(t, s.DB.Pool.QueryRow(context.Background(), `
SELECT (SELECT count(*) FROM updates), (SELECT count(*) FROM reminders), (SELECT count(*) FROM reminder_events)`).
		Scan(&updates, &reminders, &events))
	return
}

func workflowIDs(results []starter.Result) []string {
	var ids []string
	for _, r := range results {
		ids = append(ids, r.WorkflowID)
	}
	return ids
}

// A start fails after the mirror write; the shipment is cancelled (the row
// is cancelled, its workflow never started); the tracker retries the
// schedule. Nothing is started and nothing is sent: the retry starts only
// rows that are new or still pending and unstarted.
func TestCancelledReminderIsNeverStartedAgain(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now(), reminder.Email)

	crashing := *s.Starter
	crashing.CrashAfterMirror(errors.New("starter killed"))
	_, err := crashing.Schedule(ctx, u)
	require.ErrorContains(t, err, "starter killed")
	outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker", Reason: "order withdrawn"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusCancelled, outs[0].Status)

	again, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	require.Equal(t, starter.AlreadyScheduled, again[0].Status)
	require.Equal(t, reminder.Cancelled, again[0].State, "the stored state comes back")
	require.False(t, workflowExists(t, s, again[0].WorkflowID), "no workflow was started for a cancelled row")
	require.Zero(t, s.Mail.Requests())
	require.Equal(t, []string{"scheduled", "cancelled"}, eventTypes(t, s, again[0].ReminderID))
}

// A cancel runs between the schedule's mirror write and its workflow start:
// the cancel finds no workflow and cancels the row; the schedule then starts
// the workflow. The schedule sees the row cancelled when it marks it started
// and cancels the workflow it just started, at once, whether the reminder
// is due now or in an hour (and should it not, the notify activity refuses
// a cancelled row: TestAFinishedRowStopsItsWorkflowAtTheSend). Nothing is
// sent.
func TestCancelRacingAScheduleSendsNothing(t *testing.T) {
	t.Parallel()
	for name, due := range map[string]time.Duration{"due now": 0, "due in an hour": time.Hour} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := testenv.NewStack(t)
			ctx := context.Background()
			u := s.Update(t, time.Now().Add(due), reminder.Email, reminder.Webhook)

			racing := *s.Starter
			racing.BetweenMirrorAndStart(func() error {
				outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker"})
				for _, o := range outs {
					require.Equal(t, starter.StatusCancelled, o.Status)
				}
				return err
			})
			results, err := racing.Schedule(ctx, u)
			require.NoError(t, err)
			terminateAtCleanup(t, s, workflowIDs(results)...)
			for _, r := range results {
				require.Equal(t, reminder.Cancelled, waitFor(t, s, r.WorkflowID).State)
				require.Equal(t, reminder.Cancelled, row(t, s, r.ReminderID).State)
				require.Equal(t, reminder.Cancelled, r.State, "the schedule reports what the row became")
			}
			require.Zero(t, s.Mail.Requests(), "nothing sent")
			require.Zero(t, s.Hooks.Requests(), "nothing sent")
		})
	}
}

// A delivered update is resubmitted after the namespace's retention dropped
// its closed workflows: the workflow id is free again, but the stored rows
// are finished, so nothing starts and nothing is sent twice.
func TestResubmissionAfterRetentionSendsNothing(t *testing.T) {
	t.Parallel()
	server := testenv.StartDevServer(t, `history.transferProcessorUpdateAckInterval="1s"`)
	s := testenv.NewStackWith(t, testenv.StackOptions{TemporalAddress: server.Address})
	ctx := context.Background()
	u := s.Update(t, time.Now(), reminder.Email)
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	require.Equal(t, reminder.Sent, waitFor(t, s, results[0].WorkflowID).State)
	deleteWorkflow(t, s, results[0].WorkflowID)

	again, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	require.Equal(t, starter.AlreadyScheduled, again[0].Status)
	require.Equal(t, reminder.Sent, again[0].State)
	require.False(t, workflowExists(t, s, results[0].WorkflowID), "no new workflow")
	require.Equal(t, 1, s.Mail.Requests(), "sent once")
}

// The same shipment and update ids with other content are refused, naming
// what differs, and nothing is written; the identical update answers with
// the reminders as stored (here: after a reschedule).
func TestChangedResubmissionIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	due := time.Now().Add(48 * time.Hour)
	u := s.Update(t, due, reminder.Email, reminder.Webhook)
	first, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	terminateAtCleanup(t, s, workflowIDs(first)...)
	moved := due.Add(time.Hour)
	out, err := s.Starter.RescheduleReminder(ctx, "", first[0].ReminderID, moved, starter.Actor{By: "planner"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRescheduled, out.Status, out.Error)
	updates, reminders, events := countRows(t, s)

	changed := map[string]func(*reminder.Update){
		"subscribers[0].due_at": func(u *reminder.Update) { u.Subscribers[0].DueAt = due.Add(2 * time.Hour) },
		"message.text":          func(u *reminder.Update) { u.Message.Text = "Dock 9." },
		"subscribers[0].email":  func(u *reminder.Update) { u.Subscribers[0].Email = "someone@else.example" },
		"subscribers[1].approval": func(u *reminder.Update) {
			u.Subscribers[1].RequiresApproval = true
			u.EscalationEmail = escalationContact
		},
		"subscribers[2] (new subscriber late)": func(u *reminder.Update) {
			u.Subscribers = append(u.Subscribers, reminder.Subscriber{ID: "late", Channel: reminder.Email, Email: "l@x.example", DueAt: due})
		},
	}
	for field, change := range changed {
		v := s.Update(t, due, reminder.Email, reminder.Webhook)
		v.ShipmentID = u.ShipmentID
		change(&v)
		_, err := s.Starter.Schedule(ctx, v)
		require.ErrorIs(t, err, starter.ErrUpdateChanged, field)
		var ce *starter.ChangedError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, ce.Fields, field)
		require.ErrorContains(t, err, "reschedule")
		require.ErrorContains(t, err, "new update_id")
	}
	u2, r2, e2 := countRows(t, s)
	require.Equal(t, []int{updates, reminders, events}, []int{u2, r2, e2}, "nothing was written")
	require.False(t, workflowExists(t, s, workflows.ReminderWorkflowID(reminder.ID("", u.ShipmentID, u.UpdateID, "late"))))

	same, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	require.Equal(t, starter.AlreadyScheduled, same[0].Status)
	require.Equal(t, reminder.NormalizeTime(moved), same[0].DueAt.UTC(), "the stored due time, not the request's")
	require.Equal(t, reminder.DeliveryKey(first[0].ReminderID, first[0].SubscriberID, reminder.NormalizeTime(moved)), same[0].DeliveryKey)
	require.Equal(t, first[1].DeliveryKey, same[1].DeliveryKey)
}

// Moving an update's window twice to the same start, re-running after a
// failure partway through, or two callers at once: each reminder ends at
// its first-requested due time plus one shift.
func TestRescheduleUpdateShiftsOnce(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	window := time.Now().Add(10 * 24 * time.Hour).UTC().Truncate(time.Second)
	u := s.Update(t, time.Time{}, reminder.Email, reminder.Email)
	u.WindowStart = window
	u.Subscribers[0].DueAt, u.Subscribers[0].RemindBefore = time.Time{}, 72*time.Hour
	u.Subscribers[1].DueAt, u.Subscribers[1].RemindBefore = time.Time{}, 24*time.Hour
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	terminateAtCleanup(t, s, workflowIDs(results)...)
	shifted := func(r starter.Result, to time.Time) time.Time {
		return reminder.NormalizeTime(r.DueAt.Add(to.Sub(window)))
	}
	who := starter.Actor{By: "planner"}
	check := func(to time.Time) {
		t.Helper()
		for _, r := range results {
			got := row(t, s, r.ReminderID)
			require.Equal(t, shifted(r, to), got.DueAt.UTC(), r.ReminderID)
			v, err := s.Temporal.QueryWorkflow(ctx, r.WorkflowID, "", workflows.QueryStatus)
			require.NoError(t, err)
			var st workflows.Status
			require.NoError(t, v.Get(&st))
			require.Equal(t, shifted(r, to), st.DueAt.UTC(), "the workflow agrees")
		}
	}

	later := window.Add(6 * time.Hour)
	for range 2 {
		_, err := s.Starter.RescheduleUpdate(ctx, "", u.ShipmentID, u.UpdateID, later, who)
		require.NoError(t, err)
		check(later)
	}
	moves := func() int {
		n := 0
		for _, r := range results {
			for _, e := range eventTypes(t, s, r.ReminderID) {
				if e == "rescheduled" {
					n++
				}
			}
		}
		return n
	}
	require.Equal(t, 2, moves(), "the second move to the same window moved nothing")

	// A run that failed after moving one reminder, then ran again.
	evenLater := window.Add(12 * time.Hour)
	_, err = s.Starter.RescheduleReminder(ctx, "", results[0].ReminderID, shifted(results[0], evenLater), who)
	require.NoError(t, err)
	outs, err := s.Starter.RescheduleUpdate(ctx, "", u.ShipmentID, u.UpdateID, evenLater, who)
	require.NoError(t, err)
	require.Equal(t, starter.StatusUnchanged, outcomesByID(outs)[results[0].ReminderID].Status)
	check(evenLater)

	// Two callers at once.
	last := window.Add(-6 * time.Hour)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Starter.RescheduleUpdate(ctx, "", u.ShipmentID, u.UpdateID, last, who)
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	check(last)
	require.Equal(t, 6, moves(), "each reminder moved once per new window")
	_, ws, err := s.Mirror.Window(ctx, "", u.ShipmentID, u.UpdateID)
	require.NoError(t, err)
	require.True(t, last.Equal(ws))
}

// A reschedule whose mirror write cannot be taken (a lock holds the audit
// trail, as a stalled PostgreSQL would) past the starter's 60 s wait is
// answered accepted: its workflow took it, and nothing has moved yet, not
// the mirror, not the workflow's due time, key or timer. Once the lock goes
// it lands in both, once; a repeat finds it there.
func TestARescheduleHeldPastTheWaitIsAcceptedAndLands(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	due := time.Now().Add(48 * time.Hour)
	results, err := s.Starter.Schedule(ctx, s.Update(t, due, reminder.Email))
	require.NoError(t, err)
	terminateAtCleanup(t, s, workflowIDs(results)...)
	r := results[0]

	tx, err := s.DB.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE reminder_events IN SHARE ROW EXCLUSIVE MODE`)
	require.NoError(t, err)
	moved := due.Add(24 * time.Hour)
	out, err := s.Starter.RescheduleReminder(ctx, "", r.ReminderID, moved, starter.Actor{By: "planner"})
	require.ErrorIs(t, err, starter.ErrAccepted)
	require.Equal(t, starter.StatusAccepted, out.Status, out.Error)

	got := row(t, s, r.ReminderID)
	require.Equal(t, r.DueAt.UTC(), got.DueAt.UTC())
	require.Equal(t, r.DeliveryKey, got.DeliveryKey)
	st := status(t, s, r.WorkflowID)
	require.Equal(t, r.DueAt.UTC(), st.DueAt.UTC(), "the timer has not moved yet")
	require.Equal(t, r.DeliveryKey, st.DeliveryKey)
	require.Zero(t, st.Reschedules)

	require.NoError(t, tx.Rollback(ctx))
	key := reminder.DeliveryKey(r.ReminderID, "email-a", reminder.NormalizeTime(moved))
	require.Eventually(t, func() bool {
		v, err := s.Temporal.QueryWorkflow(ctx, r.WorkflowID, "", workflows.QueryStatus)
		var st workflows.Status
		got, gerr := s.Mirror.Get(ctx, r.ReminderID)
		return err == nil && v.Get(&st) == nil && gerr == nil && st.DeliveryKey == key && got.DeliveryKey == key
	}, time.Minute, 100*time.Millisecond, "the accepted reschedule lands in the workflow and the mirror")
	require.Equal(t, []string{"scheduled", "rescheduled"}, eventTypes(t, s, r.ReminderID))

	// Repeated, it finds the reminder moved already.
	out, err = s.Starter.RescheduleReminder(ctx, "", r.ReminderID, moved, starter.Actor{By: "planner"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusUnchanged, out.Status, out.Error)
	require.NoError(t, s.Temporal.TerminateWorkflow(ctx, r.WorkflowID, "", "test over"))
	testenv.RecordHistory(t, s.Temporal, r.WorkflowID, testenv.AtCurrentLevel("reschedule-held-then-landed"))
}

// status is a reminder's status as its workflow answers it.
func status(t *testing.T, s *testenv.Stack, workflowID string) workflows.Status {
	t.Helper()
	v, err := s.Temporal.QueryWorkflow(context.Background(), workflowID, "", workflows.QueryStatus)
	require.NoError(t, err)
	var st workflows.Status
	require.NoError(t, v.Get(&st))
	return st
}

// A row another path finished while its workflow slept (here: cancelled
// behind the workflow's back) stops the workflow at the send: the notify
// activity refuses it, nothing goes out, and the workflow ends as the
// mirror says.
func TestAFinishedRowStopsItsWorkflowAtTheSend(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	results, err := s.Starter.Schedule(ctx, s.Update(t, time.Now().Add(2*time.Second), reminder.Email))
	require.NoError(t, err)
	r := results[0]
	_, err = s.DB.Pool.Exec(ctx, `UPDATE reminders SET state = 'cancelled' WHERE id = $1`, r.ReminderID)
	require.NoError(t, err)

	require.Equal(t, reminder.Cancelled, waitFor(t, s, r.WorkflowID).State)
	require.Zero(t, s.Mail.Requests(), "nothing sent")
	testenv.RecordHistory(t, s.Temporal, r.WorkflowID, testenv.AtCurrentLevel("ended-as-mirror"))
}

// More window moves at once than serve's pool has connections (16, as
// serve runs): each move holds its update's lock for its Temporal calls on
// a connection outside the pool, so the moves finish, and a schedule made
// meanwhile, which needs the pool, is not held behind them. (A move once
// pinned a pooled connection for its lock and waited for a second one: 16
// moves took the whole pool and hung until their deadline.)
func TestMoreWindowMovesThanConnectionsStallNothing(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const servePool, movers = 16, 24
	cfg, err := pgxpool.ParseConfig(s.DB.ProductURL())
	require.NoError(t, err)
	cfg.MaxConns = servePool
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := *s.Starter
	st.Mirror = mirror.New(pool).SealSecretsWith(testenv.Codec(t))

	window := time.Now().Add(10 * 24 * time.Hour).UTC().Truncate(time.Second)
	var updates []reminder.Update
	for i := range movers {
		u := windowedUpdate(t, s, window)
		u.UpdateID = fmt.Sprintf("window-%02d", i)
		results, err := st.Schedule(ctx, u)
		require.NoError(t, err)
		terminateAtCleanup(t, s, workflowIDs(results)...)
		updates = append(updates, u)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(updates))
	for i, u := range updates {
		wg.Go(func() {
			_, errs[i] = st.RescheduleUpdate(ctx, "", u.ShipmentID, u.UpdateID, window.Add(time.Hour), starter.Actor{By: "planner"})
		})
	}
	// Meanwhile the pool serves the rest of serve.
	other := s.Update(t, time.Now().Add(time.Hour), reminder.Email)
	other.UpdateID = "meanwhile"
	results, err := st.Schedule(ctx, other)
	require.NoError(t, err, "a schedule is not held behind the moves")
	terminateAtCleanup(t, s, workflowIDs(results)...)
	moved := make(chan struct{})
	go func() { wg.Wait(); close(moved) }()
	select {
	case <-moved:
	case <-time.After(90 * time.Second):
		t.Fatal("the window moves stalled: more movers than the pool has connections hold each other")
	}
	for i, err := range errs {
		require.NoError(t, err, "move %d", i)
	}
	for _, u := range updates {
		_, current, err := st.Mirror.Window(ctx, "", u.ShipmentID, u.UpdateID)
		require.NoError(t, err)
		require.True(t, current.Equal(window.Add(time.Hour)), "every window moved")
	}
}

// windowedUpdate is an update of one email subscriber reminded a day
// before its delivery window opens at window.
func windowedUpdate(t *testing.T, s *testenv.Stack, window time.Time) reminder.Update {
	t.Helper()
	u := s.Update(t, time.Time{}, reminder.Email)
	u.WindowStart = window
	u.Subscribers[0].DueAt, u.Subscribers[0].RemindBefore = time.Time{}, 24*time.Hour
	return u
}

// A window move finds a reminder whose workflow never started (its starter
// died after the mirror write): the row moves in the mirror, and the
// reconciler starts its workflow at the moved due time. (The move answered
// "refused: no longer running" for it, moved the window anyway, and the
// reconciler later started it at its old due time.)
func TestAWindowMoveMovesAReminderThatNeverStarted(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{DelayedStart: true})
	ctx := context.Background()
	window := time.Now().Add(10 * 24 * time.Hour).UTC().Truncate(time.Second)
	u := windowedUpdate(t, s, window)
	crashing := *s.Starter
	crashing.CrashAfterMirror(errors.New("starter killed"))
	_, err := crashing.Schedule(ctx, u)
	require.ErrorContains(t, err, "starter killed")

	later := window.Add(6 * time.Hour)
	outs, err := s.Starter.RescheduleUpdate(ctx, "", u.ShipmentID, u.UpdateID, later, starter.Actor{By: "planner"})
	require.NoError(t, err)
	require.Len(t, outs, 1)
	require.Equal(t, starter.StatusRescheduled, outs[0].Status, outs[0].Error)
	want := later.Add(-24 * time.Hour)
	require.True(t, row(t, s, outs[0].ReminderID).DueAt.Equal(want), "the row moved")

	results, err := s.Starter.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Len(t, results, 1)
	terminateAtCleanup(t, s, results[0].WorkflowID)
	require.True(t, results[0].DueAt.Equal(want), "started from the moved row")
	st, err := starter.LiveStatus(ctx, s.Temporal, row(t, s, results[0].ReminderID), nil)
	require.NoError(t, err)
	require.True(t, st.DueAt.Equal(want), "the workflow sleeps until the moved due time, not the old one: %s", st.DueAt)
	require.WithinDuration(t, want, st.WaitingUntil, time.Second, "the engine holds it until the moved due time")
}

// A window move lands between a start's read of the row and its mark: the
// new workflow, started at the old due time, is moved to the row's.
func TestAWindowMoveRacingAStartIsFollowed(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	window := time.Now().Add(10 * 24 * time.Hour).UTC().Truncate(time.Second)
	u := windowedUpdate(t, s, window)
	later := window.Add(6 * time.Hour)
	racing := *s.Starter
	racing.BetweenMirrorAndStart(func() error {
		_, err := s.Starter.RescheduleUpdate(ctx, "", u.ShipmentID, u.UpdateID, later, starter.Actor{By: "planner"})
		return err
	})
	results, err := racing.Schedule(ctx, u)
	require.NoError(t, err)
	terminateAtCleanup(t, s, results[0].WorkflowID)
	want := later.Add(-24 * time.Hour)
	v, err := s.Temporal.QueryWorkflow(ctx, results[0].WorkflowID, "", workflows.QueryStatus)
	require.NoError(t, err)
	var st workflows.Status
	require.NoError(t, v.Get(&st))
	require.True(t, st.DueAt.Equal(want), "the workflow follows the move: %s", st.DueAt)
	moved := row(t, s, results[0].ReminderID)
	require.True(t, moved.DueAt.Equal(want))
	require.True(t, results[0].DueAt.Equal(want), "the schedule answers the row's due time")
	require.Equal(t, moved.DeliveryKey, results[0].DeliveryKey, "and the key the mirror holds")
	require.Equal(t, moved.DeliveryKey, st.DeliveryKey, "the workflow's key is the row's")
}

// An approval that arrives while the expiry's mirror write is held (the
// reminder's row locked, as a slow or failing-over PostgreSQL would hold
// it) is refused, and the reminder ends expired in the mirror and in the
// engine, with no "approved" on its trail. (It was answered "approved",
// wrote an approved event beside the expiry, and the workflow closed with
// the state "scheduled", which is not final.)
func TestAnApprovalDuringTheExpiryIsRefused(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Hour), reminder.Email)
	u.Approval = reminder.Approval{Required: true, Timeout: 2 * time.Second, ExpireAfter: 2 * time.Second}
	u.EscalationEmail = "lead@shipper.example"
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]
	terminateAtCleanup(t, s, r.WorkflowID)

	hold, err := s.DB.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	_, err = hold.Exec(ctx, `SELECT 1 FROM reminders WHERE id = $1 FOR UPDATE`, r.ReminderID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		waiting, err := s.DB.WaitersBehind(ctx, hold, "UPDATE reminders SET state = $3")
		require.NoError(t, err)
		return waiting > 0
	}, 30*time.Second, 20*time.Millisecond, "the expiry's write waits on the held row")

	outs, err := s.Starter.Decide(ctx, starter.Selection{ReminderID: r.ReminderID}, true, starter.Actor{By: "alice"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRefused, outs[0].Status, "not approved: %+v", outs[0])
	require.Contains(t, outs[0].Error, "expiring")
	require.NoError(t, hold.Commit(ctx))

	require.Equal(t, reminder.Expired, waitFor(t, s, r.WorkflowID).State, "the engine says expired")
	require.Equal(t, reminder.Expired, row(t, s, r.ReminderID).State, "and so does the mirror")
	require.NotContains(t, eventTypes(t, s, r.ReminderID), "approved")
	require.Empty(t, mailsFor(s, r.ReminderID, reminder.PurposeReminder), "the reminder is never sent")
}

// A workflow that started but whose mark in the mirror failed is moved by a
// window move along with its row: it sends at the new due time, under the
// key the row holds. (The move went to the mirror alone; the workflow slept
// on to its old due time and would have sent under its old key then.)
func TestAWindowMoveReachesAWorkflowWhoseMarkFailed(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	window := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	u := s.Update(t, window.Add(-time.Hour), reminder.Email)
	u.WindowStart = window
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	r := results[0]
	terminateAtCleanup(t, s, r.WorkflowID)
	// The start succeeded; its mark in the mirror did not.
	_, err = s.DB.Pool.Exec(ctx, `UPDATE reminders SET workflow_started_at = NULL`)
	require.NoError(t, err)

	// The window moves so the reminder comes due in a few seconds.
	moved := window.Add(time.Now().Add(3 * time.Second).Sub(r.DueAt)).Truncate(time.Second)
	outs, err := s.Starter.RescheduleUpdate(ctx, "", u.ShipmentID, u.UpdateID, moved, starter.Actor{By: "planner"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRescheduled, outs[0].Status)
	key := outs[0].DeliveryKey
	require.Equal(t, key, row(t, s, r.ReminderID).DeliveryKey)

	res := waitFor(t, s, r.WorkflowID)
	require.Equal(t, reminder.Sent, res.State, "sent at the new due time")
	require.Equal(t, key, res.DeliveryKey)
	mails := s.Mail.Mails()
	require.Len(t, mails, 1)
	require.Equal(t, key, mails[0].CustomArgs["delivery_key"])
}

// describeHook is a Temporal client whose first DescribeWorkflowExecution
// runs hook after the server answered and before the caller hears it: what
// happens between a look at a workflow and what its caller does next.
type describeHook struct {
	client.Client
	once sync.Once
	hook func()
}

func (c *describeHook) DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	desc, err := c.Client.DescribeWorkflowExecution(ctx, workflowID, runID)
	c.once.Do(c.hook)
	return desc, err
}

// The race the window move's look at Temporal leaves open: the move finds
// no workflow for a row never marked started, and, before it moves the
// row, the workflow starts from the row's old due time and its mark in the
// mirror fails. The move then moves the row alone, and the workflow sleeps
// on to its old due time, where the claim refuses the key the row no
// longer holds. The workflow takes the due time and key the mirror holds
// instead, sleeps again, and sends once, at the new due time, under the
// row's key: never at the old time, never lost. (It ended "as the mirror
// says" in the pending state scheduled: the workflow closed, the row
// stayed scheduled, and nothing was ever sent.) A reminder started before
// levels asks GetVersion for the change when the refusal comes.
func TestAWindowMoveThatMissesAStartingWorkflowIsFollowedAtItsSend(t *testing.T) {
	t.Parallel()
	for _, earlier := range []bool{false, true} {
		t.Run(map[bool]string{false: "current level", true: "started before levels"}[earlier], func(t *testing.T) {
			t.Parallel()
			var o testenv.StackOptions
			if earlier {
				o.Versions = map[string]workflow.Version{workflows.ChangeLocalFirstAttempt: 2}
			}
			s := testenv.NewStackWith(t, o)
			ctx := context.Background()
			// Due 4 s from now, a day before its window.
			window := time.Now().Add(24*time.Hour + 4*time.Second).UTC().Truncate(time.Second)
			u := windowedUpdate(t, s, window)
			crashing := *s.Starter
			crashing.CrashAfterMirror(errors.New("starter killed"))
			_, err := crashing.Schedule(ctx, u)
			require.ErrorContains(t, err, "starter killed")
			old := row(t, s, reminder.ID("", u.ShipmentID, u.UpdateID, u.Subscribers[0].ID))

			moving := *s.Starter
			var started []starter.Result
			moving.Temporal = &describeHook{Client: s.Temporal, hook: func() {
				// The reconciler starts the workflow from the row (its old
				// due time); its mark is lost.
				started, err = s.Starter.Reconcile(ctx, 0)
				require.NoError(t, err)
				_, err = s.DB.Pool.Exec(ctx, `UPDATE reminders SET workflow_started_at = NULL WHERE id = $1`, old.ID)
				require.NoError(t, err)
			}}
			later := window.Add(5 * time.Second)
			outs, err := moving.RescheduleUpdate(ctx, "", u.ShipmentID, u.UpdateID, later, starter.Actor{By: "planner"})
			require.NoError(t, err)
			require.Len(t, started, 1, "the workflow started during the move")
			r := started[0]
			terminateAtCleanup(t, s, r.WorkflowID)
			require.True(t, r.DueAt.Equal(old.DueAt), "started at the old due time")
			require.Equal(t, starter.StatusRescheduled, outs[0].Status, outs[0].Error)
			newDue := later.Add(-24 * time.Hour)
			moved := row(t, s, r.ReminderID)
			require.True(t, moved.DueAt.Equal(newDue), "the row alone moved")
			require.Equal(t, reminder.DeliveryKey(r.ReminderID, r.SubscriberID, newDue), moved.DeliveryKey)

			res := waitFor(t, s, r.WorkflowID)
			require.Equal(t, reminder.Sent, res.State, "sent, not lost")
			require.Equal(t, moved.DeliveryKey, res.DeliveryKey, "under the key the row holds")
			mails := s.Mail.Mails()
			require.Len(t, mails, 1, "sent once")
			require.Equal(t, moved.DeliveryKey, mails[0].CustomArgs["delivery_key"])
			require.False(t, mails[0].Received.Before(newDue), "not before the new due time: received %s, due %s",
				mails[0].Received.Format(time.StampMilli), newDue.Format(time.StampMilli))
			require.Equal(t, reminder.Sent, row(t, s, r.ReminderID).State)
			desc, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
			require.NoError(t, err)
			_, due, err := starter.ReminderAttributes(desc.GetWorkflowExecutionInfo().GetSearchAttributes())
			require.NoError(t, err)
			require.True(t, due.Equal(newDue), "the DueAt search attribute follows: %s", due)
			name := testenv.AtCurrentLevel("follows-the-mirrors-move")
			if earlier {
				name = "follows-the-mirrors-move-unleveled"
			}
			testenv.RecordHistory(t, s.Temporal, r.WorkflowID, name)
		})
	}
}
