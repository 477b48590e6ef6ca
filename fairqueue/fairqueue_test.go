package fairqueue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/fairqueue"
)

// acquireAsync starts an Acquire and returns a channel that yields its
// release once granted.
func acquireAsync(t *testing.T, q *fairqueue.Queue, tenant string) <-chan func() {
	t.Helper()
	ch := make(chan func(), 1)
	go func() {
		release, err := q.Acquire(context.Background(), tenant)
		if err != nil {
			t.Errorf("Acquire(%s): %v", tenant, err)
			return
		}
		ch <- release
	}()
	return ch
}

// waitFor waits until cond holds, failing after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, "waiting for %s", what)
}

func mustAcquire(t *testing.T, q *fairqueue.Queue, tenant string) func() {
	t.Helper()
	release, err := q.Acquire(context.Background(), tenant)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", tenant, err)
	}
	return release
}

func TestAQuietTenantWaitsForOneSlotNotForTheNoisyQueue(t *testing.T) {
	q := fairqueue.New(2, 2)
	held := []func(){mustAcquire(t, q, "acme"), mustAcquire(t, q, "acme")}
	var noisy []<-chan func()
	for range 100 {
		noisy = append(noisy, acquireAsync(t, q, "acme"))
	}
	waitFor(t, "acme's 100 to queue", func() bool { return q.Waiting("acme") == 100 })
	quiet := acquireAsync(t, q, "globex")
	waitFor(t, "globex to queue", func() bool { return q.Waiting("globex") == 1 })

	// Two slots free: acme, first in the ring, gets one, and globex the
	// next, though it came after all of acme's hundred.
	held[0]()
	held[1]()
	select {
	case release := <-quiet:
		if got := q.Waiting("acme"); got != 99 {
			t.Fatalf("acme waiting = %d when globex got its slot, want 99", got)
		}
		release()
	case <-time.After(5 * time.Second):
		t.Fatal("globex did not get the second slot that freed")
	}
	for _, ch := range noisy {
		go func() { (<-ch)() }()
	}
	waitFor(t, "acme's hundred to pass", func() bool { return q.Waiting("acme") == 0 && q.Held("acme") == 0 })
}

func TestATenantHoldsAtMostItsCeiling(t *testing.T) {
	q := fairqueue.New(4, 2)
	a1, a2 := mustAcquire(t, q, "acme"), mustAcquire(t, q, "acme")
	third := acquireAsync(t, q, "acme")
	waitFor(t, "acme's third to wait", func() bool { return q.Waiting("acme") == 1 })
	// Two slots are free, but not for acme: globex takes one at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := q.Acquire(ctx, "globex")
	if err != nil {
		t.Fatalf("globex waited while slots were free: %v", err)
	}
	if held := q.Held("acme"); held != 2 {
		t.Fatalf("acme holds %d, want its ceiling 2", held)
	}
	a1()
	(<-third)()
	a2()
	g()
}

func TestBusyTenantsTakeTurns(t *testing.T) {
	q := fairqueue.New(1, 1)
	first := mustAcquire(t, q, "acme")
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	enqueue := func(tenant string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release := mustAcquire(t, q, tenant)
			mu.Lock()
			order = append(order, tenant)
			mu.Unlock()
			release()
		}()
	}
	for range 3 {
		enqueue("acme")
	}
	waitFor(t, "acme's three to wait", func() bool { return q.Waiting("acme") == 3 })
	for range 3 {
		enqueue("globex")
	}
	waitFor(t, "globex's three to wait", func() bool { return q.Waiting("globex") == 3 })
	first()
	wg.Wait()
	want := []string{"acme", "globex", "acme", "globex", "acme", "globex"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order = %v, want %v", order, want)
		}
	}
}

func TestAWaiterWhoseContextEndsLeavesTheQueue(t *testing.T) {
	q := fairqueue.New(1, 1)
	held := mustAcquire(t, q, "acme")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := q.Acquire(ctx, "globex")
		errc <- err
	}()
	waitFor(t, "globex to wait", func() bool { return q.Waiting("globex") == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel = %v, want context.Canceled", err)
	}
	if q.Waiting("globex") != 0 {
		t.Fatal("a cancelled waiter stayed in the queue")
	}
	held()
	// The slot is free again: nothing cancelled kept it.
	mustAcquire(t, q, "initech")()
}

func TestSlotsAreNeverOverHandedUnderRace(t *testing.T) {
	const slots = 3
	q := fairqueue.New(slots, 2)
	var in, peak atomic.Int32
	var wg sync.WaitGroup
	for i := range 300 {
		tenant := []string{"acme", "globex", "initech"}[i%3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*time.Millisecond)
			defer cancel()
			if i%5 != 0 {
				ctx = context.Background()
			}
			release, err := q.Acquire(ctx, tenant)
			if err != nil {
				return
			}
			n := in.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			in.Add(-1)
			release()
			release() // a second call is harmless
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > slots {
		t.Fatalf("%d slots held at once, want at most %d", p, slots)
	}
	for _, tenant := range []string{"acme", "globex", "initech"} {
		if q.Held(tenant) != 0 || q.Waiting(tenant) != 0 {
			t.Fatalf("%s holds %d and waits %d after everyone left", tenant, q.Held(tenant), q.Waiting(tenant))
		}
	}
	// Every slot came back: all three are free at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tenant := range []string{"acme", "acme", "globex"} {
		release, err := q.Acquire(ctx, tenant)
		if err != nil {
			t.Fatalf("a slot did not come back: %v", err)
		}
		defer release()
	}
}

func TestANilQueueGrantsAtOnce(t *testing.T) {
	var q *fairqueue.Queue
	release, err := q.Acquire(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	release()
}
