package soak

import (
	"encoding/json"
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
	// Tenant owns it ("" the default tenant).
	Tenant           string
	Channel          reminder.Channel
	State            reminder.State
	DueAt            time.Time
	DeliveryKey      string
	WorkflowID       string
	RequiresApproval bool
	// GoesOutAt is when it goes out: DueAt, or the opening of its send
	// window (Window, nil: none) that DueAt takes, rounded up to its
	// digest interval's boundary (Digest, 0: none).
	GoesOutAt time.Time
	Window    *reminder.SendWindow
	Digest    time.Duration
	// DigestKey is the digest it was sealed into ("" none): the key of
	// the one message that carries it.
	DigestKey string
	// Address is its email address or webhook URL: a digest's members
	// share it.
	Address string
}

// Event is one of a reminder's audit events.
type Event struct {
	// ID is the trail event's id: its status event is evt_<ID>.
	ID     int64
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
	// DigestKey is the digest the key was sealed into ("" none), and
	// ProviderMessageID what the provider answered for its send.
	DigestKey, ProviderMessageID string
}

// Receipt is a message a sink took: under its delivery key, when. A
// digest's message (its key begins reminder.DigestKeyPrefix) also says to
// whom it went and which reminders it lists.
type Receipt struct {
	Key      string
	Channel  string
	Received time.Time
	To       string
	Listed   []Listed
}

// Listed is one reminder a digest's message lists: its reference and
// shipment (an email's text), and its own delivery key (a webhook's body;
// "" in an email).
type Listed struct {
	ReminderID, Shipment, DeliveryKey string
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
	// Endpoints, Outbox and StatusReceipts are the status events: the
	// endpoints registered, the outbox's rows, the trackers' receipts.
	Endpoints      []Endpoint
	Outbox         []OutboxRow
	StatusReceipts []StatusReceipt
	// Faults are the run's faults: the windows of a repeat are read
	// from them.
	Faults []Fault
	// WorkflowViews are what the workflows of the reminders a decision
	// or reschedule answered failure for say they hold, by reminder.
	WorkflowViews map[string]WorkflowView
	// Verifies are the operator's reconcile --verify runs.
	Verifies []VerifyRun
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
	RuleOnce        = "sent or delivered: received once under its final key"
	RuleWindow      = "received twice, inside the documented window: a send whose outcome was unknown, sent again under the same key"
	RuleNotReceived = "the mirror says sent, and no provider got it"
	// RuleUnconfirmedUnreceived is no violation: the row was made sent by a
	// cancel that met a send whose outcome was unknown (its sent event says
	// unconfirmed), and the provider never got it.
	RuleUnconfirmedUnreceived = "sent on an unknown outcome a cancel met, and no provider got it: an ambiguous send is a send"
	RuleTooMany               = "received more often than its unknown outcomes allow"
	RuleCancelledSent         = "a cancel or reject answered cancelled, and the reminder was received"
	RuleEarly                 = "received before it goes out (its due time, or its send window's opening)"
	RuleSendWindow            = "goes out at a time its send window does not give for its due time"
	RuleUnknownKey            = "received under a key the mirror does not hold"
	RuleOldKey                = "received under a key that is not its final one"
	RuleShouldHaveGo          = "should have gone out and did not"
	RuleNotFinal              = "a row is not final"
	RuleRunning               = "a workflow is still running"
	RuleVerify                = "reconcile --verify finds a divergence"
	RuleRefusedWrote          = "a refused command wrote something"
	RuleSignature             = "a webhook signature did not verify"
	RuleApprovedLost          = "answered approved, and ended unsent without a cancel"
	RuleReceivedUnsent        = "received, and the row ends in a state that says it was never sent"
)

// Result is what the checker found: how each reminder's delivery came
// out, the digests' figures, the status events repeated inside a window,
// what came of each answer of failure, and each violation.
type Result struct {
	Delivered  []Delivered
	Digests    DigestTally
	Repeats    []Repeat
	Answered   []AnsweredFailure
	Violations []Violation
}

// Check applies every rule to s.
func Check(s Snapshot) Result {
	var out []Violation
	add := func(rule, id, format string, args ...any) {
		out = append(out, Violation{Rule: rule, Reminder: id, Evidence: fmt.Sprintf(format, args...)})
	}
	for i := range s.Rows {
		// A row read with no goes-out time goes out when it is due.
		if s.Rows[i].GoesOutAt.IsZero() {
			s.Rows[i].GoesOutAt = s.Rows[i].DueAt
		}
	}
	own := map[string][]Receipt{} // a reminder's own receipts, by reminder
	byKey := map[string][]Receipt{}
	notices := map[string]bool{} // reminders whose cancellation notice was received
	var digests []Receipt
	for _, r := range s.Receipts {
		if strings.HasPrefix(r.Key, reminder.DigestKeyPrefix) {
			digests = append(digests, r)
			continue
		}
		d, ok := s.Deliveries[r.Key]
		if !ok {
			add(RuleUnknownKey, "", "%s key %s at %s", r.Channel, r.Key, r.Received.Format(time.RFC3339Nano))
			continue
		}
		switch d.Purpose {
		case reminder.PurposeReminder:
			own[d.ReminderID] = append(own[d.ReminderID], r)
			byKey[r.Key] = append(byKey[r.Key], r)
		case reminder.PurposeCancellation:
			notices[d.ReminderID] = true
		}
	}
	dg := indexDigests(s, digests, add)
	targeted, answered, approved := opsByReminder(s)
	var delivered []Delivered
	for _, row := range s.Rows {
		// A digest member's messages are its own key's and the digest
		// messages that list it.
		recs := append(slices.Clip(own[row.ID]), dg.carried[row.ID]...)
		for _, r := range own[row.ID] {
			if r.Key != row.DeliveryKey {
				add(RuleOldKey, row.ID, "key %s received at %s; its final key is %s", r.Key, r.Received.Format(time.RFC3339Nano), row.DeliveryKey)
			}
		}
		if want := reminder.GoesOutAt(row.DueAt, row.Window, row.Digest); !row.GoesOutAt.Equal(want) {
			add(RuleSendWindow, row.ID, "due %s in %s, digest every %s: the mirror says it goes out at %s, the window and digest at %s",
				row.DueAt.Format(time.RFC3339Nano), row.Window, row.Digest, row.GoesOutAt.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
		for _, r := range append(slices.Clip(byKey[row.DeliveryKey]), dg.carried[row.ID]...) {
			if r.Received.Before(row.GoesOutAt) {
				add(RuleEarly, row.ID, "received at %s, due at %s, goes out at %s", r.Received.Format(time.RFC3339Nano),
					row.DueAt.Format(time.RFC3339Nano), row.GoesOutAt.Format(time.RFC3339Nano))
			}
		}
		if answer, ok := answered[row.ID]; ok && len(recs) > 0 {
			add(RuleCancelledSent, row.ID, "%s answered %q at %s; received %d time(s), first at %s",
				answer.kind, answer.status, answer.at.Format(time.RFC3339Nano), len(recs), recs[0].Received.Format(time.RFC3339Nano))
		}
		unsent := recs
		if row.State == reminder.Cancelled {
			unsent = own[row.ID] // a digest's: RuleDigestWithdrawn
		}
		if len(unsent) > 0 && (row.State == reminder.Cancelled || row.State == reminder.Expired || row.State == reminder.Failed) {
			// A send whose outcome was unknown is a send: the row, the
			// answers and the status events must say it went.
			add(RuleReceivedUnsent, row.ID, "the row is %s; %s received it %d time(s) (at %s); trail: %s",
				row.State, unsent[0].Channel, len(unsent), receivedAt(unsent), trail(s.Events[row.ID]))
		}
		if st := s.Workflows[row.WorkflowID]; st == "running" {
			add(RuleRunning, row.ID, "workflow %s is running; the row is %s", row.WorkflowID, row.State)
		}
		unknowns := unconfirmed(s.Events[row.ID], row.DeliveryKey)
		n := dg.times(row, len(byKey[row.DeliveryKey]), unknowns)
		once := RuleOnce
		if len(dg.carried[row.ID]) > 0 {
			once = RuleDigestOnce
		}
		switch {
		case row.State.Pending():
			add(RuleNotFinal, row.ID, "the row is %s (due %s)", row.State, row.DueAt.Format(time.RFC3339Nano))
		case row.State.Handed():
			switch {
			case n == 0 && sentUnconfirmed(s.Events[row.ID], row.DeliveryKey):
				// A cancel met a send whose outcome was unknown: an
				// ambiguous send is a send, even one no provider got.
				delivered = append(delivered, Delivered{Reminder: row.ID, Channel: row.Channel, Times: 0, Rule: RuleUnconfirmedUnreceived})
			case n == 0:
				add(RuleNotReceived, row.ID, "the row is %s under key %s%s", row.State, row.DeliveryKey, inDigest(row))
			case n == 1:
				delivered = append(delivered, Delivered{Reminder: row.ID, Channel: row.Channel, Times: 1, Rule: once})
			case n <= 1+unknowns:
				delivered = append(delivered, Delivered{Reminder: row.ID, Channel: row.Channel, Times: n,
					Rule: fmt.Sprintf("%s (%d unknown outcome(s) on its trail)%s", RuleWindow, unknowns, inDigest(row))})
			default:
				add(RuleTooMany, row.ID, "%s received %d times under %s%s (at %s); %d unknown outcome(s) on its trail: %s",
					row.Channel, n, row.DeliveryKey, inDigest(row), receivedAt(recs), unknowns, trail(s.Events[row.ID]))
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
	checkDigests(s, dg, notices, add)
	repeats := checkStatus(s, add)
	failures := checkAnswers(s, add)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return Result{Delivered: delivered, Digests: tallyDigests(s, dg), Repeats: repeats, Answered: failures, Violations: out}
}

// inDigest names the digest a row was sealed into, for evidence.
func inDigest(row Row) string {
	if row.DigestKey == "" {
		return ""
	}
	return " in digest " + row.DigestKey
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

// sentUnconfirmed reports whether the reminder's last sent event for key
// records a send never confirmed: one a cancel found maybe sent.
func sentUnconfirmed(events []Event, key string) bool {
	for i := len(events) - 1; i >= 0; i-- {
		if e := events[i]; e.Type == "sent" && e.Detail["delivery_key"] == key {
			_, ok := e.Detail["unconfirmed"]
			return ok
		}
	}
	return false
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
	// RateCapAt is when the workers restarted with the rate cap on, into
	// the run (0: they did not).
	RateCapAt time.Duration  `json:"rate_cap_at_ns"`
	States    map[string]int `json:"reminders_by_state"`
	// Receipts counts every message the sinks took, notices included;
	// Messages splits them by channel and purpose.
	Receipts   int            `json:"receipts"`
	Messages   map[string]int `json:"messages_by_purpose"`
	Delivered  int            `json:"reminders_delivered"`
	Duplicates []Delivered    `json:"duplicates"`
	// Digests are the digests' figures.
	Digests DigestTally `json:"digests"`
	// Unreceived are the reminders made sent by a cancel that met a send
	// whose outcome was unknown, which no provider got.
	Unreceived []Delivered `json:"unreceived,omitempty"`
	// Endpoints are each status endpoint's figures, Repeats the events
	// that reached one again inside a window.
	Endpoints map[string]EndpointTally `json:"status_events_by_endpoint"`
	Repeats   []Repeat                 `json:"status_events_repeated"`
	// Answered are the decisions and reschedules that answered failure,
	// and what came of each.
	Answered []AnsweredFailure `json:"answered_failure"`
	// VerifyRuns counts the operator's reconcile --verify runs; Repairs
	// their repairs, by kind.
	VerifyRuns int            `json:"verify_runs"`
	Repairs    map[string]int `json:"verify_repairs_by_kind"`
	Violations []Violation    `json:"violations"`
}

// EndpointTally is one status endpoint's figures: the events the outbox
// holds for it, the posts it took, the events recorded delivered, and
// those it took more than once.
type EndpointTally struct {
	Events    int `json:"events"`
	Posts     int `json:"posts"`
	Delivered int `json:"recorded_delivered"`
	Repeated  int `json:"repeated"`
}

// Summarise gathers a run's figures.
func Summarise(seed uint64, took time.Duration, s Snapshot, res Result) Summary {
	sum := Summary{Seed: seed, Duration: took, Ops: map[string]int{}, Faults: map[string]int{}, States: map[string]int{},
		Receipts: len(s.Receipts), Messages: map[string]int{}, Delivered: len(res.Delivered), Violations: res.Violations,
		Endpoints: map[string]EndpointTally{}, Repeats: res.Repeats, Answered: res.Answered, VerifyRuns: len(s.Verifies),
		Repairs: map[string]int{}, Digests: res.Digests}
	for _, r := range s.Receipts {
		purpose := "unknown key"
		if d, ok := s.Deliveries[r.Key]; ok {
			purpose = string(d.Purpose)
		} else if strings.HasPrefix(r.Key, reminder.DigestKeyPrefix) {
			purpose = "digest"
		}
		sum.Messages[r.Channel+" "+purpose]++
	}
	for _, op := range s.Ops {
		sum.Ops[op.Kind+" via "+op.Via]++
	}
	var began time.Time
	if len(s.Ops) > 0 {
		began = s.Ops[0].At
	}
	for _, f := range s.Faults {
		sum.Faults[f.Kind]++
		if f.Kind == FaultRateCap && !began.IsZero() {
			sum.RateCapAt = f.At.Sub(began)
		}
	}
	for _, r := range s.Rows {
		sum.States[string(r.State)]++
	}
	for _, d := range res.Delivered {
		switch {
		case d.Times > 1:
			sum.Duplicates = append(sum.Duplicates, d)
		case d.Rule == RuleUnconfirmedUnreceived:
			sum.Unreceived = append(sum.Unreceived, d)
		}
	}
	for _, e := range s.Endpoints {
		sum.Endpoints[e.Name] = EndpointTally{}
	}
	for _, o := range s.Outbox {
		t := sum.Endpoints[o.Endpoint]
		t.Events++
		if o.Status == "delivered" {
			t.Delivered++
		}
		sum.Endpoints[o.Endpoint] = t
	}
	for _, r := range s.StatusReceipts {
		t := sum.Endpoints[r.Endpoint]
		t.Posts++
		sum.Endpoints[r.Endpoint] = t
	}
	for _, r := range res.Repeats {
		t := sum.Endpoints[r.Endpoint]
		t.Repeated++
		sum.Endpoints[r.Endpoint] = t
	}
	for _, run := range s.Verifies {
		for _, line := range run.Lines {
			var d struct {
				Kind, Repair, Error string
			}
			if json.Unmarshal([]byte(line), &d) == nil && d.Repair != "" && d.Error == "" {
				sum.Repairs[d.Kind]++
			}
		}
	}
	return sum
}

// listed is how many repeats and answers of failure the text lists; the
// JSON keeps them all.
const listed = 15

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
	if s.RateCapAt > 0 {
		fmt.Fprintf(&b, "rate cap: %g sends/s from %s into the run\n", RateCap, s.RateCapAt.Round(time.Second))
	} else {
		b.WriteString("rate cap: never on (the run ended before its deploy)\n")
	}
	section("reminders by final state", s.States)
	section("messages the sinks took, by channel and purpose", s.Messages)
	fmt.Fprintf(&b, "messages the sinks took: %d; reminders delivered: %d; delivered twice: %d\n", s.Receipts, s.Delivered, len(s.Duplicates))
	for _, d := range s.Duplicates {
		fmt.Fprintf(&b, "  %s (%s): %d times, by the rule: %s\n", d.Reminder, d.Channel, d.Times, d.Rule)
	}
	d := s.Digests
	fmt.Fprintf(&b, "digests: %d sealed, of %d members; %d reminders asked for one, %d of them went out alone (no member met them)\n",
		d.Digests, d.Members, d.Asked, d.Alone)
	fmt.Fprintf(&b, "digest messages the sinks took: %d by email, %d by webhook\n", d.Messages["email"], d.Messages["webhook"])
	if len(s.Unreceived) > 0 {
		fmt.Fprintf(&b, "sent on an unknown outcome a cancel met, never received: %d\n", len(s.Unreceived))
		for _, d := range s.Unreceived {
			fmt.Fprintf(&b, "  %s (%s)\n", d.Reminder, d.Channel)
		}
	}
	names := make([]string, 0, len(s.Endpoints))
	for n := range s.Endpoints {
		names = append(names, n)
	}
	slices.Sort(names)
	b.WriteString("status events by endpoint (events, posts taken, recorded delivered, taken more than once):\n")
	for _, n := range names {
		t := s.Endpoints[n]
		fmt.Fprintf(&b, "  %-32s %d, %d, %d, %d\n", n, t.Events, t.Posts, t.Delivered, t.Repeated)
	}
	windows := map[string]int{}
	for _, r := range s.Repeats {
		for _, w := range r.Windows {
			windows[w]++
		}
	}
	section("status events taken again, by window", windows)
	for i, r := range s.Repeats {
		if i == listed {
			fmt.Fprintf(&b, "  … and %d more (the .json has them)\n", len(s.Repeats)-listed)
			break
		}
		fmt.Fprintf(&b, "  %s %s (%s): %d times: %s\n", r.Endpoint, r.EventID, r.ReminderID, r.Times, r.Posts)
	}
	came := map[string]int{}
	for _, a := range s.Answered {
		came[a.Came]++
	}
	section("decisions and reschedules answered failure, by what came of them", came)
	shown := 0
	for _, a := range s.Answered {
		if a.Came == CameNothing {
			continue
		}
		if shown == listed {
			b.WriteString("  … (the .json has them all)\n")
			break
		}
		shown++
		fmt.Fprintf(&b, "  %s: %s answered %s; %s\n", a.Reminder, a.Op, a.Answer, a.Came)
	}
	section(fmt.Sprintf("reconcile --verify repairs in %d runs, by kind", s.VerifyRuns), s.Repairs)
	fmt.Fprintf(&b, "violations: %d\n", len(s.Violations))
	for _, v := range s.Violations {
		fmt.Fprintf(&b, "  [%s] %s %s\n", v.Rule, v.Reminder, v.Evidence)
	}
	return b.String()
}
