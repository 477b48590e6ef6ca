package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// snapshot is a quiet run of n reminders that kept every promise: each
// key taken once, each reminder delivered with its three status events
// received once in order, two provider events each posted and kept once.
func snapshot(n int) runSnapshot {
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	s := runSnapshot{Keys: map[string]string{}, States: map[string]string{}, Accepted: map[string]int{},
		FirstAccepted: map[string]time.Time{}, Posted: map[string]int{}, Acknowledged: map[string]bool{},
		Held: map[string]bool{}, ServeClaimed: map[string]bool{}}
	for i := range n {
		id, key := fmt.Sprintf("r%d", i), fmt.Sprintf("k%d", i)
		s.Keys[id], s.States[id], s.Accepted[key] = key, "delivered", 1
		s.FirstAccepted[key] = t0.Add(time.Duration(i) * time.Second)
		for seq := 1; seq <= 3; seq++ {
			ev := fmt.Sprintf("evt_%d_%d", i, seq)
			s.Outbox = append(s.Outbox, outboxRow{EventID: ev, ReminderID: id, Seq: seq, Status: "delivered"})
			s.Received = append(s.Received, statusReceipt{EventID: ev, ReminderID: id, Seq: seq, At: t0.Add(time.Duration(10*i+seq) * time.Millisecond)})
		}
		for _, kind := range []string{"processed", "delivered"} {
			sg := fmt.Sprintf("sg-%d-%s", i, kind)
			s.Posted[sg], s.Acknowledged[sg] = 1, true
		}
	}
	s.Applied, s.Trail = 2*n, 2*n
	return s
}

func TestACleanRunHasNoViolations(t *testing.T) {
	t.Parallel()
	c := checkRun(snapshot(4))
	require.Empty(t, c.Violations)
	require.Equal(t, RunCheck{Reminders: 4, Delivered: 4, StatusEvents: 12, Reached: 12, ProviderEvents: 8, Applied: 8, Trail: 8}, c)
}

// A key taken twice is in the documented window only if its claim was
// held when the worker died; any other key taken twice is a duplicate
// beyond it, and a key never taken is lost.
func TestADuplicateIsAllowedOnlyForAClaimHeldAtTheKill(t *testing.T) {
	t.Parallel()
	s := snapshot(4)
	s.Accepted["k0"], s.Accepted["k1"], s.Accepted["k2"] = 2, 2, 0
	s.Held = map[string]bool{"k0": true, "k3": true}
	c := checkRun(s)
	require.Equal(t, 2, c.Twice)
	require.Equal(t, 1, c.InWindow, "k0: held at the kill")
	require.Equal(t, 1, c.BeyondWindow, "k1: not held")
	require.Equal(t, 1, c.Lost, "k2: never taken")
	require.Equal(t, 2, c.HeldAtKill)
	require.Len(t, c.Violations, 2)
	require.Contains(t, strings.Join(c.Violations, "\n"), "1 key(s) taken more than once whose claim was not held at a kill")
	require.Contains(t, strings.Join(c.Violations, "\n"), "1 reminder(s) lost")

	s.Held["k1"] = true
	require.NotContains(t, strings.Join(checkRun(s).Violations, "\n"), "taken more than once", "held: in the window")
}

// Every status event the outbox holds must reach the tracker; a repeat is
// allowed only for an event the killed serve had claimed, in order per
// reminder, and nothing the outbox does not hold may arrive.
func TestStatusEventRepeatsAreAllowedOnlyForTheKilledServesClaims(t *testing.T) {
	t.Parallel()
	s := snapshot(3)
	t0 := s.Received[0].At
	s.ServeClaimed = map[string]bool{"evt_0_2": true}
	s.Received = append(s.Received,
		statusReceipt{EventID: "evt_0_2", ReminderID: "r0", Seq: 2, At: t0.Add(time.Minute)}, // claimed: allowed
		statusReceipt{EventID: "evt_1_1", ReminderID: "r1", Seq: 1, At: t0.Add(time.Minute)}, // not claimed
		statusReceipt{EventID: "evt_9_9", ReminderID: "r1", Seq: 9, At: t0.Add(time.Minute)}, // not in the outbox
	)
	// r2's last event never came, and its row is still pending.
	var kept []statusReceipt
	for _, r := range s.Received {
		if r.EventID != "evt_2_3" {
			kept = append(kept, r)
		}
	}
	s.Received = kept
	s.Outbox[8].Status = "pending"
	c := checkRun(s)
	require.Equal(t, 9, c.StatusEvents)
	require.Equal(t, 8, c.Reached)
	require.Equal(t, 2, c.Repeated)
	require.Equal(t, 1, c.RepeatedClaimed)
	require.Equal(t, 1, c.RepeatedUnclaimed)
	require.Equal(t, 1, c.Undelivered)
	v := strings.Join(c.Violations, "\n")
	require.Contains(t, v, "1 status event(s) in the outbox never reached the tracker")
	require.Contains(t, v, "1 status event(s) received more than once that the killed serve had not claimed")
	require.Contains(t, v, "1 status event(s) received that the outbox does not hold")
	require.Contains(t, v, "1 status event(s) not delivered in the outbox")
	require.NotContains(t, v, "out of order", "a repeat later does not reorder the first arrivals")

	s = snapshot(2)
	s.Received[1].At, s.Received[2].At = s.Received[2].At, s.Received[1].At // r0's sent arrived after its delivered
	require.Equal(t, 1, checkRun(s).OutOfOrder)
}

// Provider events the mail sink posted again (a post cut by the kill) are
// kept once: as many rows as distinct events, and one trail event each.
func TestProviderEventsAreKeptOnce(t *testing.T) {
	t.Parallel()
	s := snapshot(2)
	s.Posted["sg-0-processed"] = 2
	s.Acknowledged["sg-1-delivered"] = false
	c := checkRun(s)
	require.Empty(t, c.Violations, "a repost kept once is the promise")
	require.Equal(t, 1, c.Reposted)
	require.Equal(t, 1, c.Unacknowledged)

	s.Trail = 5 // an event applied twice writes its trail twice
	require.Contains(t, strings.Join(checkRun(s).Violations, "\n"), "4 provider events kept, 5 on the trail")
	s.Trail, s.Applied = 3, 3
	require.Contains(t, strings.Join(checkRun(s).Violations, "\n"), "4 provider events posted, 3 kept by serve")
	s = snapshot(2)
	s.States["r1"] = "sent"
	require.Contains(t, strings.Join(checkRun(s).Violations, "\n"), "1 reminder(s) not delivered in the mirror")
}
