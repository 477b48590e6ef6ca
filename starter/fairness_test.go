package starter_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/fairqueue"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
)

// noisyUpdate is an update of tenant's with n email subscribers due at due.
func noisyUpdate(t *testing.T, s *testenv.Stack, tenant string, n int, due time.Time) reminder.Update {
	t.Helper()
	u := s.Update(t, due)
	u.Tenant = tenant
	for i := range n {
		id := fmt.Sprintf("sub-%03d", i)
		u.Subscribers = append(u.Subscribers, reminder.Subscriber{ID: id, Channel: reminder.Email, Email: id + "@" + tenant + ".example", DueAt: due})
	}
	return u
}

// A noisy tenant's burst does not stall a quiet tenant's due reminder
// behind it: 300 of acme's reminders and then globex's one all come due
// while no worker polls, so their first workflow tasks wait in the task
// queue's backlog in that order. Each reminder starts with its tenant as
// its fairness key, and the engine dispatches the backlog among the keys
// in turn: globex's mail goes out among the first of the 301, where a
// first-in-first-out backlog sends it last.
func TestANoisyTenantsBurstDoesNotStallAQuietTenantsReminder(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	ctx := context.Background()
	due := time.Now().Add(5 * time.Second)
	acme := testenv.ID(t, "acme")
	for i := range 3 {
		u := noisyUpdate(t, s, acme, 100, due)
		u.UpdateID = fmt.Sprintf("burst-%d", i)
		_, err := s.Starter.Schedule(ctx, u)
		require.NoError(t, err)
	}
	quiet := noisyUpdate(t, s, testenv.ID(t, "globex"), 1, due)
	results, err := s.Starter.Schedule(ctx, quiet)
	require.NoError(t, err)
	quietID := results[0].ReminderID

	// Everything is due and queued before a worker polls.
	<-time.After(time.Until(due))
	s.StartWorker(t)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	mails, err := s.Mail.Wait(wctx, func(ms []sink.Mail) bool { return len(ms) >= 301 })
	require.NoError(t, err, "all 301 reminders sent")
	at := slices.IndexFunc(mails, func(m sink.Mail) bool { return m.CustomArgs["reminder_id"] == quietID })
	require.GreaterOrEqual(t, at, 0, "globex's reminder was sent")
	t.Logf("globex went out %d of 301", at+1)
	require.Less(t, at, 75, "globex's reminder went out %d of 301: behind the noisy tenant's burst", at+1)
}

// countingClient counts the workflow starts in flight, by tenant, and how
// many of the noisy tenant's wait for a slot when the quiet one's starts.
type countingClient struct {
	client.Client
	quiet        string
	noisyWaiting func() int

	mu             sync.Mutex
	inFlight, peak map[string]int
	quietStarted   atomic.Bool
	waitingAtQuiet atomic.Int64
}

func (c *countingClient) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	tenant := o.Priority.FairnessKey
	c.mu.Lock()
	c.inFlight[tenant]++
	c.peak[tenant] = max(c.peak[tenant], c.inFlight[tenant])
	if tenant == c.quiet {
		c.quietStarted.Store(true)
		c.waitingAtQuiet.Store(int64(c.noisyWaiting()))
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight[tenant]--
		c.mu.Unlock()
	}()
	return c.Client.ExecuteWorkflow(ctx, o, wf, args...)
}

// A serve's starts are shared among tenants in turn: however many updates
// a noisy tenant sends at once, it has at most its ceiling of workflow
// starts in flight, and a quiet tenant's one reminder starts while the
// noisy tenant's queue is still long, not after it.
func TestStartsAreSharedAmongTenantsInTurn(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	ctx := context.Background()
	const slots, ceiling = 8, 4
	q := fairqueue.New(slots, ceiling)
	acme, globex := testenv.ID(t, "acme"), testenv.ID(t, "globex")
	counting := &countingClient{Client: s.Temporal, inFlight: map[string]int{}, peak: map[string]int{},
		quiet: globex, noisyWaiting: func() int { return q.Waiting(acme) }}
	st := *s.Starter
	st.Temporal, st.Slots = counting, q

	due := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := noisyUpdate(t, s, acme, 50, due)
			u.UpdateID = fmt.Sprintf("burst-%d", i)
			_, err := st.Schedule(ctx, u)
			require.NoError(t, err)
		}()
	}
	require.Eventually(t, func() bool { return q.Waiting(acme) >= 50 }, time.Minute, 10*time.Millisecond,
		"acme's updates queue their starts")
	_, err := st.Schedule(ctx, noisyUpdate(t, s, globex, 1, due))
	require.NoError(t, err)
	wg.Wait()

	require.True(t, counting.quietStarted.Load())
	require.LessOrEqual(t, counting.peak[acme], ceiling, "acme's starts in flight")
	require.GreaterOrEqual(t, counting.waitingAtQuiet.Load(), int64(20),
		"globex's reminder started while acme's starts still queued, not after them")
}
