package migrations

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// 00011 keeps a channel's address beyond email and webhook in its own
// column, under a rule added NOT VALID (nothing reads the whole table
// while writers wait); 00012 validates it. The rule takes the rows of
// before, refuses a reminder whose address is in the wrong column, and
// takes a new channel once its own migration names it.
func TestTheChannelAddressRuleFinishesWithoutHoldingWriters(t *testing.T) {
	t.Parallel()
	pool, p := schemaAt(t, 10)
	ctx := context.Background()
	insert := func(id, channel, email, url, secret, address string) error {
		_, err := pool.Exec(ctx, `
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, webhook_url, webhook_secret, address,
                       due_at, requested_due_at, state, delivery_key, workflow_id)
VALUES ($1, 'S', 'U', $1, $2, nullif($3, ''), nullif($4, ''), nullif($5, ''), nullif($6, ''), now(), now(), 'scheduled', $1, $1)`,
			id, channel, email, url, secret, address)
		return err
	}
	_, err := pool.Exec(ctx, `INSERT INTO updates (shipment_id, update_id, kind, subject, body) VALUES ('S', 'U', 'k', 's', 'b')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
INSERT INTO reminders (id, shipment_id, update_id, subscriber_id, channel, email, due_at, requested_due_at, state, delivery_key, workflow_id)
VALUES ('before', 'S', 'U', 'before', 'email', 'a@b.example', now(), now(), 'scheduled', 'kb', 'wb')`)
	require.NoError(t, err)

	_, err = p.UpTo(ctx, 11)
	require.NoError(t, err)
	validated := func() bool {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, `
SELECT convalidated FROM pg_constraint WHERE conrelid = 'reminders'::regclass AND conname = 'reminders_address_check'`).Scan(&ok))
		return ok
	}
	require.False(t, validated(), "added NOT VALID")
	require.NoError(t, insert("email", "email", "a@b.example", "", "", ""))
	require.NoError(t, insert("hook", "webhook", "", "https://h.example/in", "whsec_x", ""))
	require.ErrorContains(t, insert("email-with-address", "email", "a@b.example", "", "", "+4915112345678"), "reminders_address_check")
	require.ErrorContains(t, insert("pager-early", "pager", "", "", "", "+4915112345678"), "reminders_channel_check",
		"a new channel waits for its own migration")
	_, err = pool.Exec(ctx, `ALTER TABLE reminders DROP CONSTRAINT reminders_channel_check;
ALTER TABLE reminders ADD CONSTRAINT reminders_channel_check CHECK (channel IN ('email', 'webhook', 'pager'))`)
	require.NoError(t, err)
	require.NoError(t, insert("pager", "pager", "", "", "", "+4915112345678"))
	require.ErrorContains(t, insert("pager-no-address", "pager", "a@b.example", "", "", ""), "reminders_address_check")

	_, err = p.UpTo(ctx, 12)
	require.NoError(t, err)
	require.True(t, validated(), "00012 validates it over the rows of before")
}
