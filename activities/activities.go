// Package activities holds shipnotify's side effects, run by Temporal at
// least once: the idempotent notify activity (claim the delivery key, send,
// record) and the small mirror writes the workflow's branches make.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// Error types the workflow tells apart; both are non-retryable.
const (
	// ErrTypePermanentDelivery: the provider refused the delivery for good.
	ErrTypePermanentDelivery = "PermanentDeliveryFailure"
	// ErrTypeReminderNotFound: the mirror has no such reminder.
	ErrTypeReminderNotFound = "ReminderNotFound"
	// errTypeInProgress: another live execution holds the delivery key.
	errTypeInProgress = "DeliveryInProgress"
)

// Activities are the worker's activities and what they need. The worker
// registers one value; workflows call its methods through a nil pointer.
type Activities struct {
	Mirror  *mirror.Store
	Email   *email.Sender
	Webhook *webhook.Sender
	// RecordRetries bounds how often a failed write of a completed send is
	// retried within the attempt before it gives up (0 means 5).
	RecordRetries int
}

// NotifyInput names the delivery: the reminder at its current due time.
type NotifyInput struct {
	ReminderID   string
	SubscriberID string
	DueAt        time.Time
}

// NotifyResult says what the delivery did.
type NotifyResult struct {
	DeliveryKey       string
	ProviderMessageID string
	// AlreadySent: an earlier execution sent and recorded this key; this one
	// sent nothing.
	AlreadySent bool
}

// sentProgress is heartbeated when a send succeeded but could not be
// recorded, so the retry records it instead of sending again.
type sentProgress struct {
	ProviderMessageID string
}

// Notify delivers one reminder exactly once per delivery key, as far as a
// crash allows: it claims the key in the mirror first, so a second execution
// for the same key finds it and sends nothing; then sends by the
// subscriber's channel; then records the provider's message id and the
// "sent" event. The one window it cannot close is a crash after the provider
// accepted and before the record or heartbeat is written.
func (a *Activities) Notify(ctx context.Context, in NotifyInput) (NotifyResult, error) {
	key := reminder.DeliveryKey(in.ReminderID, in.SubscriberID, in.DueAt)
	res := NotifyResult{DeliveryKey: key}
	logger := activity.GetLogger(ctx)

	var prior sentProgress
	if activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &prior) == nil {
		// The previous attempt sent and failed only to record it.
		res.ProviderMessageID = prior.ProviderMessageID
		return res, a.record(ctx, key, prior.ProviderMessageID)
	}

	info := activity.GetInfo(ctx)
	lease := info.Deadline
	if lease.IsZero() {
		lease = time.Now().Add(time.Minute)
	}
	claim, err := a.Mirror.ClaimDelivery(ctx, mirror.Claim{
		Key:        key,
		ReminderID: in.ReminderID,
		Purpose:    mirror.PurposeReminder,
		Owner:      info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID,
		LeaseUntil: lease,
	})
	if errors.Is(err, mirror.ErrNotFound) {
		return res, temporal.NewNonRetryableApplicationError("reminder is not in the mirror", ErrTypeReminderNotFound, err)
	}
	if err != nil {
		return res, err
	}
	switch claim.Outcome {
	case mirror.AlreadySent:
		logger.Info("delivery already sent; nothing to do", "delivery_key", key)
		res.AlreadySent, res.ProviderMessageID = true, claim.ProviderMessageID
		return res, nil
	case mirror.AlreadyFailed:
		return res, temporal.NewNonRetryableApplicationError("delivery already failed permanently", ErrTypePermanentDelivery, nil)
	case mirror.HeldElsewhere:
		return res, temporal.NewApplicationError("another execution holds the delivery key", errTypeInProgress)
	}

	providerID, err := a.send(ctx, claim.Target, key)
	var derr *delivery.Error
	if errors.As(err, &derr) {
		if derr.Permanent {
			if rerr := a.Mirror.RecordDeliveryFailed(ctx, key, derr.Error()); rerr != nil {
				return res, rerr
			}
			return res, temporal.NewNonRetryableApplicationError(derr.Error(), ErrTypePermanentDelivery, nil)
		}
		return res, temporal.NewApplicationErrorWithOptions(derr.Error(), "DeliveryFailed",
			temporal.ApplicationErrorOptions{NextRetryDelay: derr.RetryAfter})
	}
	if err != nil {
		return res, err
	}
	res.ProviderMessageID = providerID
	if err := a.record(ctx, key, providerID); err != nil {
		// Sent but not recorded: leave the proof with Temporal so the retry
		// records instead of sending twice.
		activity.RecordHeartbeat(ctx, sentProgress{ProviderMessageID: providerID})
		return res, err
	}
	logger.Info("delivery sent", "delivery_key", key, "attempt", claim.Attempts)
	return res, nil
}

// record writes a completed send, retrying a short while within the attempt
// so a brief database outage does not turn into a second send.
func (a *Activities) record(ctx context.Context, key, providerID string) error {
	tries := a.RecordRetries
	if tries == 0 {
		tries = 5
	}
	wait := 200 * time.Millisecond
	var err error
	for i := 0; i < tries; i++ {
		if err = a.Mirror.RecordSent(ctx, key, providerID); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
	return err
}

func (a *Activities) send(ctx context.Context, t mirror.Target, key string) (string, error) {
	r := t.Reminder
	switch r.Channel {
	case reminder.Email:
		return a.Email.Send(ctx, email.Message{
			To:          r.Email,
			Subject:     t.Message.Subject,
			Text:        t.Message.Text,
			DeliveryKey: key,
			Args:        map[string]string{"reminder_id": r.ID, "shipment_id": r.ShipmentID},
		})
	case reminder.Webhook:
		body, err := json.Marshal(webhookPayload(t, key))
		if err != nil {
			return "", fmt.Errorf("error encoding webhook body: %w", err)
		}
		return a.Webhook.Send(ctx, webhook.Message{URL: r.WebhookURL, Secret: r.WebhookSecret, ID: key, Body: body})
	}
	return "", temporal.NewNonRetryableApplicationError("unknown channel "+string(r.Channel), ErrTypePermanentDelivery, nil)
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

func webhookPayload(t mirror.Target, key string) WebhookEvent {
	r := t.Reminder
	ev := WebhookEvent{
		Type:      "shipment.reminder",
		Timestamp: r.DueAt.UTC(),
		Data: WebhookData{
			DeliveryKey: key, ReminderID: r.ID, ShipmentID: r.ShipmentID, UpdateID: r.UpdateID,
			SubscriberID: r.SubscriberID, Kind: t.Kind, DueAt: r.DueAt.UTC(),
			Subject: t.Message.Subject, Text: t.Message.Text,
		},
	}
	if !t.WindowStart.IsZero() {
		ws := t.WindowStart.UTC()
		ev.Data.WindowStart = &ws
	}
	return ev
}

// TransitionInput is a state change of a reminder to mirror.
type TransitionInput struct {
	ReminderID string
	To         reminder.State
	Event      string
	Detail     map[string]any
}

// RecordTransition mirrors a workflow's state change and appends its event.
// Small and idempotent enough to run as a local activity.
func (a *Activities) RecordTransition(ctx context.Context, in TransitionInput) error {
	_, err := a.Mirror.Transition(ctx, in.ReminderID, in.To, in.Event, in.Detail)
	return err
}
