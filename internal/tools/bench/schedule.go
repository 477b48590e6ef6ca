package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// batch is one scheduled run of reminders and how to find them again.
type batch struct {
	kind     Kind
	shipment string // the shipment id (full) or id prefix (baselines)
	// planned is the i-th reminder's due time.
	planned []time.Time
	// ids are the workflows started and dueAt their due times, in step.
	ids   []string
	dueAt []time.Time
	// keys are the delivery keys the sink's journal knows the batch's mails
	// by, with each one's due time: the full path's delivery keys, and the
	// baselines' workflow ids while they send.
	keys map[string]time.Time
	// sends: the baselines' no-op calls the mail sink (a provider other
	// than Instant is in use).
	sends bool
	// started is when scheduling began, scheduled when the last start
	// returned.
	started, scheduled time.Time
}

// schedule starts n reminders of kind, the i-th due at due(i), and
// returns the batch and the start rate; sends makes a baseline's no-op
// call the mail sink.
func (r *Runner) schedule(ctx context.Context, kind Kind, n int, due func(i int) time.Time, sends bool) (*batch, float64, error) {
	b := &batch{kind: kind, shipment: fmt.Sprintf("BENCH-%s-%d", r.RunID, r.seq.Add(1)), keys: map[string]time.Time{}, sends: sends}
	b.planned = make([]time.Time, n)
	for i := range n {
		b.planned[i] = reminder.NormalizeTime(due(i))
	}
	b.started = time.Now()
	var err error
	switch kind {
	case Naive, Lean:
		err = r.scheduleBare(ctx, b)
	case API:
		err = r.scheduleAPI(ctx, b)
	default:
		err = r.scheduleFull(ctx, b)
	}
	b.scheduled = time.Now()
	return b, float64(n) / b.scheduled.Sub(b.started).Seconds(), err
}

// inBatches runs fn over [0, n) cut into batches of Fanout, with
// Concurrency/Fanout batches in flight: every path schedules the same way,
// so each has the same starts in flight.
func (r *Runner) inBatches(ctx context.Context, n int, fn func(ctx context.Context, first, end int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, r.Concurrency/r.Fanout))
	for first := 0; first < n; first += r.Fanout {
		g.Go(func() error { return fn(gctx, first, min(first+r.Fanout, n)) })
	}
	return g.Wait()
}

func (r *Runner) scheduleBare(ctx context.Context, b *batch) error {
	workflowType := NaiveWorkflowName
	if b.kind == Lean {
		workflowType = LeanWorkflowName
	}
	b.ids, b.dueAt = make([]string, len(b.planned)), b.planned
	for i := range b.planned {
		b.ids[i] = fmt.Sprintf("%s/%s/%06d", b.kind, b.shipment, i)
		if b.sends {
			// The no-op sends under its workflow id.
			b.keys[b.ids[i]] = b.planned[i]
		}
	}
	return r.inBatches(ctx, len(b.planned), func(ctx context.Context, first, end int) error {
		// A batch's starts go out together, as an update's fan-out does.
		g, gctx := errgroup.WithContext(ctx)
		for i := first; i < end; i++ {
			g.Go(func() error {
				_, err := r.Temporal.ExecuteWorkflow(gctx, client.StartWorkflowOptions{
					ID: b.ids[i], TaskQueue: r.Queues[b.kind],
					WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
				}, workflowType, BareInput{DueAt: b.planned[i], Send: b.sends})
				if err != nil {
					return fmt.Errorf("error starting %s: %w", b.ids[i], err)
				}
				return nil
			})
		}
		return g.Wait()
	})
}

// update is the full path's batch [first, end) as one shipment update.
func (r *Runner) update(b *batch, first, end int) reminder.Update {
	u := reminder.Update{
		ShipmentID: b.shipment, UpdateID: fmt.Sprintf("u-%06d", first), Kind: "delivery_window",
		Message: reminder.Message{Subject: "Delivery window opens in 3 days", Text: "Benchmark reminder."},
	}
	for i := first; i < end; i++ {
		id := fmt.Sprintf("s%06d", i)
		u.Subscribers = append(u.Subscribers, reminder.Subscriber{
			ID: id, Channel: reminder.Email, Email: id + "@bench.example", DueAt: b.planned[i],
		})
	}
	return u
}

// scheduleEach schedules a batch's updates with schedule and records their
// reminders; the starter starts each update's fan-out concurrently.
func (r *Runner) scheduleEach(ctx context.Context, b *batch, schedule func(context.Context, reminder.Update) ([]starter.Result, error)) error {
	var mu sync.Mutex
	return r.inBatches(ctx, len(b.planned), func(ctx context.Context, first, end int) error {
		results, err := schedule(ctx, r.update(b, first, end))
		mu.Lock()
		defer mu.Unlock()
		for _, res := range results {
			b.ids = append(b.ids, res.WorkflowID)
			b.dueAt = append(b.dueAt, res.DueAt)
			b.keys[res.DeliveryKey] = res.DueAt
		}
		return err
	})
}

func (r *Runner) scheduleFull(ctx context.Context, b *batch) error {
	return r.scheduleEach(ctx, b, r.starterFor(b.kind).Schedule)
}

// starterFor is the starter that schedules kind's reminders.
func (r *Runner) starterFor(kind Kind) *starter.Starter {
	if st, ok := r.Starters[kind]; ok {
		return st
	}
	return r.Starter
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
