package faults

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// A worker frozen mid-call (SIGSTOP: a long GC pause, a stuck node) for
// longer than its delivery claim's lease (about 42 s), at production's
// timings: the mail API takes the mail at once and answers 6 s later, its
// Event Webhook reaches serve, the evidence wait is the default 5 minutes,
// and a second worker is running. Temporal gives the attempt up at its 30 s
// timeout and hands the retry to the other worker, which finds the claim
// held until its lease lapses, then settles it from the provider's event
// for the key: recorded sent, nothing sent again. The frozen worker thaws
// to find its send recorded. The subscriber gets the reminder once.
func TestAWorkerFrozenPastItsClaimSendsTheKeyOnce(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true, Events: true})
	s.Mail.SetLatency(6 * time.Second)
	env := append(s.Env(), "SHIPNOTIFY_UNCONFIRMED_SEND_WAIT="+activities.DefaultEvidenceWait.String())
	frozen := testenv.StartProcess(t, env, testenv.Binary(t), "worker")
	results, err := s.Starter.Schedule(context.Background(), emailUpdate(t, 1, time.Now().Add(time.Second), 0))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = s.Mail.Wait(ctx, func([]sink.Mail) bool { return s.Mail.InFlight() > 0 })
	require.NoError(t, err, frozen.Log())
	// The second worker starts only now, so the call is the frozen one's.
	other := testenv.StartProcess(t, env, testenv.Binary(t), "worker")
	frozen.Signal(syscall.SIGSTOP)
	thawed := false
	defer func() {
		if !thawed {
			frozen.Signal(syscall.SIGCONT)
		}
	}()

	// While it is frozen, the other worker finishes the reminder.
	waitAll(t, s, results, 2*time.Minute)
	require.Empty(t, audit(t, s, results), "the key was sent once\n%s", other.Log())
	events := trail(t, s, results[0].ReminderID)
	require.Contains(t, events, "sent", events)

	frozen.Signal(syscall.SIGCONT)
	thawed = true
	// Its call ends either way: the provider's answer has waited in the
	// socket since the freeze, and the attempt's deadline passed during it,
	// so the read may find the answer (a send, whose record finds the key
	// recorded) or the deadline first (a maybe-sent, which keeps the record).
	ended := func() bool {
		log := frozen.Log()
		return strings.Contains(log, "no answer after the request may have reached it") ||
			strings.Contains(log, "delivery sent") || strings.Contains(log, "sent, but not recorded")
	}
	if !waitFor(ended, 2*time.Minute) {
		// Where it is stuck, for whoever reads the failure.
		frozen.Signal(syscall.SIGQUIT)
		require.Eventually(t, func() bool { return strings.Contains(frozen.Log(), "goroutine ") }, 10*time.Second, 100*time.Millisecond)
		t.Fatalf("the thawed worker's attempt never ended\n%s", frozen.Log())
	}
	require.Len(t, s.Mail.Mails(), 1, "the thawed worker sends nothing again")
	require.Equal(t, "sent", claimStatus(s, results[0].DeliveryKey), "and its late answer leaves the record as it is")
}

// waitFor polls cond until it holds or d has passed, and says which.
func waitFor(cond func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(100 * time.Millisecond)
	}
	return true
}
