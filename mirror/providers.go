package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// What the workers share about the providers they call, so the provider's
// behaviour, not each reminder's own history, paces the sends: how long a
// provider has been failing (provider_health), and the next free slot of
// the provider's rate cap (send_rate). Both are counted on the database's
// clock.

// ProviderOutage says how long a provider has been failing: its current
// run of failures began Since, and it last failed at Last.
type ProviderOutage struct {
	Since, Last time.Time
	// For is how long the run has lasted, now.
	For time.Duration
}

// NoteProviderFailure records that provider failed just now and returns
// the run of failures it belongs to. A failure continues the run unless
// the provider answered in between, or the last failure is older than
// quiet, or than a quarter of the run's length (a run that long has its
// retries that far apart): then it starts a new one.
func (s *Store) NoteProviderFailure(ctx context.Context, provider string, quiet time.Duration) (ProviderOutage, error) {
	var o ProviderOutage
	var secs float64
	err := s.pool.QueryRow(ctx, `
INSERT INTO provider_health AS h (provider, failing_since, last_failure_at) VALUES ($1, now(), now())
ON CONFLICT (provider) DO UPDATE
   SET failing_since = CASE WHEN `+runContinues+` THEN h.failing_since ELSE now() END,
       failures = CASE WHEN `+runContinues+` THEN h.failures + 1 ELSE 1 END,
       last_failure_at = now()
RETURNING failing_since, last_failure_at, extract(epoch FROM now() - failing_since)::float8`, provider, quiet.Seconds()).
		Scan(&o.Since, &o.Last, &secs)
	if err != nil {
		return ProviderOutage{}, fmt.Errorf("error recording a provider failure: %w", err)
	}
	o.For = time.Duration(secs * float64(time.Second))
	return o, nil
}

// runContinues: the failure recorded now belongs to the run in the row h.
const runContinues = `(h.last_success_at IS NULL OR h.last_success_at < h.last_failure_at)
       AND now() - h.last_failure_at < greatest(make_interval(secs => $2), (h.last_failure_at - h.failing_since) / 4)`

// NoteProviderSuccess records that provider answered just now, which ends
// its run of failures. Callers write it only after they saw a failure:
// a healthy provider's sends write nothing here.
func (s *Store) NoteProviderSuccess(ctx context.Context, provider string) error {
	_, err := s.pool.Exec(ctx, `UPDATE provider_health SET last_success_at = now() WHERE provider = $1`, provider)
	if err != nil {
		return fmt.Errorf("error recording a provider success: %w", err)
	}
	return nil
}

// TakeSendSlot takes the next slot of a rate cap of one send every every
// (the generic cell rate algorithm over one row): a slot at most ahead
// from now is taken and wait says how long to wait for it; a later one is
// not taken, ok is false, and wait is how long until one is within reach
// (at least a millisecond: a slot may come in reach between the two reads).
// Slots are spaced exactly, so the cap holds across every worker that
// shares the database, whatever reached them.
func (s *Store) TakeSendSlot(ctx context.Context, name string, every, ahead time.Duration) (wait time.Duration, ok bool, err error) {
	var secs float64
	err = s.pool.QueryRow(ctx, `
INSERT INTO send_rate AS r (name, next_at) VALUES ($1, now() + make_interval(secs => $2))
ON CONFLICT (name) DO UPDATE
   SET next_at = greatest(r.next_at, now()) + make_interval(secs => $2)
 WHERE greatest(r.next_at, now()) <= now() + make_interval(secs => $3)
RETURNING greatest(extract(epoch FROM next_at - now()) - $2, 0)::float8`, name, every.Seconds(), ahead.Seconds()).Scan(&secs)
	if err == nil {
		return time.Duration(secs * float64(time.Second)), true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, false, fmt.Errorf("error taking a send slot: %w", err)
	}
	err = s.pool.QueryRow(ctx, `
SELECT greatest(extract(epoch FROM next_at - now()) - $2, 0.001)::float8 FROM send_rate WHERE name = $1`, name, ahead.Seconds()).Scan(&secs)
	if err != nil {
		return 0, false, fmt.Errorf("error reading the send rate: %w", err)
	}
	return time.Duration(secs * float64(time.Second)), false, nil
}
