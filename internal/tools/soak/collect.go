package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/enums/v1"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// Quiesce waits, up to within, until every stored reminder is final in
// the mirror, its workflow closed and every status event delivered or
// given up, having started what a starter left unstarted (`shipnotify
// reconcile`, as an operator's schedule runs it).
func (e *Env) Quiesce(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if out, err := e.run(ctx, "reconcile"); err != nil {
			e.T.Logf("soak: reconcile: %v\n%s", err, out)
		}
		pending, running, err := e.unsettled(ctx)
		var events int
		if err == nil {
			err = e.Stack.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM status_outbox WHERE status = 'pending'`).Scan(&events)
		}
		if err == nil && pending == 0 && running == 0 && events == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %d rows not final, %d workflows running, %d status events pending (%v)",
				within, pending, running, events, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// unsettled counts rows not final and reminder workflows still running.
func (e *Env) unsettled(ctx context.Context) (pending, running int, err error) {
	rows, err := e.rows(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range rows {
		if r.State.Pending() {
			pending++
		}
		desc, err := e.Stack.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
		if err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
			running++
		}
	}
	return pending, running, nil
}

// Snapshot reads what the checker needs; faults and verifies are the
// run's faults and the operator's `reconcile --verify` runs.
func (e *Env) Snapshot(ctx context.Context, ops []Op, faults []Fault, verifies []VerifyRun) (Snapshot, error) {
	s := Snapshot{Events: map[string][]Event{}, Deliveries: map[string]Delivery{}, Workflows: map[string]string{},
		Subjects: map[string]string{}, Shipments: map[string]bool{}, Ops: ops, Faults: faults, Verifies: verifies,
		WorkflowViews: map[string]WorkflowView{}}
	var err error
	if s.Rows, err = e.rows(ctx); err != nil {
		return s, err
	}
	pool := e.Stack.DB.Pool
	evs, _ := pool.Query(ctx, `SELECT id, reminder_id, type, at, detail FROM reminder_events ORDER BY id`)
	var eventID int64
	var id, typ string
	var at time.Time
	var detail map[string]any
	if _, err := pgx.ForEachRow(evs, []any{&eventID, &id, &typ, &at, &detail}, func() error {
		s.Events[id] = append(s.Events[id], Event{ID: eventID, Type: typ, At: at, Detail: detail})
		return nil
	}); err != nil {
		return s, fmt.Errorf("error reading events: %w", err)
	}
	ds, _ := pool.Query(ctx, `
SELECT delivery_key, reminder_id, purpose, status, maybe_sent_at IS NOT NULL, coalesce(digest_key, ''), coalesce(provider_message_id, '')
  FROM deliveries`)
	var d Delivery
	var purpose string
	if _, err := pgx.ForEachRow(ds, []any{&d.Key, &d.ReminderID, &purpose, &d.Status, &d.MaybeSent, &d.DigestKey, &d.ProviderMessageID}, func() error {
		d.Purpose = reminder.Purpose(purpose)
		s.Deliveries[d.Key] = d
		return nil
	}); err != nil {
		return s, fmt.Errorf("error reading deliveries: %w", err)
	}
	us, _ := pool.Query(ctx, `SELECT shipment_id, subject FROM updates`)
	var shipment, subject string
	if _, err := pgx.ForEachRow(us, []any{&shipment, &subject}, func() error {
		s.Subjects[shipment] = subject
		return nil
	}); err != nil {
		return s, fmt.Errorf("error reading updates: %w", err)
	}
	for _, r := range s.Rows {
		s.Shipments[r.Shipment] = true
		desc, err := e.Stack.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
		if err != nil {
			s.Workflows[r.WorkflowID] = "missing"
			continue
		}
		s.Workflows[r.WorkflowID] = strings.ToLower(strings.TrimPrefix(desc.GetWorkflowExecutionInfo().GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"))
	}
	if err := e.statusEvents(ctx, &s); err != nil {
		return s, err
	}
	if err := e.workflowViews(ctx, &s); err != nil {
		return s, err
	}
	for _, m := range e.Stack.Mail.Mails() {
		r := Receipt{Key: m.CustomArgs["delivery_key"], Channel: "email", Received: m.Received}
		if strings.HasPrefix(r.Key, reminder.DigestKeyPrefix) {
			r.To = strings.Join(m.To, ",")
			r.Listed = listedInLetter(m.Text)
		}
		s.Receipts = append(s.Receipts, r)
	}
	for _, h := range e.Stack.Hooks.Hooks() {
		r := Receipt{Key: h.ID, Channel: "webhook", Received: h.Received}
		if strings.HasPrefix(r.Key, reminder.DigestKeyPrefix) {
			r.To = e.Stack.Hooks.URL() + h.Path
			r.Listed = listedInBody(h.Body)
		}
		s.Receipts = append(s.Receipts, r)
	}
	s.BadSignatures = e.Stack.Hooks.Rejected()
	out, err := e.run(ctx, "reconcile", "--verify", "--dry-run")
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(line) > 0 && json.Valid(line) {
			s.Divergences = append(s.Divergences, string(line))
		}
	}
	if err != nil && len(s.Divergences) == 0 {
		return s, fmt.Errorf("reconcile --verify: %w", err)
	}
	return s, nil
}

func (e *Env) rows(ctx context.Context) ([]Row, error) {
	rows, _ := e.Stack.DB.Pool.Query(ctx, `
SELECT id, tenant, shipment_id, update_id, subscriber_id, channel, state, due_at, delivery_key, workflow_id,
       approval_timeout IS NOT NULL, coalesce(goes_out_at, due_at), send_window,
       coalesce(extract(epoch FROM digest_every)::bigint, 0), coalesce(digest_key, ''), coalesce(email, webhook_url, '')
  FROM reminders ORDER BY id`)
	var out []Row
	var r Row
	var channel, state string
	var window []byte
	var digestSecs int64
	_, err := pgx.ForEachRow(rows, []any{&r.ID, &r.Tenant, &r.Shipment, &r.Update, &r.Subscriber, &channel, &state, &r.DueAt,
		&r.DeliveryKey, &r.WorkflowID, &r.RequiresApproval, &r.GoesOutAt, &window, &digestSecs, &r.DigestKey, &r.Address}, func() error {
		r.Channel, r.State = reminder.Channel(channel), reminder.State(state)
		r.Digest = time.Duration(digestSecs) * time.Second
		r.Window = nil
		if window != nil {
			r.Window = new(reminder.SendWindow)
			if err := json.Unmarshal(window, r.Window); err != nil {
				return fmt.Errorf("reminder %s: its send window: %w", r.ID, err)
			}
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error reading reminders: %w", err)
	}
	return out, nil
}

// run runs the binary with the product's environment.
func (e *Env) run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Bin, args...)
	cmd.Env = e.ProcessEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut.String()))
	}
	return out.Bytes(), nil
}

// statusEvents reads the registered endpoints, the status outbox and what
// each tracker received.
func (e *Env) statusEvents(ctx context.Context, s *Snapshot) error {
	pool := e.Stack.DB.Pool
	eps, _ := pool.Query(ctx, `SELECT name, tenant, events FROM status_endpoints WHERE retired_at IS NULL ORDER BY name`)
	var ep Endpoint
	if _, err := pgx.ForEachRow(eps, []any{&ep.Name, &ep.Tenant, &ep.Events}, func() error {
		s.Endpoints = append(s.Endpoints, ep)
		return nil
	}); err != nil {
		return fmt.Errorf("error reading status endpoints: %w", err)
	}
	rows, _ := pool.Query(ctx, `
SELECT endpoint, event_id, reminder_id, seq, type, status, attempts, coalesce(last_error, '')
  FROM status_outbox ORDER BY id`)
	// The outbox keeps the trail event's number; the tracker was posted
	// its sealed id, which the rows are matched by.
	ids, err := testenv.IDKeys(e.ProcessEnv())
	if err != nil {
		return err
	}
	var o OutboxRow
	if _, err := pgx.ForEachRow(rows, []any{&o.Endpoint, &o.EventID, &o.ReminderID, &o.Seq, &o.Type, &o.Status, &o.Attempts, &o.LastError}, func() error {
		var err error
		o.Trail = o.EventID
		o.EventID, err = ids.OutboxEventID(o.Trail)
		s.Outbox = append(s.Outbox, o)
		return err
	}); err != nil {
		return fmt.Errorf("error reading the status outbox: %w", err)
	}
	for _, tr := range e.Trackers {
		for _, h := range tr.Sink.Hooks() {
			var body struct {
				Type string `json:"type"`
				Data struct {
					ReminderID string `json:"reminder_id"`
					Tenant     string `json:"tenant"`
					Sequence   int    `json:"sequence"`
				} `json:"data"`
			}
			_ = json.Unmarshal(h.Body, &body)
			s.StatusReceipts = append(s.StatusReceipts, StatusReceipt{
				Endpoint: tr.Name, EventID: h.ID, Type: body.Type, ReminderID: body.Data.ReminderID, Tenant: body.Data.Tenant,
				Seq: body.Data.Sequence, Received: h.Received, AnswerIn: h.AnswerIn, Replica: h.Peer,
			})
		}
	}
	return nil
}

// workflowViews asks the workflow of every reminder a decision or a
// reschedule answered failure for what it holds (its status query; a
// closed workflow answers it too, replayed by a worker).
func (e *Env) workflowViews(ctx context.Context, s *Snapshot) error {
	for id := range FailureAnswered(*s) {
		var row mirror.Row
		for _, r := range s.Rows {
			if r.ID == id {
				row = mirror.Row{ID: r.ID, SubscriberID: r.Subscriber, State: r.State, DueAt: r.DueAt, WorkflowID: r.WorkflowID}
			}
		}
		if row.WorkflowID == "" {
			continue
		}
		v := WorkflowView{}
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		st, err := starter.LiveStatus(qctx, e.Stack.Temporal, row, nil)
		cancel()
		if err != nil {
			v.Err = err.Error()
		} else {
			v.State, v.DueAt, v.DeliveryKey = st.State, st.DueAt, st.DeliveryKey
			if d := st.Approval.Decision; d != nil {
				v.Decision = "rejected"
				if d.Approved {
					v.Decision = "approved"
				}
			}
		}
		s.WorkflowViews[id] = v
	}
	return nil
}

// VerifyRun is one of the operator's `reconcile --verify` runs: when it
// began, and the divergences it printed (each with the repair it made).
type VerifyRun struct {
	At    time.Time `json:"at"`
	Lines []string  `json:"lines,omitempty"`
	Err   string    `json:"error,omitempty"`
}

// Verifier runs `reconcile --verify` (repairing, with its default grace)
// every every until ctx ends, as an operator's cron does, and returns
// what each run printed.
func (e *Env) Verifier(ctx context.Context, every time.Duration) []VerifyRun {
	var runs []VerifyRun
	for sleep(ctx, every) {
		run := VerifyRun{At: time.Now()}
		out, err := e.run(context.WithoutCancel(ctx), "reconcile", "--verify")
		for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			if len(line) > 0 && json.Valid(line) {
				run.Lines = append(run.Lines, string(line))
			}
		}
		if err != nil && len(run.Lines) == 0 {
			run.Err = err.Error()
		}
		runs = append(runs, run)
	}
	return runs
}

// listedInLetter reads the reminders a digest letter lists: each item ends
// with its "Shipment:", "Update:" and "Reference:" lines (the English
// letter: the soak's subscribers name no locale).
func listedInLetter(text string) []Listed {
	var out []Listed
	var shipment string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "Shipment: "); ok {
			shipment = v
		}
		if v, ok := strings.CutPrefix(line, "Reference: "); ok {
			out = append(out, Listed{ReminderID: v, Shipment: shipment})
			shipment = ""
		}
	}
	return out
}

// listedInBody reads the reminders a webhook digest's body lists: each
// with its own delivery key.
func listedInBody(body []byte) []Listed {
	var ev activities.WebhookDigestEvent
	if json.Unmarshal(body, &ev) != nil {
		return nil
	}
	out := make([]Listed, len(ev.Data.Reminders))
	for i, m := range ev.Data.Reminders {
		out[i] = Listed{ReminderID: m.ReminderID, Shipment: m.ShipmentID, DeliveryKey: m.DeliveryKey}
	}
	return out
}
