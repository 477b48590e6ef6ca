package mirror_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// digestMembers stores n reminders for n shipments, all due at due to one
// inbox with a 30-minute digest, and returns them.
func digestMembers(t *testing.T, store *mirror.Store, name string, n int, due time.Time) []stored {
	t.Helper()
	every := 30 * time.Minute
	var out []stored
	for i := range n {
		u := update(fmt.Sprintf("SHP-%s-%d", name, i), due)
		u.Subscribers[0].Email = name + "@inbox.example"
		u.Digest = &every
		s := insert(t, store, u, due.Add(-time.Hour)).Reminders[0]
		out = append(out, stored{ID: s.Requested.ID, DeliveryKey: s.DeliveryKey})
	}
	return out
}

// claimDigest claims r's key as its digest member's attempt owner does.
func claimDigest(t *testing.T, store *mirror.Store, r stored, owner string) (mirror.ClaimVerdict, int) {
	t.Helper()
	res, members, err := store.ClaimDigest(context.Background(), mirror.Claim{
		Key: r.DeliveryKey, ReminderID: r.ID, Purpose: reminder.PurposeReminder, Owner: owner, LeaseFor: time.Minute})
	require.NoError(t, err)
	return res.Verdict, members
}

func stateOf(t *testing.T, store *mirror.Store, id string) reminder.State {
	t.Helper()
	r, err := store.Get(context.Background(), id)
	require.NoError(t, err)
	return r.State
}

// The first member's attempt claims every member's key; another member's
// attempt finds its key held. The seal names the digest by its members'
// keys; one record records every member sent under one provider message
// id, and SendGrid's bounce of the digest's key makes each member
// undeliverable and owes each its escalation.
func TestADigestIsClaimedSealedRecordedAndSettledAsOne(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	ms := digestMembers(t, store, "one", 3, time.Now().Add(-time.Minute))

	verdict, members := claimDigest(t, store, ms[1], "leader")
	require.Equal(t, mirror.Claimed, verdict)
	require.Equal(t, 2, members)
	verdict, members = claimDigest(t, store, ms[0], "late")
	require.Equal(t, mirror.HeldElsewhere, verdict, "the leader holds every member's key")
	require.Zero(t, members)

	dg, err := store.SealDigest(ctx, ms[1].DeliveryKey, "leader")
	require.NoError(t, err)
	require.Equal(t, reminder.DigestKey([]string{ms[0].DeliveryKey, ms[1].DeliveryKey, ms[2].DeliveryKey}), dg.Key)
	require.Len(t, dg.Members, 3)

	require.NoError(t, ignoreDelivered(store.RecordSent(ctx, ms[1].DeliveryKey, "msg-digest", nil)))
	var sent int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM deliveries WHERE digest_key = $1 AND status = 'sent' AND provider_message_id = 'msg-digest'`, dg.Key).Scan(&sent))
	require.Equal(t, 3, sent)
	for _, m := range ms {
		require.Equal(t, reminder.Sent, stateOf(t, store, m.ID))
		var detail map[string]any
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT detail FROM reminder_events WHERE reminder_id = $1 AND type = 'sent'`, m.ID).Scan(&detail))
		require.Equal(t, m.DeliveryKey, detail["delivery_key"], "each member's trail names its own key")
		require.Equal(t, dg.Key, detail["digest_key"])
	}
	verdict, _ = claimDigest(t, store, ms[0], "late")
	require.Equal(t, mirror.AlreadySent, verdict)

	applied, err := store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{
		event("bounce-1", dg.Key, reminder.OutcomeBounce, time.Now())}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 3, applied.Applied[reminder.OutcomeBounce], "one event, applied to each member")
	require.Equal(t, 3, applied.Escalations, "each member owes its escalation")
	for _, m := range ms {
		require.Equal(t, reminder.Undeliverable, stateOf(t, store, m.ID))
	}
	again, err := store.ApplyProviderEvents(ctx, []mirror.ProviderEvent{
		event("bounce-1", dg.Key, reminder.OutcomeBounce, time.Now())}, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 3, again.Duplicate[reminder.OutcomeBounce], "a repeat is a repeat for every member")
	require.Zero(t, again.Escalations)
}

// A member cancelled before the seal leaves the digest: its claim is
// released and it ends cancelled with nothing sent. One cancelled after
// the seal waits while the send may be on its way; once it is recorded,
// the cancel meets a sent reminder, which its notice follows.
func TestACancelBeforeTheSealLeavesTheDigestAndOneAfterWaitsForIt(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	ms := digestMembers(t, store, "cancel", 3, time.Now().Add(-time.Minute))
	verdict, members := claimDigest(t, store, ms[0], "leader")
	require.Equal(t, mirror.Claimed, verdict)
	require.Equal(t, 2, members)

	state, err := store.CancelDuringSend(ctx, ms[1].ID, "cancelled", nil)
	require.NoError(t, err)
	require.Equal(t, reminder.Cancelled, state)
	delivered, err := store.WasDelivered(ctx, ms[1].ID)
	require.NoError(t, err)
	require.False(t, delivered, "nothing of it went: no notice")

	dg, err := store.SealDigest(ctx, ms[0].DeliveryKey, "leader")
	require.NoError(t, err)
	require.Len(t, dg.Members, 2, "the cancelled member is left out")
	require.Equal(t, reminder.DigestKey([]string{ms[0].DeliveryKey, ms[2].DeliveryKey}), dg.Key)

	_, err = store.CancelDuringSend(ctx, ms[2].ID, "cancelled", nil)
	require.ErrorIs(t, err, mirror.ErrDigestSending, "sealed: the message may be on its way")
	require.Equal(t, reminder.Scheduled, stateOf(t, store, ms[2].ID))

	require.NoError(t, ignoreDelivered(store.RecordSent(ctx, ms[0].DeliveryKey, "msg-digest", nil)))
	_, err = store.CancelDuringSend(ctx, ms[2].ID, "cancelled", nil)
	require.NoError(t, err)
	delivered, err = store.WasDelivered(ctx, ms[2].ID)
	require.NoError(t, err)
	require.True(t, delivered, "it was in the digest: its notice goes")
}

// A member rescheduled before the seal leaves the digest (a digest of the
// leader alone is none); one sealed refuses the move.
func TestARescheduleLeavesAnUnsealedDigestAndIsRefusedBySealedOne(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	due := time.Now().Add(-time.Minute)
	later := due.Add(24 * time.Hour)

	ms := digestMembers(t, store, "move", 2, due)
	_, members := claimDigest(t, store, ms[0], "leader")
	require.Equal(t, 1, members)
	require.NoError(t, store.Reschedule(ctx, ms[1].ID, later, reminder.DeliveryKey(ms[1].ID, "sub-a", later), nil))
	dg, err := store.SealDigest(ctx, ms[0].DeliveryKey, "leader")
	require.NoError(t, err)
	require.Empty(t, dg.Key, "the leader alone is no digest")
	var status string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM deliveries WHERE delivery_key = $1`, ms[1].DeliveryKey).Scan(&status))
	require.Equal(t, "released", status)

	ms = digestMembers(t, store, "sealed", 2, due)
	claimDigest(t, store, ms[0], "leader-2")
	_, err = store.SealDigest(ctx, ms[0].DeliveryKey, "leader-2")
	require.NoError(t, err)
	err = store.Reschedule(ctx, ms[1].ID, later, reminder.DeliveryKey(ms[1].ID, "sub-a", later), nil)
	require.ErrorIs(t, err, mirror.ErrInDigest)

	// A send that failed for now releases every member, and frees them.
	require.NoError(t, store.ReleaseDelivery(ctx, ms[0].DeliveryKey, "leader-2"))
	require.NoError(t, store.Reschedule(ctx, ms[1].ID, later, reminder.DeliveryKey(ms[1].ID, "sub-a", later), nil))
}
