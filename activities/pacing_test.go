package activities_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

func retryDelay(t *testing.T, err error) time.Duration {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.False(t, appErr.NonRetryable(), "%v", err)
	return appErr.NextRetryDelay()
}

// A retry after the provider failed follows the provider's outage, which
// every worker shares through the mirror: a blip waits the reminder's own
// backoff; five minutes into an outage a retry waits about
// delivery.OutageFloor, whatever its own attempt count, so the backlog goes
// within that of the recovery; the first answer after ends the outage.
func TestAProvidersOutagePacesTheRetries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	in := f.schedule(t, reminder.Email)

	f.mail.Fail(sink.Answer{Status: 503})
	_, err := f.notify(t, in)
	require.Equal(t, activities.NotifyInitialInterval, retryDelay(t, err), "a blip: the reminder's own backoff, named")

	_, err = f.db.Pool.Exec(ctx, `UPDATE provider_health SET failing_since = now() - interval '5 minutes'`)
	require.NoError(t, err)
	f.mail.Fail(sink.Answer{Status: 503})
	_, err = f.notify(t, in)
	d := retryDelay(t, err)
	require.GreaterOrEqual(t, d, time.Duration(0.8*float64(delivery.OutageFloor)), "no hammering a provider known down")
	require.LessOrEqual(t, d, time.Duration(1.2*float64(delivery.OutageFloor)), "none sleeps through the recovery")

	_, err = f.notify(t, in)
	require.NoError(t, err, "it answers again")
	var ended bool
	require.NoError(t, f.db.Pool.QueryRow(ctx, `SELECT last_success_at > last_failure_at FROM provider_health WHERE provider = 'email'`).Scan(&ended))
	require.True(t, ended, "the answer ended the outage")
	other := f.schedule(t, reminder.Email)
	f.mail.Fail(sink.Answer{Status: 503})
	_, err = f.notify(t, other)
	require.Equal(t, activities.NotifyInitialInterval, retryDelay(t, err), "a failure after the recovery is a blip again")
}

// The provider's rate cap holds across workers: two workers' activities,
// sharing the mirror, call the provider no faster than the cap together,
// whatever reached them at once.
func TestTheRateCapHoldsAcrossWorkers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.acts.SendsPerSecond = 4
	// Another worker: its own process, the same mirror and cap.
	second := &activities.Activities{Mirror: f.acts.Mirror, Email: f.acts.Email, Webhook: f.acts.Webhook, SendsPerSecond: 4}
	var ins []activities.NotifyInput
	for range 12 {
		ins = append(ins, f.schedule(t, reminder.Email))
	}
	var wg sync.WaitGroup
	for i, in := range ins {
		acts := f.acts
		if i%2 == 1 {
			acts = second
		}
		wg.Go(func() {
			g := *f
			g.acts = acts
			require.Eventually(t, func() bool {
				_, err := g.notify(t, in)
				return err == nil
			}, time.Minute, 100*time.Millisecond)
		})
	}
	wg.Wait()
	var at []time.Time
	for _, m := range f.mail.Mails() {
		at = append(at, m.Received)
	}
	require.Len(t, at, len(ins))
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	for i := 0; i+4 < len(at); i++ {
		require.GreaterOrEqual(t, at[i+4].Sub(at[i]), 900*time.Millisecond, "five sends within a second at a cap of 4/s: %v", at)
	}
}

// A cap of 0 is no cap: the sends take no slot and wait for none.
func TestNoCapTakesNoSlot(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for range 3 {
		_, err := f.notify(t, f.schedule(t, reminder.Email))
		require.NoError(t, err)
	}
	var slots int
	require.NoError(t, f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM send_rate`).Scan(&slots))
	require.Zero(t, slots)
	require.Len(t, f.mail.Mails(), 3)
}

// Every retryable failure Notify reports names its wait, not only the
// provider's: a mirror it cannot reach gives the reminder's own backoff.
// The retry policy's ceiling (30 s for reminders started today) is then
// left to bound only an attempt that reports nothing, one that timed out
// or whose worker stopped; without the wait named, a database blip late in
// a reminder's retries would come back within 30 s instead of its 10
// minutes.
func TestEveryRetryableFailureNamesItsWait(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	f.acts = &activities.Activities{Mirror: mirror.New(pool), Email: f.acts.Email, Webhook: f.acts.Webhook, RecordRetries: 1}

	_, err = f.notify(t, in)
	require.Error(t, err)
	require.Equal(t, activities.NotifyInitialInterval, retryDelay(t, err), "the first attempt's own backoff: %v", err)
	require.Contains(t, err.Error(), "127.0.0.1", "the cause is kept")
	require.Zero(t, f.mail.Requests(), "nothing was sent")
}
