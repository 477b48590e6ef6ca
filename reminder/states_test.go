package reminder_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

// The state machine's shape: pending and final states split the states;
// nothing leaves a state a reminder is finished in without a send; the one
// way back to a pending state is an approval; a reminder handed to its
// provider moves only on its report, and never back: to another handed
// state, or suppressed when the provider dropped it for an opt-out.
func TestTheStateMachineHoldsItsShape(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, reminder.States, slices.Concat(reminder.PendingStates, reminder.FinalStates))
	require.False(t, slices.ContainsFunc(reminder.PendingStates, reminder.State.Terminal))
	require.Equal(t, []reminder.State{reminder.Failed, reminder.Cancelled, reminder.Expired, reminder.Suppressed}, reminder.UnsentFinalStates)
	require.Equal(t, []reminder.State{reminder.Sent, reminder.Delivered, reminder.Undeliverable}, reminder.HandedStates)
	for _, from := range reminder.States {
		for _, to := range reminder.States {
			if !from.CanBecome(to) {
				continue
			}
			require.NotEqual(t, from, to, "no move stays")
			require.False(t, slices.Contains(reminder.UnsentFinalStates, from), "%s is the last word, yet moves to %s", from, to)
			require.False(t, from == reminder.Undeliverable, "a bounce is the last word, yet undeliverable moves to %s", to)
			if to.Pending() {
				require.Equal(t, [2]reminder.State{reminder.AwaitingApproval, reminder.Scheduled}, [2]reminder.State{from, to},
					"only an approval goes back to pending")
			}
			if from.Handed() {
				require.True(t, to.Handed() || from == reminder.Sent && to == reminder.Suppressed,
					"%s moves only on its provider's report, not to %s", from, to)
			}
		}
	}
	require.Equal(t, reminder.PendingStates, reminder.Into(reminder.Cancelled), "a cancel takes any pending reminder")
	require.Equal(t, reminder.PendingStates, reminder.Into(reminder.Sent))
	require.Equal(t, []reminder.State{reminder.Scheduled, reminder.AwaitingApproval, reminder.Sent},
		reminder.Into(reminder.Delivered))
	require.Equal(t, []reminder.State{reminder.AwaitingApproval}, reminder.Into(reminder.Scheduled))
	require.Empty(t, reminder.Into(reminder.AwaitingApproval), "a reminder starts awaiting approval, or never does")
	require.Equal(t, []reminder.State{reminder.Scheduled, reminder.AwaitingApproval, reminder.Sent},
		reminder.Into(reminder.Suppressed), "a pending reminder is suppressed at its send, a sent one by an opt-out drop")
	require.Empty(t, reminder.Into(""), "an empty state is a note: nothing moves")
	require.False(t, reminder.State("pending").Terminal(), "an unknown state is not final")
}

// The rule that a finished reminder is never sent, state by state.
func TestAFinishedReminderRefusesItsSend(t *testing.T) {
	t.Parallel()
	want := map[reminder.State][2]bool{ // [same key, another key]
		reminder.Scheduled:        {false, true},
		reminder.AwaitingApproval: {false, true},
		reminder.Sent:             {false, true},
		reminder.Delivered:        {false, true},
		reminder.Undeliverable:    {false, true},
		reminder.Failed:           {true, true},
		reminder.Cancelled:        {true, true},
		reminder.Expired:          {true, true},
		reminder.Suppressed:       {true, true},
	}
	require.Len(t, want, len(reminder.States))
	for s, w := range want {
		require.Equal(t, w, [2]bool{s.RefusesSend(true), s.RefusesSend(false)}, "%s", s)
	}
}

func TestTheStateAfterASendFollowsTheProvidersReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ch                       reminder.Channel
		delivered, undeliverable bool
		want                     reminder.State
	}{
		{reminder.Email, false, false, reminder.Sent},
		{reminder.Email, true, false, reminder.Delivered},
		{reminder.Email, false, true, reminder.Undeliverable},
		{reminder.Email, true, true, reminder.Undeliverable},
		{reminder.Webhook, false, false, reminder.Delivered},
		{reminder.Webhook, true, false, reminder.Delivered},
		{reminder.Webhook, false, true, reminder.Undeliverable},
		{reminder.Webhook, true, true, reminder.Undeliverable},
	} {
		require.Equal(t, tc.want, reminder.StateAfterSend(tc.ch, tc.delivered, tc.undeliverable), "%+v", tc)
	}
}

// Where a bounce becomes an escalation, outcome by outcome.
func TestAnOutcomesEffectOnTheReminder(t *testing.T) {
	t.Parallel()
	none, delivered, bounced := reminder.Reported{}, reminder.Reported{Delivered: true}, reminder.Reported{Undeliverable: true}
	for _, tc := range []struct {
		name   string
		o      reminder.ProviderOutcome
		reason string
		so     reminder.Reported
		stands bool
		want   reminder.OutcomeEffect
	}{
		{"a first delivery settles a deferral", reminder.OutcomeDelivered, "", none, true,
			reminder.OutcomeEffect{Delivered: true, Settles: true}},
		{"a repeated delivery changes nothing", reminder.OutcomeDelivered, "", delivered, true, reminder.OutcomeEffect{}},
		{"a delivery after a bounce is recorded, settles nothing", reminder.OutcomeDelivered, "", bounced, true,
			reminder.OutcomeEffect{Delivered: true}},
		{"a bounce owes an escalation", reminder.OutcomeBounce, "", none, true,
			reminder.OutcomeEffect{Undeliverable: true, Settles: true, Escalation: reminder.ReasonUndeliverable}},
		{"a drop after a delivery owes one too", reminder.OutcomeDropped, "", delivered, true,
			reminder.OutcomeEffect{Undeliverable: true, Settles: true, Escalation: reminder.ReasonUndeliverable}},
		{"a second bounce owes nothing more", reminder.OutcomeBounce, "", bounced, true, reminder.OutcomeEffect{}},
		{"a bounce of a reminder cancelled before its send owes nothing", reminder.OutcomeBounce, "", none, false,
			reminder.OutcomeEffect{Undeliverable: true, Settles: true}},
		{"a deferral owes a later escalation", reminder.OutcomeDeferred, "", none, true,
			reminder.OutcomeEffect{Escalation: reminder.ReasonDeliveryDeferred}},
		{"a deferral after the last word owes nothing", reminder.OutcomeDeferred, "", delivered, true, reminder.OutcomeEffect{}},
		{"a deferral of a finished reminder owes nothing", reminder.OutcomeDeferred, "", none, false, reminder.OutcomeEffect{}},
		{"processed changes nothing", reminder.OutcomeProcessed, "", none, true, reminder.OutcomeEffect{}},
		{"an unsubscribe suppresses the address, and the reminder stays", reminder.OutcomeUnsubscribe, "", delivered, true,
			reminder.OutcomeEffect{Suppresses: true}},
		{"a spam report suppresses the address", reminder.OutcomeSpamReport, "", none, true,
			reminder.OutcomeEffect{Suppresses: true}},
		{"a drop for an unsubscribed address suppresses, owes nothing", reminder.OutcomeDropped, "Unsubscribed Address", none, true,
			reminder.OutcomeEffect{Suppressed: true, Suppresses: true, Settles: true}},
		{"a drop for a spam reporting address suppresses too", reminder.OutcomeDropped, "Spam Reporting Address", none, true,
			reminder.OutcomeEffect{Suppressed: true, Suppresses: true, Settles: true}},
		{"a drop for a bounced address is undeliverable", reminder.OutcomeDropped, "Bounced Address", none, true,
			reminder.OutcomeEffect{Undeliverable: true, Settles: true, Escalation: reminder.ReasonUndeliverable}},
		{"an opt-out drop after the last word only suppresses the address", reminder.OutcomeDropped, "Unsubscribed Address", bounced, true,
			reminder.OutcomeEffect{Suppresses: true}},
		{"an opt-out drop of a finished reminder only suppresses the address", reminder.OutcomeDropped, "Unsubscribed Address", none, false,
			reminder.OutcomeEffect{Suppresses: true, Settles: true}},
	} {
		require.Equal(t, tc.want, tc.o.Effect(tc.reason, tc.so, tc.stands), tc.name)
	}
	for _, s := range reminder.States {
		require.Equal(t, s.Pending() || s.Handed(), s.Stands(), "%s", s)
	}
}
