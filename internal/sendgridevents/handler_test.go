package sendgridevents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

const escalationContact = "lead@shipper.example"

// rig is the product with the Event Webhook in front: the stack (dev
// server, PostgreSQL, worker, mail sink), serve's handler and escalator on
// a loopback server, and the sink posting signed events to it.
type rig struct {
	s       *testenv.Stack
	key     *sink.EventKey
	url     string
	metrics *prometheus.Registry // serve's
	// worker is the worker's: a send whose delivered event came before
	// the send was recorded is delivered, and observed, there.
	worker *prometheus.Registry
}

// deferAfter is the tests' deferral escalation time: short, and longer
// than a deferral the sink delivers after.
const deferAfter = 3 * time.Second

func newRig(t *testing.T, emit sink.EventOptions) *rig {
	t.Helper()
	return newRigWith(t, emit, testenv.StackOptions{})
}

// newRigWith is newRig on a stack made with o.
func newRigWith(t *testing.T, emit sink.EventOptions, o testenv.StackOptions) *rig {
	t.Helper()
	worker := prometheus.NewRegistry()
	o.Metrics = metrics.New(worker)
	s := testenv.NewStackWith(t, o)
	key, err := sink.NewEventKey()
	require.NoError(t, err)
	pub, err := sendgridevents.ParseVerificationKey(key.PublicKey())
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	m := metrics.NewProviderEvents(reg)
	esc := sendgridevents.NewEscalator(s.Mirror, s.Temporal, s.TaskQueue)
	esc.Metrics = m
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go esc.Run(ctx)
	h, err := sendgridevents.NewHandler(sendgridevents.Options{
		Key: pub, Store: s.Mirror, DeferAfter: deferAfter, Escalate: esc.Nudge, Metrics: m,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	emit.URL, emit.Key = srv.URL, key
	s.Mail.EmitEvents(emit)
	return &rig{s: s, key: key, url: srv.URL, metrics: reg, worker: worker}
}

// schedule starts one email reminder to addr, due now, from an update
// that names an escalation contact.
func (r *rig) schedule(t *testing.T, addr string) starter.Result {
	t.Helper()
	u := r.s.Update(t, time.Now(), reminder.Email)
	u.Subscribers[0].Email = addr
	u.EscalationEmail = escalationContact
	res, err := r.s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	return res[0]
}

type row struct {
	State       reminder.State
	Outcome     string
	DeliveredAt *time.Time
	Key         string
}

func (r *rig) row(t *testing.T, id string) row {
	t.Helper()
	var out row
	var state string
	require.NoError(t, r.s.DB.Pool.QueryRow(context.Background(), `
SELECT state, coalesce(provider_outcome, ''), delivered_at, delivery_key FROM reminders WHERE id = $1`, id).
		Scan(&state, &out.Outcome, &out.DeliveredAt, &out.Key))
	out.State = reminder.State(state)
	return out
}

// waitState waits until the reminder's row is in state.
func (r *rig) waitState(t *testing.T, id string, state reminder.State) row {
	t.Helper()
	require.Eventually(t, func() bool { return r.row(t, id).State == state }, 30*time.Second, 20*time.Millisecond,
		"reminder %s never became %s (it is %s)", id, state, r.row(t, id).State)
	return r.row(t, id)
}

// trail is the reminder's audit trail's event types, in order.
func (r *rig) trail(t *testing.T, id string) []string {
	t.Helper()
	rows, err := r.s.DB.Pool.Query(context.Background(), `SELECT type FROM reminder_events WHERE reminder_id = $1 ORDER BY id`, id)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var typ string
		require.NoError(t, rows.Scan(&typ))
		out = append(out, typ)
	}
	require.NoError(t, rows.Err())
	return out
}

// escalations counts the escalation mails the sink accepted for a
// reminder and reason.
func (r *rig) escalations(id, reason string) int {
	accepted, _ := r.s.Mail.DeliveryKeys()
	return accepted[reminder.EscalationKey(id, reason)]
}

// waitEscalated waits for the reminder's escalation workflow to finish
// and returns how many escalation mails went out for it.
func (r *rig) waitEscalated(t *testing.T, id, reason string) int {
	t.Helper()
	wid := workflows.DeliveryEscalationWorkflowID(id, reason)
	require.Eventually(t, func() bool {
		_, err := r.s.Temporal.DescribeWorkflowExecution(context.Background(), wid, "")
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "no escalation workflow %s", wid)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, r.s.Temporal.GetWorkflow(ctx, wid, "").Get(ctx, nil))
	return r.escalations(id, reason)
}

func (r *rig) post(t *testing.T, events ...sink.Event) sendgridevents.Summary {
	t.Helper()
	body, err := json.Marshal(events)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(r.signed(t, body, time.Now(), r.key))
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", answer)
	var sum sendgridevents.Summary
	require.NoError(t, json.Unmarshal(answer, &sum))
	return sum
}

func TestDeliveredEventMakesTheReminderDelivered(t *testing.T) {
	t.Parallel()
	r := newRig(t, sink.EventOptions{})
	res := r.schedule(t, "ops@customer.example")
	got := r.waitState(t, res.ReminderID, reminder.Delivered)
	require.Equal(t, "delivered", got.Outcome)
	require.NotNil(t, got.DeliveredAt)
	require.Contains(t, r.trail(t, res.ReminderID), "provider_delivered")
	require.Contains(t, r.trail(t, res.ReminderID), "provider_processed")
	// Once, by whichever wrote delivered: serve's handler once it has
	// answered the commit, or the worker recording a send whose event
	// came first (the sink posts as soon as it has answered the send).
	observed := func() uint64 {
		return sampleCount(t, r.metrics, "shipnotify_delivery_slo_seconds") + sampleCount(t, r.worker, "shipnotify_delivery_slo_seconds")
	}
	require.Eventually(t, func() bool { return observed() > 0 }, 10*time.Second, 10*time.Millisecond, "an observation of the delivery SLO")
	require.Equal(t, uint64(1), observed(), "one observation of the delivery SLO")
}

func TestBounceEscalatesOnceEvenWhenTheEventArrivesTwice(t *testing.T) {
	t.Parallel()
	const addr = "nobody@customer.example"
	r := newRig(t, sink.EventOptions{Bounce: []string{addr}})
	res := r.schedule(t, addr)
	got := r.waitState(t, res.ReminderID, reminder.Undeliverable)
	require.Equal(t, "bounce", got.Outcome)

	// SendGrid retries the batch, and reports the bounce once more under
	// a new event id.
	status, err := r.s.Mail.Replay(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	sum := r.post(t, sink.Event{Event: "bounce", SGEventID: "another-bounce", Timestamp: time.Now().Unix(),
		Email: addr, Status: "5.1.1", CustomArgs: map[string]string{"delivery_key": got.Key}})
	require.Equal(t, 1, sum.Applied)

	require.Equal(t, 1, r.waitEscalated(t, res.ReminderID, "undeliverable"), "one escalation mail")
	// The Web UI finds the bounce under the reminder's shipment: the
	// reminder's workflow ended "sent", its escalation says undeliverable.
	stored, err := r.s.Mirror.Get(context.Background(), res.ReminderID)
	require.NoError(t, err)
	query := fmt.Sprintf(`ShipmentId = %q AND ReminderState = "undeliverable"`, stored.ShipmentID)
	require.Eventually(t, func() bool {
		resp, err := r.s.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		return err == nil && len(resp.Executions) == 1 &&
			resp.Executions[0].Execution.WorkflowId == workflows.DeliveryEscalationWorkflowID(res.ReminderID, "undeliverable")
	}, 30*time.Second, 100*time.Millisecond, query)
	testenv.RecordHistory(t, r.s.Temporal, workflows.DeliveryEscalationWorkflowID(res.ReminderID, "undeliverable"), "delivery-escalation-undeliverable")
	require.Equal(t, reminder.Undeliverable, r.row(t, res.ReminderID).State)
	// Another pass, another server: the workflow's id refuses a second run.
	esc := sendgridevents.NewEscalator(r.s.Mirror, r.s.Temporal, r.s.TaskQueue)
	require.NoError(t, esc.Pass(context.Background()))
	_, err = r.s.DB.Pool.Exec(context.Background(), `UPDATE outcome_escalations SET started_at = NULL WHERE reminder_id = $1`, res.ReminderID)
	require.NoError(t, err)
	require.NoError(t, esc.Pass(context.Background()), "a start of a finished escalation is refused, and taken as done")
	require.Equal(t, 1, r.escalations(res.ReminderID, "undeliverable"))
	require.Contains(t, r.trail(t, res.ReminderID), "escalation_sent")
}

func TestDroppedIsUndeliverableAndEscalates(t *testing.T) {
	t.Parallel()
	const addr = "suppressed@customer.example"
	r := newRig(t, sink.EventOptions{Drop: []string{addr}})
	res := r.schedule(t, addr)
	got := r.waitState(t, res.ReminderID, reminder.Undeliverable)
	require.Equal(t, "dropped", got.Outcome)
	require.Equal(t, 1, r.waitEscalated(t, res.ReminderID, "undeliverable"))
}

func TestDeferredThenDeliveredDoesNotEscalate(t *testing.T) {
	t.Parallel()
	const addr = "slow@customer.example"
	r := newRig(t, sink.EventOptions{Defer: []string{addr}, DeliverAfterDefer: true})
	res := r.schedule(t, addr)
	r.waitState(t, res.ReminderID, reminder.Delivered)
	require.Subset(t, r.trail(t, res.ReminderID), []string{"provider_deferred", "provider_delivered"})
	// The deferral owed nothing: settled, or never owed when the delivered
	// came in the same batch.
	var started int
	require.NoError(t, r.s.DB.Pool.QueryRow(context.Background(), `
SELECT count(*) FROM outcome_escalations WHERE reminder_id = $1 AND (started_at IS NOT NULL OR settled_at IS NULL)`,
		res.ReminderID).Scan(&started))
	require.Zero(t, started)
	// Past the deferral time, still no escalation.
	esc := sendgridevents.NewEscalator(r.s.Mirror, r.s.Temporal, r.s.TaskQueue)
	require.Eventually(t, func() bool {
		require.NoError(t, esc.Pass(context.Background()))
		return r.row(t, res.ReminderID).DeliveredAt.Add(deferAfter).Before(time.Now())
	}, 30*time.Second, 100*time.Millisecond)
	_, err := r.s.Temporal.DescribeWorkflowExecution(context.Background(),
		workflows.DeliveryEscalationWorkflowID(res.ReminderID, "delivery_deferred"), "")
	require.Error(t, err, "no escalation workflow")
}

func TestDeferredPastTheThresholdEscalatesOnce(t *testing.T) {
	t.Parallel()
	const addr = "greylisted@customer.example"
	r := newRig(t, sink.EventOptions{Defer: []string{addr}})
	res := r.schedule(t, addr)
	require.Eventually(t, func() bool { return r.row(t, res.ReminderID).Outcome == "deferred" }, 30*time.Second, 20*time.Millisecond)
	// SendGrid defers it again, under a new event id.
	r.post(t, sink.Event{Event: "deferred", SGEventID: "deferred-again", Timestamp: time.Now().Unix(), Email: addr,
		Response: "451 4.7.1 Try again later", CustomArgs: map[string]string{"delivery_key": r.row(t, res.ReminderID).Key}})
	require.Equal(t, 1, r.waitEscalated(t, res.ReminderID, "delivery_deferred"))
	testenv.RecordHistory(t, r.s.Temporal, workflows.DeliveryEscalationWorkflowID(res.ReminderID, "delivery_deferred"), "delivery-escalation-deferred")
	require.Equal(t, reminder.Sent, r.row(t, res.ReminderID).State, "still sent: SendGrid may yet deliver it")
}

func TestReplayedBatchChangesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t, sink.EventOptions{})
	res := r.schedule(t, "ops@customer.example")
	r.waitState(t, res.ReminderID, reminder.Delivered)
	// The sink records a post once its answer is back, which may be after
	// the batch it carried is applied.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := r.s.Mail.WaitPosted(ctx, func(b []sink.PostedBatch) bool { return len(b) > 0 })
	require.NoError(t, err)
	before := r.trail(t, res.ReminderID)
	status, err := r.s.Mail.Replay(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Positive(t, counter(t, r.metrics, "shipnotify_provider_events_total", "result", "duplicate"))
	require.Equal(t, before, r.trail(t, res.ReminderID))
	require.Equal(t, reminder.Delivered, r.row(t, res.ReminderID).State)
}

func TestEventsForUnknownKeysAreCountedAndDropped(t *testing.T) {
	t.Parallel()
	r := newRig(t, sink.EventOptions{})
	sum := r.post(t,
		sink.Event{Event: "delivered", SGEventID: "u1", Timestamp: time.Now().Unix(), Email: "a@b.example",
			CustomArgs: map[string]string{"delivery_key": strings.Repeat("ab", 32)}},
		sink.Event{Event: "bounce", SGEventID: "u2", Timestamp: time.Now().Unix(), Email: "a@b.example",
			CustomArgs: map[string]string{"delivery_key": strings.Repeat("cd", 32)}},
		sink.Event{Event: "open", SGEventID: "u3", Timestamp: time.Now().Unix(), Email: "a@b.example"},
	)
	require.Equal(t, sendgridevents.Summary{Unknown: 2, Ignored: 1}, sum)
	require.Equal(t, 0, countRows(t, r, "provider_events"))
	require.Equal(t, 0, countRows(t, r, "reminder_events"))
	require.Equal(t, 1.0, counter(t, r.metrics, "shipnotify_provider_events_total", "outcome", "bounce", "result", "unknown_key"))
}

func countRows(t *testing.T, r *rig, table string) int {
	t.Helper()
	var n int
	require.NoError(t, r.s.DB.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// Bad batches: each gets its status and writes nothing, neither the
// events' ids nor the audit trail.
func TestBadBatchesAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t, sink.EventOptions{})
	res := r.schedule(t, "ops@customer.example")
	r.waitState(t, res.ReminderID, reminder.Delivered)
	key := r.row(t, res.ReminderID).Key
	ids, trail := countRows(t, r, "provider_events"), r.trail(t, res.ReminderID)

	good := func(id string) map[string]any {
		return map[string]any{"event": "bounce", "sg_event_id": id, "timestamp": time.Now().Unix(), "email": "x@y.example", "delivery_key": key}
	}
	batch := func(events ...map[string]any) []byte {
		b, err := json.Marshal(events)
		require.NoError(t, err)
		return b
	}
	noKey := good("b2")
	delete(noKey, "delivery_key")
	other, err := sink.NewEventKey()
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		req    func() *http.Request
		status int
		field  string
	}{
		{"not JSON", func() *http.Request { return r.signed(t, []byte(`{"event": "bounce"`), time.Now(), r.key) }, 400, ""},
		{"null", func() *http.Request { return r.signed(t, []byte(`null`), time.Now(), r.key) }, 400, ""},
		{"an object, not an array", func() *http.Request { return r.signed(t, []byte(`{"event": "bounce"}`), time.Now(), r.key) }, 400, ""},
		{"too large", func() *http.Request {
			return r.signed(t, batch(append(make([]map[string]any, 0), good("b1"), map[string]any{"pad": strings.Repeat("x", sendgridevents.DefaultMaxBody)})...), time.Now(), r.key)
		}, 413, ""},
		{"unsigned", func() *http.Request {
			req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(batch(good("b1"))))
			require.NoError(t, err)
			return req
		}, 401, ""},
		{"signed by another key", func() *http.Request { return r.signed(t, batch(good("b1")), time.Now(), other) }, 403, ""},
		{"tampered after signing", func() *http.Request {
			req := r.signed(t, batch(good("b1")), time.Now(), r.key)
			tampered := bytes.Replace(batch(good("b1")), []byte("bounce"), []byte("delivered"), 1)
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(tampered)), int64(len(tampered))
			return req
		}, 403, ""},
		{"stale timestamp", func() *http.Request { return r.signed(t, batch(good("b1")), time.Now().Add(-10*time.Minute), r.key) }, 403, ""},
		{"future timestamp", func() *http.Request { return r.signed(t, batch(good("b1")), time.Now().Add(10*time.Minute), r.key) }, 403, ""},
		{"an event without a delivery key", func() *http.Request { return r.signed(t, batch(good("b1"), noKey), time.Now(), r.key) }, 422, "[1].delivery_key"},
		{"an event from the year 10000", func() *http.Request {
			e := good("b1")
			e["timestamp"] = 253402300800
			return r.signed(t, batch(e), time.Now(), r.key)
		}, 422, "[0].timestamp"},
		{"an event without an id", func() *http.Request {
			e := good("")
			return r.signed(t, batch(e), time.Now(), r.key)
		}, 422, "[0].sg_event_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.DefaultClient.Do(tc.req())
			require.NoError(t, err)
			defer resp.Body.Close()
			var p struct {
				Status int    `json:"status"`
				Detail string `json:"detail"`
				Field  string `json:"field"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
			require.Equal(t, tc.status, resp.StatusCode, "%+v", p)
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			require.NotEmpty(t, p.Detail)
			require.Equal(t, tc.field, p.Field)
		})
	}
	require.Equal(t, ids, countRows(t, r, "provider_events"), "no event id recorded")
	require.Equal(t, trail, r.trail(t, res.ReminderID), "nothing on the trail")
	require.Equal(t, reminder.Delivered, r.row(t, res.ReminderID).State)
}

func (r *rig) signed(t *testing.T, body []byte, at time.Time, key *sink.EventKey) *http.Request {
	t.Helper()
	req, err := sink.SignedRequest(context.Background(), r.url, key, body, at)
	require.NoError(t, err)
	return req
}

// A webhook reminder is delivered when its receiver answers 2xx: no
// provider event is needed.
func TestWebhookIsDeliveredOnItsReceiversAnswer(t *testing.T) {
	t.Parallel()
	r := newRig(t, sink.EventOptions{})
	u := r.s.Update(t, time.Now(), reminder.Webhook)
	res, err := r.s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	got := r.waitState(t, res[0].ReminderID, reminder.Delivered)
	require.NotNil(t, got.DeliveredAt)
	require.Equal(t, []string{"scheduled", "sent", "delivered"}, r.trail(t, res[0].ReminderID))
}

// sampleCount is a histogram family's observations, over its series.
func sampleCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range family(t, reg, name) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// counter sums a counter family's series whose labels match the pairs.
func counter(t *testing.T, reg *prometheus.Registry, name string, pairs ...string) float64 {
	t.Helper()
	var sum float64
	for _, m := range family(t, reg, name) {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(pairs); i += 2 {
			match = match && labels[pairs[i]] == pairs[i+1]
		}
		if match {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func family(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

// A database blip answers 503 with Retry-After and writes nothing; SendGrid's
// retry of the same batch is applied, once.
func TestDatabaseBlipAnswers503AndTheRetryApplies(t *testing.T) {
	t.Parallel()
	r := newRig(t, sink.EventOptions{})
	res := r.schedule(t, "ops@customer.example")
	r.waitState(t, res.ReminderID, reminder.Delivered)
	key := r.row(t, res.ReminderID).Key

	pool, err := pgxpool.New(context.Background(), r.s.DB.URL)
	require.NoError(t, err)
	pool.Close() // the database is away
	pub, err := sendgridevents.ParseVerificationKey(r.key.PublicKey())
	require.NoError(t, err)
	h, err := sendgridevents.NewHandler(sendgridevents.Options{Key: pub, Store: mirror.New(pool)})
	require.NoError(t, err)
	away := httptest.NewServer(h)
	t.Cleanup(away.Close)

	body, err := json.Marshal([]sink.Event{{Event: "bounce", SGEventID: "late-bounce", Timestamp: time.Now().Unix(),
		Email: "ops@customer.example", Status: "5.1.1", CustomArgs: map[string]string{"delivery_key": key}}})
	require.NoError(t, err)
	req, err := sink.SignedRequest(context.Background(), away.URL, r.key, body, time.Now())
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Equal(t, reminder.Delivered, r.row(t, res.ReminderID).State)

	for range 2 { // SendGrid's retry, and one more
		resp, err = http.DefaultClient.Do(r.signed(t, body, time.Now(), r.key))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	require.Equal(t, reminder.Undeliverable, r.row(t, res.ReminderID).State)
	require.Equal(t, 1, r.waitEscalated(t, res.ReminderID, "undeliverable"))
}
