package mirror_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// A state change that finds its reminder in none of the states it leaves
// (an approval after the expiry committed) is refused, naming the state it
// found, and writes neither the row nor an event; repeating a change that
// was taken answers as taken and writes nothing more.
func TestATransitionFromAFinishedRowIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	id := insert(t, store, update("SHP-T", time.Now().Add(time.Hour)), time.Now()).Reminders[0].Requested.ID
	events := func() int {
		es, err := store.Events(ctx, id)
		require.NoError(t, err)
		return len(es)
	}

	awaiting := []reminder.State{reminder.Scheduled}
	require.NoError(t, store.TransitionFrom(ctx, id, awaiting, reminder.Expired, "expired", nil))
	before := events()
	require.NoError(t, store.TransitionFrom(ctx, id, awaiting, reminder.Expired, "expired", nil), "a repeat answers as taken")
	require.Equal(t, before, events(), "and writes nothing more")

	err := store.TransitionFrom(ctx, id, awaiting, reminder.Cancelled, "rejected", map[string]any{"by": "alice"})
	var refused *mirror.RefusedError
	require.True(t, errors.As(err, &refused), "refused, not a silent success: %v", err)
	require.Equal(t, reminder.Expired, refused.State)
	require.Equal(t, before, events(), "no event for a change not made")
	row, err := store.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, reminder.Expired, row.State)
}
