package reminder

import (
	"slices"
	"strings"
)

// This file is the audit trail's vocabulary: the event types the mirror
// writes and the move of its reminder's state each one records. The
// database holds the role the product runs as to it (migration 00019): an
// event that records a move is taken only in the transaction that made
// that move, and prune takes a finished reminder only when its trail
// records its finish. reminder_event_into, reminder_event_follows and
// reminder_event_reaches are the SQL twins, tested against these.

// The event types whose move depends on their detail.
const (
	// EventScheduled is a reminder's first event, written with its row:
	// it records the reminder's creation in the state its detail names
	// ("state"; scheduled when absent).
	EventScheduled = "scheduled"
	// EventRepaired is reconcile --verify's correction: a move from its
	// detail's "from" to its "to", or a note when they are the same.
	EventRepaired = "repaired"
	// ProviderEventPrefix starts a provider's report (provider_delivered,
	// provider_bounce, ...): a move into its detail's "state" when it
	// moved the reminder, a note otherwise.
	ProviderEventPrefix = "provider_"
)

// fixedMove is the move an event type always records: into one state,
// from one of from (nil: from any state that may become it).
type fixedMove struct {
	into State
	from []State
}

// fixedMoves are the event types that record a move into a fixed state.
var fixedMoves = map[string]fixedMove{
	"approved":      {into: Scheduled, from: []State{AwaitingApproval}},
	"rejected":      {into: Cancelled, from: []State{AwaitingApproval}},
	"cancelled":     {into: Cancelled},
	"expired":       {into: Expired},
	"failed":        {into: Failed},
	"sent":          {into: Sent},
	"delivered":     {into: Delivered},
	"undeliverable": {into: Undeliverable},
	"suppressed":    {into: Suppressed},
}

// NoteEvents are the event types the mirror writes that record no move:
// what happened beside the state (a reschedule, a claim's fate, a notice,
// a cancel asked for) and the late arrivals of moves (LateEvent).
var NoteEvents = []string{
	"rescheduled", "cancel_requested", "send_unconfirmed", "delivery_failed", "endpoint_disabled",
	"cancellation_sent", "escalation_sent", "escalation_failed", "escalation_skipped",
	"cancelled_late", "sent_late",
}

// MoveEvents are the event types that record a move: a fixed one, or
// one their detail gives (EventScheduled, EventRepaired and a provider's
// report, ProviderEventPrefix and its outcome).
func MoveEvents() []string {
	out := []string{EventScheduled, EventRepaired}
	for t := range fixedMoves {
		out = append(out, t)
	}
	for _, o := range ProviderOutcomes {
		out = append(out, ProviderEventPrefix+string(o))
	}
	slices.Sort(out)
	return out
}

// LateEvent is the type a move's event is written under when the mirror
// did not make the move, because the reminder had left the states it
// leaves (a cancel after the send, a send that went out after a cancel):
// a note, so the trail shows the late arrival without claiming the move.
// A type that records no fixed move is its own.
func LateEvent(eventType string) string {
	if _, ok := fixedMoves[eventType]; ok {
		return eventType + "_late"
	}
	return eventType
}

// EventInto is the state an event says its reminder moved into, and
// whether it records a move at all.
func EventInto(eventType string, detail map[string]any) (State, bool) {
	if m, ok := fixedMoves[eventType]; ok {
		return m.into, true
	}
	switch {
	case eventType == EventScheduled:
		if s, ok := text(detail, "state"); ok {
			return State(s), true
		}
		return Scheduled, true
	case eventType == EventRepaired:
		to, ok := text(detail, "to")
		if from, has := text(detail, "from"); !ok || has && from == to {
			return "", false
		}
		return State(to), true
	case strings.HasPrefix(eventType, ProviderEventPrefix):
		s, ok := text(detail, "state")
		return State(s), ok
	}
	return "", false
}

// EventFollows reports whether an event may be appended after the move
// its reminder made in the same transaction, from from to to (from empty:
// the reminder was created). A note always may. A move's event must name
// that move: its from state, and its into state or one the provider's
// outcome carried further in the same write (sent, then delivered).
func EventFollows(eventType string, detail map[string]any, from, to State) bool {
	into, ok := EventInto(eventType, detail)
	if !ok {
		return true
	}
	switch {
	case eventType == EventScheduled:
		if from != "" {
			return false
		}
	case from == "" || !from.CanBecome(into):
		return false
	case eventType == EventRepaired:
		if f, _ := text(detail, "from"); State(f) != from {
			return false
		}
	default:
		if m, fixed := fixedMoves[eventType]; fixed && m.from != nil && !slices.Contains(m.from, from) {
			return false
		}
	}
	return reaches(into, to)
}

// EventReaches reports whether an event records its reminder's move into
// s, or into a state handed to the provider that s follows from: prune
// takes a finished reminder only when its trail has one.
func EventReaches(eventType string, detail map[string]any, s State) bool {
	into, ok := EventInto(eventType, detail)
	return ok && reaches(into, s)
}

// reaches reports whether a move into into leaves the reminder in s:
// into itself, or a provider's later outcome of a reminder handed to it.
func reaches(into, s State) bool {
	return into == s || into.Handed() && into.CanBecome(s)
}

// text is detail's string under key, if it holds one.
func text(detail map[string]any, key string) (string, bool) {
	s, ok := detail[key].(string)
	return s, ok
}
