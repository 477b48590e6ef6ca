package mirror_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// statusRow is an outbox row as the tests read it.
type statusRow struct {
	Endpoint string
	Seq      int
	EventID  string
	Type     string
	Status   string
	Payload  map[string]any
	Raw      string
}

// outboxOf is reminder id's outbox rows, in the order written.
func outboxOf(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, id string) []statusRow {
	t.Helper()
	rows, err := q.Query(context.Background(), `
SELECT endpoint, seq, event_id, type, status, payload::text FROM status_outbox WHERE reminder_id = $1 ORDER BY id`, id)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (statusRow, error) {
		var r statusRow
		if err := row.Scan(&r.Endpoint, &r.Seq, &r.EventID, &r.Type, &r.Status, &r.Raw); err != nil {
			return r, err
		}
		return r, json.Unmarshal([]byte(r.Raw), &r.Payload)
	})
	require.NoError(t, err)
	return out
}

// endpoints are a test's tracker: every event of the default tenant's,
// only the sends, and another tenant's.
var endpoints = []mirror.StatusEndpoint{
	{Name: "all", Events: reminder.StatusTypes, URL: "https://tracker.example/all"},
	{Name: "sends", Events: []reminder.StatusType{reminder.StatusSent}, URL: "https://tracker.example/sends"},
	{Name: "acme", Tenant: "acme", Events: reminder.StatusTypes, URL: "https://acme.example/hooks"},
}

// The SQL twin of the status events' vocabulary (migration 00023) agrees
// with reminder.StatusOf on every trail event type the mirror writes (and
// a few it does not), with every detail that matters, in every state.
func TestTheSQLStatusEventsAreTheDomains(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	types := slices.Concat(reminder.MoveEvents(), reminder.NoteEvents, []string{"provider_", "approved_late", "unknown"})
	states := append(slices.Clip(reminder.States), "bogus")
	details := []map[string]any{{}, {"state": 5}, {"during": "send"}}
	for _, a := range states {
		details = append(details, map[string]any{"state": string(a)}, map[string]any{"from": string(a), "to": string(reminder.Cancelled)},
			map[string]any{"from": string(reminder.AwaitingApproval), "to": string(a)})
	}
	var ts, ss []string
	var ds []map[string]any
	for _, typ := range types {
		for _, d := range details {
			for _, s := range states {
				ts, ds, ss = append(ts, typ), append(ds, d), append(ss, string(s))
			}
		}
	}
	rows, err := db.Pool.Query(context.Background(), `
SELECT reminder_status_event(t, d, s)
  FROM unnest($1::text[], $2::jsonb[], $3::text[]) WITH ORDINALITY AS x(t, d, s, n) ORDER BY n`, ts, ds, ss)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[*string])
	require.NoError(t, err)
	require.Len(t, got, len(ts))
	made := map[reminder.StatusType]bool{}
	for i := range ts {
		what := fmt.Sprintf("%s %v in %s", ts[i], ds[i], ss[i])
		want, ok := reminder.StatusOf(ts[i], ds[i], reminder.State(ss[i]))
		if !ok {
			require.Nil(t, got[i], what)
			continue
		}
		made[want.Type] = true
		require.NotNil(t, got[i], what)
		require.Equal(t, string(want.Type), *got[i], what)
	}
	for _, st := range reminder.StatusTypes {
		require.True(t, made[st], "some trail event makes %s", st)
	}
}

// A state change and its status event are one: the event is written in
// the transaction of the change, for each endpoint of the reminder's
// tenant that takes its type, and a transaction that fails after the
// change leaves neither. The event carries the reminder's ids, states and
// times, and no address or message text.
func TestAStatusEventIsWrittenWithItsChangeOrNotAtAll(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	require.NoError(t, store.RegisterStatusEndpoints(ctx, endpoints))
	due := time.Now().Add(time.Hour)
	u := update("SHP-outbox", due)
	u.Message = reminder.Message{Subject: "Your window", Text: "secret message text"}
	id := insert(t, store, u, time.Now()).Reminders[0].Requested.ID

	rows := outboxOf(t, db.Pool, id)
	require.Len(t, rows, 1, "scheduled goes to the endpoint that takes it, of the reminder's tenant only")
	require.Equal(t, "all", rows[0].Endpoint)
	require.Equal(t, "scheduled", rows[0].Type)
	require.Equal(t, 1, rows[0].Seq)

	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE reminders SET state = 'cancelled', updated_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'cancelled', '{"by": "ops"}')`, id)
	require.NoError(t, err)
	require.Len(t, outboxOf(t, tx, id), 2, "the event is there in the change's transaction")
	_, err = tx.Exec(ctx, `SELECT 1/0`)
	require.Error(t, err, "the transaction fails after the change")
	require.NoError(t, tx.Rollback(ctx))
	require.Len(t, outboxOf(t, db.Pool, id), 1, "neither the change nor its event")
	row, err := store.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, reminder.Scheduled, row.State)

	state, err := store.Cancel(ctx, id, "cancelled", map[string]any{"by": "ops"})
	require.NoError(t, err)
	require.Equal(t, reminder.Cancelled, state)
	rows = outboxOf(t, db.Pool, id)
	require.Len(t, rows, 2, "both")
	ev := rows[1]
	require.Equal(t, "cancelled", ev.Type)
	require.Equal(t, 2, ev.Seq)
	events, err := store.Events(ctx, id)
	require.NoError(t, err)
	require.Equal(t, mirror.StatusEventID(events[len(events)-1].ID), ev.EventID, "the event's id is its trail event's")
	require.Equal(t, ev.EventID, ev.Payload["id"])
	require.Equal(t, "reminder.cancelled", ev.Payload["type"])
	at, err := time.Parse(time.RFC3339Nano, ev.Payload["timestamp"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, events[len(events)-1].At, at, time.Microsecond)
	require.Equal(t, map[string]any{
		"reminder_id": id, "shipment_id": "SHP-outbox", "update_id": "u-1", "subscriber_id": "sub-a", "channel": "email",
		"state": "cancelled", "previous_state": "scheduled", "sequence": 2.0,
		"due_at": due.UTC().Truncate(time.Microsecond).Format("2006-01-02T15:04:05.000000Z"), "notice_sent": false,
	}, ev.Payload["data"])
	for _, secret := range []string{"x@y.example", "secret message text", "Your window"} {
		require.NotContains(t, ev.Raw, secret)
		require.NotContains(t, rows[0].Raw, secret)
	}
}

// The role the product runs as may read the outbox and mark its rows,
// but never insert one or change what a row says: every event a tracker
// receives comes from the trail, which the trigger writes it from, for
// that role too.
func TestTheRuntimeRoleCannotWriteTheOutbox(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	runtime, store, _ := runtimeOf(t, db)
	ctx := context.Background()
	require.NoError(t, store.RegisterStatusEndpoints(ctx, endpoints[:1]))
	id := insert(t, store, update("SHP-outbox-role", time.Now().Add(time.Hour)), time.Now()).Reminders[0].Requested.ID
	_, err := store.Cancel(ctx, id, "cancelled", map[string]any{"by": "ops"})
	require.NoError(t, err)
	rows := outboxOf(t, runtime, id)
	require.Len(t, rows, 2, "the trigger writes the runtime role's events too")

	refused := func(sql string, args ...any) {
		t.Helper()
		_, err := runtime.Exec(ctx, sql, args...)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, sql)
		require.Equal(t, "42501", pgErr.Code, "insufficient privilege: %s", sql)
	}
	refused(`INSERT INTO status_outbox (endpoint, reminder_id, seq, event_id, type, payload) VALUES ('all', $1, 9, 'evt_9', 'sent', '{}')`, id)
	refused(`UPDATE status_outbox SET payload = '{"forged": true}' WHERE reminder_id = $1`, id)
	refused(`UPDATE status_outbox SET event_id = 'evt_1' WHERE reminder_id = $1`, id)
	refused(`DELETE FROM status_outbox WHERE reminder_id = $1`, id)
	refused(`INSERT INTO reminder_changes (reminder_id, tenant, seq, xact, event_id, type, state, at) VALUES ($1, '', 9, '1', 1, 'sent', 'sent', now())`, id)
	refused(`UPDATE reminder_changes SET seq = 1 WHERE reminder_id = $1`, id)
	_, err = runtime.Exec(ctx, `UPDATE status_outbox SET status = 'delivered', finished_at = now() WHERE reminder_id = $1`, id)
	require.NoError(t, err, "marking rows is the relay's work")
}

// A reminder's status events are numbered in the order their
// transactions commit, whoever writes them: an event written while an
// earlier one's transaction is open waits for it, and takes the next
// number, so the relay's order per reminder is the order things happened.
func TestAReminderStatusEventsAreNumberedInCommitOrder(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	require.NoError(t, store.RegisterStatusEndpoints(ctx, endpoints[:1]))
	id := insert(t, store, update("SHP-outbox-order", time.Now().Add(time.Hour)), time.Now()).Reminders[0].Requested.ID

	first, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	// A note (no move: the reminder's row is not locked by it).
	_, err = first.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'escalation_sent', '{"reason": "approval_timeout"}')`, id)
	require.NoError(t, err)
	second := make(chan error, 1)
	go func() {
		second <- store.Reschedule(ctx, id, time.Now().Add(2*time.Hour), "k2", map[string]any{"by": "ops"})
	}()
	require.Eventually(t, func() bool {
		waiting, err := db.WaitersBehind(ctx, first, "rescheduled")
		require.NoError(t, err)
		return waiting > 0
	}, 10*time.Second, 10*time.Millisecond, "the later event waits for the earlier one's transaction")
	require.NoError(t, first.Commit(ctx))
	require.NoError(t, <-second)
	rows := outboxOf(t, db.Pool, id)
	require.Len(t, rows, 3)
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%d %s", r.Seq, r.Type))
	}
	require.Equal(t, []string{"1 scheduled", "2 escalated", "3 rescheduled"}, got)
	require.Equal(t, "approval_timeout", rows[1].Payload["data"].(map[string]any)["reason"])
	require.Equal(t, "scheduled", rows[2].Payload["data"].(map[string]any)["previous_state"])
}

// The change feed hands out a change only once no change can appear
// behind it: while a transaction that began before it is open (its id
// taken, its commit to come) the feed stops short of it, and once that
// transaction commits, both come, in order, and none is skipped.
func TestTheChangeFeedNeverPassesAChangeStillToCommit(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	// The store writes on one connection, and the slow transaction below
	// runs on one whose tally slot (pg_backend_pid() % 16, migration 00006)
	// is another: sharing it, the late cancel would wait for the slow
	// transaction's tally row, which waits for this test to commit it.
	cfg, err := pgxpool.ParseConfig(db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	store := mirror.New(pool)
	var storePID int
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&storePID))
	var slowConn *pgxpool.Conn
	for slowConn == nil {
		c, err := db.Pool.Acquire(ctx)
		require.NoError(t, err)
		defer c.Release()
		var pid int
		require.NoError(t, c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		if pid%16 != storePID%16 {
			slowConn = c
		}
	}
	stored := insert(t, store, update("SHP-feed", time.Now().Add(time.Hour), time.Now().Add(time.Hour)), time.Now()).Reminders
	early, late := stored[0].Requested.ID, stored[1].Requested.ID
	page := func(after mirror.Position) ([]string, mirror.Position) {
		rows, last, err := store.Changes(ctx, mirror.ChangeFilter{After: after, Limit: 100})
		require.NoError(t, err)
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID+" "+string(r.LastChange.Type))
		}
		return ids, last
	}
	// drain pages from pos until want changes came, and returns them and
	// where it stopped: other transactions of the cluster (the tests
	// beside this one) hold the feed back too, for as long as each runs.
	drain := func(pos mirror.Position, want int) ([]string, mirror.Position) {
		var seen []string
		require.Eventually(t, func() bool {
			var ids []string
			ids, pos = page(pos)
			seen = append(seen, ids...)
			return len(seen) >= want
		}, 30*time.Second, 20*time.Millisecond)
		return seen, pos
	}
	scheduled, head := drain(mirror.Position{}, 2)
	require.Equal(t, []string{early + " scheduled", late + " scheduled"}, scheduled)

	// The early change takes its transaction id first and commits last.
	slow, err := slowConn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = slow.Rollback(ctx) }()
	_, err = slow.Exec(ctx, `UPDATE reminders SET state = 'cancelled', updated_at = now() WHERE id = $1`, early)
	require.NoError(t, err)
	_, err = slow.Exec(ctx, `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'cancelled', '{}')`, early)
	require.NoError(t, err)
	_, err = store.Cancel(ctx, late, "cancelled", nil)
	require.NoError(t, err)

	ids, pos := page(head)
	require.Empty(t, ids, "the late change waits behind the open transaction")
	require.Equal(t, head, pos, "and the cursor stays")
	require.NoError(t, slow.Commit(ctx))
	seen, pos := drain(pos, 2)
	require.Equal(t, []string{early + " cancelled", late + " cancelled"}, seen, "in order, each once")
	ids, _ = page(pos)
	require.Empty(t, ids, "each once")

	// From the start: both reminders, once each, at their latest change.
	ids, _ = page(mirror.Position{})
	require.Equal(t, []string{early + " cancelled", late + " cancelled"}, ids)
}

// outboxState is a row's status, claimant and attempts, by id.
func outboxState(t *testing.T, db testenv.DB, id int64) (status, claimedBy string, attempts int) {
	t.Helper()
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT status, coalesce(claimed_by, ''), attempts FROM status_outbox WHERE id = $1`, id).Scan(&status, &claimedBy, &attempts))
	return status, claimedBy, attempts
}

// The relay's records, as the product's role writes them: a lease is
// renewed only by its holder; a 2xx is recorded delivered whoever holds
// the row by then (a relay whose lease lapsed mid-post still tells what
// happened, and a row given up meanwhile was delivered after all), while
// a refusal is recorded only by the holder (it must not end another
// relay's claim); rows never posted are let go with their attempt
// uncounted.
func TestTheRelaysRecordsAndWhoseClaimTheyNeed(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	_, store, _ := runtimeOf(t, db)
	ctx := context.Background()
	require.NoError(t, store.RegisterStatusEndpoints(ctx, endpoints[:1]))
	insert(t, store, update("SHP-outbox-records", time.Now().Add(time.Hour), time.Now().Add(time.Hour), time.Now().Add(time.Hour)), time.Now())
	claim := func(owner string) []int64 {
		t.Helper()
		evs, err := store.ClaimStatusEvents(ctx, mirror.StatusClaim{Endpoint: "all", Owner: owner, Lease: 45 * time.Second, Limit: 10})
		require.NoError(t, err)
		ids := make([]int64, len(evs))
		for i, e := range evs {
			ids[i] = e.ID
		}
		return ids
	}
	ids := claim("a")
	require.Len(t, ids, 3)
	held, err := store.RenewStatusEvents(ctx, "b", ids, 45*time.Second)
	require.NoError(t, err)
	require.Empty(t, held, "only the holder renews")
	held, err = store.RenewStatusEvents(ctx, "a", ids, 45*time.Second)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, held)

	// a's lease lapses (a stall); b takes the rows over.
	_, err = db.Pool.Exec(ctx, `UPDATE status_outbox SET lease_until = now() - interval '1 second'`)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, claim("b"))
	held, err = store.RenewStatusEvents(ctx, "a", ids, 45*time.Second)
	require.NoError(t, err)
	require.Empty(t, held, "a learns its rows are b's")

	require.NoError(t, store.StatusDelivered(ctx, "all", ids[:1]), "a's post of the first completed")
	status, by, _ := outboxState(t, db, ids[0])
	require.Equal(t, []string{"delivered", ""}, []string{status, by})
	require.NoError(t, store.StatusRefused(ctx, ids[1], "a", 422, "refused", time.Hour))
	status, by, _ = outboxState(t, db, ids[1])
	require.Equal(t, []string{"pending", "b"}, []string{status, by}, "a's refusal leaves b's claim alone")

	require.NoError(t, store.ReleaseStatusEvents(ctx, "b", ids[1:2]))
	status, by, attempts := outboxState(t, db, ids[1])
	require.Equal(t, []string{"pending", ""}, []string{status, by})
	require.Equal(t, 1, attempts, "b never posted it")

	_, err = db.Pool.Exec(ctx, `UPDATE status_outbox SET status = 'given_up', claimed_by = NULL WHERE id = $1`, ids[2])
	require.NoError(t, err)
	require.NoError(t, store.StatusDelivered(ctx, "all", ids[2:]))
	status, _, _ = outboxState(t, db, ids[2])
	require.Equal(t, "delivered", status, "given up, then delivered after all")
}

// An endpoint whose tenant changed under rows already written for its old
// tenant (a move committed while they were being written) has them given
// up by the relay's sweep, as the product's role, saying why; no claim
// for the endpoint's tenant takes them.
func TestStatusEventsOfAnotherTenantAreGivenUp(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	_, store, _ := runtimeOf(t, db)
	ctx := context.Background()
	require.NoError(t, store.RegisterStatusEndpoints(ctx, endpoints[2:]))
	u := update("SHP-outbox-moved", time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	u.Tenant = "acme"
	insert(t, store, u, time.Now())
	_, err := db.Pool.Exec(ctx, `UPDATE status_endpoints SET tenant = 'globex' WHERE name = 'acme'`)
	require.NoError(t, err)

	evs, err := store.ClaimStatusEvents(ctx, mirror.StatusClaim{Endpoint: "acme", Tenant: "globex", Owner: "a", Lease: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, evs, "acme's events are not globex's to post")
	n, err := store.GiveUpStrandedStatusEvents(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	rows, err := store.OutboxRows(ctx, mirror.OutboxFilter{Status: "given_up"})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Contains(t, rows[0].LastError, "another tenant")
	n, err = store.GiveUpStrandedStatusEvents(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "once")
}
