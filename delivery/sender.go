package delivery

import (
	"context"
	"time"
)

// Sender is a channel's way out: it sends one notice to one subscriber
// under the notice's delivery key and returns the provider's id for it (""
// when the provider gives none), or an *Error that classifies the failure
// (Permanent, Credentials, RetryAfter, MaybeSent: an ambiguous outcome is a
// send). Email and webhook are the first two; a channel beyond them is a
// package with a Sender, registered on activities.Activities.Senders. The
// delivery key, the claim and the classification of what comes back are
// the notify activity's, the same for every channel.
type Sender interface {
	Send(ctx context.Context, n Notice) (providerID string, err error)
}

// Notice is one delivery of a reminder, its cancellation notice or its
// escalation, whatever the channel.
type Notice struct {
	// Key is the delivery key: the same on every retry, for a provider or
	// a receiver to drop a duplicate by.
	Key string
	// Address is where the channel reaches the subscriber (an email
	// address, a URL, a phone number); Secret is its signing secret, for a
	// channel that signs.
	Address, Secret string
	// Type names what it is: "shipment.reminder", "shipment.cancelled" or
	// "shipment.escalation".
	Type string
	// Purpose is the delivery's purpose (reminder, cancellation,
	// escalation).
	Purpose string
	// The reminder's ids, its update's kind, window and due time: ids and
	// times only, never another subscriber's address.
	ReminderID, ShipmentID, UpdateID, SubscriberID, Kind string
	WindowStart, DueAt                                   time.Time
	// Subject and Text are the message a person reads.
	Subject, Text string
	// Name, TimeZone and Locale are the subscriber's, for a channel that
	// writes to a person ("" when not given: no name, UTC, English).
	Name, TimeZone, Locale string
	// HTML is the message's HTML part, for a channel that sends one
	// (email); "" for none.
	HTML string
	// TemplateID and TemplateData name a template the provider renders,
	// and its data (SendGrid's dynamic templates); the notice's own
	// Subject and Text are in the data too.
	TemplateID   string
	TemplateData map[string]any
}
