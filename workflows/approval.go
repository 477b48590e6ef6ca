package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
)

// The approval: a reminder that awaits one waits for the decision (or
// expires at the final deadline), and tells the escalation contact when it
// is overdue. The decision's handlers are in handlers.go.

// approvalState is the run's approval and the escalations running beside
// the reminder.
type approvalState struct {
	requestedAt time.Time
	decision    *DecisionRecord
	escalated   bool
	// deciding: a decision is being written; a second one is refused.
	deciding bool
	// expiring: the expiry is being written; a decision or a reschedule
	// arriving meanwhile is refused.
	expiring bool
	// escalations counts escalation notices still running beside the
	// reminder; stopApprovalEscalation abandons the approval one.
	escalations            int
	stopApprovalEscalation workflow.CancelFunc
}

// awaitDecision waits while the reminder awaits approval. done is true when
// the reminder ended there (rejected, expired, cancelled).
func (r *run) awaitDecision(ctx workflow.Context) (done bool, err error) {
	timeoutAt := r.requestedAt.Add(r.in.Approval.Timeout)
	expiresAt := r.requestedAt.Add(r.in.Approval.ExpireAfter)
	for r.state == reminder.AwaitingApproval {
		if r.cancel != nil {
			return true, r.endCancelled(ctx)
		}
		if r.continueAsNewDue(ctx) {
			return true, r.continueAsNew(ctx)
		}
		now := workflow.Now(ctx)
		if !r.escalated && !now.Before(timeoutAt) {
			r.escalated = true
			r.escalate(ctx, "approval_timeout", fmt.Sprintf("no decision within %s of scheduling", r.in.Approval.Timeout))
			continue
		}
		if !now.Before(expiresAt) {
			if r.busy > 0 {
				// A decision is being written; it goes first and may settle the reminder.
				if err := workflow.Await(ctx, func() bool { return r.busy == 0 }); err != nil {
					return true, err
				}
				continue
			}
			// From here a decision or a reschedule is refused: the expiry's
			// write may take a while, and nothing may land beside it.
			r.expiring = true
			r.setState(ctx, reminder.Expired, "expired", map[string]any{"reason": "no decision by the final deadline"})
			r.abandonApprovalEscalation()
			return true, r.finish(ctx)
		}
		next := expiresAt
		if !r.escalated {
			next = timeoutAt
		}
		r.showAwaitingApproval(ctx, timeoutAt, expiresAt)
		summary := "approval timeout " + timerTime(timeoutAt)
		if r.escalated {
			summary = "approval's final deadline " + timerTime(expiresAt)
		}
		_, err := workflow.AwaitWithOptions(ctx, awaitFor(next.Sub(now), summary), func() bool {
			return r.state != reminder.AwaitingApproval || r.cancel != nil || r.continueAsNewDue(ctx)
		})
		if err != nil {
			return true, err
		}
	}
	if err := workflow.Await(ctx, func() bool { return r.busy == 0 }); err != nil {
		return true, err
	}
	// Decided: an overdue-approval notice still retrying has nothing left to say.
	r.abandonApprovalEscalation()
	if r.state == reminder.Cancelled { // rejected
		return true, r.finish(ctx)
	}
	return false, nil
}

// escalate tells the update's escalation contact, once per reason (the
// notice's delivery key makes a repeat a no-op). The notice runs beside the
// reminder: one that keeps failing holds neither an expiry nor a cancel
// behind it; finish waits for it.
func (r *run) escalate(ctx workflow.Context, reason, detail string) {
	in := activities.NotifyInput{
		Purpose: reminder.PurposeEscalation, ReminderID: r.in.ReminderID, SubscriberID: r.in.SubscriberID,
		DueAt: r.due, Reason: reason, Detail: detail,
	}
	if r.version(ctx, changeEscalationBeside) == workflow.DefaultVersion {
		var res activities.NotifyResult
		err := workflow.ExecuteActivity(r.notifyOptions(ctx), a.Notify, in).Get(ctx, &res)
		r.noteEscalation(ctx, reason, res, err)
		return
	}
	ectx, stop := workflow.WithCancel(ctx)
	if reason == "approval_timeout" {
		r.stopApprovalEscalation = stop
	}
	r.escalations++
	f := workflow.ExecuteActivity(r.notifyOptions(ectx), a.Notify, in)
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { r.escalations-- }()
		var res activities.NotifyResult
		r.noteEscalation(ctx, reason, res, f.Get(ctx, &res))
	})
}

// abandonApprovalEscalation stops an overdue-approval notice still
// retrying once the reminder no longer awaits approval.
func (r *run) abandonApprovalEscalation() {
	if r.stopApprovalEscalation != nil {
		r.stopApprovalEscalation()
		r.stopApprovalEscalation = nil
	}
}

func (r *run) noteEscalation(ctx workflow.Context, reason string, res activities.NotifyResult, err error) {
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &canceled):
		r.note(ctx, "escalation_abandoned", reason)
	case err != nil:
		workflow.GetLogger(ctx).Warn("escalation failed", "reminder_id", r.in.ReminderID, "error", err)
		r.note(ctx, "escalation_failed", reason)
	case res.Skipped:
		r.note(ctx, "escalation_skipped", res.SkipReason)
	default:
		r.note(ctx, "escalated", reason)
	}
}
