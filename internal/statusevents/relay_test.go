package statusevents_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/statusevents"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// tracker is a test's tracker: a private schema, a receiver that verifies
// every post's signature with the official Standard Webhooks library, and
// the endpoint registered for it.
type tracker struct {
	db       testenv.DB
	store    *mirror.Store
	receiver *sink.WebhookSink
	endpoint statusevents.Endpoint
}

func newTracker(t *testing.T) *tracker {
	t.Helper()
	tr := &tracker{db: testenv.Postgres(t)}
	tr.store = mirror.New(tr.db.Pool)
	secret := webhook.NewSecret()
	var err error
	tr.receiver, err = sink.StartWebhook("", secret)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.receiver.Close() })
	tr.endpoint = statusevents.Endpoint{Name: "tracker", URL: tr.receiver.URL() + "/status", Secret: secret, Events: reminder.StatusTypes}
	require.NoError(t, tr.store.RegisterStatusEndpoints(context.Background(), []mirror.StatusEndpoint{tr.endpoint.Registration()}))
	return tr
}

// relay is a relay of the tracker's endpoint, quick to look and to back
// off, on a pool of its own (another serve replica's).
func (tr *tracker) relay(t *testing.T, tune ...func(*statusevents.Relay)) *statusevents.Relay {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), tr.db.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	r := &statusevents.Relay{
		Store: mirror.New(pool), Endpoints: []statusevents.Endpoint{tr.endpoint},
		Sender: webhook.NewSender(webhook.Options{Guard: webhook.Guard{AllowLoopback: true}}),
		Every:  20 * time.Millisecond, BaseBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
	}
	for _, f := range tune {
		f(r)
	}
	return r
}

// run runs r until the test ends.
func run(t *testing.T, r *statusevents.Relay) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// changeAll writes each reminder's rescheduled and cancelled events.
func (tr *tracker) changeAll(t *testing.T, ids []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		require.NoError(t, tr.store.Reschedule(ctx, id, time.Now().Add(2*time.Hour), "k2-"+id, map[string]any{"by": "ops"}))
		_, err := tr.store.Cancel(ctx, id, "cancelled", map[string]any{"by": "ops"})
		require.NoError(t, err)
	}
}

// received is one post as the receiver took it.
type received struct {
	ID       string
	Reminder string
	Seq      int
	Type     string
	Body     string
}

var (
	statusSchemaOnce sync.Once
	statusSchema     *base.Schema
	statusSchemaErr  error
)

// requireConforms fails unless body is a StatusEvent as the OpenAPI
// document declares it (strictly: no member it does not name).
func requireConforms(t *testing.T, body []byte) {
	t.Helper()
	statusSchemaOnce.Do(func() {
		doc, err := libopenapi.NewDocument(api.OpenAPI)
		if err != nil {
			statusSchemaErr = err
			return
		}
		model, err := doc.BuildV3Model()
		if err != nil {
			statusSchemaErr = err
			return
		}
		proxy, ok := model.Model.Components.Schemas.Get("StatusEvent")
		if !ok {
			statusSchemaErr = errors.New("openapi.json declares no StatusEvent")
			return
		}
		statusSchema = proxy.Schema()
	})
	require.NoError(t, statusSchemaErr)
	ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(statusSchema, body)
	var why []string
	for _, e := range errs {
		why = append(why, e.Message+": "+e.Reason)
		for _, f := range e.SchemaValidationErrors {
			why = append(why, f.Error())
		}
	}
	require.True(t, ok, "the event conforms to the document's StatusEvent: %s\n%s", strings.Join(why, "; "), body)
}

func parse(t *testing.T, hooks []sink.Hook) []received {
	t.Helper()
	out := make([]received, len(hooks))
	for i, h := range hooks {
		requireConforms(t, h.Body)
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				ReminderID string `json:"reminder_id"`
				Sequence   int    `json:"sequence"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(h.Body, &ev))
		require.Equal(t, h.ID, ev.ID, "webhook-id is the event's id")
		require.Equal(t, h.ID, h.IdempotencyKey)
		out[i] = received{ID: ev.ID, Reminder: ev.Data.ReminderID, Seq: ev.Data.Sequence, Type: ev.Type, Body: string(h.Body)}
	}
	return out
}

// waitFor waits until the receiver holds n distinct events.
func (tr *tracker) waitFor(t *testing.T, n int, within time.Duration) []received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	hooks, err := tr.receiver.Wait(ctx, func(hs []sink.Hook) bool {
		ids := map[string]bool{}
		for _, h := range hs {
			ids[h.ID] = true
		}
		return len(ids) >= n
	})
	require.NoError(t, err, "the receiver got %d of %d events", len(tr.receiver.Hooks()), n)
	return parse(t, hooks)
}

// requireInOrderOnce fails unless got holds each event once and each
// reminder's events in their order, 1, 2, 3...
func requireInOrderOnce(t *testing.T, got []received, reminders, each int) {
	t.Helper()
	seen := map[string]int{}
	next := map[string]int{}
	for _, r := range got {
		seen[r.ID]++
		require.Equal(t, 1, seen[r.ID], "event %s arrived twice", r.ID)
		next[r.Reminder]++
		require.Equal(t, next[r.Reminder], r.Seq, "reminder %s's events arrive in order", r.Reminder)
	}
	require.Len(t, next, reminders)
	for id, n := range next {
		require.Equal(t, each, n, id)
	}
}

func pendingRows(t *testing.T, tr *tracker) int {
	t.Helper()
	var n int
	require.NoError(t, tr.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM status_outbox WHERE status = 'pending'`).Scan(&n))
	return n
}

// Two relays (two serve replicas) on one outbox deliver every event once,
// each reminder's in order, every post signed so the official library
// verifies it: many small passes racing for 450 rows. Its posts take 2 ms,
// so no pass comes near its lease; that is
// TestTwoRelaysAtProductionTimingsPostABacklogOnceEach.
func TestTwoRelaysDeliverEachEventOnce(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	ids := testenv.ScheduleInMirror(t, tr.store, "", "SHP-two-relays", 150)
	tr.receiver.SetLatency(2 * time.Millisecond)
	small := func(r *statusevents.Relay) { r.Batch, r.Concurrency = 10, 4 }
	run(t, tr.relay(t, small))
	run(t, tr.relay(t, small))
	tr.changeAll(t, ids)
	got := tr.waitFor(t, 3*len(ids), time.Minute)
	require.Eventually(t, func() bool { return pendingRows(t, tr) == 0 }, 10*time.Second, 20*time.Millisecond)
	got = parse(t, tr.receiver.Hooks())
	requireInOrderOnce(t, got, len(ids), 3)
	require.Zero(t, tr.receiver.Rejected(), "every signature verified")
	var owners int
	require.NoError(t, tr.db.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT claimed_by) FROM status_outbox`).Scan(&owners))
	require.Zero(t, owners, "no claim left behind")
}

// A receiver that is down for a while gets everything once it is back:
// the endpoint backs off while it fails, and then every reminder's events
// arrive, each once, in order.
func TestAReceiverDownForAWhileGetsEverythingInOrder(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	addr := strings.TrimPrefix(tr.receiver.URL(), "http://")
	require.NoError(t, tr.receiver.Close())
	ids := testenv.ScheduleInMirror(t, tr.store, "", "SHP-down", 40)
	run(t, tr.relay(t))
	tr.changeAll(t, ids)
	require.Eventually(t, func() bool {
		var failures int
		require.NoError(t, tr.db.Pool.QueryRow(context.Background(), `SELECT failures FROM status_endpoints`).Scan(&failures))
		return failures >= 3
	}, 30*time.Second, 20*time.Millisecond, "the endpoint fails while the receiver is down")
	require.Equal(t, 3*len(ids), pendingRows(t, tr), "nothing is lost meanwhile")

	back, err := sink.StartWebhook(addr, tr.endpoint.Secret)
	require.NoError(t, err)
	t.Cleanup(func() { _ = back.Close() })
	tr.receiver = back
	got := tr.waitFor(t, 3*len(ids), time.Minute)
	requireInOrderOnce(t, got, len(ids), 3)
	require.Eventually(t, func() bool {
		var failures int
		require.NoError(t, tr.db.Pool.QueryRow(context.Background(), `SELECT failures FROM status_endpoints`).Scan(&failures))
		return failures == 0
	}, 10*time.Second, 20*time.Millisecond, "its first delivery ends the run of failures")
}

// An event posted again (its relay stopped before recording the receiver's
// answer, and another took it over once the claim lapsed) carries the same
// id and the same body, so the receiver drops the second as a duplicate.
func TestAReplayedEventKeepsItsID(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	testenv.ScheduleInMirror(t, tr.store, "", "SHP-replay", 1)
	release := tr.receiver.Hold()
	// A lease short enough to wait out, and posts that fit in it.
	lease := func(r *statusevents.Relay) {
		r.Lease = 3 * time.Second
		r.Sender = webhook.NewSender(webhook.Options{Guard: webhook.Guard{AllowLoopback: true}, Timeout: 2 * time.Second})
	}
	first := tr.relay(t, lease)
	ctx, cancel := context.WithCancel(context.Background())
	passed := make(chan error, 1)
	go func() { _, err := first.Pass(ctx, tr.endpoint); passed <- err }()
	require.Eventually(t, func() bool { return tr.receiver.Held() == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel() // the relay stops before it hears the answer
	require.NoError(t, <-passed)
	release()
	tr.waitFor(t, 1, 10*time.Second)
	require.Equal(t, 1, pendingRows(t, tr), "unrecorded, it is still owed")

	run(t, tr.relay(t, lease))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	hooks, err := tr.receiver.Wait(ctx2, func(hs []sink.Hook) bool { return len(hs) == 2 })
	require.NoError(t, err)
	require.Equal(t, hooks[0].ID, hooks[1].ID, "the same id")
	require.Equal(t, string(hooks[0].Body), string(hooks[1].Body), "the same event")
	require.Eventually(t, func() bool { return pendingRows(t, tr) == 0 }, 10*time.Second, 20*time.Millisecond)

	// An event given up and put back by an operator is the same event too.
	var id int64
	require.NoError(t, tr.db.Pool.QueryRow(context.Background(),
		`UPDATE status_outbox SET status = 'given_up' RETURNING id`).Scan(&id))
	res, err := tr.store.RetryOutbox(context.Background(), mirror.RetryOptions{IDs: []int64{id}})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Requeued)
	hooks, err = tr.receiver.Wait(ctx2, func(hs []sink.Hook) bool { return len(hs) == 3 })
	require.NoError(t, err)
	require.Equal(t, hooks[0].ID, hooks[2].ID)
}

// An endpoint that answers 410 Gone is disabled: nothing more is posted to
// it, and no event is written for it, until an operator enables it again;
// then what it owed goes.
func TestA410DisablesTheEndpoint(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	ids := testenv.ScheduleInMirror(t, tr.store, "", "SHP-gone", 3)
	gone := sink.Answer{Status: 410}
	tr.receiver.Fail(gone, gone, gone)
	r := tr.relay(t)
	n, err := r.Pass(context.Background(), tr.endpoint)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	eps, err := tr.store.StatusEndpoints(context.Background())
	require.NoError(t, err)
	require.NotNil(t, eps[0].DisabledAt, "disabled")
	require.EqualValues(t, 3, eps[0].Pending, "what it owed waits")
	requests := tr.receiver.Requests()

	_, err = tr.store.Cancel(context.Background(), ids[0], "cancelled", nil)
	require.NoError(t, err)
	n, err = r.Pass(context.Background(), tr.endpoint)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is posted to a disabled endpoint")
	require.Equal(t, requests, tr.receiver.Requests())
	require.Equal(t, 3, pendingRows(t, tr), "and nothing written for it")

	res, err := tr.store.RetryOutbox(context.Background(), mirror.RetryOptions{Endpoint: tr.endpoint.Name})
	require.NoError(t, err)
	require.True(t, res.Enabled)
	run(t, r)
	got := tr.waitFor(t, 3, 10*time.Second)
	requireInOrderOnce(t, got, 3, 1)
}

// A receiver's 429 with Retry-After holds the endpoint back for what it
// asked (within delivery's bounds), not the relay's own backoff.
func TestRetryAfterHoldsTheEndpointBack(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	testenv.ScheduleInMirror(t, tr.store, "", "SHP-retry-after", 1)
	tr.receiver.Fail(sink.Answer{Status: 429, Headers: map[string]string{"Retry-After": "3"}})
	r := tr.relay(t)
	_, err := r.Pass(context.Background(), tr.endpoint)
	require.NoError(t, err)
	var wait float64
	require.NoError(t, tr.db.Pool.QueryRow(context.Background(),
		`SELECT extract(epoch FROM retry_at - now()) FROM status_endpoints`).Scan(&wait))
	require.InDelta(t, 3, wait, 0.5, "the receiver's wait, not 50 ms")
	n, err := r.Pass(context.Background(), tr.endpoint)
	require.NoError(t, err)
	require.Zero(t, n, "nothing goes before it")
	run(t, r)
	tr.waitFor(t, 1, 10*time.Second)
}

// A receiver that refuses one event (422) holds back that event only:
// the endpoint's other reminders go on, and the refused one is tried
// again, its reminder's next event after it.
func TestARefusedEventHoldsBackOnlyItsReminder(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	ids := testenv.ScheduleInMirror(t, tr.store, "", "SHP-refused", 5)
	tr.receiver.Fail(sink.Answer{Status: 422})
	run(t, tr.relay(t, func(r *statusevents.Relay) { r.Concurrency = 1; r.BaseBackoff = time.Second }))
	got := tr.waitFor(t, 4, 10*time.Second)
	for _, r := range got {
		require.NotEqual(t, ids[0], r.Reminder, "the first was refused; the four others went on")
	}
	_, err := tr.store.Cancel(context.Background(), ids[0], "cancelled", nil)
	require.NoError(t, err)
	got = tr.waitFor(t, 6, 20*time.Second)
	require.Equal(t, []string{ids[0], ids[0]}, []string{got[4].Reminder, got[5].Reminder})
	require.Equal(t, []int{1, 2}, []int{got[4].Seq, got[5].Seq}, "its next event waited for it")
}

// The relay reaches endpoints through the webhook guard: an endpoint on an
// address the guard refuses gets no request, and the endpoint is failing
// with the guard's reason, which names no address.
func TestTheRelayGoesThroughTheGuard(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	testenv.ScheduleInMirror(t, tr.store, "", "SHP-guard", 1)
	r := tr.relay(t, func(r *statusevents.Relay) {
		r.Sender = webhook.NewSender(webhook.Options{Guard: webhook.Guard{}})
	})
	_, err := r.Pass(context.Background(), tr.endpoint)
	require.NoError(t, err)
	require.Zero(t, tr.receiver.Requests())
	rows, err := tr.store.OutboxRows(context.Background(), mirror.OutboxFilter{})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Contains(t, rows[0].LastError, webhook.RefusedDestination)
	u, err := url.Parse(tr.receiver.URL())
	require.NoError(t, err)
	require.NotContains(t, rows[0].LastError, u.Hostname())
}

// An endpoint whose host does not resolve is failing with a fixed reason:
// status_outbox.last_error, the serve log and, once the events are given
// up, what an operator reads back name neither the host nor the resolver.
func TestAnEndpointThatDoesNotResolveNamesNoHost(t *testing.T) {
	t.Parallel()
	tr := newTracker(t)
	const host = "rebind-status.attack.test"
	tr.endpoint.URL = "https://" + host + "/status"
	require.NoError(t, tr.store.RegisterStatusEndpoints(context.Background(), []mirror.StatusEndpoint{tr.endpoint.Registration()}))
	testenv.ScheduleInMirror(t, tr.store, "", "SHP-unresolved", 1)
	_, err := tr.relay(t).Pass(context.Background(), tr.endpoint)
	require.NoError(t, err)
	rows, err := tr.store.OutboxRows(context.Background(), mirror.OutboxFilter{})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "webhook receiver unreachable: "+delivery.ReasonNotResolved, rows[0].LastError)
	for _, leak := range []string{host, "lookup", ":53"} {
		require.NotContains(t, rows[0].LastError, leak)
	}
}
