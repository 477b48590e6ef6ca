package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/mirror"
)

// KillRecord is the kill of one worker and one serve replica mid-run.
type KillRecord struct {
	At time.Time `json:"at"`
	// Accepted is the run's mails the sink had accepted at the kill, and
	// InFlight the calls it was answering.
	Accepted int `json:"accepted"`
	InFlight int `json:"in_flight"`
	// Worker and Serve are the killed processes (their index, and pid).
	Worker    int `json:"worker"`
	WorkerPID int `json:"worker_pid"`
	Serve     int `json:"serve"`
	ServePID  int `json:"serve_pid"`
	// HeldClaims are the delivery keys claimed and not recorded (status
	// sending) right after the worker died: the documented window, in
	// which a key may go twice (the live workers' claims are in it too).
	HeldClaims []string `json:"held_claims"`
	// ServeClaims are the status events the killed replica had claimed
	// and not recorded (claimed_by names its pid): only these may reach
	// the tracker twice.
	ServeClaims []string      `json:"serve_claims"`
	RestartedAt time.Time     `json:"restarted_at"`
	After       time.Duration `json:"restart_after_ns"`
	Error       string        `json:"error,omitempty"`
}

// killMidRun kills one worker and one serve replica once KillAt of the
// run's n reminders' mail is accepted (counted from base) while mail is
// in flight, and starts both again RestartAfter later, as a supervisor
// would. The record comes on the channel once they run again, or with why
// the kill did not happen (ctx ended first).
func (h *horizontalEnv) killMidRun(ctx context.Context, base int64, n int) <-chan *KillRecord {
	out := make(chan *KillRecord, 1)
	go func() { out <- h.kill(ctx, base, n) }()
	return out
}

func (h *horizontalEnv) kill(ctx context.Context, base int64, n int) *KillRecord {
	k := &KillRecord{After: h.o.RestartAfter}
	want := int64(math.Ceil(h.o.KillAt * float64(n)))
	for {
		accepted := h.accepted.Load() - base
		if accepted >= want {
			if inFlight := h.mail.InFlight(); inFlight > 0 {
				k.Accepted, k.InFlight = int(accepted), inFlight
				break
			}
		}
		select {
		case <-ctx.Done():
			k.Error = fmt.Sprintf("the run ended before %d of its mails were accepted with mail in flight (%d were)", want, accepted)
			return k
		case <-time.After(20 * time.Millisecond):
		}
	}
	var worker *productProc
	for i, p := range h.fleet.running() {
		if p.proc.Alive() {
			worker, k.Worker = p, i
			break
		}
	}
	serve := h.serves[0]
	if worker == nil {
		k.Error = "no worker was running"
		return k
	}
	k.WorkerPID, k.ServePID = worker.proc.Pid(), serve.proc.Pid()
	k.At = time.Now()
	worker.proc.Kill()
	serve.proc.Kill()
	// The dead hold what they held: read it now, whatever the run does.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var errs []error
	var err error
	if k.HeldClaims, err = heldClaims(rctx, h.o.Mirror); err != nil {
		errs = append(errs, err)
	}
	if k.ServeClaims, err = serveClaims(rctx, h.o.Mirror, h.ids, k.ServePID); err != nil {
		errs = append(errs, err)
	}
	<-time.After(h.o.RestartAfter)
	k.RestartedAt = time.Now()
	if _, err := worker.start(); err != nil {
		errs = append(errs, err)
	}
	if _, err := serve.start(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		k.Error = err.Error()
	}
	h.logf("killed %s (pid %d) and %s (pid %d) with %d mails accepted and %d in flight; %d claims held, %d status events claimed; both running again after %s",
		worker.name, k.WorkerPID, serve.name, k.ServePID, k.Accepted, k.InFlight, len(k.HeldClaims), len(k.ServeClaims), h.o.RestartAfter)
	return k
}

// heldClaims are the delivery keys claimed and not recorded.
func heldClaims(ctx context.Context, store *mirror.Store) ([]string, error) {
	rows, _ := store.Pool().Query(ctx, `SELECT delivery_key FROM deliveries WHERE status = 'sending'`)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error reading the claims held: %w", err)
	}
	return keys, nil
}

// serveClaims are the status events a relay of process pid claimed and
// did not record, by the sealed ids a tracker is posted: a relay names
// itself host/pid/random in claimed_by.
func serveClaims(ctx context.Context, store *mirror.Store, ids *opaque.Keys, pid int) ([]string, error) {
	rows, _ := store.Pool().Query(ctx, `
SELECT event_id FROM status_outbox WHERE status = 'pending' AND split_part(claimed_by, '/', 2) = $1`, strconv.Itoa(pid))
	outboxed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error reading the killed relay's claims: %w", err)
	}
	claims := make([]string, len(outboxed))
	for i, id := range outboxed {
		if claims[i], err = ids.OutboxEventID(id); err != nil {
			return nil, err
		}
	}
	return claims, nil
}
