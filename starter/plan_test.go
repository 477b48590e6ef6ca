package starter_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/webhook"
)

// webhookUpdate is an update with n webhook subscribers, each on its own host.
func webhookUpdate(now time.Time, n int) reminder.Update {
	u := reminder.Update{ShipmentID: "SHP-1", UpdateID: "u-1", Kind: "eta_changed",
		Message: reminder.Message{Subject: "ETA moved", Text: "Now Thursday."}}
	for i := range n {
		u.Subscribers = append(u.Subscribers, reminder.Subscriber{
			ID: fmt.Sprintf("hook-%d", i), Channel: reminder.Webhook, URL: fmt.Sprintf("https://h%d.example/in", i),
			Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", DueAt: now.Add(time.Hour),
		})
	}
	return u
}

// Planning an update of 500 webhook subscribers looks their hosts up
// together: with a slow resolver it takes about one lookup's time per
// batch, not 500 lookups one after another; with a resolver that never
// answers, it is refused by the lookup deadline, naming the field.
func TestPlanLooksWebhookHostsUpTogetherUnderOneDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	u := webhookUpdate(now, reminder.MaxSubscribers)

	// 50 ms a lookup: 25 s one after another.
	var lookups atomic.Int64
	slow := webhook.ResolverFunc(func(ctx context.Context, _ string) ([]netip.Addr, error) {
		lookups.Add(1)
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	})
	st := &starter.Starter{Webhooks: webhook.Guard{Resolver: slow}, Now: func() time.Time { return now }}
	start := time.Now()
	rems, err := st.Plan(context.Background(), u)
	require.NoError(t, err)
	require.Len(t, rems, reminder.MaxSubscribers)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, int64(reminder.MaxSubscribers), lookups.Load())

	// A resolver that never answers, not even to a cancelled context.
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	hung := webhook.ResolverFunc(func(context.Context, string) ([]netip.Addr, error) {
		<-stuck
		return nil, errors.New("too late")
	})
	st = &starter.Starter{Webhooks: webhook.Guard{Resolver: hung, LookupDeadline: time.Second}, Now: func() time.Time { return now }}
	start = time.Now()
	_, err = st.Plan(context.Background(), u)
	require.Less(t, time.Since(start), 4*time.Second, "refused by the deadline plus a margin")
	var fe *reminder.FieldError
	require.True(t, errors.As(err, &fe), "want a *FieldError, got %T: %v", err, err)
	require.Equal(t, "subscribers[0].url", fe.Field)
	require.ErrorContains(t, err, "could not be checked in time")

	// An update wrong in another way costs no lookup.
	lookups.Store(0)
	u.Subscribers[reminder.MaxSubscribers-1].DueAt = now.AddDate(5, 0, 0)
	st = &starter.Starter{Webhooks: webhook.Guard{Resolver: slow}, Now: func() time.Time { return now }}
	_, err = st.Plan(context.Background(), u)
	require.ErrorContains(t, err, fmt.Sprintf("subscribers[%d].due_at", reminder.MaxSubscribers-1))
	require.Zero(t, lookups.Load())
}

// 500 webhook subscribers on one host, however its name is spelt, cost one
// lookup.
func TestPlanLooksEachHostUpOnce(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	u := webhookUpdate(now, reminder.MaxSubscribers)
	for i := range u.Subscribers {
		host := "hooks.tracker.example"
		if i%2 == 1 {
			host = "Hooks.Tracker.EXAMPLE"
		}
		u.Subscribers[i].URL = fmt.Sprintf("https://%s/in/%d", host, i)
	}
	var lookups atomic.Int64
	public := webhook.ResolverFunc(func(context.Context, string) ([]netip.Addr, error) {
		lookups.Add(1)
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	})
	st := &starter.Starter{Webhooks: webhook.Guard{Resolver: public}, Now: func() time.Time { return now }}
	rems, err := st.Plan(context.Background(), u)
	require.NoError(t, err)
	require.Len(t, rems, reminder.MaxSubscribers)
	require.Equal(t, int64(1), lookups.Load())
}

// A resubmission of an update whose starts failed after its mirror write
// is compared with the stored update and starts the stored reminders,
// looking no host up (the stored URLs were checked when first written);
// other content is refused before any lookup.
func TestAStoredUpdateIsScheduledAgainWithoutALookup(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Hour), reminder.Email, reminder.Webhook)
	u.Subscribers[1].URL = "https://hooks.tracker.example/in"
	var lookups atomic.Int64
	st := *s.Starter
	st.Webhooks.Resolver = webhook.ResolverFunc(func(context.Context, string) ([]netip.Addr, error) {
		lookups.Add(1)
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	})

	crashing := st
	crashing.CrashAfterMirror(errors.New("starter killed"))
	_, err := crashing.Schedule(ctx, u)
	require.ErrorContains(t, err, "starter killed")
	require.Equal(t, int64(1), lookups.Load())

	d, err := st.Draft(ctx, u)
	require.NoError(t, err)
	require.Zero(t, d.Lookups())
	results, err := st.ScheduleDraft(ctx, d)
	require.NoError(t, err)
	terminateAtCleanup(t, s, workflowIDs(results)...)
	require.Len(t, results, 2)
	for _, r := range results {
		require.Equal(t, starter.Scheduled, r.Status)
		require.True(t, workflowExists(t, s, r.WorkflowID))
	}
	require.Equal(t, int64(1), lookups.Load(), "the resubmission looked nothing up")

	u.Message.Text = "Dock 9."
	_, err = st.Draft(ctx, u)
	require.ErrorIs(t, err, starter.ErrUpdateChanged)
	require.Equal(t, int64(1), lookups.Load())
}
