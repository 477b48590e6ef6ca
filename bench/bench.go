package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// Kind is which path a run measures.
type Kind string

const (
	Bare Kind = "bare"
	Full Kind = "full"
	// API is the full path scheduled through the tracker API (POST
	// /v1/updates over real HTTP) instead of the starter called in process:
	// the same reminders and worker, plus the API's own cost.
	API Kind = "api"
)

// worker is the worker process a kind's reminders run on: the API
// schedules onto the full path.
func (k Kind) worker() Kind {
	if k == API {
		return Full
	}
	return k
}

// Workers starts and stops the worker processes of each kind and reads
// their memory.
type Workers interface {
	Start(Kind) error
	Stop(Kind)
	// RSS is the worker's resident memory in bytes (0 if not running).
	RSS(Kind) int64
}

// Runner runs workloads against one Temporal server and one mirror.
type Runner struct {
	Temporal  client.Client
	Namespace string
	// Starter schedules the full path on its task queue.
	Starter *starter.Starter
	Mirror  *mirror.Store
	// Mail is the local SendGrid the full path's worker sends to.
	Mail      *sink.MailSink
	BareQueue string
	Workers   Workers
	// RunID keeps this run's shipment ids apart from earlier runs'.
	RunID string
	// Fanout is subscribers per update on the full path (one mirror
	// statement per update).
	Fanout int
	// Concurrency is workflow starts in flight.
	Concurrency int
	Progress    io.Writer
	// APIURL and APIKey reach a tracker API serving Starter, for the API
	// path; HTTP is the client that calls it.
	APIURL string
	APIKey string
	HTTP   *http.Client

	seq atomic.Int64
}

// Result is one workload on one path.
type Result struct {
	Workload string `json:"workload"`
	Kind     Kind   `json:"kind"`
	N        int    `json:"n"`
	// ScheduleRate is reminders started per second.
	ScheduleRate float64 `json:"schedule_rate"`
	// DrainRate is reminders whose notify started per second, from the due
	// instant (burst) or the worker's start (catchup) to the last one.
	DrainRate float64       `json:"drain_rate,omitempty"`
	LagP50    time.Duration `json:"lag_p50_ns"`
	LagP90    time.Duration `json:"lag_p90_ns"`
	LagP99    time.Duration `json:"lag_p99_ns"`
	LagMax    time.Duration `json:"lag_max_ns"`
	Delivered int           `json:"delivered"`
	// Duplicates are delivery keys the sink received more than once.
	Duplicates int `json:"duplicates"`
	Lost       int `json:"lost"`
	// WorkerRSS is the worker's resident memory at the end, in bytes.
	WorkerRSS int64 `json:"worker_rss_bytes"`
	// HistoryEvents is one finished reminder's history length.
	HistoryEvents int `json:"history_events,omitempty"`
	// QueryP99 is the mirror's due-between query p99 (hold only).
	QueryP99 time.Duration `json:"due_between_query_p99_ns,omitempty"`
	Elapsed  time.Duration `json:"elapsed_ns"`
}

func (r *Runner) logf(format string, args ...any) {
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, "bench: "+format+"\n", args...)
	}
}

// batch is one scheduled run of reminders and how to find them again.
type batch struct {
	kind     Kind
	shipment string // full: the shipment id prefix of its updates
	ids      []string
	keys     map[string]bool // full: delivery keys
	due      []time.Time
}

// schedule starts n reminders of kind, the i-th due at due(i), and
// returns the batch and the schedule rate.
func (r *Runner) schedule(ctx context.Context, kind Kind, n int, due func(i int) time.Time) (*batch, float64, error) {
	b := &batch{kind: kind, shipment: fmt.Sprintf("BENCH-%s-%d", r.RunID, r.seq.Add(1)), keys: map[string]bool{}}
	b.due = make([]time.Time, n)
	for i := range n {
		b.due[i] = reminder.NormalizeTime(due(i))
	}
	start := time.Now()
	var err error
	switch kind {
	case Bare:
		err = r.scheduleBare(ctx, b)
	case API:
		err = r.scheduleAPI(ctx, b)
	default:
		err = r.scheduleFull(ctx, b)
	}
	rate := float64(n) / time.Since(start).Seconds()
	return b, rate, err
}

func (r *Runner) scheduleBare(ctx context.Context, b *batch) error {
	b.ids = make([]string, len(b.due))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.Concurrency)
	for i, due := range b.due {
		id := fmt.Sprintf("bare/%s/%06d", b.shipment, i)
		b.ids[i] = id
		g.Go(func() error {
			_, err := r.Temporal.ExecuteWorkflow(gctx, client.StartWorkflowOptions{
				ID: id, TaskQueue: r.BareQueue,
				WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			}, BareWorkflowName, BareInput{DueAt: due})
			return err
		})
	}
	return g.Wait()
}

// updates cuts a batch into updates of Fanout subscribers each.
func (r *Runner) updates(b *batch) []reminder.Update {
	var out []reminder.Update
	for first := 0; first < len(b.due); first += r.Fanout {
		u := reminder.Update{
			ShipmentID: b.shipment, UpdateID: fmt.Sprintf("u-%06d", first), Kind: "delivery_window",
			Message: reminder.Message{Subject: "Delivery window opens in 3 days", Text: "Benchmark reminder."},
		}
		for i := first; i < min(first+r.Fanout, len(b.due)); i++ {
			id := fmt.Sprintf("s%06d", i)
			u.Subscribers = append(u.Subscribers, reminder.Subscriber{
				ID: id, Channel: reminder.Email, Email: id + "@bench.example", DueAt: b.due[i],
			})
		}
		out = append(out, u)
	}
	return out
}

// scheduleEach schedules a batch's updates with schedule, as many at once
// as the full path allows, and records their reminders.
func (r *Runner) scheduleEach(ctx context.Context, b *batch, schedule func(context.Context, reminder.Update) ([]starter.Result, error)) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	// Each update already starts its fan-out concurrently.
	g.SetLimit(max(1, r.Concurrency/r.Fanout))
	for _, u := range r.updates(b) {
		g.Go(func() error {
			results, err := schedule(gctx, u)
			mu.Lock()
			defer mu.Unlock()
			for _, res := range results {
				b.ids = append(b.ids, res.ReminderID)
				b.keys[res.DeliveryKey] = true
			}
			return err
		})
	}
	return g.Wait()
}

func (r *Runner) scheduleFull(ctx context.Context, b *batch) error {
	return r.scheduleEach(ctx, b, r.Starter.Schedule)
}

// scheduleAPI schedules each update by POST /v1/updates, as a tracker does:
// the document as JSON, the key as a bearer token, the results decoded.
func (r *Runner) scheduleAPI(ctx context.Context, b *batch) error {
	return r.scheduleEach(ctx, b, func(ctx context.Context, u reminder.Update) ([]starter.Result, error) {
		doc, err := json.Marshal(updateDocument(u))
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.APIURL+"/v1/updates", bytes.NewReader(doc))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+r.APIKey)
		resp, err := r.HTTP.Do(req)
		if err != nil {
			return nil, fmt.Errorf("error calling the API: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			return nil, fmt.Errorf("the API answered %d: %s", resp.StatusCode, body)
		}
		var out struct {
			Results []starter.Result `json:"results"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, fmt.Errorf("error reading the API's answer: %w", err)
		}
		return out.Results, nil
	})
}

// updateDocument is an update as a tracker sends it (the wire format
// reminder.ParseUpdate reads); the benchmark's updates use due_at only.
func updateDocument(u reminder.Update) map[string]any {
	subs := make([]map[string]any, len(u.Subscribers))
	for i, s := range u.Subscribers {
		subs[i] = map[string]any{"id": s.ID, "channel": string(s.Channel), "email": s.Email,
			"due_at": s.DueAt.UTC().Format(time.RFC3339Nano)}
	}
	return map[string]any{
		"shipment_id": u.ShipmentID, "update_id": u.UpdateID, "kind": u.Kind,
		"message":     map[string]any{"subject": u.Message.Subject, "text": u.Message.Text},
		"subscribers": subs,
	}
}

// notified is one reminder whose notify started.
type notified struct {
	Start, Due time.Time
}

// starts waits until every reminder of the batch has started its notify
// (or deadline) and returns those that did.
func (r *Runner) starts(ctx context.Context, b *batch, deadline time.Duration) ([]notified, error) {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	if b.kind == Bare {
		started := make([]time.Time, len(b.ids))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(64)
		for i, id := range b.ids {
			g.Go(func() error { return r.Temporal.GetWorkflow(gctx, id, "").Get(gctx, &started[i]) })
		}
		err := g.Wait()
		var out []notified
		for i, t := range started {
			if !t.IsZero() {
				out = append(out, notified{Start: t, Due: b.due[i]})
			}
		}
		return out, err
	}
	r.waitDelivered(ctx, b)
	// The full path's notify start is its delivery claim.
	rows, err := r.Mirror.Pool().Query(context.Background(), `
SELECT d.created_at, r.due_at FROM deliveries d JOIN reminders r ON r.id = d.reminder_id
 WHERE r.shipment_id = $1 AND d.purpose = 'reminder' AND d.status = 'sent'`, b.shipment)
	if err != nil {
		return nil, err
	}
	var out []notified
	var n notified
	_, err = pgx.ForEachRow(rows, []any{&n.Start, &n.Due}, func() error {
		out = append(out, n)
		return nil
	})
	return out, err
}

// waitDelivered polls the mirror until the batch is delivered or ctx ends.
func (r *Runner) waitDelivered(ctx context.Context, b *batch) {
	for {
		var n int
		err := r.Mirror.Pool().QueryRow(ctx, `
SELECT count(*) FROM deliveries d JOIN reminders r ON r.id = d.reminder_id
 WHERE r.shipment_id = $1 AND d.purpose = 'reminder' AND d.status = 'sent'`, b.shipment).Scan(&n)
		if err == nil && n >= len(b.ids) {
			return
		}
		select {
		case <-ctx.Done():
			r.logf("%d of %d delivered when the wait ended", n, len(b.ids))
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// measure fills the lag, delivery and memory figures of a finished batch.
func (r *Runner) measure(ctx context.Context, res *Result, b *batch, done []notified) {
	res.N = len(b.due)
	lags := make([]time.Duration, len(done))
	for i, n := range done {
		lags[i] = n.Start.Sub(n.Due)
	}
	setLags(res, lags)
	res.Delivered = len(done)
	if b.kind != Bare {
		// What the provider received: distinct keys, and keys received twice.
		counts := map[string]int{}
		for _, m := range r.Mail.Mails() {
			if k := m.CustomArgs["delivery_key"]; b.keys[k] {
				counts[k]++
			}
		}
		res.Delivered = len(counts)
		for _, c := range counts {
			if c > 1 {
				res.Duplicates++
			}
		}
	}
	res.Lost = res.N - res.Delivered
	res.WorkerRSS = r.Workers.RSS(b.kind.worker())
	if len(b.ids) > 0 {
		id := b.ids[0]
		if b.kind != Bare {
			id = "reminder/" + id
		}
		res.HistoryEvents = r.historyLength(ctx, id)
	}
}

func setLags(res *Result, lags []time.Duration) {
	if len(lags) == 0 {
		return
	}
	slices.Sort(lags)
	q := func(p float64) time.Duration { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	res.LagP50, res.LagP90, res.LagP99, res.LagMax = q(0.50), q(0.90), q(0.99), lags[len(lags)-1]
}

func (r *Runner) historyLength(ctx context.Context, workflowID string) int {
	desc, err := r.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return 0
	}
	return int(desc.GetWorkflowExecutionInfo().GetHistoryLength())
}

// lead is how far ahead to put the first due time so scheduling n
// reminders finishes before it.
func lead(n int) time.Duration {
	return time.Duration(n)*time.Second/150 + 5*time.Second
}

// Steady runs n reminders due at rate per second.
func (r *Runner) Steady(ctx context.Context, kind Kind, n int, rate float64) (Result, error) {
	res := Result{Workload: "steady", Kind: kind}
	first := time.Now().Add(lead(n))
	step := time.Duration(float64(time.Second) / rate)
	begin := time.Now()
	b, schedRate, err := r.schedule(ctx, kind, n, func(i int) time.Time { return first.Add(time.Duration(i) * step) })
	res.ScheduleRate = schedRate
	if err != nil {
		return res, err
	}
	starts, err := r.starts(ctx, b, time.Until(first)+time.Duration(n)*step+2*time.Minute)
	r.measure(ctx, &res, b, starts)
	res.Elapsed = time.Since(begin)
	return res, err
}

// Burst runs n reminders due at one instant: the morning peak.
func (r *Runner) Burst(ctx context.Context, kind Kind, n int) (Result, error) {
	res := Result{Workload: "burst", Kind: kind}
	due := time.Now().Add(lead(n))
	begin := time.Now()
	b, schedRate, err := r.schedule(ctx, kind, n, func(int) time.Time { return due })
	res.ScheduleRate = schedRate
	if err != nil {
		return res, err
	}
	starts, err := r.starts(ctx, b, time.Until(due)+10*time.Minute)
	r.measure(ctx, &res, b, starts)
	res.DrainRate = drainRate(starts, due)
	res.Elapsed = time.Since(begin)
	return res, err
}

// Catchup stops the worker while n reminders come due, then starts it:
// the seed article's rehearsal.
func (r *Runner) Catchup(ctx context.Context, kind Kind, n int) (Result, error) {
	res := Result{Workload: "catchup", Kind: kind}
	r.Workers.Stop(kind)
	due := time.Now().Add(lead(n))
	begin := time.Now()
	b, schedRate, err := r.schedule(ctx, kind, n, func(i int) time.Time { return due.Add(time.Duration(i) * time.Millisecond) })
	res.ScheduleRate = schedRate
	if err != nil {
		return res, err
	}
	// The outage: everything comes due while no worker runs.
	select {
	case <-time.After(time.Until(due.Add(time.Duration(n)*time.Millisecond + 3*time.Second))):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	restart := time.Now()
	if err := r.Workers.Start(kind); err != nil {
		return res, err
	}
	starts, err := r.starts(ctx, b, 10*time.Minute)
	r.measure(ctx, &res, b, starts)
	res.DrainRate = drainRate(starts, restart)
	res.Elapsed = time.Since(begin)
	return res, err
}

// Hold schedules n reminders far in the future, then reads the worker's
// memory and times the mirror's "due between" query.
func (r *Runner) Hold(ctx context.Context, n int, queries int) (Result, error) {
	res := Result{Workload: "hold", Kind: Full, N: n}
	begin := time.Now()
	from := time.Now().Add(24 * time.Hour)
	span := 30 * 24 * time.Hour
	b, schedRate, err := r.schedule(ctx, Full, n, func(i int) time.Time {
		return from.Add(time.Duration(float64(span) * float64(i) / float64(n)))
	})
	res.ScheduleRate = schedRate
	if err != nil {
		return res, err
	}
	// Let the worker take every reminder's first workflow task.
	if err := r.waitBacklog(ctx, r.Starter.TaskQueue, 45*time.Minute); err != nil {
		return res, err
	}
	res.WorkerRSS = r.Workers.RSS(Full)
	lat := make([]time.Duration, 0, queries)
	for range queries {
		t := from.Add(time.Duration(rand.Int64N(int64(span))))
		q := time.Now()
		if _, err := r.Mirror.List(ctx, mirror.Filter{DueFrom: t, DueTo: t.Add(time.Hour), Limit: 1000}); err != nil {
			return res, err
		}
		lat = append(lat, time.Since(q))
	}
	slices.Sort(lat)
	res.QueryP99 = lat[min(len(lat)-1, len(lat)*99/100)]
	res.HistoryEvents = r.historyLength(ctx, "reminder/"+b.ids[0])
	res.Elapsed = time.Since(begin)
	return res, nil
}

// waitBacklog waits until the task queue's workflow-task backlog is empty.
func (r *Runner) waitBacklog(ctx context.Context, queue string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	empty := 0
	for empty < 3 {
		resp, err := r.Temporal.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace:     r.Namespace,
			TaskQueue:     &taskqueuepb.TaskQueue{Name: queue, Kind: enums.TASK_QUEUE_KIND_NORMAL},
			TaskQueueType: enums.TASK_QUEUE_TYPE_WORKFLOW,
			ReportStats:   true,
		})
		if err != nil {
			return err
		}
		if resp.GetStats().GetApproximateBacklogCount() == 0 {
			empty++
		} else {
			empty = 0
		}
		select {
		case <-ctx.Done():
			return errors.New("the worker did not take the held reminders' tasks in time")
		case <-time.After(time.Second):
		}
	}
	return nil
}

func drainRate(done []notified, from time.Time) float64 {
	var last time.Time
	for _, n := range done {
		if n.Start.After(last) {
			last = n.Start
		}
	}
	if len(done) == 0 || !last.After(from) {
		return 0
	}
	return float64(len(done)) / last.Sub(from).Seconds()
}
