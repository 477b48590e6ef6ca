package soak

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/letters"
	"github.com/shipnotify/shipnotify/reminder"
)

// The checker holds digests to their rules: each sealed member received
// once inside its digest's message (twice only with an unknown outcome on
// its trail), never before its boundary, whose goes-out time is its
// window's and digest's; one provider message id per digest; a member
// cancelled before the seal left out, one cancelled after it told. Each
// rule is shown broken here on a made-up run, beside members that kept
// them.
func TestCheckHoldsDigestsToTheirRules(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) // a minute's boundary
	const inbox, hooks = "digest.default@customer.example", "http://127.0.0.1:1/in/digest-default"
	// member is a reminder due half a minute before t0 with a one-minute
	// digest, sealed under digest (none: ""), sent under provider id msg.
	msgs := map[string]string{}
	member := func(id, digest, msg string) Row {
		msgs[id] = msg
		return Row{ID: id, Shipment: "S-" + id, Update: "u1", Subscriber: "s0", Channel: reminder.Email, State: reminder.Sent,
			DueAt: t0.Add(-30 * time.Second), GoesOutAt: t0, Digest: time.Minute, DeliveryKey: "k-" + id, WorkflowID: "reminder/" + id,
			DigestKey: digest, Address: inbox}
	}
	hook := func(r Row) Row {
		r.Channel, r.Address = reminder.Webhook, hooks
		return r
	}
	rows := []Row{
		member("ok-a", "digest_ok", "m-ok"), member("ok-b", "digest_ok", "m-ok"),
		member("missing", "digest_missing", "m-missing"), member("listed", "digest_missing", "m-missing"),
		member("early-a", "digest_early", "m-early"), member("early-b", "digest_early", "m-early"),
		member("ids-a", "digest_ids", "m-ids-a"), member("ids-b", "digest_ids", "m-ids-b"),
		member("window", "digest_twice", "m-twice"), member("too-many", "digest_twice", "m-twice"),
		hook(member("hook-a", "digest_hook", "m-hook")), hook(member("hook-b", "digest_hook", "m-hook")),
		member("told", "digest_cancel", "m-cancel"), member("untold", "digest_cancel", "m-cancel"),
		// Asked for a digest and met no one: alone, under its own key.
		member("alone", "", "m-alone"),
		// Went out alone, and a digest lists it too.
		hook(member("stranger", "", "m-stranger")),
		// Its goes-out time ignores its digest.
		func() Row { r := member("wrong", "", "m-wrong"); r.GoesOutAt = r.DueAt; return r }(),
	}
	withdrawn := hook(member("withdrawn", "", ""))
	withdrawn.State = reminder.Cancelled
	rows = append(rows, withdrawn)
	deliveries := map[string]Delivery{}
	for _, r := range rows {
		deliveries[r.DeliveryKey] = Delivery{Key: r.DeliveryKey, ReminderID: r.ID, Purpose: reminder.PurposeReminder, Status: "sent",
			DigestKey: r.DigestKey, ProviderMessageID: msgs[r.ID]}
	}
	deliveries["n-told"] = Delivery{Key: "n-told", ReminderID: "told", Purpose: reminder.PurposeCancellation, Status: "sent"}
	// digest is a message under key, at t0 plus after, listing ids (a
	// webhook's with each one's own key, or the one given).
	digest := func(key string, after time.Duration, ids ...string) Receipt {
		r := Receipt{Key: key, Channel: "email", Received: t0.Add(after), To: inbox}
		for _, id := range ids {
			l := Listed{ReminderID: id, Shipment: "S-" + id}
			if key == "digest_hook" {
				r.Channel, r.To, l.DeliveryKey = "webhook", hooks, "k-"+id
			}
			r.Listed = append(r.Listed, l)
		}
		return r
	}
	oldKey := digest("digest_hook", time.Second, "hook-a", "hook-b", "withdrawn", "stranger")
	oldKey.Listed[0].DeliveryKey = "k-hook-a-before-its-move"
	s := Snapshot{
		Rows:       rows,
		Deliveries: deliveries,
		Events: map[string][]Event{
			"window": {{Type: "send_unconfirmed", Detail: map[string]any{"delivery_key": "k-window"}}},
			"told":   {{Type: "sent"}, {Type: "cancelled_late", Detail: map[string]any{"after": "sent"}}},
			"untold": {{Type: "sent"}, {Type: "cancelled_late", Detail: map[string]any{"after": "sent"}}},
		},
		Receipts: []Receipt{
			digest("digest_ok", time.Second, "ok-a", "ok-b"),
			digest("digest_missing", time.Second, "listed"),
			digest("digest_early", -time.Second, "early-a", "early-b"),
			digest("digest_ids", time.Second, "ids-a", "ids-b"),
			digest("digest_twice", time.Second, "window", "too-many"), digest("digest_twice", 20*time.Second, "window", "too-many"),
			oldKey,
			digest("digest_cancel", time.Second, "told", "untold"),
			{Key: "n-told", Channel: "email", Received: t0.Add(time.Minute)},
			{Key: "k-alone", Channel: "email", Received: t0.Add(time.Second)},
			{Key: "k-stranger", Channel: "webhook", Received: t0.Add(time.Second)},
			{Key: "k-wrong", Channel: "email", Received: t0.Add(time.Second)},
			digest("digest_nobody", time.Second, "ok-a"),
		},
		Ops: []Op{{Kind: "cancel", Shipment: "S-withdrawn"}},
	}
	res := Check(s)
	rules := map[string][]string{}
	for _, v := range res.Violations {
		rules[v.Rule] = append(rules[v.Rule], v.Reminder)
	}
	require.Equal(t, []string{"missing"}, rules[RuleDigestListing])
	require.Equal(t, []string{"missing"}, rules[RuleNotReceived])
	require.Equal(t, []string{"early-a", "early-b"}, rules[RuleEarly])
	require.Equal(t, []string{""}, rules[RuleDigestMessageID])
	require.Equal(t, []string{"too-many"}, rules[RuleTooMany])
	require.Equal(t, []string{"hook-a"}, rules[RuleOldKey])
	require.Equal(t, []string{"withdrawn"}, rules[RuleDigestWithdrawn])
	require.NotContains(t, rules, RuleReceivedUnsent, "a withdrawn member's is the digest's own rule")
	require.Equal(t, []string{"stranger"}, rules[RuleDigestStranger])
	require.Equal(t, []string{"untold"}, rules[RuleDigestNoNotice])
	require.Equal(t, []string{"wrong"}, rules[RuleSendWindow])
	require.Len(t, rules[RuleUnknownKey], 1)

	byID := map[string]Delivered{}
	for _, d := range res.Delivered {
		byID[d.Reminder] = d
	}
	require.Equal(t, RuleDigestOnce, byID["ok-a"].Rule)
	require.Equal(t, RuleDigestOnce, byID["hook-b"].Rule)
	require.Equal(t, RuleOnce, byID["alone"].Rule)
	require.Equal(t, 2, byID["window"].Times)
	require.Contains(t, byID["window"].Rule, RuleWindow, "twice inside its digest, with an unknown outcome on its trail")

	require.Equal(t, DigestTally{Asked: len(rows), Members: 14, Digests: 7, Alone: 3,
		Messages: map[string]int{"email": 7, "webhook": 1}}, res.Digests)
	sum := Summarise(1, time.Minute, s, res)
	require.Contains(t, sum.Text(), "digests: 7 sealed, of 14 members")
	require.Equal(t, 9, sum.Messages["email digest"]+sum.Messages["webhook digest"], "the unknown digest key too")
}

// The checker reads which reminders a digest lists from the letter the
// product writes and the webhook body it sends, as the sinks take them.
func TestDigestMessagesSayWhichRemindersTheyCarry(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	l, err := letters.Digest("", []letters.Shipment{
		{Subject: "Delivery window opens soon", Text: "Dock 1.", ShipmentID: "SOAK-1-0001", UpdateID: "u1", ReminderID: "SOAK-1-0001/u1/s0", DueAt: due},
		{Subject: "Delivery window opens soon", Text: "Dock 2.", ShipmentID: "SOAK-1-0002", UpdateID: "u1", ReminderID: "acme/SOAK-1-0002/u1/s1",
			DueAt: due, WindowStart: due.Add(time.Hour)},
	}, letters.Audience{})
	require.NoError(t, err)
	require.Equal(t, []Listed{{ReminderID: "SOAK-1-0001/u1/s0", Shipment: "SOAK-1-0001"}, {ReminderID: "acme/SOAK-1-0002/u1/s1", Shipment: "SOAK-1-0002"}},
		listedInLetter(l.Text))

	body, err := json.Marshal(activities.WebhookDigestEvent{Type: activities.EventDigest, Timestamp: due, Data: activities.DigestData{
		DeliveryKey: "digest_x", Reminders: []activities.WebhookData{
			{DeliveryKey: "k-1", ReminderID: "SOAK-1-0001/u1/s0", ShipmentID: "SOAK-1-0001"},
			{DeliveryKey: "k-2", ReminderID: "SOAK-1-0002/u1/s0", ShipmentID: "SOAK-1-0002"},
		}}})
	require.NoError(t, err)
	require.Equal(t, []Listed{{ReminderID: "SOAK-1-0001/u1/s0", Shipment: "SOAK-1-0001", DeliveryKey: "k-1"},
		{ReminderID: "SOAK-1-0002/u1/s0", Shipment: "SOAK-1-0002", DeliveryKey: "k-2"}}, listedInBody(body))
}
