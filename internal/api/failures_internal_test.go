package api

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The failures table never holds more than maxFailingClients clients,
// however many addresses fail: those whose failures have come back are
// forgotten first, so a client still throttled stays throttled while
// the table has room.
func TestTheFailuresTableIsBounded(t *testing.T) {
	t.Parallel()
	f := newFailures()
	now := time.Date(2027, 1, 14, 8, 0, 0, 0, time.UTC)
	for range FailedKeyBurst {
		require.Zero(t, f.fail("throttled", now))
	}
	require.Positive(t, f.fail("throttled", now))
	for i := range 3 * maxFailingClients {
		f.fail("10.0."+strconv.Itoa(i), now)
		require.LessOrEqual(t, len(f.clients), maxFailingClients)
	}
	// Some time on, every client but the throttled one has its failure
	// back; a newcomer to a full table forgets them, not it.
	f = newFailures()
	for range FailedKeyBurst {
		f.fail("throttled", now)
	}
	for i := range maxFailingClients - 1 {
		f.fail("10.0."+strconv.Itoa(i), now)
	}
	later := now.Add(FailedKeyEvery)
	require.Len(t, f.clients, maxFailingClients)
	require.Zero(t, f.fail("newcomer", later))
	require.Len(t, f.clients, 2, "the throttled client and the newcomer")
	require.Zero(t, f.fail("throttled", later), "the one failure that came back")
	require.Positive(t, f.fail("throttled", later), "still throttled: it was not forgotten")
}
