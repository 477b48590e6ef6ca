// Package fairqueue shares a fixed number of slots among tenants in turn,
// so one tenant's burst of work waits behind itself, not in front of every
// other tenant's.
//
// It is the round-robin of multi-tenant job queues (River's and Temporal's
// task-queue fairness do the same across their keys): a slot that frees goes
// to the next tenant in the ring that has work waiting, never to the longest
// queue. A tenant also holds at most a ceiling of the slots at once, so a
// newcomer finds one free even while another tenant's burst is in flight.
// A tenant with a single operation therefore waits for at most one freed
// slot per other tenant waiting, however much each of them has queued.
package fairqueue

import (
	"context"
	"fmt"
	"sync"
)

// Queue hands out slots to tenants in turn. The zero Queue is not usable;
// call New. A nil *Queue grants every Acquire at once (no bound).
type Queue struct {
	mu      sync.Mutex
	free    int // slots not held
	ceiling int // slots one tenant may hold at once
	held    map[string]int
	waiting map[string][]*waiter
	ring    []string // tenants with waiters, in the order they are served
}

// waiter is one Acquire that found no slot; ready is closed when it is
// granted one.
type waiter struct {
	ready   chan struct{}
	granted bool
}

// New is a queue of slots slots, of which one tenant holds at most ceiling
// (ceiling < 1 or above slots means slots).
func New(slots, ceiling int) *Queue {
	if slots < 1 {
		slots = 1
	}
	if ceiling < 1 || ceiling > slots {
		ceiling = slots
	}
	return &Queue{free: slots, ceiling: ceiling, held: map[string]int{}, waiting: map[string][]*waiter{}}
}

// Acquire waits for a slot for tenant, in turn with the other tenants
// waiting, until ctx ends. release gives the slot back; call it once.
func (q *Queue) Acquire(ctx context.Context, tenant string) (release func(), err error) {
	if q == nil {
		return func() {}, nil
	}
	q.mu.Lock()
	if q.free > 0 && q.held[tenant] < q.ceiling && len(q.waiting[tenant]) == 0 {
		q.take(tenant)
		q.mu.Unlock()
		return q.releaser(tenant), nil
	}
	w := &waiter{ready: make(chan struct{})}
	if len(q.waiting[tenant]) == 0 {
		q.ring = append(q.ring, tenant)
	}
	q.waiting[tenant] = append(q.waiting[tenant], w)
	q.mu.Unlock()

	select {
	case <-w.ready:
		return q.releaser(tenant), nil
	case <-ctx.Done():
		q.mu.Lock()
		defer q.mu.Unlock()
		if w.granted {
			// Granted as the context ended: hand the slot on.
			q.give(tenant)
		} else {
			q.drop(tenant, w)
		}
		return nil, fmt.Errorf("error waiting for a slot: %w", ctx.Err())
	}
}

// Held is how many slots tenant holds now.
func (q *Queue) Held(tenant string) int {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held[tenant]
}

// Waiting is how many Acquires of tenant wait now.
func (q *Queue) Waiting(tenant string) int {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting[tenant])
}

func (q *Queue) releaser(tenant string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.give(tenant)
		})
	}
}

func (q *Queue) take(tenant string) {
	q.free--
	q.held[tenant]++
}

// give returns tenant's slot and hands free slots on in turn. q.mu is held.
func (q *Queue) give(tenant string) {
	q.free++
	if q.held[tenant]--; q.held[tenant] <= 0 {
		delete(q.held, tenant)
	}
	q.dispatch()
}

// dispatch grants free slots to the waiting tenants in ring order, one
// each per turn, skipping a tenant at its ceiling. A tenant served goes to
// the back of the ring if it still waits. q.mu is held.
func (q *Queue) dispatch() {
	for q.free > 0 {
		i := q.next()
		if i < 0 {
			return
		}
		tenant := q.ring[i]
		ws := q.waiting[tenant]
		w := ws[0]
		q.waiting[tenant] = ws[1:]
		q.ring = append(q.ring[:i], q.ring[i+1:]...)
		if len(q.waiting[tenant]) > 0 {
			q.ring = append(q.ring, tenant)
		} else {
			delete(q.waiting, tenant)
		}
		q.take(tenant)
		w.granted = true
		close(w.ready)
	}
}

// next is the index in the ring of the first tenant under its ceiling, or
// -1. q.mu is held.
func (q *Queue) next() int {
	for i, tenant := range q.ring {
		if q.held[tenant] < q.ceiling {
			return i
		}
	}
	return -1
}

// drop removes a waiter whose context ended before it was granted. q.mu is
// held.
func (q *Queue) drop(tenant string, w *waiter) {
	ws := q.waiting[tenant]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) > 0 {
		q.waiting[tenant] = ws
		return
	}
	delete(q.waiting, tenant)
	for i, t := range q.ring {
		if t == tenant {
			q.ring = append(q.ring[:i], q.ring[i+1:]...)
			break
		}
	}
}
