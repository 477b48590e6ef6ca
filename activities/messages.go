package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// Notice types (a webhook event's type).
const (
	EventReminder   = "shipment.reminder"
	EventCancelled  = "shipment.cancelled"
	EventEscalation = "shipment.escalation"
)

// send delivers by purpose: the reminder and its cancellation notice go to
// the subscriber by its channel's sender, an escalation goes to the
// update's escalation contact by email.
func (a *Activities) send(ctx context.Context, in NotifyInput, t mirror.Target, key string) (string, error) {
	r := t.Reminder
	n := delivery.Notice{
		Key: key, Purpose: string(in.purpose()), Type: EventReminder, Subject: t.Message.Subject, Text: t.Message.Text,
		ReminderID: r.ID, ShipmentID: r.ShipmentID, UpdateID: r.UpdateID, SubscriberID: r.SubscriberID,
		Kind: t.Kind, WindowStart: t.WindowStart, DueAt: r.DueAt,
	}
	if in.purpose() == reminder.PurposeEscalation {
		n.Type, n.Address = EventEscalation, t.EscalationEmail
		n.Subject, n.Text = escalationMessage(in, t, a.Links)
		return emailSender{s: a.Email}.Send(ctx, n)
	}
	if in.purpose() == reminder.PurposeCancellation {
		msg := cancellationMessage(t)
		n.Type, n.Subject, n.Text = EventCancelled, msg.Subject, msg.Text
	}
	var sender delivery.Sender
	sender, n.Address, n.Secret = a.senderOf(r)
	if sender == nil {
		return "", temporal.NewNonRetryableApplicationError("no sender for the channel "+string(r.Channel), ErrTypePermanentDelivery, nil)
	}
	return sender.Send(ctx, n)
}

// senderOf is the sender of r's channel and r's address on it: email and
// webhook's own, or the one registered for a channel beyond them (nil when
// none is), with its address column.
func (a *Activities) senderOf(r reminder.Reminder) (s delivery.Sender, address, secret string) {
	switch r.Channel {
	case reminder.Email:
		return emailSender{s: a.Email, unsubscribe: a.unsubscribe(r.ID)}, r.Email, ""
	case reminder.Webhook:
		return webhookSender{a.Webhook}, r.WebhookURL, r.WebhookSecret
	}
	return a.Senders[r.Channel], r.Address, ""
}

// emailSender sends a notice as an email through SendGrid, the key and the
// ids in its custom_args; a subscriber's mail carries its way to opt out.
type emailSender struct {
	s           *email.Sender
	unsubscribe email.Unsubscribe
}

func (e emailSender) Send(ctx context.Context, n delivery.Notice) (string, error) {
	return e.s.Send(ctx, email.Message{To: n.Address, Subject: n.Subject, Text: n.Text, DeliveryKey: n.Key,
		Args:        map[string]string{"reminder_id": n.ReminderID, "shipment_id": n.ShipmentID, "purpose": n.Purpose},
		Unsubscribe: e.unsubscribe})
}

// webhookSender posts a notice as a signed Standard Webhooks event, its key
// the event's id.
type webhookSender struct{ s *webhook.Sender }

func (w webhookSender) Send(ctx context.Context, n delivery.Notice) (string, error) {
	body, err := json.Marshal(webhookEvent(n))
	if err != nil {
		return "", fmt.Errorf("error encoding webhook body: %w", err)
	}
	return w.s.Send(ctx, webhook.Message{URL: n.Address, Secret: n.Secret, ID: n.Key, Body: body})
}

func cancellationMessage(t mirror.Target) reminder.Message {
	subject := "Cancelled: " + t.Message.Subject
	if len([]rune(subject)) > reminder.MaxSubjectRunes {
		subject = string([]rune(subject)[:reminder.MaxSubjectRunes])
	}
	return reminder.Message{
		Subject: subject,
		Text: fmt.Sprintf("Shipment %s has been cancelled.\n\nPlease disregard our earlier message, %q.",
			t.Reminder.ShipmentID, t.Message.Subject),
	}
}

// escalationMessage tells the escalation contact about a reminder: ids,
// never the subscriber's address. An overdue approval carries the links to
// approve or reject it when links are configured.
func escalationMessage(in NotifyInput, t mirror.Target, links DecisionLinks) (subject, text string) {
	r := t.Reminder
	what := map[string]string{
		"approval_timeout": "is waiting for approval past its approval timeout",
		"delivery_failed":  "could not be delivered and has failed",
		// The provider accepted these, then reported on them.
		"undeliverable":     "was bounced or dropped by the mail provider: the subscriber did not get it",
		"delivery_deferred": "is still deferred by the mail provider: the subscriber has not got it yet",
	}[in.Reason]
	if what == "" {
		what = "needs attention (" + in.Reason + ")"
	}
	subject = fmt.Sprintf("[shipnotify] Reminder %s %s", r.ID, what)
	if len([]rune(subject)) > reminder.MaxSubjectRunes {
		subject = string([]rune(subject)[:reminder.MaxSubjectRunes])
	}
	text = fmt.Sprintf("Reminder %s %s.\n\nShipment: %s\nUpdate: %s\nSubscriber: %s (%s)\nDue: %s\nState: %s\n",
		r.ID, what, r.ShipmentID, r.UpdateID, r.SubscriberID, r.Channel, r.DueAt.UTC().Format(time.RFC3339), t.State)
	if in.Detail != "" {
		text += "\nDetail: " + in.Detail + "\n"
	}
	if in.Reason == "approval_timeout" && links != nil {
		approve, reject, expires := links.DecisionLinks(r.ID)
		text += "\nDecide it in your browser (each link opens a confirmation page and acts only when you press its button;" +
			" valid until " + expires.UTC().Format(time.RFC3339) + "):\n" +
			"  Approve: " + approve + "\n" +
			"  Reject:  " + reject + "\n"
	}
	text += "\nInspect it with: shipnotify show " + r.ID + "\n"
	return subject, text
}

// WebhookEvent is the JSON body a webhook receiver gets, in the Standard
// Webhooks shape (type, timestamp, data). Its timestamp is the due time, so
// every retry carries the same body.
type WebhookEvent struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      WebhookData `json:"data"`
}

// WebhookData is the reminder a webhook event carries.
type WebhookData struct {
	DeliveryKey  string     `json:"delivery_key"`
	ReminderID   string     `json:"reminder_id"`
	ShipmentID   string     `json:"shipment_id"`
	UpdateID     string     `json:"update_id"`
	SubscriberID string     `json:"subscriber_id"`
	Kind         string     `json:"kind"`
	WindowStart  *time.Time `json:"window_start,omitempty"`
	DueAt        time.Time  `json:"due_at"`
	Subject      string     `json:"subject"`
	Text         string     `json:"text"`
}

func webhookEvent(n delivery.Notice) WebhookEvent {
	ev := WebhookEvent{
		Type:      n.Type,
		Timestamp: n.DueAt.UTC(),
		Data: WebhookData{
			DeliveryKey: n.Key, ReminderID: n.ReminderID, ShipmentID: n.ShipmentID, UpdateID: n.UpdateID,
			SubscriberID: n.SubscriberID, Kind: n.Kind, DueAt: n.DueAt.UTC(),
			Subject: n.Subject, Text: n.Text,
		},
	}
	if !n.WindowStart.IsZero() {
		ws := n.WindowStart.UTC()
		ev.Data.WindowStart = &ws
	}
	return ev
}
