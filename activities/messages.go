package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/letters"
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
		Name: r.Name, TimeZone: r.TimeZone, Locale: r.Locale,
	}
	if in.purpose() == reminder.PurposeEscalation {
		n.Type, n.Address = EventEscalation, t.EscalationEmail
		// The escalation contact is not the subscriber: no name, and the
		// operator's English and UTC.
		n.Name, n.TimeZone, n.Locale = "", "", ""
		l, err := letters.Escalate(escalationOf(in, t, a.Links))
		if err != nil {
			return "", err
		}
		n.Subject, n.Text, n.HTML = l.Subject, l.Text, l.HTML
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
	if r.Channel == reminder.Email {
		if err := writeEmail(&n, in, t); err != nil {
			return "", err
		}
	}
	return sender.Send(ctx, n)
}

// writeEmail dresses a subscriber's email: the update's dynamic template
// with its data for the reminder when the update names one, otherwise
// shipnotify's own letter (the reminder, or the cancellation notice) in
// the subscriber's language and zone. It reads only what the claim read
// from the mirror.
func writeEmail(n *delivery.Notice, in NotifyInput, t mirror.Target) error {
	a := letters.Audience{Locale: n.Locale, TimeZone: n.TimeZone}
	s := letters.Shipment{Name: n.Name, Subject: t.Message.Subject, Text: t.Message.Text,
		ShipmentID: n.ShipmentID, UpdateID: n.UpdateID, ReminderID: n.ReminderID, WindowStart: n.WindowStart, DueAt: n.DueAt}
	var l letters.Letter
	var err error
	switch {
	case in.purpose() == reminder.PurposeCancellation:
		l, err = letters.Cancellation(s, a)
	case t.Message.HasTemplate():
		n.TemplateID = t.Message.TemplateID
		n.TemplateData, err = templateData(*n, t)
		return err
	default:
		l, err = letters.Reminder(s, a)
	}
	if err != nil {
		return err
	}
	n.Subject, n.Text, n.HTML = l.Subject, l.Text, l.HTML
	return nil
}

// templateData is a dynamic template's data: the caller's template_data
// and, under reminder.TemplateKeys, the ids, the message, and each time in
// UTC and in the subscriber's zone (RFC 3339, and as the default letters
// state it).
func templateData(n delivery.Notice, t mirror.Target) (map[string]any, error) {
	data := map[string]any{}
	if len(t.Message.TemplateData) > 0 {
		if err := json.Unmarshal(t.Message.TemplateData, &data); err != nil {
			return nil, fmt.Errorf("error reading the update's template data: %w", err)
		}
	}
	c := letters.NewClock(letters.Audience{Locale: n.Locale, TimeZone: n.TimeZone})
	locale := n.Locale
	if locale == "" {
		locale = "en"
	}
	ours := map[string]any{
		"reminder_id": n.ReminderID, "shipment_id": n.ShipmentID, "update_id": n.UpdateID,
		"subscriber_id": n.SubscriberID, "subscriber_name": n.Name, "kind": n.Kind,
		"subject": n.Subject, "text": n.Text, "delivery_key": n.Key,
		"time_zone": c.ZoneLabel(), "locale": locale,
		"due_at_utc": letters.UTC(n.DueAt), "due_at_local": c.Local(n.DueAt), "due_at_text": c.Text(n.DueAt),
	}
	if !n.WindowStart.IsZero() {
		ours["window_start_utc"] = letters.UTC(n.WindowStart)
		ours["window_start_local"] = c.Local(n.WindowStart)
		ours["window_start_text"] = c.Text(n.WindowStart)
	}
	maps.Copy(data, ours)
	return data, nil
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
	return e.s.Send(ctx, email.Message{To: n.Address, ToName: n.Name, Subject: n.Subject, Text: n.Text, HTML: n.HTML,
		TemplateID: n.TemplateID, TemplateData: n.TemplateData, DeliveryKey: n.Key,
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

// escalationOf is what the escalation contact is told about a reminder:
// ids, never the subscriber's address. An overdue approval carries the
// links to approve or reject it when links are configured.
func escalationOf(in NotifyInput, t mirror.Target, links DecisionLinks) letters.Escalation {
	r := t.Reminder
	e := letters.Escalation{ReminderID: r.ID, ShipmentID: r.ShipmentID, UpdateID: r.UpdateID, SubscriberID: r.SubscriberID,
		Channel: string(r.Channel), State: string(t.State), Reason: in.Reason, Detail: in.Detail, DueAt: r.DueAt}
	if in.Reason == "approval_timeout" && links != nil {
		e.Approve, e.Reject, e.LinksExpire = links.DecisionLinks(r.ID)
	}
	return e
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
