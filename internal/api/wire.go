package api

import (
	"time"

	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// The API's own wire format. The store's types (mirror.Row, mirror.Event,
// mirror.Suppression, starter's results and outcomes) are mapped into these
// by the functions below, so a column added to the mirror reaches no client
// until it is added here, with its mapping, and to openapi.json.
// TestTheResponseTypesAreTheDocuments holds these types and the document's
// schemas together, field for field, both ways; the contract test holds
// every answer the suite gets to the document.

// Reminder is a reminder as the API (and `shipnotify list --json`) shows
// it: the mirror's row, without its recipient's address or secret.
type Reminder struct {
	ID string `json:"reminder_id"`
	// Tenant owns the reminder; "" (left out) is the default tenant.
	Tenant         string           `json:"tenant,omitempty"`
	ShipmentID     string           `json:"shipment_id"`
	UpdateID       string           `json:"update_id"`
	SubscriberID   string           `json:"subscriber_id"`
	Channel        reminder.Channel `json:"channel"`
	DueAt          time.Time        `json:"due_at"`
	RequestedDueAt time.Time        `json:"requested_due_at"`
	// GoesOutAt is when it goes out: DueAt, or the opening of SendWindow
	// that DueAt takes. "What do we owe on a day" counts by it.
	GoesOutAt time.Time `json:"goes_out_at"`
	// SendWindow is the window it was scheduled with (absent: none).
	SendWindow *SendWindow `json:"send_window,omitempty"`
	// Digest is the interval its address's reminders are gathered over
	// into one message, as the update document spells one ("30m", "2h";
	// absent: it goes out alone).
	Digest string `json:"digest,omitempty"`
	// DigestKey is the delivery key of the one message the reminder went
	// out in with its digest's other members: set when the digest's send
	// sealed it, absent before (and for a member left out, cancelled in
	// time). GET /v1/reminders?digest_key= lists those members.
	DigestKey         string                   `json:"digest_key,omitempty"`
	State             reminder.State           `json:"state"`
	DeliveryKey       string                   `json:"delivery_key"`
	WorkflowID        string                   `json:"workflow_id"`
	WorkflowStartedAt *time.Time               `json:"workflow_started_at,omitempty"`
	SentAt            *time.Time               `json:"sent_at,omitempty"`
	CancelRequestedAt *time.Time               `json:"cancel_requested_at,omitempty"`
	CreatedAt         time.Time                `json:"created_at"`
	UpdatedAt         time.Time                `json:"updated_at"`
	ProviderOutcome   reminder.ProviderOutcome `json:"provider_outcome,omitempty"`
	ProviderOutcomeAt *time.Time               `json:"provider_outcome_at,omitempty"`
	DeliveredAt       *time.Time               `json:"delivered_at,omitempty"`
	// LastChange is set in a page of the change feed only.
	LastChange *LastChange `json:"last_change,omitempty"`
}

// SendWindow is a reminder's send window as it was resolved when the
// reminder was scheduled: the subscriber's, the update's or the tenant's
// default, in the zone that applied, with the dates it skips (its own and
// the tenant's holidays then) and the policy for a due time outside it.
// It is spelt as the update document spells a window, so a caller can
// read back what it sent.
type SendWindow struct {
	// Days are the open days, "mon,tue,wed,thu,fri".
	Days string `json:"days"`
	// Hours are the local opening and closing times, both included,
	// "08:00-18:00".
	Hours     string   `json:"hours"`
	TimeZone  string   `json:"time_zone"`
	SkipDates []string `json:"skip_dates,omitempty"`
	// Policy is next or previous.
	Policy string `json:"policy"`
}

// LastChange is a reminder's latest status event; ID is the one its post
// carries.
type LastChange struct {
	ID       string              `json:"id"`
	Type     reminder.StatusType `json:"type"`
	At       time.Time           `json:"at"`
	Sequence int                 `json:"sequence"`
}

// Event is one entry of a reminder's audit trail. ID is sealed
// (opaque.Keys.EventID): the trail's own numbers count every tenant's
// events. A status event's id is the id of the entry it comes from.
type Event struct {
	ID     string         `json:"id"`
	Type   string         `json:"type"`
	At     time.Time      `json:"at"`
	Detail map[string]any `json:"detail"`
}

// Suppression is an address that opted out of one tenant's mail, shown
// by its SHA-256 only.
type Suppression struct {
	Tenant        string     `json:"tenant"`
	AddressSHA256 string     `json:"address_sha256"`
	Reason        string     `json:"reason"`
	ReminderID    string     `json:"reminder_id"`
	EventID       string     `json:"event_id,omitempty"`
	SuppressedAt  time.Time  `json:"suppressed_at"`
	LiftedAt      *time.Time `json:"lifted_at,omitempty"`
	LiftedBy      string     `json:"lifted_by,omitempty"`
}

// Result is what POST /v1/updates did for one subscriber.
type Result struct {
	ReminderID   string    `json:"reminder_id"`
	WorkflowID   string    `json:"workflow_id"`
	SubscriberID string    `json:"subscriber_id"`
	DeliveryKey  string    `json:"delivery_key"`
	DueAt        time.Time `json:"due_at"`
	// GoesOutAt is when it goes out: DueAt, or its send window's opening.
	GoesOutAt time.Time      `json:"goes_out_at"`
	Status    starter.Status `json:"status"`
	State     reminder.State `json:"state"`
}

// Outcome is what an operation did to one reminder.
type Outcome struct {
	ReminderID string         `json:"reminder_id"`
	Status     string         `json:"status"`
	State      reminder.State `json:"state,omitempty"`
	DueAt      *time.Time     `json:"due_at,omitempty"`
	// GoesOutAt is when a reminder with a send window goes out at DueAt
	// (absent without a window: it goes out at DueAt).
	GoesOutAt   *time.Time `json:"goes_out_at,omitempty"`
	DeliveryKey string     `json:"delivery_key,omitempty"`
	Error       string     `json:"error,omitempty"`
	DecidedBy   string     `json:"decided_by,omitempty"`
	DecidedAt   *time.Time `json:"decided_at,omitempty"`
}

// ReminderOf is a mirror row as the API shows it, its last change's id
// sealed with ids.
func ReminderOf(r mirror.Row, ids *opaque.Keys) Reminder {
	out := Reminder{
		ID: r.ID, Tenant: r.Tenant, ShipmentID: r.ShipmentID, UpdateID: r.UpdateID, SubscriberID: r.SubscriberID,
		Channel: r.Channel, DueAt: r.DueAt, RequestedDueAt: r.RequestedDueAt, GoesOutAt: goesOutAt(r.GoesOutAt, r.DueAt),
		SendWindow: SendWindowOf(r.Window), Digest: reminder.DigestEvery(r.Digest), DigestKey: r.DigestKey, State: r.State,
		DeliveryKey: r.DeliveryKey, WorkflowID: r.WorkflowID, WorkflowStartedAt: r.WorkflowStartedAt,
		SentAt: r.SentAt, CancelRequestedAt: r.CancelRequestedAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ProviderOutcome: r.ProviderOutcome, ProviderOutcomeAt: r.ProviderOutcomeAt, DeliveredAt: r.DeliveredAt,
	}
	if c := r.LastChange; c != nil {
		out.LastChange = &LastChange{ID: ids.EventID(c.Event), Type: c.Type, At: c.At, Sequence: c.Sequence}
	}
	return out
}

// SendWindowOf is a resolved send window as the API shows it (nil for
// none).
func SendWindowOf(w *reminder.SendWindow) *SendWindow {
	if w == nil {
		return nil
	}
	out := &SendWindow{Days: w.Window.Days.String(), Hours: w.Window.From.String() + "-" + w.Window.To.String(),
		TimeZone: w.TimeZone, Policy: string(w.Policy)}
	for _, d := range w.Window.Skip {
		out.SkipDates = append(out.SkipDates, d.String())
	}
	return out
}

// RemindersOf maps rows (nil for nil).
func RemindersOf(rows []mirror.Row, ids *opaque.Keys) []Reminder {
	return mapAll(rows, func(r mirror.Row) Reminder { return ReminderOf(r, ids) })
}

// EventsOf maps a trail (nil for nil).
func EventsOf(events []mirror.Event, ids *opaque.Keys) []Event {
	return mapAll(events, func(e mirror.Event) Event { return EventOf(e, ids) })
}

// EventOf is an audit trail entry as the API shows it, its id sealed
// with ids.
func EventOf(e mirror.Event, ids *opaque.Keys) Event {
	return Event{ID: ids.EventID(e.ID), Type: e.Type, At: e.At, Detail: e.Detail}
}

// SuppressionOf is a suppression as the API shows it; tenant is its
// name as callers know it (reminder.TenantName).
func SuppressionOf(s mirror.Suppression, tenant string) Suppression {
	return Suppression{
		Tenant: tenant, AddressSHA256: s.AddressSHA256, Reason: s.Reason, ReminderID: s.ReminderID,
		EventID: s.EventID, SuppressedAt: s.SuppressedAt, LiftedAt: s.LiftedAt, LiftedBy: s.LiftedBy,
	}
}

// ResultOf is what scheduling did for one subscriber, as the API shows it.
func ResultOf(r starter.Result) Result {
	return Result{
		ReminderID: r.ReminderID, WorkflowID: r.WorkflowID, SubscriberID: r.SubscriberID,
		DeliveryKey: r.DeliveryKey, DueAt: r.DueAt, GoesOutAt: goesOutAt(r.GoesOutAt, r.DueAt), Status: r.Status, State: r.State,
	}
}

// OutcomeOf is what an operation did to one reminder, as the API shows it.
func OutcomeOf(o starter.Outcome) Outcome {
	return Outcome{
		ReminderID: o.ReminderID, Status: o.Status, State: o.State, DueAt: o.DueAt, GoesOutAt: goesOutAtPtr(o.GoesOutAt, o.DueAt),
		DeliveryKey: o.DeliveryKey, Error: o.Error, DecidedBy: o.DecidedBy, DecidedAt: o.DecidedAt,
	}
}

// goesOutAt is when a reminder due at due goes out, given at: at, or due
// for a value made without it (the mirror and the starter always set it;
// the wire never says a reminder goes out in year 1). reminder.GoesOutAt
// spells it with due's offset already, so a fresh answer and a repeated
// one read alike.
func goesOutAt(at, due time.Time) time.Time {
	if at.IsZero() {
		return due
	}
	return at
}

// goesOutAtPtr is goesOutAt for an optional time, nil for nil.
func goesOutAtPtr(at, due *time.Time) *time.Time {
	if at == nil || due == nil {
		return at
	}
	return ptr(goesOutAt(*at, *due))
}

// mapAll maps a slice, nil for nil (as the store gave it: the callers
// say where an empty list is [] on the wire).
func mapAll[S, T any](in []S, f func(S) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
