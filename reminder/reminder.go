// Package reminder holds shipnotify's domain: the shipment update a tracker
// submits, the reminders it fans out to (one per update and subscriber), their
// identities, states and delivery keys. It has no I/O; the engine (workflows,
// activities), the mirror and the starter all speak in these types.
//
// It is part of shipnotify's Go contract, with starter, workflows and codec
// (docs/architecture.md, "Where the code lives").
package reminder

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Channel is how a subscriber is reached.
type Channel string

const (
	// Email sends through the mail provider (SendGrid).
	Email Channel = "email"
	// Webhook POSTs a signed JSON body to the subscriber's receiver.
	Webhook Channel = "webhook"
)

// Channels is the channels built in: an update's validation, the API's
// channel enums and the mirror's CHECK constraint hold the same list. A
// deployment adds its own through PlanOptions.Channels (and a migration
// that adds them to the CHECK constraint).
var Channels = []Channel{Email, Webhook}

// CheckAddress checks a subscriber's address for a channel beyond
// Channels; its error says what is wrong without repeating the address.
type CheckAddress func(address string) error

// channelsText is the channels for a message: "email" or "webhook".
func channelsText(extra map[Channel]CheckAddress) string {
	all := slices.Concat(Channels, slices.Sorted(maps.Keys(extra)))
	quoted := make([]string, len(all))
	for i, c := range all {
		quoted[i] = strconv.Quote(string(c))
	}
	return OneOf(quoted)
}

// OneOf is a list of choices for a message: "a, b or c".
func OneOf[T ~string](items []T) string {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = string(it)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Purpose is what a delivery is for. Each purpose has its own delivery keys,
// so a reminder, its cancellation notice and its escalations never collide.
type Purpose string

const (
	// PurposeReminder is the reminder itself, to the subscriber.
	PurposeReminder Purpose = "reminder"
	// PurposeCancellation tells a subscriber already reminded that the
	// shipment was cancelled.
	PurposeCancellation Purpose = "cancellation"
	// PurposeEscalation tells the update's escalation contact of trouble.
	PurposeEscalation Purpose = "escalation"
)

// Reminder is the unit of delivery: one shipment update for one subscriber.
// A partially delivered fan-out resumes per reminder without re-notifying the
// subscribers that already got theirs.
type Reminder struct {
	ID string
	// Tenant owns the reminder ("" is the default tenant; tenant.go).
	Tenant       string
	ShipmentID   string
	UpdateID     string
	SubscriberID string
	Channel      Channel
	// Email is set for the email channel.
	Email string
	// WebhookURL and WebhookSecret are set for the webhook channel.
	WebhookURL    string
	WebhookSecret string
	// Address is set for a channel beyond Channels (PlanOptions.Channels):
	// its subscriber's address, as the channel's sender reads it.
	Address string
	// Name is how the subscriber is greeted ("" greets no one by name);
	// TimeZone (IANA) and Locale (BCP 47) are how its email states times
	// and which language it is in ("" for UTC and English).
	Name, TimeZone, Locale string
	DueAt                  time.Time
	// Approval.Required makes the reminder wait for an operator's decision.
	Approval Approval
	// Window is the send window it goes out in (nil: at its due time).
	Window *SendWindow
	// Digest is the interval its address's reminders are gathered over
	// into one message (0: it goes out alone).
	Digest time.Duration
}

// GoesOutAt is when the reminder goes out: its due time, or the opening of
// its send window the due time takes, at its digest's next boundary.
func (r Reminder) GoesOutAt() time.Time {
	return GoesOutAt(r.DueAt, r.Window, r.Digest)
}

// GoesOutAt is when a reminder due at due goes out in window w (nil: at
// due), at the next boundary of its digest interval (0: none). A window
// that cannot say (its zone unknown to this build's zone database) goes
// out at due: a reminder is never held back by a window it cannot read.
func GoesOutAt(due time.Time, w *SendWindow, digest time.Duration) time.Time {
	return DigestAt(windowOpens(due, w), digest)
}

// windowOpens is when a reminder due at due goes out in window w.
func windowOpens(due time.Time, w *SendWindow) time.Time {
	if w == nil {
		return due
	}
	at, err := w.GoesOut(due)
	if err != nil {
		return due
	}
	// In the due time's location, so the two read alike side by side.
	return at.In(due.Location())
}

// InitialState is the state a new reminder starts in.
func (r Reminder) InitialState() State {
	if r.Approval.Required {
		return AwaitingApproval
	}
	return Scheduled
}

// DeliveryKey is the key of the reminder's notification at its current due time.
func (r Reminder) DeliveryKey() string {
	return DeliveryKey(r.ID, r.SubscriberID, r.DueAt)
}

// ID is a reminder's identity. It derives from opaque ids only, never from an
// address, so it can name a workflow and appear in logs and search attributes.
// The parts are restricted to a charset without '/', so the join is
// unambiguous: three parts for the default tenant (as every id had before
// tenancy), four, led by the tenant, for another.
func ID(tenant, shipmentID, updateID, subscriberID string) string {
	return TenantShipment(tenant, shipmentID) + "/" + updateID + "/" + subscriberID
}

// DeliveryKey is the seed article's stable key: the same reminder, subscriber
// and due time always give the same key, so a retried or duplicated delivery
// is recognised and becomes a no-op. Moving the due time gives a new key.
func DeliveryKey(reminderID, subscriberID string, due time.Time) string {
	sum := sha256.Sum256([]byte(reminderID + "|" + subscriberID + "|" + due.UTC().Format(time.RFC3339Nano)))
	return hex.EncodeToString(sum[:])
}

// CancellationKey is the key of the one "shipment cancelled" notice a
// subscriber who was already notified gets: one per reminder, whatever
// its due time, so compensating twice sends once.
func CancellationKey(reminderID, subscriberID string) string {
	return keyOf("cancellation", reminderID, subscriberID)
}

// EscalationKey is the key of the escalation notice about a reminder for
// one reason (an overdue approval, a failed delivery): each is sent once.
func EscalationKey(reminderID, reason string) string {
	return keyOf("escalation", reminderID, reason)
}

func keyOf(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "|")))
	return hex.EncodeToString(sum[:])
}

// NormalizeTime brings a time to the precision PostgreSQL keeps (microseconds)
// in UTC, so a delivery key computed before and after a round trip through the
// mirror is the same.
func NormalizeTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
