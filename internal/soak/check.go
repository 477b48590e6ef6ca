package soak

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// What the checker reads, once the system is quiet: the mirror, the
// engine, the sinks' journals and the operations' answers.

// Row is a reminder's mirror row.
type Row struct {
	ID, Shipment, Update, Subscriber string
	Channel                          reminder.Channel
	State                            reminder.State
	DueAt                            time.Time
	DeliveryKey                      string
	WorkflowID                       string
	RequiresApproval                 bool
}

// Event is one of a reminder's audit events.
type Event struct {
	Type   string
	At     time.Time
	Detail map[string]any
}

// Delivery is a deliveries row: one delivery key.
type Delivery struct {
	Key, ReminderID string
	Purpose         reminder.Purpose
	Status          string
	MaybeSent       bool
}

// Receipt is a message a sink took: under its delivery key, when.
type Receipt struct {
	Key      string
	Channel  string
	Received time.Time
}

// Snapshot is everything the checker reads.
type Snapshot struct {
	Rows       []Row
	Events     map[string][]Event
	Deliveries map[string]Delivery
	Receipts   []Receipt
	// BadSignatures counts webhook requests whose signature failed.
	BadSignatures int
	// Workflows is each reminder workflow's status (running, completed…).
	Workflows map[string]string
	// Divergences are what `reconcile --verify --dry-run` printed.
	Divergences []string
	// Subjects are the stored updates' subjects, by shipment.
	Subjects map[string]string
	// Shipments are the shipments with at least one stored reminder.
	Shipments map[string]bool
	Ops       []Op
}

// Violation is a broken promise, with its evidence.
type Violation struct {
	Rule     string `json:"rule"`
	Reminder string `json:"reminder,omitempty"`
	Evidence string `json:"evidence"`
}

// Delivered is how one reminder's own delivery came out, and by which rule
// the checker took it.
type Delivered struct {
	Reminder string           `json:"reminder"`
	Channel  reminder.Channel `json:"channel"`
	Times    int              `json:"times"`
	Rule     string           `json:"rule"`
}

// Rules the checker applies, by name.
const (
	RuleOnce          = "sent or delivered: received once under its final key"
	RuleWindow        = "received twice, inside the documented window: a send whose outcome was unknown, sent again under the same key"
	RuleNotReceived   = "the mirror says sent, and no provider got it"
	RuleTooMany       = "received more often than its unknown outcomes allow"
	RuleCancelledSent = "a cancel or reject answered cancelled, and the reminder was received"
	RuleEarly         = "received before its due time"
	RuleUnknownKey    = "received under a key the mirror does not hold"
	RuleOldKey        = "received under a key that is not its final one"
	RuleShouldHaveGo  = "should have gone out and did not"
	RuleNotFinal      = "a row is not final"
	RuleRunning       = "a workflow is still running"
	RuleVerify        = "reconcile --verify finds a divergence"
	RuleRefusedWrote  = "a refused command wrote something"
	RuleSignature     = "a webhook signature did not verify"
	RuleApprovedLost  = "answered approved, and ended unsent without a cancel"
)

// Check applies every rule to s and returns how each reminder's delivery
// came out and each violation.
func Check(s Snapshot) ([]Delivered, []Violation) {
	var out []Violation
	add := func(rule, id, format string, args ...any) {
		out = append(out, Violation{Rule: rule, Reminder: id, Evidence: fmt.Sprintf(format, args...)})
	}
	own := map[string][]Receipt{} // a reminder's own receipts, by reminder
	byKey := map[string][]Receipt{}
	for _, r := range s.Receipts {
		d, ok := s.Deliveries[r.Key]
		if !ok {
			add(RuleUnknownKey, "", "%s key %s at %s", r.Channel, r.Key, r.Received.Format(time.RFC3339Nano))
			continue
		}
		if d.Purpose == reminder.PurposeReminder {
			own[d.ReminderID] = append(own[d.ReminderID], r)
			byKey[r.Key] = append(byKey[r.Key], r)
		}
	}
	targeted, answered, approved := opsByReminder(s)
	var delivered []Delivered
	for _, row := range s.Rows {
		recs := own[row.ID]
		for _, r := range recs {
			if r.Key != row.DeliveryKey {
				add(RuleOldKey, row.ID, "key %s received at %s; its final key is %s", r.Key, r.Received.Format(time.RFC3339Nano), row.DeliveryKey)
			}
		}
		for _, r := range byKey[row.DeliveryKey] {
			if r.Received.Before(row.DueAt) {
				add(RuleEarly, row.ID, "received at %s, due at %s", r.Received.Format(time.RFC3339Nano), row.DueAt.Format(time.RFC3339Nano))
			}
		}
		if answer, ok := answered[row.ID]; ok && len(recs) > 0 {
			add(RuleCancelledSent, row.ID, "%s answered %q at %s; received %d time(s), first at %s",
				answer.kind, answer.status, answer.at.Format(time.RFC3339Nano), len(recs), recs[0].Received.Format(time.RFC3339Nano))
		}
		if st := s.Workflows[row.WorkflowID]; st == "running" {
			add(RuleRunning, row.ID, "workflow %s is running; the row is %s", row.WorkflowID, row.State)
		}
		n := len(byKey[row.DeliveryKey])
		switch {
		case row.State.Pending():
			add(RuleNotFinal, row.ID, "the row is %s (due %s)", row.State, row.DueAt.Format(time.RFC3339Nano))
		case row.State.Handed():
			unknowns := unconfirmed(s.Events[row.ID], row.DeliveryKey)
			switch {
			case n == 0:
				add(RuleNotReceived, row.ID, "the row is %s under key %s", row.State, row.DeliveryKey)
			case n == 1:
				delivered = append(delivered, Delivered{Reminder: row.ID, Channel: row.Channel, Times: 1, Rule: RuleOnce})
			case n <= 1+unknowns:
				delivered = append(delivered, Delivered{Reminder: row.ID, Channel: row.Channel, Times: n,
					Rule: fmt.Sprintf("%s (%d unknown outcome(s) on its trail)", RuleWindow, unknowns)})
			default:
				add(RuleTooMany, row.ID, "%s received %d times under %s (at %s); %d unknown outcome(s) on its trail: %s",
					row.Channel, n, row.DeliveryKey, receivedAt(byKey[row.DeliveryKey]), unknowns, trail(s.Events[row.ID]))
			}
		case row.State == reminder.Cancelled:
			if !targeted[row.ID] {
				add(RuleShouldHaveGo, row.ID, "cancelled, and no cancel or reject was asked of it")
			}
		case row.State == reminder.Expired:
			if !row.RequiresApproval {
				add(RuleShouldHaveGo, row.ID, "expired, and it needed no approval")
			}
			if approved[row.ID] && !targeted[row.ID] {
				add(RuleApprovedLost, row.ID, "an approval answered approved; the row expired")
			}
		default: // failed: nothing here fails for good
			add(RuleShouldHaveGo, row.ID, "the row is %s: %s", row.State, lastReason(s.Events[row.ID]))
		}
	}
	for _, d := range s.Divergences {
		add(RuleVerify, "", "%s", d)
	}
	if s.BadSignatures > 0 {
		add(RuleSignature, "", "%d webhook request(s) failed verification", s.BadSignatures)
	}
	// A changed resubmission is refused when the update is stored; one
	// that met an update not yet written (its first schedule failed) is
	// its first write, and one that failed may have written. Only a
	// subject changed while every changed resubmission was refused breaks
	// "a refused command writes nothing".
	refusedChanges := map[string][]Op{}
	mayHaveChanged := map[string]bool{}
	for _, op := range s.Ops {
		switch {
		case op.Kind == "bad" && s.Shipments[op.Shipment]:
			add(RuleRefusedWrote, "", "a malformed update (%s, answered %d) left reminders for %s", op.Via, op.Code, op.Shipment)
		case op.Kind == "changed" && refusedChange(op):
			refusedChanges[op.Shipment] = append(refusedChanges[op.Shipment], op)
		case op.Kind == "changed":
			mayHaveChanged[op.Shipment] = true
		}
	}
	for shipment, ops := range refusedChanges {
		if got, ok := s.Subjects[shipment]; ok && got != originalSubject && !mayHaveChanged[shipment] {
			add(RuleRefusedWrote, "", "%d changed resubmission(s) of %s, each refused (first %s, answered %d), and its subject is %q",
				len(ops), shipment, ops[0].Via, ops[0].Code, got)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return delivered, out
}

// refusedChange reports whether a changed resubmission was refused as
// one: the API's 409, or the CLI's refusal naming the changed content.
func refusedChange(op Op) bool {
	if op.Via == "api" {
		return op.Code == 409
	}
	return op.Code != 0 && strings.Contains(op.Err, "different content")
}

// receivedAt lists when each receipt came.
func receivedAt(rs []Receipt) string {
	at := make([]string, len(rs))
	for i, r := range rs {
		at[i] = r.Received.Format("15:04:05.000")
	}
	return strings.Join(at, ", ")
}

// trail is a reminder's events, in order, for a violation's evidence.
func trail(events []Event) string {
	parts := make([]string, len(events))
	for i, e := range events {
		parts[i] = e.At.Format("15:04:05.000") + " " + e.Type
		if r, ok := e.Detail["reason"]; ok {
			parts[i] += fmt.Sprintf(" (%v)", r)
		}
	}
	return strings.Join(parts, "; ")
}

// originalSubject is the subject every new update has; only a changed
// resubmission carries another, and it is refused.
const originalSubject = "Delivery window opens soon"

// answer is an operation's answer for one reminder.
type answer struct {
	kind, status string
	at           time.Time
}

// opsByReminder reads the operations' answers: which reminders a cancel or
// reject was asked of (whatever it answered), which a cancel or reject
// answered "cancelled" for (nothing sent, and nothing will be), and which
// an approval answered "approved" for.
func opsByReminder(s Snapshot) (targeted map[string]bool, cancelled map[string]answer, approved map[string]bool) {
	targeted, cancelled, approved = map[string]bool{}, map[string]answer{}, map[string]bool{}
	for _, op := range s.Ops {
		switch op.Kind {
		case "cancel", "reject":
			for _, row := range s.Rows {
				if row.Shipment == op.Shipment && (op.Kind == "cancel" || op.Subscriber == "" || op.Subscriber == row.Subscriber) {
					targeted[row.ID] = true
				}
			}
			for _, o := range op.Outcomes {
				if o.Status == starter.StatusCancelled || o.Status == starter.StatusRejected {
					if _, seen := cancelled[o.ReminderID]; !seen {
						cancelled[o.ReminderID] = answer{kind: op.Kind, status: o.Status, at: op.At}
					}
				}
			}
		case "approve":
			for _, o := range op.Outcomes {
				if o.Status == starter.StatusApproved {
					approved[o.ReminderID] = true
				}
			}
		}
	}
	return targeted, cancelled, approved
}

// unconfirmed counts the unknown outcomes of key on a reminder's trail.
func unconfirmed(events []Event, key string) int {
	n := 0
	for _, e := range events {
		if e.Type == "send_unconfirmed" && e.Detail["delivery_key"] == key {
			n++
		}
	}
	return n
}

func lastReason(events []Event) string {
	for i := len(events) - 1; i >= 0; i-- {
		if r, ok := events[i].Detail["reason"]; ok {
			return fmt.Sprint(r)
		}
	}
	return "no reason on its trail"
}

// Summary is what a soak run reports.
type Summary struct {
	Seed     uint64         `json:"seed"`
	Duration time.Duration  `json:"duration_ns"`
	Ops      map[string]int `json:"operations_by_kind"`
	Faults   map[string]int `json:"faults_by_kind"`
	States   map[string]int `json:"reminders_by_state"`
	// Receipts counts every message the sinks took, notices included;
	// Messages splits them by channel and purpose.
	Receipts   int            `json:"receipts"`
	Messages   map[string]int `json:"messages_by_purpose"`
	Delivered  int            `json:"reminders_delivered"`
	Duplicates []Delivered    `json:"duplicates"`
	Violations []Violation    `json:"violations"`
}

// Summarise gathers a run's figures.
func Summarise(seed uint64, took time.Duration, s Snapshot, faults []Fault, delivered []Delivered, violations []Violation) Summary {
	sum := Summary{Seed: seed, Duration: took, Ops: map[string]int{}, Faults: map[string]int{}, States: map[string]int{},
		Receipts: len(s.Receipts), Messages: map[string]int{}, Delivered: len(delivered), Violations: violations}
	for _, r := range s.Receipts {
		purpose := "unknown key"
		if d, ok := s.Deliveries[r.Key]; ok {
			purpose = string(d.Purpose)
		}
		sum.Messages[r.Channel+" "+purpose]++
	}
	for _, op := range s.Ops {
		sum.Ops[op.Kind+" via "+op.Via]++
	}
	for _, f := range faults {
		sum.Faults[f.Kind]++
	}
	for _, r := range s.Rows {
		sum.States[string(r.State)]++
	}
	for _, d := range delivered {
		if d.Times > 1 {
			sum.Duplicates = append(sum.Duplicates, d)
		}
	}
	return sum
}

// Text is the summary for a person.
func (s Summary) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: seed %d, %s of workload and faults\n", s.Seed, s.Duration.Round(time.Second))
	section := func(title string, m map[string]int) {
		keys := make([]string, 0, len(m))
		total := 0
		for k, v := range m {
			keys = append(keys, k)
			total += v
		}
		slices.Sort(keys)
		fmt.Fprintf(&b, "%s (%d):\n", title, total)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %-32s %d\n", k, m[k])
		}
	}
	section("operations", s.Ops)
	section("faults", s.Faults)
	section("reminders by final state", s.States)
	section("messages the sinks took, by channel and purpose", s.Messages)
	fmt.Fprintf(&b, "messages the sinks took: %d; reminders delivered: %d; delivered twice: %d\n", s.Receipts, s.Delivered, len(s.Duplicates))
	for _, d := range s.Duplicates {
		fmt.Fprintf(&b, "  %s (%s): %d times, by the rule: %s\n", d.Reminder, d.Channel, d.Times, d.Rule)
	}
	fmt.Fprintf(&b, "violations: %d\n", len(s.Violations))
	for _, v := range s.Violations {
		fmt.Fprintf(&b, "  [%s] %s %s\n", v.Rule, v.Reminder, v.Evidence)
	}
	return b.String()
}
