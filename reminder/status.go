package reminder

// This file is the status events' vocabulary: what shipnotify tells a
// tracker about its reminders, posted to the tracker's endpoints as signed
// Standard Webhooks and read back by GET /v1/reminders?updated_since=.
// Each status event is one event of the audit trail (events.go) seen from
// the tracker's side: the database writes it with the trail event, in the
// transaction that wrote the trail event (migration 00023), so a state
// change and its status event are committed together or not at all.
// reminder_status_event is the SQL twin, tested against StatusOf.

// StatusType is a status event's type.
type StatusType string

// The status event types.
const (
	// StatusScheduled: the reminder was created, scheduled or awaiting
	// approval (its state says which).
	StatusScheduled StatusType = "scheduled"
	// StatusSent: the provider accepted the reminder.
	StatusSent StatusType = "sent"
	// StatusDelivered: the subscriber got it (the provider's delivered
	// report, or the webhook receiver's 2xx).
	StatusDelivered StatusType = "delivered"
	// StatusUndeliverable: the provider bounced or dropped it.
	StatusUndeliverable StatusType = "undeliverable"
	// StatusFailed: it could not be sent (a permanent refusal, or its
	// retries spent).
	StatusFailed StatusType = "failed"
	// StatusCancelled: a cancel took effect. A reminder not yet sent ends
	// cancelled; one already sent keeps its state, and a second cancelled
	// event says when the cancellation notice went out (NoticeSent).
	StatusCancelled StatusType = "cancelled"
	// StatusExpired: no decision came before its approval ran out.
	StatusExpired StatusType = "expired"
	// StatusSuppressed: it was not sent, or no longer counts, because its
	// address opted out of the tenant's mail (SendGrid's unsubscribe or
	// spam report, or a drop for one).
	StatusSuppressed StatusType = "suppressed"
	// StatusApproved and StatusRejected: the approval decision.
	StatusApproved StatusType = "approved"
	StatusRejected StatusType = "rejected"
	// StatusRescheduled: its due time moved.
	StatusRescheduled StatusType = "rescheduled"
	// StatusEscalated: the escalation contact was told (an approval not
	// decided in time, a failed or undeliverable reminder).
	StatusEscalated StatusType = "escalated"
)

// StatusTypes lists every status event type, the order the documentation
// gives them in.
var StatusTypes = []StatusType{
	StatusScheduled, StatusSent, StatusDelivered, StatusUndeliverable, StatusFailed, StatusCancelled,
	StatusExpired, StatusSuppressed, StatusApproved, StatusRejected, StatusRescheduled, StatusEscalated,
}

// Status is the status event a trail event makes.
type Status struct {
	Type StatusType
	// NoticeSent, on a cancelled event, says a cancellation notice went
	// out to the subscriber (the reminder had been sent).
	NoticeSent bool
}

// Trail event types a status event is made from by name; the other
// moves make the event of the state they reach.
const (
	eventRescheduled      = "rescheduled"
	eventEscalationSent   = "escalation_sent"
	eventCancellationSent = "cancellation_sent"
	eventCancelledLate    = "cancelled_late"
)

// StatusOf is the status event a trail event of eventType with detail
// makes, written while its reminder is in state; false when it makes none
// (a note the tracker has no use for: a claim's fate, a send's record
// after a cancel, a repeated cancel).
//
//   - A move makes the event of what it did: scheduled, approved and
//     rejected by name, the others by the state they reach (sent,
//     delivered, undeliverable, failed, cancelled, expired, suppressed; a provider's
//     report that moved the reminder, and a reconcile --verify repair,
//     too: a repair into scheduled is an approval, the one move there).
//   - rescheduled is rescheduled, and escalation_sent escalated.
//   - A cancel that meets a reminder already handed to its provider is
//     written as cancelled_late (the reminder stays sent): cancelled,
//     with its notice to come; the notice's cancellation_sent is
//     cancelled again, NoticeSent. A cancel that meets a reminder
//     cancelled, expired or failed already makes none.
func StatusOf(eventType string, detail map[string]any, state State) (Status, bool) {
	switch eventType {
	case EventScheduled, string(StatusApproved), string(StatusRejected):
		return Status{Type: StatusType(eventType)}, true
	case eventRescheduled:
		return Status{Type: StatusRescheduled}, true
	case eventEscalationSent:
		return Status{Type: StatusEscalated}, true
	case eventCancellationSent:
		return Status{Type: StatusCancelled, NoticeSent: true}, true
	case eventCancelledLate:
		return Status{Type: StatusCancelled}, state.Handed()
	}
	into, ok := EventInto(eventType, detail)
	switch {
	case !ok:
		return Status{}, false
	case into == Scheduled:
		return Status{Type: StatusApproved}, true
	case into.Terminal():
		return Status{Type: StatusType(into)}, true
	}
	return Status{}, false
}
