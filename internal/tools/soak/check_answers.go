package soak

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// What the checker asks of an answer of failure: a decision or a
// reschedule that answered failure either moved nothing or ends with the
// mirror and the workflow agreeing; and `reconcile --verify` never
// repairs a change that was acknowledged.

// WorkflowView is what a reminder's workflow says of itself (its status
// query), read for each reminder a decision or reschedule answered
// failure for.
type WorkflowView struct {
	State       reminder.State `json:"state,omitempty"`
	DueAt       time.Time      `json:"due_at"`
	DeliveryKey string         `json:"delivery_key,omitempty"`
	// Decision is approved, rejected or "" (none taken).
	Decision string `json:"decision,omitempty"`
	// Err is why the workflow could not be asked.
	Err string `json:"error,omitempty"`
}

// AnsweredFailure is a decision or reschedule that answered failure for a
// reminder, and what came of it.
type AnsweredFailure struct {
	Reminder string `json:"reminder"`
	Op       string `json:"op"`
	Answer   string `json:"answer"`
	Came     string `json:"came"`
}

// What came of an answer of failure.
const (
	CameNothing  = "moved nothing"
	CameLanded   = "landed all the same; the mirror and the workflow agree"
	CameDisagree = "the mirror and the workflow disagree"
)

// Rules of the answers.
const (
	RuleFailedDisagree        = "a decision or reschedule answered failure, and the mirror and the workflow disagree"
	RuleRepairedAcknowledged  = "reconcile --verify repaired a change that was acknowledged"
	RuleWorkflowNotAnswerable = "a reminder's workflow could not be asked what it holds"
)

// decisionKinds and rescheduleKinds are the operations whose answers of
// failure the checker follows.
var (
	decisionKinds   = []string{"approve", "reject"}
	rescheduleKinds = []string{"move_reminder", "move_window"}
)

// failedStatuses are the outcomes that say the change failed, and the one
// that says it was accepted and not finished (it lands, or is refused by
// the mirror, and either way the two must agree): all are followed.
var failedStatuses = []string{starter.StatusFailed, starter.StatusNoAnswer, starter.StatusAccepted}

// FailureAnswered finds, by reminder, the decisions and reschedules that
// answered failure for it: an outcome failed or no_answer, or an API
// answer of 5xx or none at all (the request cut: it may have been done)
// with no outcomes, for every reminder the operation named.
func FailureAnswered(s Snapshot) map[string][]Op {
	out := map[string][]Op{}
	for _, op := range s.Ops {
		if !slices.Contains(decisionKinds, op.Kind) && !slices.Contains(rescheduleKinds, op.Kind) {
			continue
		}
		for _, o := range op.Outcomes {
			if slices.Contains(failedStatuses, o.Status) {
				out[o.ReminderID] = append(out[o.ReminderID], op)
			}
		}
		if op.Via != "api" || len(op.Outcomes) > 0 || (op.Code != 0 && op.Code < 500) {
			continue
		}
		for _, r := range s.Rows {
			if r.Tenant == op.Tenant && r.Shipment == op.Shipment && r.Update == op.Update &&
				(op.Subscriber == "" || op.Subscriber == r.Subscriber) {
				out[r.ID] = append(out[r.ID], op)
			}
		}
	}
	return out
}

// checkAnswers follows every answer of failure to what the mirror and the
// workflow hold, and every repair of reconcile --verify to what had been
// acknowledged before it.
func checkAnswers(s Snapshot, add func(rule, id, format string, args ...any)) []AnsweredFailure {
	rows := map[string]Row{}
	for _, r := range s.Rows {
		rows[r.ID] = r
	}
	var tally []AnsweredFailure
	failed := FailureAnswered(s)
	ids := make([]string, 0, len(failed))
	for id := range failed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		ops := failed[id]
		row, ok := rows[id]
		if !ok {
			continue
		}
		v, asked := s.WorkflowViews[id]
		if !asked || v.Err != "" {
			add(RuleWorkflowNotAnswerable, id, "its workflow %s did not answer the status query (%s); %s answered %s",
				row.WorkflowID, v.Err, describeOp(ops[0]), answerOf(ops[0], id))
			continue
		}
		trail := s.Events[id]
		differs := disagreement(row, trail, v)
		for _, op := range ops {
			came := CameNothing
			switch {
			case differs != "":
				came = CameDisagree
			case landed(op, trail):
				came = CameLanded
			}
			tally = append(tally, AnsweredFailure{Reminder: id, Op: describeOp(op), Answer: answerOf(op, id), Came: came})
		}
		if differs != "" {
			add(RuleFailedDisagree, id, "%s answered %s at %s; %s; trail: %s",
				describeOp(ops[0]), answerOf(ops[0], id), ops[0].Done.Format("15:04:05.000"), differs, movesTrail(trail))
		}
	}
	checkRepairs(s, add)
	return tally
}

// disagreement says how the mirror and the workflow differ on what an
// operator can change (the decision, the due time and key) and on the
// state, "" when they agree. A reminder handed to its provider may have
// moved on in the mirror (delivered, undeliverable) by the provider's
// events, which its workflow does not take.
func disagreement(row Row, trail []Event, v WorkflowView) string {
	var diffs []string
	mirrorState, wfState := row.State, v.State
	if !(mirrorState == wfState || (mirrorState.Handed() && wfState.Handed())) {
		diffs = append(diffs, fmt.Sprintf("the mirror says %s, the workflow %s", mirrorState, wfState))
	}
	if row.RequiresApproval {
		if d := mirrorDecision(trail); d != v.Decision {
			diffs = append(diffs, fmt.Sprintf("the mirror's decision is %q, the workflow's %q", d, v.Decision))
		}
	}
	if !row.DueAt.Truncate(time.Microsecond).Equal(v.DueAt.Truncate(time.Microsecond)) || row.DeliveryKey != v.DeliveryKey {
		diffs = append(diffs, fmt.Sprintf("the mirror is due %s under %s, the workflow %s under %s",
			row.DueAt.UTC().Format(time.RFC3339Nano), row.DeliveryKey, v.DueAt.UTC().Format(time.RFC3339Nano), v.DeliveryKey))
	}
	return strings.Join(diffs, "; ")
}

// mirrorDecision is the decision the trail holds last: approved or
// rejected, or none once a repair put the row back to awaiting approval.
func mirrorDecision(trail []Event) string {
	d := ""
	for _, e := range trail {
		switch e.Type {
		case "approved", "rejected":
			d = e.Type
		case "repaired":
			switch {
			case e.Detail["to"] == string(reminder.AwaitingApproval):
				d = ""
			case e.Detail["from"] == string(reminder.AwaitingApproval) && e.Detail["to"] == string(reminder.Scheduled):
				d = "approved"
			}
		}
	}
	return d
}

// landed reports whether the trail shows op's change after it was asked:
// its decision, or a move to the due time it asked for.
func landed(op Op, trail []Event) bool {
	for _, e := range trail {
		if e.At.Before(op.At) {
			continue
		}
		switch op.Kind {
		case "approve":
			if e.Type == "approved" {
				return true
			}
		case "reject":
			if e.Type == "rejected" {
				return true
			}
		case "move_reminder", "move_window":
			if e.Type == "rescheduled" {
				return true
			}
		}
	}
	return false
}

// acknowledged are the outcomes that tell the caller the change holds.
var acknowledged = map[string][]string{
	"decision":   {starter.StatusApproved, starter.StatusAlreadyApproved, starter.StatusRejected, starter.StatusAlreadyRejected},
	"reschedule": {starter.StatusRescheduled, starter.StatusUnchanged},
}

// checkRepairs finds each repair reconcile --verify made (a repaired event
// on the trail) that put a row's state or due time to what its workflow
// held, after a decision or reschedule of it had been acknowledged: the
// acknowledged change undone in the mirror.
func checkRepairs(s Snapshot, add func(rule, id, format string, args ...any)) {
	type ack struct {
		op Op
		o  starter.Outcome
	}
	acks := map[string][]ack{}
	for _, op := range s.Ops {
		what := ""
		switch {
		case slices.Contains(decisionKinds, op.Kind):
			what = "decision"
		case slices.Contains(rescheduleKinds, op.Kind):
			what = "reschedule"
		default:
			continue
		}
		for _, o := range op.Outcomes {
			if slices.Contains(acknowledged[what], o.Status) {
				acks[o.ReminderID] = append(acks[o.ReminderID], ack{op, o})
			}
		}
	}
	for id, trail := range s.Events {
		for _, e := range trail {
			if e.Type != "repaired" {
				continue
			}
			kind, _ := e.Detail["kind"].(string)
			want := ""
			switch kind {
			case "state_differs":
				want = "decision"
			case "due_differs":
				want = "reschedule"
			default:
				continue
			}
			for _, a := range acks[id] {
				if !a.op.Done.Before(e.At) || !slices.Contains(acknowledged[want], a.o.Status) {
					continue
				}
				add(RuleRepairedAcknowledged, id, "%s answered %s at %s; at %s reconcile --verify repaired %s, %v → %v; trail: %s",
					describeOp(a.op), a.o.Status, a.op.Done.Format("15:04:05.000"), e.At.Format("15:04:05.000"), kind,
					e.Detail["from"], e.Detail["to"], movesTrail(trail))
				break
			}
		}
	}
}

// describeOp names an operation for evidence.
func describeOp(op Op) string {
	d := op.Kind + " via " + op.Via
	if op.DueAt != nil {
		d += " to " + op.DueAt.UTC().Format("15:04:05.000")
	}
	return d
}

// answerOf is what op answered for reminder id.
func answerOf(op Op, id string) string {
	for _, o := range op.Outcomes {
		if o.ReminderID == id {
			return o.Status
		}
	}
	if op.Code == 0 {
		return "no answer (" + op.Err + ")"
	}
	return fmt.Sprintf("%d", op.Code)
}

// movesTrail is a reminder's trail with what the details say of moves.
func movesTrail(events []Event) string {
	parts := make([]string, len(events))
	for i, e := range events {
		parts[i] = e.At.Format("15:04:05.000") + " " + e.Type
		var bits []string
		for _, k := range []string{"by", "from", "to", "kind", "reason"} {
			if v, ok := e.Detail[k]; ok && v != "" && v != nil {
				bits = append(bits, fmt.Sprintf("%s=%v", k, v))
			}
		}
		if len(bits) > 0 {
			parts[i] += " (" + strings.Join(bits, " ") + ")"
		}
	}
	return strings.Join(parts, "; ")
}
