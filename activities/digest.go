package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/letters"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// EventDigest is a webhook digest's type: one call for several reminders.
const EventDigest = "shipment.reminder.digest"

// sendDigest sends a sealed digest as one message to the address its
// members share (the leader's, t): one letter listing each shipment in the
// reader's language and zone, or one webhook call with an array. Its key is
// the digest's: SendGrid's events carry it back, and a webhook receiver
// deduplicates on it. A member's dynamic template is not used: the digest
// is shipnotify's own letter.
func (a *Activities) sendDigest(ctx context.Context, t mirror.Target, dg mirror.Digest) (string, error) {
	r := t.Reminder
	switch r.Channel {
	case reminder.Email:
		items := make([]letters.Shipment, len(dg.Members))
		for i, m := range dg.Members {
			items[i] = letters.Shipment{Subject: m.Message.Subject, Text: m.Message.Text, ShipmentID: m.ShipmentID,
				UpdateID: m.UpdateID, ReminderID: m.ReminderID, WindowStart: m.WindowStart, DueAt: m.DueAt}
		}
		l, err := letters.Digest(r.Name, items, letters.Audience{Locale: r.Locale, TimeZone: r.TimeZone})
		if err != nil {
			return "", err
		}
		return a.Email.Send(ctx, email.Message{To: r.Email, ToName: r.Name, Subject: l.Subject, Text: l.Text, HTML: l.HTML,
			DeliveryKey: dg.Key,
			Args: map[string]string{"reminder_id": r.ID, "shipment_id": r.ShipmentID, "purpose": string(reminder.PurposeReminder),
				"digest_size": strconv.Itoa(len(dg.Members))},
			Unsubscribe: a.unsubscribe(r.ID)})
	case reminder.Webhook:
		body, err := json.Marshal(webhookDigest(dg))
		if err != nil {
			return "", fmt.Errorf("error encoding webhook body: %w", err)
		}
		return a.Webhook.Send(ctx, webhook.Message{URL: r.WebhookURL, Secret: r.WebhookSecret, ID: dg.Key, Body: body})
	}
	return "", temporal.NewNonRetryableApplicationError("no digest for the channel "+string(r.Channel), ErrTypePermanentDelivery, nil)
}

// WebhookDigestEvent is the JSON body of a webhook digest, in the Standard
// Webhooks shape: its data carries the digest's key and every reminder as
// a single reminder's event carries it. Its timestamp is the latest due
// time among them, so every retry carries the same body.
type WebhookDigestEvent struct {
	Type      string     `json:"type"`
	Timestamp time.Time  `json:"timestamp"`
	Data      DigestData `json:"data"`
}

// DigestData is what a webhook digest carries.
type DigestData struct {
	DeliveryKey string        `json:"delivery_key"`
	Reminders   []WebhookData `json:"reminders"`
}

func webhookDigest(dg mirror.Digest) WebhookDigestEvent {
	ev := WebhookDigestEvent{Type: EventDigest, Data: DigestData{DeliveryKey: dg.Key, Reminders: make([]WebhookData, len(dg.Members))}}
	for i, m := range dg.Members {
		d := WebhookData{DeliveryKey: m.DeliveryKey, ReminderID: m.ReminderID, ShipmentID: m.ShipmentID, UpdateID: m.UpdateID,
			SubscriberID: m.SubscriberID, Kind: m.Kind, DueAt: m.DueAt.UTC(), Subject: m.Message.Subject, Text: m.Message.Text}
		if !m.WindowStart.IsZero() {
			ws := m.WindowStart.UTC()
			d.WindowStart = &ws
		}
		if m.DueAt.After(ev.Timestamp) {
			ev.Timestamp = m.DueAt.UTC()
		}
		ev.Data.Reminders[i] = d
	}
	return ev
}
