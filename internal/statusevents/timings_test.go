package statusevents_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/statusevents"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/webhook"
)

// The tests here run the relay at production's timings: its defaults (a
// batch of 100, 8 posts at once, a 45 s lease, a 15 s post timeout) and a
// tracker that takes 4 s to answer each post, so a pass of 100 rows (13
// rounds of 4 s) outlives the lease it claimed them under. Each takes
// about a minute of wall time, in parallel with the others.

const trackerLatency = 4 * time.Second

// production leaves every timing of a relay at its default.
func production(r *statusevents.Relay) { r.Every, r.BaseBackoff, r.MaxBackoff = 0, 0, 0 }

// backlog writes 100 status events for the tracker: 90 reminders'
// scheduled events and ten of them rescheduled, so 90 are first of their
// reminder (claimable at once) and ten wait for the one before.
func backlog(t *testing.T, tr *tracker, shipment string) map[string]int {
	t.Helper()
	ids := testenv.ScheduleInMirror(t, tr.store, "", shipment, 90)
	want := map[string]int{}
	for _, id := range ids {
		want[id] = 1
	}
	for _, id := range ids[:10] {
		require.NoError(t, tr.store.Reschedule(context.Background(), id, time.Now().Add(72*time.Hour), "k2-"+id, map[string]any{"by": "ops"}))
		want[id] = 2
	}
	require.Equal(t, 100, pendingRows(t, tr))
	return want
}

// waitAllOrATwice waits until the receiver holds n distinct events, or
// one of them twice (a failure the caller reports), within d.
func (tr *tracker) waitAllOrATwice(t *testing.T, n int, d time.Duration) []received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	hooks, err := tr.receiver.Wait(ctx, func(hs []sink.Hook) bool {
		ids := map[string]bool{}
		for _, h := range hs {
			if ids[h.ID] {
				return true
			}
			ids[h.ID] = true
		}
		return len(ids) >= n
	})
	require.NoError(t, err, "the receiver got %d of %d events", len(tr.receiver.Hooks()), n)
	return parse(t, hooks)
}

// requireEachOnceInOrder fails unless got holds each event once, every
// reminder of want its want[id] events, in their order 1, 2...
func requireEachOnceInOrder(t *testing.T, got []received, want map[string]int) {
	t.Helper()
	seen := map[string]bool{}
	next := map[string]int{}
	for _, r := range got {
		require.False(t, seen[r.ID], "event %s (reminder %s, %d) was posted twice", r.ID, r.Reminder, r.Seq)
		seen[r.ID] = true
		next[r.Reminder]++
		require.Equal(t, next[r.Reminder], r.Seq, "reminder %s's events arrive in order", r.Reminder)
	}
	require.Equal(t, want, next)
}

// requireAllRecorded waits until every row is recorded delivered, no claim
// left, and checks each was claimed once.
func requireAllRecorded(t *testing.T, tr *tracker, n int) {
	t.Helper()
	ctx := context.Background()
	var delivered, claims, attempts int
	require.Eventually(t, func() bool {
		require.NoError(t, tr.db.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'delivered'), count(claimed_by), coalesce(sum(attempts), 0) FROM status_outbox`).
			Scan(&delivered, &claims, &attempts))
		return delivered == n && claims == 0
	}, 30*time.Second, 50*time.Millisecond, "every post recorded delivered, no claim left: %d delivered, %d claims", delivered, claims)
	require.Equal(t, n, attempts, "each row claimed and posted once")
}

// Two relays (two serve replicas) with the defaults and a tracker that
// takes 4 s a post: a backlog of 100 events is posted once each and
// recorded delivered, each reminder's in order, in about the time the
// posts take. The relay that claims the 90 first events needs 12 rounds of
// 4 s, past its 45 s lease: it renews the lease while it posts and records
// each post as it completes, so the other relay never takes a row back.
func TestTwoRelaysAtProductionTimingsPostABacklogOnceEach(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	want := backlog(t, tr, "SHP-slow-tracker")
	tr.receiver.SetLatency(trackerLatency)
	began := time.Now()
	run(t, tr.relay(t, production))
	run(t, tr.relay(t, production))

	got := tr.waitAllOrATwice(t, 100, 3*time.Minute)
	posted := time.Since(began)
	requireEachOnceInOrder(t, got, want)
	requireAllRecorded(t, tr, 100)
	require.Equal(t, 100, tr.receiver.Requests(), "no event posted again, even after it was recorded")
	t.Logf("100 events at %s a post, two relays: posted in %s, recorded in %s", trackerLatency, posted.Round(time.Second),
		time.Since(began).Round(time.Second))
}

// A relay whose writes cannot reach the outbox for 40 s (a PostgreSQL that
// stalls, a lock held on its rows) cannot renew its lease: it starts no
// post its lease, as last renewed, could not see to the end (the post's
// 15 s timeout inside the lease), and goes on once it renews: every event
// once, each recorded, none claimed twice.
func TestARelayThatCannotRenewItsLeaseStartsNoPostPastIt(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	want := backlog(t, tr, "SHP-stalled-relay")
	tr.receiver.SetLatency(trackerLatency)
	ctx := context.Background()
	run(t, tr.relay(t, production))

	// The claim: its lease's end as the database wrote it.
	var claimed int
	var leaseEnd time.Time
	require.Eventually(t, func() bool {
		require.NoError(t, tr.db.Pool.QueryRow(ctx, `
SELECT count(*), coalesce(min(lease_until), now()) FROM status_outbox WHERE claimed_by IS NOT NULL`).Scan(&claimed, &leaseEnd))
		return claimed > 0
	}, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, 90, claimed, "the first event of each reminder")
	// Its rows held, before the first post completes (4 s): no record and
	// no renewal gets through until the hold ends, 40 s after the claim.
	stall, err := tr.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = stall.Rollback(ctx) }()
	_, err = stall.Exec(ctx, `SELECT id FROM status_outbox WHERE claimed_by IS NOT NULL FOR UPDATE`)
	require.NoError(t, err)
	require.Empty(t, tr.receiver.Hooks(), "the hold began before any post completed")
	holdEnd := leaseEnd.Add(-5 * time.Second)
	require.Eventually(t, func() bool {
		var over bool
		require.NoError(t, tr.db.Pool.QueryRow(ctx, `SELECT now() >= $1`, holdEnd).Scan(&over))
		return over
	}, 2*time.Minute, 100*time.Millisecond)
	require.NoError(t, stall.Rollback(ctx))
	during := tr.receiver.Hooks()

	got := tr.waitAllOrATwice(t, 100, 3*time.Minute)
	requireEachOnceInOrder(t, got, want)
	requireAllRecorded(t, tr, 100)
	require.NotEmpty(t, during, "it posted while the lease held")
	require.Less(t, len(during), 90, "it did not post its whole batch on a lease it could not renew")
	claimedAt, lastStart := leaseEnd.Add(-statusevents.Lease), leaseEnd.Add(-webhook.Timeout)
	var latest time.Duration
	for _, h := range during {
		started := h.Received.Add(-trackerLatency)
		require.False(t, started.After(lastStart),
			"a post started %s after the claim, when its lease (never renewed) could no longer cover its %s timeout",
			started.Sub(claimedAt).Round(time.Millisecond), webhook.Timeout)
		latest = max(latest, started.Sub(claimedAt))
	}
	t.Logf("writes held for %s after the claim: %d posts started meanwhile, the last %s after it (lease %s); all %d posted once",
		holdEnd.Sub(claimedAt).Round(time.Second), len(during), latest.Round(100*time.Millisecond), statusevents.Lease, len(got))
}
