package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// Webhook event types.
const (
	EventReminder  = "shipment.reminder"
	EventCancelled = "shipment.cancelled"
)

// send delivers by purpose: the reminder and its cancellation notice go to
// the subscriber by its channel, an escalation goes to the update's
// escalation contact by email.
func (a *Activities) send(ctx context.Context, in NotifyInput, t mirror.Target, key string) (string, error) {
	r := t.Reminder
	args := map[string]string{"reminder_id": r.ID, "shipment_id": r.ShipmentID, "purpose": string(in.purpose())}
	if in.purpose() == reminder.PurposeEscalation {
		subject, text := escalationMessage(in, t, a.Links)
		return a.Email.Send(ctx, email.Message{To: t.EscalationEmail, Subject: subject, Text: text, DeliveryKey: key, Args: args})
	}
	msg, eventType := t.Message, EventReminder
	if in.purpose() == reminder.PurposeCancellation {
		msg, eventType = cancellationMessage(t), EventCancelled
	}
	switch r.Channel {
	case reminder.Email:
		return a.Email.Send(ctx, email.Message{To: r.Email, Subject: msg.Subject, Text: msg.Text, DeliveryKey: key, Args: args})
	case reminder.Webhook:
		body, err := json.Marshal(webhookEvent(eventType, t, msg, key))
		if err != nil {
			return "", fmt.Errorf("error encoding webhook body: %w", err)
		}
		return a.Webhook.Send(ctx, webhook.Message{URL: r.WebhookURL, Secret: r.WebhookSecret, ID: key, Body: body})
	}
	return "", temporal.NewNonRetryableApplicationError("unknown channel "+string(r.Channel), ErrTypePermanentDelivery, nil)
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

func webhookEvent(eventType string, t mirror.Target, msg reminder.Message, key string) WebhookEvent {
	r := t.Reminder
	ev := WebhookEvent{
		Type:      eventType,
		Timestamp: r.DueAt.UTC(),
		Data: WebhookData{
			DeliveryKey: key, ReminderID: r.ID, ShipmentID: r.ShipmentID, UpdateID: r.UpdateID,
			SubscriberID: r.SubscriberID, Kind: t.Kind, DueAt: r.DueAt.UTC(),
			Subject: msg.Subject, Text: msg.Text,
		},
	}
	if !t.WindowStart.IsZero() {
		ws := t.WindowStart.UTC()
		ev.Data.WindowStart = &ws
	}
	return ev
}
