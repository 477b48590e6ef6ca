package mirror_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// A permanent refusal that reaches the mirror from an attempt whose claim
// lapsed and was taken over (its worker froze between the provider's answer
// and its record) changes nothing: the claim and the trail are the new
// holder's. Only the holder's own refusal fails the key.
func TestALateRefusalFromASupersededAttemptLeavesTheClaim(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	r := pending(t, store, "SHP-1") // claimed by "test"
	_, err := db.Pool.Exec(ctx, `UPDATE deliveries SET lease_until = now() - interval '1 second'`)
	require.NoError(t, err)
	res, err := store.ClaimDelivery(ctx, mirror.Claim{
		Key: r.DeliveryKey, ReminderID: r.ID, Purpose: reminder.PurposeReminder, Owner: "the-next-attempt", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, mirror.Claimed, res.Verdict)

	require.NoError(t, store.RecordDeliveryFailed(ctx, r.DeliveryKey, "test", "SendGrid answered 400, long ago"))
	claim := func() (status, owner string, refusals int) {
		t.Helper()
		require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT status, claimed_by, (SELECT count(*) FROM reminder_events WHERE type = 'delivery_failed')
  FROM deliveries WHERE delivery_key = $1`, r.DeliveryKey).Scan(&status, &owner, &refusals))
		return status, owner, refusals
	}
	status, owner, refusals := claim()
	require.Equal(t, []any{"sending", "the-next-attempt", 0}, []any{status, owner, refusals}, "the superseded attempt's word moves nothing")

	require.NoError(t, store.RecordDeliveryFailed(ctx, r.DeliveryKey, "the-next-attempt", "SendGrid answered 400"))
	status, _, refusals = claim()
	require.Equal(t, []any{"failed", 1}, []any{status, refusals})
}
