package mirror_test

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
)

// The provider's rate cap is one row every worker shares: however many
// callers ask at once, the slots they take are spaced exactly one interval
// apart, none further out than asked, and a caller refused is told how
// long until a slot is within reach.
func TestSendSlotsAreSpacedAcrossCallers(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	const every, ahead = 100 * time.Millisecond, time.Second
	var mu sync.Mutex
	// Each slot as seen from outside: when it comes is known to lie between
	// the call's start and its return, plus the wait it was told.
	type slot struct{ lo, hi time.Duration }
	var slots []slot
	refused := 0
	var last time.Duration // when the last call returned
	var wg sync.WaitGroup
	began := time.Now()
	for range 30 {
		wg.Go(func() {
			start := time.Since(began)
			wait, ok, err := store.TakeSendSlot(context.Background(), "notify", every, ahead)
			end := time.Since(began)
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			last = max(last, end)
			if !ok {
				refused++
				require.Positive(t, wait, "told how long to wait")
				return
			}
			require.LessOrEqual(t, wait, ahead+time.Millisecond, "no slot is taken more than a second out")
			slots = append(slots, slot{start + wait, end + wait})
		})
	}
	wg.Wait()
	require.Positive(t, refused, "slots more than a second out are not taken")
	// The window ahead moves with the clock: calls spread over a longer
	// time (a loaded machine) may take more slots, never more than the
	// window reaches from the last call.
	require.LessOrEqual(t, len(slots), int((last+ahead)/every)+1+2, "at most the slots a second ahead of the last call reaches, and the one at once")
	slices.SortFunc(slots, func(a, b slot) int { return cmp.Compare(a.lo, b.lo) })
	for i := range slots {
		for j := range i {
			// Any two slots are at least one interval apart: the widest gap
			// the calls' own latency allows, in either order, is at least
			// that (less a few milliseconds of the database's rounding). A
			// slow call's bounds may start before a quicker later slot's,
			// so the order of the lower bounds is not the slots' order; a
			// load on the machine widens the bounds, never fails it.
			widest := max(slots[i].hi-slots[j].lo, slots[j].hi-slots[i].lo)
			require.GreaterOrEqual(t, widest, every-5*time.Millisecond, "slots %d and %d: %v", j, i, slots)
		}
	}
}

// A provider's outage is a run of failures: a failure continues it, an
// answer ends it, and so does a quiet spell longer than the quiet gap.
func TestProviderOutagesRunAndEnd(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	first, err := store.NoteProviderFailure(ctx, "email", 30*time.Second)
	require.NoError(t, err)
	require.Less(t, first.For, time.Second)
	// An outage that began five minutes ago goes on.
	_, err = db.Pool.Exec(ctx, `UPDATE provider_health SET failing_since = now() - interval '5 minutes', last_failure_at = now() - interval '1 second'`)
	require.NoError(t, err)
	again, err := store.NoteProviderFailure(ctx, "email", 30*time.Second)
	require.NoError(t, err)
	require.GreaterOrEqual(t, again.For, 5*time.Minute, "the run goes on")
	other, err := store.NoteProviderFailure(ctx, "webhook:0123456789abcdef", 30*time.Second)
	require.NoError(t, err)
	require.Less(t, other.For, time.Second, "each provider has its own")

	// It answers: the next failure starts a new run.
	require.NoError(t, store.NoteProviderSuccess(ctx, "email"))
	after, err := store.NoteProviderFailure(ctx, "email", 30*time.Second)
	require.NoError(t, err)
	require.Less(t, after.For, time.Second, "an answer ends the outage")

	// Quiet for longer than the gap (and a quarter of the run): a new run.
	_, err = db.Pool.Exec(ctx, `UPDATE provider_health SET failing_since = now() - interval '2 minutes', last_failure_at = now() - interval '31 seconds' WHERE provider = 'email'`)
	require.NoError(t, err)
	quiet, err := store.NoteProviderFailure(ctx, "email", 30*time.Second)
	require.NoError(t, err)
	require.Less(t, quiet.For, time.Second)
	// A long run keeps its retries far apart, so its gaps may be longer.
	_, err = db.Pool.Exec(ctx, `UPDATE provider_health SET failing_since = now() - interval '1 hour', last_failure_at = now() - interval '5 minutes', last_success_at = NULL WHERE provider = 'email'`)
	require.NoError(t, err)
	long, err := store.NoteProviderFailure(ctx, "email", 30*time.Second)
	require.NoError(t, err)
	require.GreaterOrEqual(t, long.For, time.Hour)
}
