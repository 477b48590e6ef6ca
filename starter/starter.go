// Package starter is how a shipment tracker schedules reminders: it checks
// an update, mirrors its fan-out in PostgreSQL in one statement, and starts
// one Temporal workflow per (update, subscriber) under a deterministic id, so
// scheduling the same update twice creates nothing new.
//
// It is part of shipnotify's Go contract, with reminder, workflows and codec:
// what a Go service imports to schedule reminders itself (example_test.go;
// docs/architecture.md, "Where the code lives").
package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/fairqueue"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/workflows"
)

// Status says what scheduling did for one subscriber.
type Status string

const (
	// Scheduled: this call started the reminder's workflow.
	Scheduled Status = "scheduled"
	// AlreadyScheduled: the update was scheduled before; nothing was
	// started, and the result carries the reminder as stored.
	AlreadyScheduled Status = "already_scheduled"
	// Conflict: the reminder's workflow id is held by a workflow that is not
	// this reminder's (one an engine kept from before this mirror, started
	// before the row was written). Nothing was started; the row stays
	// unstarted, and is started once that workflow is gone.
	Conflict Status = "conflict"
	// Unstarted: the reminder is written, but this call could not start
	// its workflow (the error says why). The reconciler starts it, as does
	// the same call again.
	Unstarted Status = "unstarted"
)

// ErrWorkflowIDTaken is the error of a start that found its workflow id
// held by a workflow that is not the reminder's (Conflict).
var ErrWorkflowIDTaken = errors.New("the reminder's workflow id is held by a workflow that is not this reminder's")

// DefaultClockSkew is Starter.ClockSkew's default.
const DefaultClockSkew = time.Minute

// ErrUpdateChanged is what a *ChangedError matches with errors.Is.
var ErrUpdateChanged = errors.New("update already scheduled with different content")

// ChangedError refuses a resubmission whose content differs from the update
// first scheduled under the same shipment and update ids. Nothing is written:
// the reminders already scheduled stay as they are.
type ChangedError struct {
	ShipmentID string
	UpdateID   string
	// Fields name what differs, as the resubmission spells them.
	Fields []string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("update %s/%s was already scheduled with different content (%s differ); nothing was written: "+
		"move a due time with `shipnotify reschedule`, or send new content under a new update_id",
		e.ShipmentID, e.UpdateID, strings.Join(e.Fields, ", "))
}

// Is makes errors.Is(err, ErrUpdateChanged) true.
func (e *ChangedError) Is(target error) bool { return target == ErrUpdateChanged }

// Starter schedules reminders.
type Starter struct {
	Temporal client.Client
	// Namespace is the one Temporal is dialled on, named in errors ("":
	// the SDK's default).
	Namespace string
	Mirror    *mirror.Store
	TaskQueue string
	// Concurrency bounds workflow starts in flight for one update (0 means 16).
	Concurrency int
	// Slots, when set, is shared by every call on this Starter: each
	// workflow start, and each reminder a cancel, a move or a decision
	// reaches, holds one of its slots, handed out among tenants in turn,
	// so one tenant's 500-reminder update waits behind itself and not in
	// front of another tenant's single reminder (nil: Concurrency alone
	// bounds each call).
	Slots *fairqueue.Queue
	// Webhooks is the guard webhook URLs must pass at schedule time (the
	// worker's sender applies the same one at connection time).
	Webhooks webhook.Guard
	// Channels are the channels a subscriber may use beyond email and
	// webhook, each with the check of its address; the worker registers
	// their senders (activities.Activities.Senders).
	Channels map[reminder.Channel]reminder.CheckAddress
	// Windows are the tenants' default send windows and holidays, which
	// reminders scheduled from now on take (those already scheduled keep
	// the window they were scheduled with).
	Windows reminder.WindowDefaults
	// Now is the clock due times are checked against (nil means time.Now).
	Now func() time.Time
	// ClockSkew is how far Temporal's clock may trail PostgreSQL's (0 means
	// a minute): a workflow that started more than this before its row was
	// written is not the row's (Conflict).
	ClockSkew time.Duration

	// CancelWait bounds how long a cancel waits for a reminder's workflow to
	// finish it before answering cancel_requested (0 means 20 s).
	CancelWait time.Duration
	// UpdateWait bounds how long a reschedule or a decision waits for the
	// workflow to answer (0 means 60 s). A request carries a deadline that
	// leaves a late acceptance inside the wait (budget.LateAcceptance), so
	// one the workflow had not accepted by then never moves anything
	// afterwards; one it had accepted lands (StatusAccepted).
	UpdateWait time.Duration
	// Unleveled starts reminders as the releases before workflow levels
	// did (ReminderInput.Level 0), so they ask GetVersion for every change
	// and a worker's pinned versions (worker.Options.Versions) decide their
	// path: the benchmark's full-local, and tests of those paths.
	Unleveled bool
	// DelayedStart starts a reminder that needs no approval with Temporal's
	// start delay (StartWorkflowOptions.StartDelay) up to its due time
	// instead of a first workflow task that sleeps on a timer: the engine
	// holds the execution and dispatches its first task at the due time, so
	// a delivered reminder records no timer and one workflow task fewer.
	// Approval reminders act before their due time and always start at once.
	DelayedStart bool

	// afterMirror, when set (by tests), runs between the mirror write and the
	// workflow starts; an error aborts there, as a crash would.
	afterMirror func() error
}

// Result is the outcome for one subscriber.
type Result struct {
	ReminderID   string    `json:"reminder_id"`
	WorkflowID   string    `json:"workflow_id"`
	SubscriberID string    `json:"subscriber_id"`
	DeliveryKey  string    `json:"delivery_key"`
	DueAt        time.Time `json:"due_at"`
	// GoesOutAt is when it goes out: DueAt, or its send window's opening.
	GoesOutAt time.Time `json:"goes_out_at"`
	Status    Status    `json:"status"`
	// State is where the reminder stands (already scheduled ones may have
	// been sent or cancelled since).
	State reminder.State `json:"state"`
}

// Plan checks an update and returns its reminders without writing anything.
// A bad update is a *reminder.FieldError naming the field.
//
// It plans twice. The first pass runs every check but the webhook
// destinations' and collects the URLs; the guard then looks their hosts up
// together, concurrently under one deadline (webhook.Guard.CheckURLs), so
// an update naming 500 slow hosts is answered within that deadline instead
// of one lookup after another, and an update that is wrong anyway costs no
// lookup. The second pass applies the verdicts in subscriber order.
func (s *Starter) Plan(ctx context.Context, u reminder.Update) ([]reminder.Reminder, error) {
	d, err := s.draft(u)
	if err != nil {
		return nil, err
	}
	return s.lookUp(ctx, d)
}

// Draft is an update checked for everything but its webhook hosts, which
// are not looked up yet, so a caller can charge the lookups (Lookups)
// before ScheduleDraft makes them.
type Draft struct {
	u    reminder.Update
	now  time.Time
	urls []string
	// rems are the reminders as planned with no destination judged.
	rems  []reminder.Reminder
	hosts []string
	// stored is the update as the mirror held it already, with the same
	// content: it is scheduled from the stored rows, with no lookup.
	stored *mirror.Stored
}

// Lookups is how many host names ScheduleDraft will look up: the distinct
// webhook hosts of an update the mirror does not hold yet, none for one it
// holds (its URLs were checked when first written).
func (d *Draft) Lookups() int {
	if d.stored != nil {
		return 0
	}
	return len(d.hosts)
}

// Starts is how many workflows ScheduleDraft will start at most: every
// reminder of an update the mirror does not hold yet (or was not asked
// about: one with no webhook host), those left unstarted of one it holds.
func (d *Draft) Starts() int {
	if d.stored == nil {
		return len(d.rems)
	}
	n := 0
	for _, r := range d.stored.Reminders {
		if r.Startable() {
			n++
		}
	}
	return n
}

// Draft checks an update as Plan does, but looks nothing up. When the
// update has hosts to look up, the mirror is asked whether it holds the
// update already (the tenant's, under the same shipment and update ids): a
// resubmission with other content is a *ChangedError here, before any
// lookup, and one with the same content needs none. A bad update is a
// *reminder.FieldError naming the field. Nothing is written.
func (s *Starter) Draft(ctx context.Context, u reminder.Update) (*Draft, error) {
	d, err := s.draft(u)
	if err != nil || len(d.hosts) == 0 {
		return d, err
	}
	stored, found, err := s.Mirror.StoredUpdate(ctx, u.Tenant, u.ShipmentID, u.UpdateID)
	if err != nil || !found {
		return d, err
	}
	if err := changed(stored, u, d.rems); err != nil {
		return nil, err
	}
	d.stored = &stored
	return d, nil
}

// draft is Plan's first pass: every check but the webhook destinations'.
func (s *Starter) draft(u reminder.Update) (*Draft, error) {
	d := &Draft{u: u, now: s.now()}
	rems, err := u.Plan(reminder.PlanOptions{Now: d.now, Channels: s.Channels, Windows: s.Windows, WebhookDestination: func(raw string) error {
		d.urls = append(d.urls, raw)
		return nil
	}})
	if err != nil {
		return nil, err
	}
	d.rems, d.hosts = rems, s.Webhooks.Hosts(d.urls)
	return d, nil
}

// lookUp is Plan's second pass: the hosts looked up together, their
// verdicts applied in subscriber order.
func (s *Starter) lookUp(ctx context.Context, d *Draft) ([]reminder.Reminder, error) {
	verdicts := make(map[string]error, len(d.urls))
	for i, err := range s.Webhooks.CheckURLs(ctx, d.urls) {
		verdicts[d.urls[i]] = err
	}
	return d.u.Plan(reminder.PlanOptions{Now: d.now, Channels: s.Channels, Windows: s.Windows, WebhookDestination: func(raw string) error {
		if err, ok := verdicts[raw]; ok {
			return err
		}
		return s.Webhooks.CheckURL(ctx, raw)
	}})
}

// ScheduleDraft schedules a draft as Schedule does: it looks the hosts up,
// plans again with their verdicts (a destination refused is a
// *reminder.FieldError, and nothing is written), writes and starts. A draft
// of an update the mirror held starts from the stored rows what was left
// unstarted, and looks nothing up.
func (s *Starter) ScheduleDraft(ctx context.Context, d *Draft) ([]Result, error) {
	if d.stored != nil {
		return s.startStored(ctx, d.rems, *d.stored)
	}
	rems, err := s.lookUp(ctx, d)
	if err != nil {
		return nil, err
	}
	return s.SchedulePlanned(ctx, d.u, rems)
}

// Schedule checks the update, writes its mirror rows and starts a workflow
// per subscriber. A bad update writes nothing. Scheduling the same update
// again starts nothing and answers with the reminders as stored; a
// different update under the same ids is a *ChangedError and writes nothing.
// Results come in subscriber order. If some starts fail, the results of the
// others are returned with the error; the failed reminders' rows stay for
// the reconciler or a retry of the same call.
func (s *Starter) Schedule(ctx context.Context, u reminder.Update) ([]Result, error) {
	rems, err := s.Plan(ctx, u)
	if err != nil {
		return nil, err
	}
	return s.SchedulePlanned(ctx, u, rems)
}

// SchedulePlanned is Schedule for reminders Plan already returned, so a
// caller that checked the update before connecting does not check (and
// resolve its webhook hosts) twice.
func (s *Starter) SchedulePlanned(ctx context.Context, u reminder.Update, rems []reminder.Reminder) ([]Result, error) {
	rows := make([]mirror.NewReminder, len(rems))
	for i, r := range rems {
		rows[i] = mirror.NewReminder{Reminder: r, WorkflowID: workflows.ReminderWorkflowID(r.ID)}
	}
	stored, err := s.Mirror.ScheduleUpdate(ctx, u, rows)
	if err != nil {
		return nil, err
	}
	if !stored.Inserted {
		if err := changed(stored, u, rems); err != nil {
			return nil, err
		}
	}
	return s.startStored(ctx, rems, stored)
}

// changed is the *ChangedError of a resubmission whose content differs from
// the update as first stored, or nil.
func changed(stored mirror.Stored, u reminder.Update, rems []reminder.Reminder) error {
	was := make([]reminder.Reminder, len(stored.Reminders))
	for i, r := range stored.Reminders {
		was[i] = r.Requested
	}
	if fields := reminder.Changes(stored.Requested, was, u, rems); len(fields) > 0 {
		return &ChangedError{ShipmentID: u.ShipmentID, UpdateID: u.UpdateID, Fields: fields}
	}
	return nil
}

// startStored starts what is new or was left unstarted, from the stored
// rows, never from the request, and answers in the request's order.
func (s *Starter) startStored(ctx context.Context, rems []reminder.Reminder, stored mirror.Stored) ([]Result, error) {
	if s.afterMirror != nil {
		if err := s.afterMirror(); err != nil {
			return nil, err
		}
	}
	bySubscriber := make(map[string]mirror.StoredReminder, len(stored.Reminders))
	var toStart []mirror.NewReminder
	tried := map[string]bool{}
	for _, r := range stored.Reminders {
		bySubscriber[r.Requested.SubscriberID] = r
		if r.Startable() {
			toStart = append(toStart, r.NewReminder())
			tried[r.Requested.ID] = true
		}
	}
	started, err := s.startAll(ctx, toStart)
	startedByID := make(map[string]Result, len(started))
	for _, r := range started {
		startedByID[r.ReminderID] = r
	}
	results := make([]Result, len(rems))
	for i, want := range rems {
		r := bySubscriber[want.SubscriberID]
		if res, ok := startedByID[r.Requested.ID]; ok {
			results[i] = res
			continue
		}
		status := AlreadyScheduled
		if tried[r.Requested.ID] {
			// Its start failed: not scheduled before, not started now.
			status = Unstarted
		}
		results[i] = Result{
			ReminderID: r.Requested.ID, WorkflowID: r.WorkflowID, SubscriberID: want.SubscriberID,
			DeliveryKey: r.DeliveryKey, DueAt: r.DueAt, GoesOutAt: r.Requested.GoesOutAt(),
			Status: status, State: r.State,
		}
	}
	return results, err
}

// Reconcile starts the workflows of mirror rows that never got one (the
// starter died between its two steps), at least grace old so a Schedule in
// progress is left alone. It is idempotent: a workflow that exists is
// reported already_scheduled.
func (s *Starter) Reconcile(ctx context.Context, grace time.Duration) ([]Result, error) {
	rows, err := s.Mirror.Unstarted(ctx, s.now().Add(-grace), 1000)
	if err != nil {
		return nil, err
	}
	return s.startAll(ctx, rows)
}

func (s *Starter) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// startAll starts a workflow per row with bounded concurrency and marks in
// the mirror those Temporal holds. Results keep the rows' order; a failed
// start leaves its result empty. A row a cancel finished while its workflow
// was being started gets its new workflow cancelled at once. A workflow id
// that ever ran is never started again (startAgain allows it).
func (s *Starter) startAll(ctx context.Context, rows []mirror.NewReminder) ([]Result, error) {
	return s.startRows(ctx, rows, enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE)
}

// startAgain is startAll for rows whose workflow ran and closed without
// finishing them: a new run under the same id, unless one runs already.
func (s *Starter) startAgain(ctx context.Context, rows []mirror.NewReminder) ([]Result, error) {
	return s.startRows(ctx, rows, enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE)
}

func (s *Starter) startRows(ctx context.Context, rows []mirror.NewReminder, reuse enums.WorkflowIdReusePolicy) ([]Result, error) {
	results, errs := parallel(ctx, s.concurrency(), rows, func(ctx context.Context, r mirror.NewReminder) (Result, error) {
		status, err := s.start(ctx, r, reuse)
		res := Result{
			ReminderID: r.ID, WorkflowID: r.WorkflowID, SubscriberID: r.SubscriberID,
			DeliveryKey: r.DeliveryKey(), DueAt: r.DueAt, GoesOutAt: r.GoesOutAt(), Status: status, State: r.InitialState(),
		}
		switch {
		case errors.Is(err, ErrWorkflowIDTaken):
			return res, fmt.Errorf("error starting workflow for reminder %s: %w", r.ID, err)
		case err != nil:
			return Result{}, fmt.Errorf("error starting workflow for reminder %s: %w", r.ID, err)
		}
		return res, nil
	})
	// Mark whatever Temporal holds, even after a failed start, so the
	// reconciler only sees rows whose workflow truly is missing.
	var started []string
	for i, err := range errs {
		if err == nil {
			started = append(started, rows[i].ID)
		}
	}
	startErr := errors.Join(errs...)
	marked, err := s.Mirror.MarkStarted(ctx, started)
	if err != nil {
		return results, errors.Join(startErr, err)
	}
	var late []mirror.NewReminder
	var moved []moveTo
	for i, r := range rows {
		if m, ok := marked[r.ID]; ok {
			results[i].State = m.State
			switch {
			case m.State == reminder.Cancelled:
				late = append(late, r)
			case m.State.Pending() && !m.DueAt.Equal(r.DueAt):
				moved = append(moved, moveTo{row: r, due: m.DueAt})
				results[i].DueAt, results[i].DeliveryKey = m.DueAt, m.DeliveryKey
				results[i].GoesOutAt = reminder.GoesOutAt(m.DueAt, r.Window, r.Digest)
			}
		}
	}
	_, cancelErrs := parallel(ctx, s.concurrency(), late, func(ctx context.Context, r mirror.NewReminder) (Outcome, error) {
		return s.cancelWorkflow(ctx, r.ID, r.WorkflowID, Actor{By: "shipnotify", Reason: "cancelled while its workflow was being started"})
	})
	// A window move that came while these started moved their rows: their
	// new workflows follow.
	_, moveErrs := parallel(ctx, s.concurrency(), moved, func(ctx context.Context, m moveTo) (Outcome, error) {
		var res workflows.RescheduleResult
		w := s.window(ctx)
		return Outcome{}, s.update(ctx, w, m.row.WorkflowID, workflows.UpdateReschedule, workflows.RescheduleRequest{
			DueAt: m.due, By: "shipnotify", Reason: "moved while its workflow was being started", Deadline: w.deadline,
		}, &res)
	})
	return results, errors.Join(startErr, errors.Join(cancelErrs...), errors.Join(moveErrs...))
}

// moveTo is a started reminder whose row a move gave a new due time.
type moveTo struct {
	row mirror.NewReminder
	due time.Time
}

// parallel runs fn on every item, at most limit at a time. Results and
// errors keep the items' order; one failure does not stop the others.
func parallel[T, R any](ctx context.Context, limit int, items []T, fn func(context.Context, T) (R, error)) ([]R, []error) {
	results, errs := make([]R, len(items)), make([]error, len(items))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, item := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i], errs[i] = fn(ctx, item)
		}()
	}
	wg.Wait()
	return results, errs
}

func (s *Starter) start(ctx context.Context, r mirror.NewReminder, reuse enums.WorkflowIdReusePolicy) (Status, error) {
	in := workflows.ReminderInput{
		ReminderID: r.ID, Tenant: r.Tenant, ShipmentID: r.ShipmentID, UpdateID: r.UpdateID,
		SubscriberID: r.SubscriberID, DueAt: r.DueAt, Approval: r.Approval, Level: workflows.CurrentLevel, Window: r.Window,
		Digest: r.Digest,
	}
	if s.Unleveled {
		in.Level = 0
	}
	delay := s.startDelay(r)
	release, err := s.Slots.Acquire(ctx, r.Tenant)
	if err != nil {
		return "", err
	}
	defer release()
	_, err = s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       r.WorkflowID,
		StartDelay:               delay,
		TaskQueue:                s.TaskQueue,
		WorkflowIDReusePolicy:    reuse,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Temporal's default, said here: an operator's change answered
		// no_answer can never be accepted later because a task started by
		// its deadline completes within this (budget.LateAcceptance).
		WorkflowTaskTimeout:   budget.WorkflowTask,
		TypedSearchAttributes: workflows.StartSearchAttributes(in),
		// Ids and the due time only, as the search attributes: the Web UI
		// shows them through the codec server.
		StaticSummary: workflows.ReminderSummary(in),
		StaticDetails: workflows.ReminderDetails(in, delay > 0),
		// Without this the SDK hands back the running workflow as if it were new.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		// The engine dispatches the task queue's backlog among tenants in
		// turn (task-queue fairness, where the server has it on); the
		// workflow's activities and children inherit the key.
		Priority: temporal.Priority{FairnessKey: r.Tenant},
	}, workflows.ReminderWorkflowName, in)
	var exists *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &exists):
		return s.collided(ctx, r)
	case err != nil:
		if saErr := asSearchAttributesError(err, s.namespace()); saErr != nil {
			return "", saErr
		}
		return "", err
	}
	return Scheduled, nil
}

// startDelay is how long the engine holds r's first workflow task: until
// its due time for a reminder that needs no approval when DelayedStart is
// set, else 0 (at once). The workflow sleeps on a timer for whatever is
// left when its first task runs early, and sends at once when it runs late.
func (s *Starter) startDelay(r mirror.NewReminder) time.Duration {
	if !s.DelayedStart || r.Approval.Required {
		return 0
	}
	return max(r.GoesOutAt().Sub(s.now()), 0)
}

// collided says whose the workflow a start collided with is. The row is
// always written before its workflow starts, so a workflow that started
// before the row was written (beyond ClockSkew) is another's: one an
// engine kept when the mirror was replaced, or restored without it. That
// is a Conflict, never already_scheduled: the row's reminder would
// otherwise wait for a workflow that is not its own and never send.
func (s *Starter) collided(ctx context.Context, r mirror.NewReminder) (Status, error) {
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
	if err != nil {
		return "", fmt.Errorf("error describing the workflow its start collided with: %w", err)
	}
	// The first run's start: a continued run starts later, and is the
	// row's when its first run was.
	info := desc.GetWorkflowExecutionInfo()
	started := info.GetStartTime().AsTime()
	if first := info.GetFirstRunId(); first != "" && first != info.GetExecution().GetRunId() {
		if d, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, first); err == nil {
			started = d.GetWorkflowExecutionInfo().GetStartTime().AsTime()
		}
	}
	skew := s.ClockSkew
	if skew <= 0 {
		skew = DefaultClockSkew
	}
	if !r.CreatedAt.IsZero() && started.Before(r.CreatedAt.Add(-skew)) {
		return Conflict, fmt.Errorf("%w: it started at %s, before the row was written at %s",
			ErrWorkflowIDTaken, started.UTC().Format(time.RFC3339), r.CreatedAt.UTC().Format(time.RFC3339))
	}
	return AlreadyScheduled, nil
}
