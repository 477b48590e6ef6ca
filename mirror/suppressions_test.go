package mirror_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// claim claims the send of a new email reminder of tenant to address.
func claim(t *testing.T, store *mirror.Store, tenant, shipment, address string) (mirror.ClaimResult, stored) {
	t.Helper()
	u := update(shipment, time.Now().Add(-time.Minute))
	u.Tenant, u.Subscribers[0].Email = tenant, address
	s := insert(t, store, u, time.Now().Add(-time.Hour)).Reminders[0]
	res, err := store.ClaimDelivery(context.Background(), mirror.Claim{
		Key: s.DeliveryKey, ReminderID: s.Requested.ID, Purpose: reminder.PurposeReminder, Owner: "test", LeaseFor: time.Minute})
	require.NoError(t, err)
	return res, stored{ID: s.Requested.ID, DeliveryKey: s.DeliveryKey}
}

// An unsubscribe or a spam report suppresses its address for the
// reminder's tenant, whatever the address's case: that tenant's next
// reminder to it is refused and ends suppressed, escalating nothing;
// another tenant's goes out. Lifting it lets the next one go.
func TestAnOptOutSuppressesTheAddressForItsTenantOnly(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	for _, o := range []reminder.ProviderOutcome{reminder.OutcomeUnsubscribe, reminder.OutcomeSpamReport} {
		r := sentReminder(t, store, "SHP-opt-"+string(o))
		_, err := store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{
			event("e-"+string(o), r.DeliveryKey, reminder.OutcomeDelivered, time.Now()),
			event("e-"+string(o)+"-2", r.DeliveryKey, o, time.Now()),
		}, time.Hour)
		require.NoError(t, err)
		require.Equal(t, reminder.Delivered, readOutcome(t, db, r.ID).State, "the %s reminder itself was delivered", o)
		require.Empty(t, owed(t, db, r.ID), "an opt-out escalates nothing")

		list, err := store.Suppressions(ctx, mirror.SuppressionFilter{Address: "x@y.example"})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, string(o), list[0].Reason)
		require.Equal(t, r.ID, list[0].ReminderID)
		require.NotContains(t, list[0].AddressSHA256, "@", "the mirror keeps a hash, not the address")

		res, next := claim(t, store, "", "SHP-next-"+string(o), "X@Y.example")
		id := next.ID
		require.Equal(t, mirror.Refused, res.Verdict, "the tenant's next reminder to the address is refused")
		require.Equal(t, reminder.Suppressed, res.Target.State)
		require.Equal(t, reminder.Suppressed, readOutcome(t, db, id).State)
		require.Contains(t, eventTypes(t, store, id), "suppressed")
		require.Empty(t, owed(t, db, id))

		res, _ = claim(t, store, "acme", "SHP-other-"+string(o), "x@y.example")
		require.Equal(t, mirror.Claimed, res.Verdict, "another tenant's reminder to the same address goes out")

		require.NoError(t, store.LiftSuppression(ctx, "", "x@Y.example", "alice"))
		require.ErrorIs(t, store.LiftSuppression(ctx, "", "x@y.example", "alice"), mirror.ErrNotSuppressed)
		res, _ = claim(t, store, "", "SHP-lifted-"+string(o), "x@y.example")
		require.Equal(t, mirror.Claimed, res.Verdict, "once lifted, the next reminder goes out")
		lifted, err := store.Suppressions(ctx, mirror.SuppressionFilter{Lifted: true, Address: "x@y.example"})
		require.NoError(t, err)
		require.Len(t, lifted, 1)
		require.NotNil(t, lifted[0].LiftedAt)
		require.Equal(t, "alice", lifted[0].LiftedBy)
	}
}

// A drop because the address is on SendGrid's unsubscribe list is no
// delivery failure: the reminder ends suppressed, not undeliverable, owes
// no escalation, and the address is suppressed. A drop for a bounced
// address stays undeliverable and escalates.
func TestADropForAnUnsubscribedAddressIsSuppressedNotUndeliverable(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	r := sentReminder(t, store, "SHP-drop-unsub")
	drop := event("d1", r.DeliveryKey, reminder.OutcomeDropped, time.Now())
	drop.Reason = "Unsubscribed Address"
	applied, err := store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{drop}, time.Hour)
	require.NoError(t, err)
	require.Zero(t, applied.Escalations)
	got := readOutcome(t, db, r.ID)
	require.Equal(t, reminder.Suppressed, got.State)
	require.Nil(t, got.Undeliverable)
	require.Nil(t, got.Awaiting, "a suppressed email awaits no outcome")
	require.Empty(t, owed(t, db, r.ID))
	list, err := store.Suppressions(ctx, mirror.SuppressionFilter{})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "dropped", list[0].Reason)

	// Another address: x@y.example is suppressed now.
	res, bounced := claim(t, store, "", "SHP-drop-bounced", "bounced@y.example")
	require.Equal(t, mirror.Claimed, res.Verdict)
	require.NoError(t, ignoreDelivered(store.RecordSent(ctx, bounced.DeliveryKey, "msg-2", nil)))
	drop = event("d2", bounced.DeliveryKey, reminder.OutcomeDropped, time.Now())
	drop.Reason = "Bounced Address"
	_, err = store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{drop}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, reminder.Undeliverable, readOutcome(t, db, bounced.ID).State)
	require.Equal(t, map[string]string{"undeliverable": "owed"}, owed(t, db, bounced.ID))
}

// The one-click link names a reminder; its address is suppressed for its
// tenant, and a link of a reminder not in the mirror suppresses nothing.
func TestSuppressAddressOfAReminder(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	r := sentReminder(t, store, "SHP-one-click")
	found, err := store.SuppressAddressOf(ctx, r.ID, "one_click")
	require.NoError(t, err)
	require.True(t, found)
	found, err = store.SuppressAddressOf(ctx, "no/such/reminder", "one_click")
	require.NoError(t, err)
	require.False(t, found)
	res, _ := claim(t, store, "", "SHP-after-click", "x@y.example")
	require.Equal(t, mirror.Refused, res.Verdict)
	require.Equal(t, reminder.Suppressed, res.Target.State)
}
