package soak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
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
	recv := func(key string, after time.Duration) Receipt {
		return Receipt{Key: key, Channel: "email", Received: t0.Add(after)}
	}
	own := func(id, key string) Delivery {
		return Delivery{Key: key, ReminderID: id, Purpose: reminder.PurposeReminder, Status: "sent"}
	}
	s := Snapshot{
		Rows: []Row{
			sent("once", "k-once"),
			sent("window", "k-window"),
			sent("twice", "k-twice"),
			sent("lost", "k-lost"),
			sent("early", "k-early"),
			{ID: "cancelled-sent", Shipment: "S-c", Subscriber: "s0", State: reminder.Sent, DueAt: t0, DeliveryKey: "k-c", WorkflowID: "reminder/c"},
			{ID: "pending", Shipment: "S-p", State: reminder.Scheduled, DueAt: t0, DeliveryKey: "k-p", WorkflowID: "reminder/p"},
			{ID: "cancelled-alone", Shipment: "S-a", State: reminder.Cancelled, DueAt: t0, DeliveryKey: "k-a", WorkflowID: "reminder/a"},
			{ID: "expired", Shipment: "S-e", State: reminder.Expired, DueAt: t0, DeliveryKey: "k-e", WorkflowID: "reminder/e", RequiresApproval: true},
		},
		Events: map[string][]Event{
			"window": {{Type: "send_unconfirmed", Detail: map[string]any{"delivery_key": "k-window"}}},
		},
		Deliveries: map[string]Delivery{
			"k-once": own("once", "k-once"), "k-window": own("window", "k-window"), "k-twice": own("twice", "k-twice"),
			"k-lost": own("lost", "k-lost"), "k-early": own("early", "k-early"), "k-c": own("cancelled-sent", "k-c"),
		},
		Receipts: []Receipt{
			recv("k-once", time.Second),
			recv("k-window", time.Second), recv("k-window", 30*time.Second),
			recv("k-twice", time.Second), recv("k-twice", 2*time.Second),
			recv("k-early", -time.Second),
			recv("k-c", time.Minute),
			recv("k-nobody", time.Second),
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
		},
	}
	delivered, violations := Check(s)

	rules := map[string][]string{}
	for _, v := range violations {
		rules[v.Rule] = append(rules[v.Rule], v.Reminder)
	}
	require.Equal(t, []string{"twice"}, rules[RuleTooMany])
	require.Equal(t, []string{"lost"}, rules[RuleNotReceived])
	require.Equal(t, []string{"early"}, rules[RuleEarly])
	require.Equal(t, []string{"cancelled-sent"}, rules[RuleCancelledSent])
	require.Equal(t, []string{"pending"}, rules[RuleNotFinal])
	require.Equal(t, []string{"pending"}, rules[RuleRunning])
	require.Equal(t, []string{"cancelled-alone"}, rules[RuleShouldHaveGo])
	require.Len(t, rules[RuleUnknownKey], 1)
	require.Len(t, rules[RuleVerify], 1)
	require.Len(t, rules[RuleRefusedWrote], 2, "the malformed update's rows and the changed subject")
	require.NotContains(t, rules, RuleApprovedLost, "an unapproved reminder may expire")

	byID := map[string]Delivered{}
	for _, d := range delivered {
		byID[d.Reminder] = d
	}
	require.Equal(t, RuleOnce, byID["once"].Rule)
	require.Equal(t, 2, byID["window"].Times)
	require.Contains(t, byID["window"].Rule, RuleWindow, "twice, and the checker says by which rule")
	require.NotContains(t, rules, "once")

	sum := Summarise(7, time.Minute, s, []Fault{{Kind: FaultStopPG}}, delivered, violations)
	require.Len(t, sum.Duplicates, 1)
	require.Contains(t, sum.Text(), "seed 7")
	require.Contains(t, sum.Text(), RuleWindow)
}
