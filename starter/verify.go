package starter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// Kinds of divergence between the mirror and Temporal, as Verify reports them.
const (
	// DivergenceUnstarted: a pending row whose workflow was never marked
	// started (the starter died between its two steps). Repaired: started,
	// or marked started when Temporal holds it.
	DivergenceUnstarted = "unstarted"
	// DivergenceWorkflowMissing: a pending row marked started whose
	// workflow Temporal does not know (retention dropped it, a namespace
	// was restored), and nothing was sent. Repaired: started again from
	// the row.
	DivergenceWorkflowMissing = "workflow_missing"
	// DivergenceSentNotMirrored: a pending row whose workflow is gone or
	// ended otherwise while its delivery is recorded as sent. Repaired:
	// marked sent.
	DivergenceSentNotMirrored = "sent_not_mirrored"
	// DivergenceClosedNotMirrored: a pending row whose workflow completed.
	// Repaired: the row takes the workflow's final state.
	DivergenceClosedNotMirrored = "closed_not_mirrored"
	// DivergenceClosedPending: a pending row whose workflow completed
	// without finishing it, in a pending state: its send was refused
	// under a key the row no longer holds (a window move reached the row
	// and not the workflow, on a release before the workflow followed such
	// a move), and nothing was sent, nor ever would be. Repaired: its
	// workflow is started again from the row, a new run under the same id
	// (cancelled instead, if a cancel was asked for); reported only when
	// a delivery of it may have gone under another key, or the row's key
	// is not its due time's.
	DivergenceClosedPending = "closed_pending"
	// DivergenceWorkflowTerminated: a pending row whose workflow was
	// terminated (or timed out) outside shipnotify; it will never send.
	// Repaired: cancelled.
	DivergenceWorkflowTerminated = "workflow_terminated"
	// DivergenceWorkflowCancelled: a pending row whose workflow was
	// cancelled without recording it. Repaired: cancelled.
	DivergenceWorkflowCancelled = "workflow_cancelled"
	// DivergenceWorkflowFailed: a pending row whose workflow failed.
	// Repaired: failed.
	DivergenceWorkflowFailed = "workflow_failed"
	// DivergenceStateDiffers: the row's state is not its running
	// workflow's. Repaired: the row takes the workflow's state.
	DivergenceStateDiffers = "state_differs"
	// DivergenceApprovalNotInWorkflow: a pending row records an approval
	// its running workflow still awaits: in flight (the workflow accepted
	// it and writes the mirror before it moves), or lost by a release
	// before changeAcceptedFirst. Repaired: the workflow takes the
	// approval; the mirror keeps it (an acknowledged decision is never
	// undone).
	DivergenceApprovalNotInWorkflow = "approval_not_in_workflow"
	// DivergenceDueDiffers: the row's due time or delivery key is not its
	// running workflow's. Repaired: the row takes the workflow's.
	DivergenceDueDiffers = "due_differs"
	// DivergenceRowMissing: a running reminder workflow the mirror has no
	// row for. Reported only: the recipient and message live in the row.
	DivergenceRowMissing = "row_missing"
	// DivergenceCancelledButRunning: a cancelled row whose workflow still
	// runs. Repaired: the workflow is cancelled.
	DivergenceCancelledButRunning = "cancelled_but_running"
	// DivergenceFinishedButRunning: a sent, expired or failed row whose
	// workflow still runs as pending. Reported only: which is right needs
	// a person.
	DivergenceFinishedButRunning = "finished_but_running"
)

// Divergence is one place where the mirror and Temporal disagree.
type Divergence struct {
	Kind       string `json:"kind"`
	ReminderID string `json:"reminder_id"`
	WorkflowID string `json:"workflow_id"`
	// Mirror and Engine say what each side holds.
	Mirror string `json:"mirror"`
	Engine string `json:"engine"`
	// Repair is what Verify did about it; empty when it only reported.
	Repair string `json:"repair,omitempty"`
	// Error is why a repair failed.
	Error string `json:"error,omitempty"`
}

// Repaired reports whether Verify put the divergence right.
func (d Divergence) Repaired() bool { return d.Repair != "" && d.Error == "" }

// VerifyOptions say how far Verify looks and whether it repairs.
type VerifyOptions struct {
	// Grace leaves rows changed more recently alone: the mirror is written
	// first and the workflow follows within seconds.
	Grace time.Duration
	// Repair puts right the divergences that have one right answer; false
	// only reports.
	Repair bool
	// QueryWait bounds the status query of each running reminder (0 means
	// 10 s); past it (no worker answers) Verify reads the workflow's search
	// attributes instead.
	QueryWait time.Duration
}

const (
	// verifyBatch is how many pending rows are read, and workflows listed, at a time.
	verifyBatch      = 500
	defaultQueryWait = 10 * time.Second
)

// reconciler is who repairs, in the audit trail and in cancel requests.
const reconciler = "reconcile"

// Verify checks the mirror and Temporal against each other: every pending
// row older than the grace period against its workflow (running, closed,
// missing), then every running reminder workflow of the task queue that
// visibility shows pending against its row. It returns every divergence
// found, repairing (when asked) those with one right answer; repairs are
// conditional on the row being as read, so running Verify again, or two at
// once, repairs nothing twice. A row that changes while it is checked is a
// change in flight, not a divergence.
func (s *Starter) Verify(ctx context.Context, o VerifyOptions) ([]Divergence, error) {
	cutoff := s.now().Add(-o.Grace)
	var out []Divergence
	after := ""
	for {
		rows, err := s.Mirror.PendingBefore(ctx, cutoff, after, verifyBatch)
		if err != nil {
			return out, err
		}
		found, errs := parallel(ctx, s.concurrency(), rows, func(ctx context.Context, row mirror.Row) ([]Divergence, error) {
			return s.verifyRow(ctx, row, o)
		})
		for i, f := range found {
			out = append(out, f...)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("error verifying reminder %s: %w", rows[i].ID, errs[i])
			}
		}
		if err := errors.Join(errs...); err != nil {
			return out, err
		}
		if len(rows) < verifyBatch {
			break
		}
		after = rows[len(rows)-1].ID
	}
	running, err := s.verifyRunning(ctx, cutoff, o.Repair)
	return append(out, running...), err
}

// verifyRow checks one pending row against its workflow.
func (s *Starter) verifyRow(ctx context.Context, row mirror.Row, o VerifyOptions) ([]Divergence, error) {
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, row.WorkflowID, "")
	gone := workflowGone(err)
	if err != nil && !gone {
		return nil, fmt.Errorf("error describing workflow: %w", err)
	}
	info := desc.GetWorkflowExecutionInfo()
	closed := !gone && info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	var found []Divergence
	// A closed workflow whose mark failed is the closed divergence alone:
	// its repair starts it again (and marks it) or settles the row.
	if row.WorkflowStartedAt == nil && !closed {
		d := s.diverge(DivergenceUnstarted, row, "no workflow")
		d.Mirror += ", workflow never started"
		if !gone {
			d.Engine = statusName(info.GetStatus())
		}
		if o.Repair {
			s.restart(ctx, row, &d, "started its workflow", false)
		}
		found = append(found, d)
		if gone {
			return found, nil
		}
	}
	if gone {
		d, err := s.verifyGone(ctx, row, "no workflow", DivergenceWorkflowMissing, "", o.Repair)
		return append(found, d...), err
	}
	if info.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		d, err := s.verifyClosed(ctx, row, info.GetStatus(), o.Repair)
		return append(found, d...), err
	}
	d, err := s.verifyLive(ctx, row, info.GetSearchAttributes(), o)
	return append(found, d...), err
}

// verifyGone settles a pending row whose workflow is missing or ended
// without recording it: a delivery recorded as sent wins; otherwise the row
// becomes to, or, when to is empty, its workflow starts again.
func (s *Starter) verifyGone(ctx context.Context, row mirror.Row, engine, kind string, to reminder.State, repair bool) ([]Divergence, error) {
	fresh, same, err := s.reread(ctx, row)
	if err != nil || !same {
		return nil, err
	}
	sent, err := s.Mirror.DeliverySent(ctx, fresh.ID, fresh.DeliveryKey)
	if err != nil {
		return nil, err
	}
	reason := ""
	switch {
	case sent:
		kind, to, reason = DivergenceSentNotMirrored, reminder.Sent, "its delivery is recorded as sent"
		engine += ", delivery sent"
	case kind == DivergenceWorkflowTerminated:
		reason = "the workflow was terminated outside shipnotify; it will never send"
	case kind == DivergenceWorkflowCancelled:
		reason = "the workflow was cancelled without recording it"
	}
	d := s.diverge(kind, fresh, engine)
	if !repair {
		return []Divergence{d}, nil
	}
	if to == "" {
		s.restart(ctx, fresh, &d, "started its workflow again", false)
		return []Divergence{d}, nil
	}
	s.repair(ctx, &d, mirror.Repair{
		ReminderID: fresh.ID, From: fresh.State, Seen: fresh.UpdatedAt, To: to,
		Detail: map[string]any{"by": reconciler, "kind": kind, "workflow": engine, "reason": reason},
	})
	return []Divergence{d}, nil
}

// verifyClosed settles a pending row whose workflow has ended.
func (s *Starter) verifyClosed(ctx context.Context, row mirror.Row, status enums.WorkflowExecutionStatus, repair bool) ([]Divergence, error) {
	engine := statusName(status)
	switch status {
	case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return s.verifyGone(ctx, row, engine, DivergenceWorkflowTerminated, reminder.Cancelled, repair)
	case enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return s.verifyGone(ctx, row, engine, DivergenceWorkflowCancelled, reminder.Cancelled, repair)
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED:
		return s.verifyGone(ctx, row, engine, DivergenceWorkflowFailed, reminder.Failed, repair)
	case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
	default:
		// The latest run is never continued-as-new; say so if it is.
		d := s.diverge(DivergenceClosedNotMirrored, row, engine)
		d.Error = "the workflow's latest run is " + engine + "; look at its history"
		return []Divergence{d}, nil
	}
	var res workflows.ReminderResult
	if err := s.Temporal.GetWorkflow(ctx, row.WorkflowID, "").Get(ctx, &res); err != nil {
		return nil, fmt.Errorf("error reading the workflow's result: %w", err)
	}
	fresh, same, err := s.reread(ctx, row)
	if err != nil || !same {
		return nil, err
	}
	if !res.State.Terminal() {
		return s.verifyClosedPending(ctx, fresh, engine+", "+string(res.State), repair)
	}
	d := s.diverge(DivergenceClosedNotMirrored, fresh, engine+", "+string(res.State))
	switch {
	case repair:
		s.repair(ctx, &d, mirror.Repair{
			ReminderID: fresh.ID, From: fresh.State, Seen: fresh.UpdatedAt, To: res.State, DeliveryKey: res.DeliveryKey,
			Detail: map[string]any{"by": reconciler, "kind": d.Kind, "workflow_status": engine},
		})
	}
	return []Divergence{d}, nil
}

// verifyClosedPending settles a pending row whose workflow completed in a
// pending state (DivergenceClosedPending). The closed run sent nothing
// under the row's key (its send was refused), so its workflow starts again
// from the row: a new run, which sleeps to the row's due time and sends
// under its key; the key makes a send already recorded a no-op, and a
// second verify meanwhile finds the new run running. A send recorded under
// the row's key is sent_not_mirrored; one that may have gone under another
// key (a bounced one aside) is reported for a person: sending again could
// double it. So is a row whose key is not its due time's: a new run would
// be refused under it and end pending again.
func (s *Starter) verifyClosedPending(ctx context.Context, row mirror.Row, engine string, repair bool) ([]Divergence, error) {
	sent, err := s.Mirror.DeliverySent(ctx, row.ID, row.DeliveryKey)
	if err != nil {
		return nil, err
	}
	if sent {
		return s.verifyGone(ctx, row, engine, DivergenceClosedPending, "", repair)
	}
	d := s.diverge(DivergenceClosedPending, row, engine)
	d.Mirror = describe(row.State, row.DueAt, row.DeliveryKey)
	maybe, err := s.Mirror.WasDelivered(ctx, row.ID)
	switch {
	case err != nil:
		return nil, err
	case maybe:
		d.Error = "a delivery of the reminder may have gone under another key (its events say which); look before starting it again"
	case row.DeliveryKey != reminder.DeliveryKey(row.ID, row.SubscriberID, row.DueAt):
		d.Error = "the row's delivery key is not its due time's; a new run would be refused under it: look at its history"
	case repair:
		s.restart(ctx, row, &d, "started its workflow again: its last run ended without sending it", true)
	}
	return []Divergence{d}, nil
}

// verifyLive compares a pending row with its running workflow: the status
// query, or (no worker answers) the search attributes. The row is read again
// afterwards: the workflow changes only after its mirror write, so a row
// that is unchanged and still differs truly diverges.
func (s *Starter) verifyLive(ctx context.Context, row mirror.Row, sa *commonpb.SearchAttributes, o VerifyOptions) ([]Divergence, error) {
	st, err := s.liveStatus(ctx, row, sa, o.QueryWait)
	if err != nil {
		return nil, err
	}
	fresh, same, err := s.reread(ctx, row)
	if err != nil || !same {
		return nil, err
	}
	kind := DivergenceStateDiffers
	switch {
	case st.State != fresh.State:
	case !st.DueAt.Equal(fresh.DueAt) || st.DeliveryKey != fresh.DeliveryKey:
		kind = DivergenceDueDiffers
	default:
		return nil, nil
	}
	d := s.diverge(kind, fresh, "running, "+describe(st.State, st.DueAt, st.DeliveryKey))
	d.Mirror = describe(fresh.State, fresh.DueAt, fresh.DeliveryKey)
	if kind == DivergenceStateDiffers && st.State == reminder.AwaitingApproval {
		decided, err := s.Mirror.Decisions(ctx, []string{fresh.ID})
		if err != nil {
			return nil, err
		}
		if dec, ok := decided[fresh.ID]; ok && dec.Approved {
			d.Kind = DivergenceApprovalNotInWorkflow
			d.Mirror += ", approved by " + dec.By
			if o.Repair {
				s.settleInWorkflow(ctx, &d, fresh, dec)
			}
			return []Divergence{d}, nil
		}
	}
	if o.Repair {
		s.repair(ctx, &d, mirror.Repair{
			ReminderID: fresh.ID, From: fresh.State, Seen: fresh.UpdatedAt,
			To: st.State, DueAt: st.DueAt, DeliveryKey: st.DeliveryKey,
			Detail: map[string]any{"by": reconciler, "kind": kind, "due_at": st.DueAt, "delivery_key": st.DeliveryKey},
		})
	}
	return []Divergence{d}, nil
}

// settleInWorkflow repairs an approval the mirror records and its
// workflow does not hold yet: the workflow takes it (settleApproval).
func (s *Starter) settleInWorkflow(ctx context.Context, d *Divergence, row mirror.Row, dec mirror.Decision) {
	d.Repair = "the workflow takes the approval the mirror records (by " + dec.By + ")"
	err := s.settleApproval(ctx, row, dec)
	switch {
	case err == nil:
	case errors.Is(err, ErrAccepted):
		d.Repair = "the workflow accepted the approval the mirror records (by " + dec.By + "); it lands when a worker finishes it"
	case errors.Is(err, ErrNoAnswer):
		d.Error = "the workflow did not answer (is a worker running?); the mirror keeps the approval; verify again"
	default:
		var out Outcome
		if refused(err, &out) {
			d.Error = "the workflow refused it (" + out.Error + "); the mirror keeps the approval; verify again"
			return
		}
		d.Error = err.Error()
	}
}

// liveStatus asks a running reminder where it stands (LiveStatus); when no
// worker answers in time it reads the search attributes the workflow
// upserts after each mirror write.
func (s *Starter) liveStatus(ctx context.Context, row mirror.Row, sa *commonpb.SearchAttributes, wait time.Duration) (workflows.Status, error) {
	if wait <= 0 {
		wait = defaultQueryWait
	}
	qctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	st, err := LiveStatus(qctx, s.Temporal, row, nil)
	if err == nil {
		return st, nil
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	state, due, saErr := reminderAttributes(sa)
	if saErr != nil {
		return st, fmt.Errorf("error reading the workflow's state (status query: %v): %w", err, saErr)
	}
	return workflows.Status{State: state, DueAt: due, DeliveryKey: reminder.DeliveryKey(row.ID, row.SubscriberID, due)}, nil
}

// restart starts a pending row's workflow from the mirror; again allows a
// new run under a workflow id that ran and closed. A row already approved
// (scheduled under an approval policy) starts without awaiting approval
// again. The notify activity refuses finished rows and the delivery key
// makes a second send a no-op, so starting again is safe.
func (s *Starter) restart(ctx context.Context, row mirror.Row, d *Divergence, did string, again bool) {
	if row.CancelRequestedAt != nil {
		// A cancel was asked for and never finished: nothing that was
		// asked to be cancelled is started again. The row ends cancelled.
		state, err := s.Mirror.Cancel(ctx, row.ID, "cancelled", map[string]any{
			"by": reconciler, "reason": "a cancel was asked for, and its workflow is gone", "kind": d.Kind,
		})
		d.Repair = "mirror set to cancelled: a cancel was asked for, so its workflow is not started again"
		switch {
		case err != nil:
			d.Error = err.Error()
		case state != reminder.Cancelled:
			d.Error = "the row was " + string(state) + " already; left alone"
		}
		return
	}
	nr, err := s.Mirror.StartOf(ctx, row.ID)
	if err == nil {
		if row.State != reminder.AwaitingApproval {
			nr.Approval = reminder.Approval{}
		}
		start := s.startAll
		if again {
			start = s.startAgain
		}
		var results []Result
		results, err = start(ctx, []mirror.NewReminder{nr})
		if err == nil && results[0].Status == AlreadyScheduled {
			did = "marked its workflow started"
		}
	}
	d.Repair = did
	if err != nil {
		d.Error = err.Error()
	}
}

// repair applies a mirror repair and records on d what it did.
func (s *Starter) repair(ctx context.Context, d *Divergence, r mirror.Repair) {
	d.Repair = "mirror set to " + describe(r.To, r.DueAt, r.DeliveryKey)
	changed, err := s.Mirror.Repair(ctx, r)
	switch {
	case err != nil:
		d.Error = err.Error()
	case !changed:
		d.Error = "the row changed while it was being verified; left alone, verify again"
	}
}

// reread reads a row again and reports whether it is as it was.
func (s *Starter) reread(ctx context.Context, row mirror.Row) (mirror.Row, bool, error) {
	fresh, err := s.Mirror.Get(ctx, row.ID)
	if err != nil {
		return fresh, false, err
	}
	same := fresh.State == row.State && fresh.UpdatedAt.Equal(row.UpdatedAt) &&
		fresh.DueAt.Equal(row.DueAt) && fresh.DeliveryKey == row.DeliveryKey
	return fresh, same, nil
}

func (s *Starter) diverge(kind string, row mirror.Row, engine string) Divergence {
	return Divergence{
		Kind: kind, ReminderID: row.ID, WorkflowID: row.WorkflowID,
		Mirror: describe(row.State, row.DueAt, ""), Engine: engine,
	}
}

// describe says where a reminder stands, for a person reading the report.
func describe(state reminder.State, due time.Time, key string) string {
	out := string(state)
	if !due.IsZero() {
		out += ", due " + due.UTC().Format(time.RFC3339Nano)
	}
	if len(key) >= 12 {
		out += ", key " + key[:12]
	}
	return out
}

// statusName is a workflow status in snake case: running, timed_out.
func statusName(status enums.WorkflowExecutionStatus) string {
	var b strings.Builder
	for i, r := range status.String() {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
