package soak

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
	"github.com/shipnotify/shipnotify/starter"
)

// The checker finds each broken promise from what it reads, and passes
// what kept them: each rule is shown here on a made-up run.
func TestCheckFindsEachBrokenPromise(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	sent := func(id, key string) Row {
		return Row{ID: id, Shipment: "S-" + id, Update: "u1", Subscriber: "s0", Channel: reminder.Email, State: reminder.Sent,
			DueAt: t0, DeliveryKey: key, WorkflowID: "reminder/" + id}
	}
	// windowed is a sent reminder due at 09:00 UTC whose window opens at
	// 10:00 UTC, closes at 08:00 UTC, and goes out at goes.
	windowed := func(id, key string, goes time.Time, p sendwindow.Policy) Row {
		r := sent(id, key)
		r.Window = &reminder.SendWindow{Window: sendwindow.Window{Days: 1<<7 - 1, From: 10 * 60, To: 10*60 + 30}, TimeZone: "UTC", Policy: p}
		if p == sendwindow.Previous {
			r.Window.Window.From, r.Window.Window.To = 7*60, 8*60
		}
		r.GoesOutAt = goes
		return r
	}
	recv := func(key string, after time.Duration) Receipt {
		return Receipt{Key: key, Channel: "email", Received: t0.Add(after)}
	}
	own := func(id, key string) Delivery {
		return Delivery{Key: key, ReminderID: id, Purpose: reminder.PurposeReminder, Status: "sent"}
	}
	expired := func(id string) Row {
		return Row{ID: id, Shipment: "S-" + id, Update: "u1", Subscriber: "s0", Channel: reminder.Email, State: reminder.Expired,
			DueAt: t0, DeliveryKey: "k-" + id, WorkflowID: "reminder/" + id, RequiresApproval: true}
	}
	acme := expired("acme/st-acme")
	acme.Tenant = TenantAcme
	all := make([]string, len(reminder.StatusTypes))
	for i, st := range reminder.StatusTypes {
		all[i] = string(st)
	}
	out := func(endpoint string, event int, id string, seq int, status string) OutboxRow {
		// A tracker is posted the sealed id; the outbox keeps the trail's number.
		return OutboxRow{Endpoint: endpoint, EventID: fmt.Sprintf("sealed_%d", event), Trail: fmt.Sprintf("evt_%d", event), ReminderID: id, Seq: seq, Type: "scheduled", Status: status}
	}
	post := func(endpoint string, event int, id string, after, answerIn time.Duration, replica string) StatusReceipt {
		r := StatusReceipt{Endpoint: endpoint, EventID: fmt.Sprintf("sealed_%d", event), Type: "reminder.scheduled", ReminderID: id,
			Received: t0.Add(after), AnswerIn: answerIn, Replica: replica}
		if strings.HasPrefix(id, "acme/") {
			r.Tenant = TenantAcme
		}
		return r
	}
	leak := post("ep", 7, "acme/st-acme", 0, 0, "serve 1")
	failed := func(kind, id, status string) Op {
		return Op{Kind: kind, Via: "api", Shipment: "S-" + id, Update: "u1", Code: 503, At: t0, Done: t0.Add(time.Minute),
			Outcomes: []starter.Outcome{{ReminderID: id, Status: status}}}
	}
	s := Snapshot{
		Rows: []Row{
			sent("once", "k-once"),
			sent("window", "k-window"),
			sent("twice", "k-twice"),
			sent("lost", "k-lost"),
			// Made sent by a cancel that met a send whose outcome was
			// unknown, and never received: an ambiguous send is a send. The
			// same without the cancel's unconfirmed sent is a loss.
			sent("unconfirmed-unreceived", "k-uu"),
			sent("lost-after-unconfirmed", "k-lu"),
			sent("early", "k-early"),
			// Windowed: received after its due time, before its window
			// opened; under the previous policy, before its due time at
			// the window's close, as it should; one whose goes-out time is
			// not its window's.
			windowed("window-early", "k-wearly", t0.Add(time.Hour), sendwindow.Next),
			windowed("window-previous", "k-wprev", t0.Add(-time.Hour), sendwindow.Previous),
			func() Row { r := windowed("window-wrong", "k-wwrong", t0, sendwindow.Next); r.GoesOutAt = t0; return r }(),
			{ID: "cancelled-sent", Shipment: "S-c", Subscriber: "s0", State: reminder.Sent, DueAt: t0, DeliveryKey: "k-c", WorkflowID: "reminder/c"},
			// Received, and the row says cancelled: a maybe-sent reminder
			// cancelled as if nothing went.
			{ID: "received-cancelled", Shipment: "S-c", Subscriber: "s1", State: reminder.Cancelled, DueAt: t0, DeliveryKey: "k-rc",
				WorkflowID: "reminder/rc"},
			{ID: "pending", Shipment: "S-p", State: reminder.Scheduled, DueAt: t0, DeliveryKey: "k-p", WorkflowID: "reminder/p"},
			{ID: "cancelled-alone", Shipment: "S-a", State: reminder.Cancelled, DueAt: t0, DeliveryKey: "k-a", WorkflowID: "reminder/a"},
			{ID: "expired", Shipment: "S-e", State: reminder.Expired, DueAt: t0, DeliveryKey: "k-e", WorkflowID: "reminder/e", RequiresApproval: true},
			// Reminders of the status events' cases: each of the default
			// tenant but the last.
			// tenant but the last; each needed approval and ended expired,
			// so no other rule minds them, nor those of the answers' cases.
			expired("st-once"), expired("st-hung"), expired("st-twice"), expired("st-relay"), expired("st-stuck"),
			expired("st-unwritten"), expired("st-order"), expired("st-db"), expired("st-late-db"), expired("st-stale"), acme,
			expired("ans-lost"), expired("ans-landed"), expired("ans-nothing"), expired("ans-unasked"),
			sent("ans-repaired", "k-ans-repaired"),
		},
		Events: map[string][]Event{
			"window": {{Type: "send_unconfirmed", Detail: map[string]any{"delivery_key": "k-window"}}},
			"unconfirmed-unreceived": {{Type: "send_unconfirmed", Detail: map[string]any{"delivery_key": "k-uu"}},
				{Type: "sent", Detail: map[string]any{"delivery_key": "k-uu", "unconfirmed": "its attempt ended without a record or a release"}},
				{Type: "cancelled_late"}},
			"lost-after-unconfirmed": {{Type: "send_unconfirmed", Detail: map[string]any{"delivery_key": "k-lu"}},
				{Type: "sent", Detail: map[string]any{"delivery_key": "k-lu", "provider_message_id": "m-1"}}},
			// Each status event case's trail: one event (two for the
			// order's), whose status event is evt_<ID>.
			"st-once":      {{ID: 1, Type: "scheduled", At: t0}},
			"st-hung":      {{ID: 2, Type: "scheduled", At: t0}},
			"st-twice":     {{ID: 3, Type: "scheduled", At: t0}},
			"st-relay":     {{ID: 4, Type: "scheduled", At: t0}},
			"st-stuck":     {{ID: 5, Type: "scheduled", At: t0}},
			"st-unwritten": {{ID: 6, Type: "scheduled", At: t0}},
			"st-order":     {{ID: 8, Type: "scheduled", At: t0}, {ID: 9, Type: "rescheduled", At: t0}},
			"st-db":        {{ID: 10, Type: "scheduled", At: t0}},
			"st-late-db":   {{ID: 11, Type: "scheduled", At: t0}},
			"st-stale":     {{ID: 12, Type: "scheduled", At: t0}},
			"acme/st-acme": {{ID: 7, Type: "scheduled", At: t0}},
			// An approval answered failed that the mirror took and the
			// workflow did not: the decision lost.
			"ans-lost": {{Type: "approved", At: t0.Add(time.Second), Detail: map[string]any{"by": "soak"}}, {Type: "expired", At: t0.Add(time.Minute)}},
			// A reschedule answered no_answer that landed in both.
			"ans-landed": {{Type: "rescheduled", At: t0.Add(time.Second)}, {Type: "expired", At: t0.Add(time.Minute)}},
			// An approval answered approved, undone by a repair.
			"ans-repaired": {{Type: "approved", At: t0.Add(-time.Minute)},
				{Type: "repaired", At: t0.Add(time.Minute), Detail: map[string]any{"kind": "state_differs", "from": "scheduled", "to": "awaiting_approval"}},
				{Type: "approved", At: t0.Add(2 * time.Minute)}},
		},
		Deliveries: map[string]Delivery{
			"k-once": own("once", "k-once"), "k-window": own("window", "k-window"), "k-twice": own("twice", "k-twice"),
			"k-lost": own("lost", "k-lost"), "k-uu": own("unconfirmed-unreceived", "k-uu"), "k-lu": own("lost-after-unconfirmed", "k-lu"), "k-early": own("early", "k-early"),
			"k-wearly": own("window-early", "k-wearly"), "k-wprev": own("window-previous", "k-wprev"), "k-wwrong": own("window-wrong", "k-wwrong"), "k-c": own("cancelled-sent", "k-c"),
			"k-ans-repaired": own("ans-repaired", "k-ans-repaired"), "k-rc": own("received-cancelled", "k-rc"),
		},
		Receipts: []Receipt{
			recv("k-once", time.Second),
			recv("k-window", time.Second), recv("k-window", 30*time.Second),
			recv("k-twice", time.Second), recv("k-twice", 2*time.Second),
			recv("k-early", -time.Second),
			recv("k-wearly", time.Minute), recv("k-wprev", -time.Hour), recv("k-wwrong", time.Hour),
			recv("k-c", time.Minute),
			recv("k-nobody", time.Second),
			recv("k-ans-repaired", time.Second), recv("k-rc", time.Second),
		},
		Endpoints: []Endpoint{{Name: "ep", Events: all}, {Name: "ep-acme", Tenant: TenantAcme, Events: all}},
		Outbox: []OutboxRow{
			out("ep", 1, "st-once", 1, "delivered"), out("ep", 2, "st-hung", 1, "delivered"), out("ep", 3, "st-twice", 1, "delivered"),
			out("ep", 4, "st-relay", 1, "delivered"), out("ep", 5, "st-stuck", 1, "pending"),
			out("ep", 8, "st-order", 1, "delivered"), out("ep", 9, "st-order", 2, "delivered"),
			out("ep", 10, "st-db", 1, "delivered"), out("ep", 11, "st-late-db", 1, "delivered"), out("ep", 12, "st-stale", 1, "delivered"),
			out("ep-acme", 7, "acme/st-acme", 1, "delivered"),
		},
		StatusReceipts: []StatusReceipt{
			post("ep", 1, "st-once", 0, 2*time.Second, "serve 0"),
			// Not answered in time, then posted again: the window.
			post("ep", 2, "st-hung", 0, sink.NeverAnswered, "serve 0"), post("ep", 2, "st-hung", 20*time.Second, 3*time.Second, "serve 1"),
			// Answered in 3 s, posted again with nothing in between (the
			// stall was over).
			post("ep", 3, "st-twice", time.Minute, 3*time.Second, "serve 0"), post("ep", 3, "st-twice", 2*time.Minute, 3*time.Second, "serve 1"),
			// Serve 0 frozen with a batch whose lease lapsed, serve 1
			// posting it, serve 0 posting it again as it came back (its
			// stall's end noted a moment after): the window.
			post("ep", 12, "st-stale", 600*time.Second, 0, "serve 1"), post("ep", 12, "st-stale", 600*time.Second+200*time.Millisecond, 0, "serve 0"),
			// Its replica frozen between the two posts: the window.
			post("ep", 4, "st-relay", 0, 3*time.Second, "serve 1"), post("ep", 4, "st-relay", 50*time.Second, 3*time.Second, "serve 0"),
			// PostgreSQL frozen while the answer was to be recorded: the
			// window; frozen only once the lease had run out: none.
			post("ep", 10, "st-db", 200*time.Second, 2*time.Second, "serve 0"), post("ep", 10, "st-db", 300*time.Second, 0, "serve 0"),
			post("ep", 11, "st-late-db", 400*time.Second, 2*time.Second, "serve 1"), post("ep", 11, "st-late-db", 520*time.Second, 0, "serve 0"),
			// The second event came before the first.
			post("ep", 8, "st-order", 10*time.Second, 0, "serve 0"), post("ep", 9, "st-order", 5*time.Second, 0, "serve 0"),
			// The acme event, posted to its own endpoint and to another
			// tenant's.
			post("ep-acme", 7, "acme/st-acme", 0, 0, "serve 0"), leak,
		},
		Faults: []Fault{
			{Kind: FaultStallServe, Target: "serve 1", At: t0.Add(10 * time.Second), Until: t0.Add(40 * time.Second)},
			{Kind: FaultStallPG, Target: TargetPG, At: t0.Add(220 * time.Second), Until: t0.Add(230 * time.Second)},
			{Kind: FaultStopPG, Target: TargetPG, At: t0.Add(480 * time.Second), Until: t0.Add(490 * time.Second)},
			{Kind: FaultStallServe, Target: "serve 0", At: t0.Add(550 * time.Second), Until: t0.Add(600*time.Second + 203*time.Millisecond)},
		},
		WorkflowViews: map[string]WorkflowView{
			"ans-lost":    {State: reminder.Expired, DueAt: t0, DeliveryKey: "k-ans-lost"},
			"ans-landed":  {State: reminder.Expired, DueAt: t0, DeliveryKey: "k-ans-landed"},
			"ans-nothing": {State: reminder.Expired, DueAt: t0, DeliveryKey: "k-ans-nothing"},
		},
		Workflows:   map[string]string{"reminder/p": "running"},
		Divergences: []string{`{"kind":"state_differs"}`},
		Shipments:   map[string]bool{"S-bad": true},
		Subjects:    map[string]string{"S-changed": "A changed subject", "S-first": "A changed subject"},
		Ops: []Op{
			{Kind: "cancel", Shipment: "S-c", At: t0.Add(-time.Minute),
				Outcomes: []starter.Outcome{{ReminderID: "cancelled-sent", Status: starter.StatusCancelled}}},
			{Kind: "bad", Shipment: "S-bad", Code: 2},
			{Kind: "changed", Via: "api", Shipment: "S-changed", Code: 409},
			{Kind: "changed", Via: "cli", Shipment: "S-changed", Code: 1, Err: "update S-changed/u1 was already scheduled with different content"},
			// A changed document that met no stored update (its first
			// schedule wrote nothing) is its first write, and a later
			// refused one wrote nothing.
			{Kind: "changed", Via: "api", Shipment: "S-first", Code: 201},
			{Kind: "changed", Via: "cli", Shipment: "S-first", Code: 1, Err: "connection refused"},
			{Kind: "changed", Via: "api", Shipment: "S-first", Code: 409},
			failed("approve", "ans-lost", starter.StatusFailed),
			failed("move_reminder", "ans-landed", starter.StatusNoAnswer),
			failed("approve", "ans-nothing", starter.StatusNoAnswer),
			failed("reject", "ans-unasked", starter.StatusNoAnswer),
			{Kind: "approve", Via: "cli", Shipment: "S-ans-repaired", At: t0.Add(-time.Minute), Done: t0.Add(-time.Minute),
				Outcomes: []starter.Outcome{{ReminderID: "ans-repaired", Status: starter.StatusApproved}}},
		},
	}
	res := Check(s)
	delivered, violations := res.Delivered, res.Violations

	rules := map[string][]string{}
	for _, v := range violations {
		rules[v.Rule] = append(rules[v.Rule], v.Reminder)
	}
	require.Equal(t, []string{"twice"}, rules[RuleTooMany])
	require.Equal(t, []string{"lost", "lost-after-unconfirmed"}, rules[RuleNotReceived])
	require.Equal(t, []string{"early", "window-early"}, rules[RuleEarly])
	require.Equal(t, []string{"window-wrong"}, rules[RuleSendWindow])
	require.Equal(t, []string{"cancelled-sent"}, rules[RuleCancelledSent])
	require.Equal(t, []string{"pending"}, rules[RuleNotFinal])
	require.Equal(t, []string{"pending"}, rules[RuleRunning])
	require.Equal(t, []string{"cancelled-alone"}, rules[RuleShouldHaveGo])
	require.Len(t, rules[RuleUnknownKey], 1)
	require.Len(t, rules[RuleVerify], 1)
	require.Len(t, rules[RuleRefusedWrote], 2, "the malformed update's rows and the changed subject")
	require.NotContains(t, rules, RuleApprovedLost, "an unapproved reminder may expire")
	require.Equal(t, []string{"received-cancelled"}, rules[RuleReceivedUnsent])

	byID := map[string]Delivered{}
	for _, d := range delivered {
		byID[d.Reminder] = d
	}
	require.Equal(t, RuleOnce, byID["once"].Rule)
	require.Equal(t, 2, byID["window"].Times)
	require.Contains(t, byID["window"].Rule, RuleWindow, "twice, and the checker says by which rule")
	require.Equal(t, RuleUnconfirmedUnreceived, byID["unconfirmed-unreceived"].Rule)
	require.NotContains(t, rules, "once")

	// Status events: each reaches each endpoint of its tenant once, or
	// again inside a named window, and is recorded delivered.
	require.Equal(t, []string{"st-unwritten"}, rules[RuleStatusNotWritten])
	require.Equal(t, []string{"st-stuck"}, rules[RuleStatusNotRecorded])
	require.Equal(t, []string{"st-stuck"}, rules[RuleStatusNotReached])
	require.Equal(t, []string{"st-twice", "st-late-db"}, rules[RuleStatusTwice])
	require.Equal(t, []string{"acme/st-acme"}, rules[RuleStatusLeak])
	require.Equal(t, []string{"acme/st-acme"}, rules[RuleStatusUnknown], "the leaked post has no row for that endpoint")
	require.Equal(t, []string{"st-order"}, rules[RuleStatusOrder])
	windows := map[string][]string{}
	for _, r := range res.Repeats {
		windows[r.ReminderID] = r.Windows
	}
	require.Equal(t, map[string][]string{"st-hung": {WindowUnanswered}, "st-relay": {WindowRelay}, "st-db": {WindowDatabase}, "st-stale": {WindowRelay}}, windows)

	// Answers of failure: the lost decision is found, what moved nothing
	// or landed in both is not; a workflow that cannot be asked is said.
	require.Equal(t, []string{"ans-lost"}, rules[RuleFailedDisagree])
	require.Equal(t, []string{"ans-unasked"}, rules[RuleWorkflowNotAnswerable])
	came := map[string]string{}
	for _, a := range res.Answered {
		came[a.Reminder] = a.Came
	}
	require.Equal(t, map[string]string{"ans-lost": CameDisagree, "ans-landed": CameLanded, "ans-nothing": CameNothing}, came)
	require.Equal(t, []string{"ans-repaired"}, rules[RuleRepairedAcknowledged])

	sum := Summarise(7, time.Minute, s, res)
	require.Len(t, sum.Duplicates, 1)
	require.Len(t, sum.Unreceived, 1)
	require.Contains(t, sum.Text(), "never received: 1")
	require.Contains(t, sum.Text(), "seed 7")
	require.Contains(t, sum.Text(), RuleWindow)
	require.Contains(t, sum.Text(), WindowUnanswered)
	require.Equal(t, EndpointTally{Events: 10, Posts: 16, Delivered: 9, Repeated: 4}, sum.Endpoints["ep"])
}
