package reminder

import (
	"slices"
	"strings"
)

// This file is the reminder's state machine: its states, which are final,
// the moves between them, and the rules that decide a move from what the
// provider reported. The mirror's SQL takes its state lists from here as
// parameters, and its CHECK constraint and reminder_state_after_send are
// tested against these definitions.

// State is where a reminder is in its life.
type State string

const (
	Scheduled        State = "scheduled"
	AwaitingApproval State = "awaiting_approval"
	Sent             State = "sent"
	// Delivered: the mail provider reported it delivered, or the webhook
	// receiver answered 2xx.
	Delivered State = "delivered"
	// Undeliverable: the mail provider bounced or dropped it after
	// accepting it.
	Undeliverable State = "undeliverable"
	Failed        State = "failed"
	Cancelled     State = "cancelled"
	Expired       State = "expired"
	// Suppressed: the subscriber's address unsubscribed or reported spam
	// to this tracker's mail (a suppression), so the reminder was never
	// sent, or the provider dropped it for that reason. Not a delivery
	// failure: nothing escalates.
	Suppressed State = "suppressed"
)

// States is every state, in the order a reminder's life meets them: the
// mirror's CHECK constraint, the API's State enum and the CLI's --state
// hold the same list.
var States = []State{Scheduled, AwaitingApproval, Sent, Delivered, Undeliverable, Failed, Cancelled, Expired, Suppressed}

// PendingStates are those a reminder waits in before its send: the ones
// a reschedule, a decision, an expiry or a cancel may leave.
var PendingStates = []State{Scheduled, AwaitingApproval}

// FinalStates are those the reminder's workflow is done in (see Terminal).
var FinalStates = statesWhere(State.Terminal)

// HandedStates are those of a reminder handed to its provider.
var HandedStates = statesWhere(State.Handed)

// moves are the state machine's edges. A pending reminder may take any
// other state its workflow, an operator or a repair gives it (approved:
// awaiting_approval → scheduled; never back). A sent reminder moves only
// on its provider's report, and an undeliverable one stays: a bounce is
// the last word, even after a delivered report. A sent reminder the
// provider dropped because its address opted out is suppressed, not
// undeliverable.
var moves = map[State][]State{
	Scheduled:        {Sent, Delivered, Undeliverable, Failed, Cancelled, Expired, Suppressed},
	AwaitingApproval: {Scheduled, Sent, Delivered, Undeliverable, Failed, Cancelled, Expired, Suppressed},
	Sent:             {Delivered, Undeliverable, Suppressed},
	Delivered:        {Undeliverable},
}

// CanBecome reports whether the state machine lets a reminder in s move to to.
func (s State) CanBecome(to State) bool { return slices.Contains(moves[s], to) }

// Into is the states a move to to may leave, in States' order: the mirror
// changes a row to to only from one of them.
func Into(to State) []State {
	return statesWhere(func(s State) bool { return s.CanBecome(to) })
}

// Known reports whether s is one of States.
func (s State) Known() bool { return slices.Contains(States, s) }

// Terminal reports whether the reminder's workflow is done with it: no
// transition of the workflow leaves the state. (A sent reminder still takes
// the provider's outcome: delivered or undeliverable.)
func (s State) Terminal() bool { return !s.Pending() && s.Known() }

// Pending reports whether the reminder has yet to be sent or finished.
func (s State) Pending() bool { return slices.Contains(PendingStates, s) }

// Handed reports whether the reminder was handed to its provider: sent,
// and whatever the provider reported since.
func (s State) Handed() bool { return s == Sent || s == Delivered || s == Undeliverable }

// Stands reports whether the reminder still stands: pending, or handed
// to its provider. One that another path finished before its send
// (cancelled, expired, failed, suppressed) owes nothing more.
func (s State) Stands() bool { return s.Pending() || s.Handed() }

// RefusesSend is the rule that a finished reminder is never sent: its own
// delivery under key is refused when the reminder was cancelled, expired,
// failed or suppressed, or when its row holds another key: handed under it
// (an earlier due time), or, pending, moved to it (a window move that
// reached the mirror and not the workflow, whose key names the old due
// time: sent then, it would go at the wrong time). A handed reminder's own
// key may be claimed again: a retry that finds it sent is answered from its
// record.
func (s State) RefusesSend(sameKey bool) bool {
	return (s.Terminal() && !s.Handed()) || !sameKey
}

// UnsentFinalStates are the final states a reminder reaches without a send.
var UnsentFinalStates = statesWhere(func(s State) bool { return s.RefusesSend(true) })

// StateAfterSend is the state a reminder takes when its send is recorded,
// from what its provider has reported of it so far: undeliverable once a
// bounce or drop was reported, delivered once a delivery was (a webhook's
// 2xx is its delivery), sent otherwise, awaiting its outcome.
// reminder_state_after_send (migration 00007) is its SQL twin.
func StateAfterSend(ch Channel, delivered, undeliverable bool) State {
	switch {
	case undeliverable:
		return Undeliverable
	case ch == Webhook || delivered:
		return Delivered
	}
	return Sent
}

// ProviderOutcome is what the mail provider reported about a delivery after it
// accepted it: SendGrid's Event Webhook event types that shipnotify keeps.
type ProviderOutcome string

const (
	OutcomeProcessed   ProviderOutcome = "processed"
	OutcomeDeferred    ProviderOutcome = "deferred"
	OutcomeDelivered   ProviderOutcome = "delivered"
	OutcomeBounce      ProviderOutcome = "bounce"
	OutcomeDropped     ProviderOutcome = "dropped"
	OutcomeSpamReport  ProviderOutcome = "spamreport"
	OutcomeUnsubscribe ProviderOutcome = "unsubscribe"
)

// ProviderOutcomes is every outcome kept, in the order a delivery meets them; the
// mirror's CHECK constraint holds the same list.
var ProviderOutcomes = []ProviderOutcome{
	OutcomeProcessed, OutcomeDeferred, OutcomeDelivered, OutcomeBounce,
	OutcomeDropped, OutcomeSpamReport, OutcomeUnsubscribe,
}

// Rank orders outcomes reported at the same second: later in a delivery's
// life ranks higher. Unknown outcomes rank 0.
func (o ProviderOutcome) Rank() int {
	for i, k := range ProviderOutcomes {
		if k == o {
			return i + 1
		}
	}
	return 0
}

// Hard reports whether the outcome means the subscriber will not get it.
func (o ProviderOutcome) Hard() bool { return o == OutcomeBounce || o == OutcomeDropped }

// optOutDrops are SendGrid's drop reasons that mean the address opted out:
// it is on the account's unsubscribe or spam report list.
var optOutDrops = []string{"unsubscribed address", "spam reporting address"}

// OptsOut reports whether the outcome, with its reason code, says the
// address does not want the tracker's mail: an unsubscribe, a spam
// report, or a drop because of one. Future reminders to the address are
// suppressed (Suppressed), and a drop for it is no delivery failure.
func (o ProviderOutcome) OptsOut(reason string) bool {
	switch o {
	case OutcomeUnsubscribe, OutcomeSpamReport:
		return true
	case OutcomeDropped:
		return slices.Contains(optOutDrops, strings.ToLower(strings.TrimSpace(reason)))
	}
	return false
}

// Escalation reasons a provider's outcome gives.
const (
	// ReasonUndeliverable: the provider bounced or dropped the reminder;
	// the escalation is due at once.
	ReasonUndeliverable = "undeliverable"
	// ReasonDeliveryDeferred: the provider deferred it and had not
	// delivered it a while later; the escalation is due after that while
	// and settled if the delivery comes first.
	ReasonDeliveryDeferred = "delivery_deferred"
)

// Reported is what the provider has reported so far of a reminder's own
// delivery: a delivery, a bounce or drop.
type Reported struct {
	Delivered, Undeliverable bool
}

// Final reports whether the provider has given its last word.
func (r Reported) Final() bool { return r.Delivered || r.Undeliverable }

// OutcomeEffect is what one new outcome does to a reminder's own delivery.
type OutcomeEffect struct {
	// Delivered and Undeliverable: the outcome is the first of its kind,
	// and the reminder records it.
	Delivered, Undeliverable bool
	// Suppressed: a drop because the address opted out; the reminder is
	// suppressed, not undeliverable, and nothing escalates.
	Suppressed bool
	// Suppresses: the address opted out; its future reminders of this
	// tracker are suppressed.
	Suppresses bool
	// Settles: an escalation owed for a deferral is owed no more.
	Settles bool
	// Escalation is the reason of an escalation newly owed ("" none).
	Escalation string
}

// Effect is the post-send rule: where a bounce becomes an escalation. A
// first delivery settles a pending deferral. A drop because the address
// opted out (reason, OptsOut) suppresses the reminder before its last
// word, settles any deferral and owes nothing. Any other first bounce or
// drop makes the reminder undeliverable, settles any deferral and owes an
// undeliverable escalation. A deferral before the last word owes a
// deferred one. A reminder that no longer stands (another path finished it
// before its send) records the outcome and owes nothing. An unsubscribe,
// a spam report or an opt-out drop also suppresses the address.
func (o ProviderOutcome) Effect(reason string, so Reported, stands bool) OutcomeEffect {
	e := OutcomeEffect{Suppresses: o.OptsOut(reason)}
	switch {
	case o == OutcomeDropped && e.Suppresses:
		e.Suppressed, e.Settles = !so.Final() && stands, !so.Final()
	case o == OutcomeDelivered && !so.Delivered:
		e.Delivered, e.Settles = true, !so.Final()
	case o.Hard() && !so.Undeliverable:
		e.Undeliverable, e.Settles = true, true
		if stands {
			e.Escalation = ReasonUndeliverable
		}
	case o == OutcomeDeferred && !so.Final() && stands:
		e.Escalation = ReasonDeliveryDeferred
	}
	return e
}

// statesWhere is the states that satisfy keep, in States' order.
func statesWhere(keep func(State) bool) []State {
	var out []State
	for _, s := range States {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}
