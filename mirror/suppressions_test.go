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

// A lift outranks the one-click links made before it: a link issued
// before the latest lift of its address, or of the first format (a zero
// issue time), writes nothing and says so; one issued after the lift
// suppresses the address again. The lift time is the row's lifted_at.
func TestALiftOutranksTheLinksMadeBeforeIt(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	r := sentReminder(t, store, "SHP-lift-link")
	res, err := store.SuppressAddressByLink(ctx, r.ID, time.Now())
	require.NoError(t, err)
	require.Equal(t, mirror.LinkSuppressed, res)
	require.NoError(t, store.LiftSuppression(ctx, "", "x@y.example", "ops"))
	rows, err := store.Suppressions(ctx, mirror.SuppressionFilter{Address: "x@y.example", Lifted: true})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	lifted := *rows[0].LiftedAt

	for _, issued := range []time.Time{{}, lifted.Add(-time.Millisecond)} {
		res, err = store.SuppressAddressByLink(ctx, r.ID, issued)
		require.NoError(t, err)
		require.Equal(t, mirror.LinkOutranked, res, issued)
	}
	now, err := store.Suppressions(ctx, mirror.SuppressionFilter{Address: "x@y.example"})
	require.NoError(t, err)
	require.Empty(t, now, "the lift stands")

	res, err = store.SuppressAddressByLink(ctx, r.ID, lifted.Add(time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, mirror.LinkSuppressed, res)
	now, err = store.Suppressions(ctx, mirror.SuppressionFilter{Address: "x@y.example"})
	require.NoError(t, err)
	require.Len(t, now, 1, "a link made after the lift suppresses again")
	res, err = store.SuppressAddressByLink(ctx, "no/such/reminder", time.Now())
	require.NoError(t, err)
	require.Equal(t, mirror.LinkNoReminder, res)
}

// SendGrid may report the drop before the send is recorded: the reminder
// ends suppressed all the same, awaits no outcome, owes no escalation, and
// its record is a note that changes nothing; a retry is refused. As the
// runtime role, whose moves the state machine's triggers judge.
func TestAnOptOutDropBeforeTheSendIsRecordedSuppressesTheReminder(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	_, store, _ := runtimeOf(t, db)
	ctx := context.Background()
	r := pending(t, store, "SHP-drop-first")
	drop := event("d1", r.DeliveryKey, reminder.OutcomeDropped, time.Now())
	drop.Reason = "Unsubscribed Address"
	applied, err := store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{drop}, time.Hour)
	require.NoError(t, err)
	require.Zero(t, applied.Escalations)
	require.Equal(t, reminder.Suppressed, readOutcome(t, db, r.ID).State)

	require.NoError(t, ignoreDelivered(store.RecordSent(ctx, r.DeliveryKey, "msg-1", nil)))
	got := readOutcome(t, db, r.ID)
	require.Equal(t, reminder.Suppressed, got.State, "the record does not make it sent")
	require.Nil(t, got.Awaiting, "a suppressed email awaits no outcome")
	require.Nil(t, got.Undeliverable)
	require.Empty(t, owed(t, db, r.ID))
	var types []string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT array_agg(type ORDER BY id) FROM reminder_events WHERE reminder_id = $1`, r.ID).Scan(&types))
	require.Equal(t, []string{"scheduled", "provider_dropped", "sent_late"}, types)
	res, err := store.ClaimDelivery(ctx, mirror.Claim{
		Key: r.DeliveryKey, ReminderID: r.ID, Purpose: reminder.PurposeReminder, Owner: "retry", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, mirror.Refused, res.Verdict, "a retry sends nothing")
	require.Equal(t, reminder.Suppressed, res.Target.State, "and is told the reminder ended suppressed")
}

// Suppressions pages by keyset: each row once, newest first, rows
// suppressed at the same instant by tenant and hash, whatever the page
// size.
func TestSuppressionsPageByKeyset(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	// Five rows, three of them at one instant (as one batch of provider
	// events writes them), across two tenants.
	at := time.Now().UTC().Truncate(time.Microsecond)
	for i, r := range []struct {
		tenant, addr string
		at           time.Time
	}{
		{"acme", "a@x.example", at}, {"", "b@x.example", at}, {"acme", "c@x.example", at},
		{"", "d@x.example", at.Add(-time.Second)}, {"acme", "e@x.example", at.Add(time.Second)},
	} {
		_, err := db.Pool.Exec(ctx, `INSERT INTO suppressions (tenant, address_sha256, reason, reminder_id, suppressed_at)
VALUES ($1, suppression_address($2), 'unsubscribe', $3, $4)`, r.tenant, r.addr, "r"+string(rune('0'+i)), r.at)
		require.NoError(t, err)
	}
	all, err := store.Suppressions(ctx, mirror.SuppressionFilter{AnyTenant: true})
	require.NoError(t, err)
	require.Len(t, all, 5)
	for size := 1; size <= 3; size++ {
		var got []mirror.Suppression
		f := mirror.SuppressionFilter{AnyTenant: true, Limit: size}
		for range 6 {
			page, err := store.Suppressions(ctx, f)
			require.NoError(t, err)
			got = append(got, page...)
			if len(page) < size {
				break
			}
			last := page[len(page)-1]
			f.After = &mirror.SuppressionPosition{SuppressedAt: last.SuppressedAt, Tenant: last.Tenant, AddressSHA256: last.AddressSHA256}
		}
		require.Equal(t, all, got, "pages of %d", size)
	}
	// One tenant's pages hold that tenant's rows only.
	newest := all[0] // acme's e, a second later
	page, err := store.Suppressions(ctx, mirror.SuppressionFilter{Tenant: "acme", Limit: 2,
		After: &mirror.SuppressionPosition{SuppressedAt: newest.SuppressedAt, Tenant: newest.Tenant, AddressSHA256: newest.AddressSHA256}})
	require.NoError(t, err)
	require.Len(t, page, 2)
	for _, s := range page {
		require.Equal(t, "acme", s.Tenant)
		require.True(t, s.SuppressedAt.Equal(at))
	}
}
