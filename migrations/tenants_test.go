package migrations

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// 00014-00017 give updates and reminders a tenant. Every row written before
// belongs to the default tenant and keeps its id, so the workflows already
// sleeping under those ids are found as they were; another tenant may then
// use the same shipment and update ids; the keys, built concurrently, are
// tenant-qualified and the new rules validated.
func TestRowsOfBeforeTenancyBelongToTheDefaultTenant(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 13)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'U', 'k', 's', 'b');
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
VALUES ('S/U/a', 'S', 'U', 'a', 'email', 'a@b.example', now(), now(), 'scheduled', 'ka', 'reminder/S/U/a')`)
	require.NoError(t, err)

	_, err = p.Up(ctx)
	require.NoError(t, err)
	store := mirror.New(pool)
	row, err := store.Get(ctx, "S/U/a")
	require.NoError(t, err)
	require.Equal(t, "", row.Tenant, "the default tenant")
	require.Equal(t, "reminder/S/U/a", row.WorkflowID)
	rows, err := store.List(ctx, mirror.Filter{ShipmentID: "S"})
	require.NoError(t, err)
	require.Len(t, rows, 1, "the default tenant's list has it")
	rows, err = store.List(ctx, mirror.Filter{Tenant: "acme", ShipmentID: "S"})
	require.NoError(t, err)
	require.Empty(t, rows, "another tenant's has not")
	_, _, err = store.Window(ctx, "acme", "S", "U")
	require.ErrorIs(t, err, mirror.ErrNotFound)

	// acme schedules the same ids: its own update, its own ids.
	u := reminder.Update{Tenant: "acme", ShipmentID: "S", UpdateID: "U", Kind: "k", Message: reminder.Message{Subject: "s", Text: "b"}}
	r := reminder.Reminder{ID: reminder.ID("acme", "S", "U", "a"), Tenant: "acme", ShipmentID: "S", UpdateID: "U", SubscriberID: "a",
		Channel: reminder.Email, Email: "a@b.example", DueAt: time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)}
	stored, err := store.ScheduleUpdate(ctx, u, []mirror.NewReminder{{Reminder: r, WorkflowID: "reminder/" + r.ID}})
	require.NoError(t, err)
	require.True(t, stored.Inserted)
	require.Equal(t, "acme/S/U/a", stored.Reminders[0].Requested.ID)
	// The default tenant's update is still its own, as first written.
	_, err = pool.Exec(ctx, `INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'U', 'k', 's', 'b')`)
	require.ErrorContains(t, err, "updates_pkey", "one update per tenant and ids")

	var valid, keyed bool
	require.NoError(t, pool.QueryRow(ctx, `
SELECT bool_and(convalidated) FROM pg_constraint
 WHERE connamespace = current_schema()::regnamespace
   AND conname IN ('updates_tenant_check', 'reminders_tenant_check', 'reminders_tenant_shipment_id_update_id_fkey')`).Scan(&valid))
	require.True(t, valid, "00017 validated the rules over the rows of before")
	require.NoError(t, pool.QueryRow(ctx, `
SELECT pg_get_indexdef(indexrelid) LIKE '%(tenant, shipment_id, update_id)%' FROM pg_index
 WHERE indrelid = 'updates'::regclass AND indisprimary`).Scan(&keyed))
	require.True(t, keyed)
	var invalid int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE NOT i.indisvalid AND c.relnamespace = current_schema()::regnamespace`).Scan(&invalid))
	require.Zero(t, invalid, "no index left half-built")

	// Down again: acme's row breaks the old keys, and the down refuses
	// rather than lose it.
	_, err = p.DownTo(ctx, 15)
	require.Error(t, err, "the old keys cannot hold two tenants' same ids")
}
