package mirror_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// explain is the plan PostgreSQL picks for q, as one string.
func explain(t *testing.T, db testenv.DB, q string, args ...any) string {
	t.Helper()
	rows, _ := db.Pool.Query(context.Background(), "EXPLAIN "+q, args...)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// The mirror's listings at scale read the indexes migration 00006 made for
// them: a due window from the covering index alone (every column List
// returns is in it, the provider outcome's since 00008; one added to List
// and not to the index would send each row to the heap again), pending
// pages from the partial indexes, the gauges' counts from the tallies, and
// the oldest unconfirmed email from the first entry of its partial index.
func TestListingsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'u', 'k', 's', 'b');
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id,
                       awaiting_outcome_since)
SELECT 'S/u/' || g, 'S', 'u', g::text, 'email', 'a@b.example', now() + g * interval '1 minute', now() + g * interval '1 minute',
       CASE WHEN g % 4 = 0 THEN 'scheduled' ELSE 'sent' END, md5(g::text), 'reminder/S/u/' || g,
       CASE WHEN g % 40 = 1 THEN now() - g * interval '1 second' END
  FROM generate_series(1, 20000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `VACUUM ANALYZE reminders`)
	require.NoError(t, err)
	from := time.Now().Add(100 * time.Hour)

	q, args := mirror.ListQuery(mirror.Filter{DueFrom: from, DueTo: from.Add(time.Hour), Limit: 1000})
	plan := explain(t, db, q, args...)
	require.Contains(t, plan, "Index Only Scan using reminders_due_at_list_idx", plan)
	require.NotContains(t, plan, "Sort", plan)

	q, args = mirror.ListQuery(mirror.Filter{AfterDueAt: from, AfterID: "S/u/6000", Limit: 1000})
	plan = explain(t, db, q, args...)
	require.Contains(t, plan, "using reminders_due_at_list_idx", "the keyset is the index's key: %s", plan)
	require.NotContains(t, plan, "Sort", plan)

	q, args = mirror.ListQuery(mirror.Filter{State: mirror.Pending, Limit: 100})
	plan = explain(t, db, q, args...)
	require.Contains(t, plan, "using reminders_pending_due_at_idx", plan)

	plan = explain(t, db, mirror.PendingBeforeQuery, time.Now(), "", 500)
	require.Contains(t, plan, "using reminders_pending_id_idx", plan)

	plan = explain(t, db, mirror.CountByStateQuery)
	require.Contains(t, plan, "reminder_tallies", plan)
	require.NotContains(t, plan, "on reminders", plan)

	// min() over the index is its first entry (a Limit 1), not a scan of
	// every awaiting row.
	plan = explain(t, db, mirror.OldestUnconfirmedQuery)
	require.Contains(t, plan, "Index Only Scan using reminders_awaiting_outcome_idx", plan)
	require.Contains(t, plan, "Limit", plan)
	require.NotContains(t, plan, "Aggregate", plan)
}

// The relay's claim, the operator's and the gauges' reads of the outbox,
// and a page of the change feed read their indexes, not the tables: the
// outbox keeps every delivered event until prune, and the feed has a row
// for every reminder.
func TestTheOutboxAndTheFeedUseTheirIndexes(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	store := mirror.New(db.Pool)
	require.NoError(t, store.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{
		{Name: "tracker", Events: reminder.StatusTypes, URL: "https://tracker.example/status"}}))
	_, err := db.Pool.Exec(ctx, `
INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'u', 'k', 's', 'b');
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
SELECT 'S/u/' || g, 'S', 'u', g::text, 'email', 'a@b.example', now(), now(), 'scheduled', md5(g::text), 'reminder/S/u/' || g
  FROM generate_series(1, 5000) g;
INSERT INTO reminder_events (reminder_id, type) SELECT id, 'scheduled' FROM reminders;
UPDATE status_outbox SET status = 'delivered' WHERE id % 50 <> 0;
UPDATE status_outbox SET status = 'given_up' WHERE id % 100 = 0`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `VACUUM ANALYZE status_outbox, reminder_changes, reminders`)
	require.NoError(t, err)

	plan := explain(t, db, mirror.ClaimStatusEventsQuery,
		mirror.StatusClaim{Endpoint: "tracker", Owner: "relay", Lease: 45 * time.Second, Limit: 100}.Args())
	require.Contains(t, plan, "status_outbox_pending_idx", plan)
	require.NotContains(t, plan, "Seq Scan on status_outbox", plan)
	plan = explain(t, db, mirror.StatusEndpointsQuery)
	require.Contains(t, plan, "status_outbox_pending_idx", plan)
	require.Contains(t, plan, "status_outbox_given_up_idx", plan)
	require.NotContains(t, plan, "Seq Scan on status_outbox", plan)

	for _, f := range []mirror.ChangeFilter{{After: mirror.Position{Xact: 1, Event: 2500}, Limit: 100}, {AnyTenant: true, Limit: 100}} {
		q, args := mirror.ChangesQuery(f)
		plan = explain(t, db, q, args...)
		require.Regexp(t, `Index Scan using reminder_changes_(tenant_)?position_idx`, plan)
		require.NotContains(t, plan, "Sort", "the position is the index's key: %s", plan)
		require.NotContains(t, plan, "Seq Scan", plan)
	}
}
