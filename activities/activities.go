// Package activities holds shipnotify's side effects, run by Temporal at
// least once: the idempotent notify activity (claim the delivery key, send,
// record) and the small mirror writes the workflow's branches make.
package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/metrics"
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
	// Metrics records lag, durations and outcomes; nil records nothing.
	Metrics *metrics.Metrics
}

// NotifyInput names one delivery. For the reminder itself it is the
// reminder at its current due time; a cancellation notice and an escalation
// are keyed by the reminder (and the escalation's reason) alone.
type NotifyInput struct {
	// Purpose is what the delivery is for; empty means the reminder.
	Purpose      reminder.Purpose
	ReminderID   string
	SubscriberID string
	DueAt        time.Time
	// Reason names an escalation: "approval_timeout" or "delivery_failed".
	Reason string
	// Detail explains an escalation to its contact; ids and provider
	// answers only, never a subscriber's address.
	Detail string
}

func (in NotifyInput) purpose() reminder.Purpose {
	if in.Purpose == "" {
		return reminder.PurposeReminder
	}
	return in.Purpose
}

// Key is the delivery key of this delivery.
func (in NotifyInput) Key() string {
	switch in.purpose() {
	case reminder.PurposeCancellation:
		return reminder.CancellationKey(in.ReminderID, in.SubscriberID)
	case reminder.PurposeEscalation:
		return reminder.EscalationKey(in.ReminderID, in.Reason)
	}
	return reminder.DeliveryKey(in.ReminderID, in.SubscriberID, in.DueAt)
}

// NotifyResult says what the delivery did.
type NotifyResult struct {
	DeliveryKey       string
	ProviderMessageID string
	// AlreadySent: an earlier execution sent and recorded this key; this one
	// sent nothing.
	AlreadySent bool
	// Skipped: there was nothing to send (no escalation contact, or a
	// cancellation notice for a reminder that was never delivered).
	Skipped    bool
	SkipReason string
}

// sentProgress is heartbeated when a send succeeded but could not be
// recorded, so the retry records it instead of sending again.
type sentProgress struct {
	ProviderMessageID string
}

// Notify makes one delivery exactly once per delivery key, as far as a crash
// allows: it claims the key in the mirror first, so a second execution for
// the same key finds it and sends nothing; then sends; then records the
// provider's message id and the event. The one window it cannot close is a
// crash after the provider accepted and before the record or heartbeat is
// written.
func (a *Activities) Notify(ctx context.Context, in NotifyInput) (res NotifyResult, err error) {
	key := in.Key()
	res.DeliveryKey = key
	info := activity.GetInfo(ctx)
	logger := log.With(activity.GetLogger(ctx), "reminder_id", in.ReminderID, "delivery_key", key, "purpose", string(in.purpose()))
	if in.purpose() == reminder.PurposeReminder && info.Attempt == 1 {
		a.Metrics.SchedulingLag(info.StartedTime.Sub(in.DueAt))
	}
	// What the attempt came to, for the metrics.
	channel, outcome, took := "email", "retry", time.Duration(0)
	defer func() {
		switch {
		case err == nil && res.Skipped:
			outcome = "skipped"
		case err == nil && res.AlreadySent:
			outcome = "already_sent"
		case err == nil:
			outcome = "sent"
		case isNonRetryable(err):
			outcome = "failed"
		}
		a.Metrics.Delivery(channel, string(in.purpose()), outcome, took)
	}()
	detail := map[string]any{}
	if in.Reason != "" {
		detail["reason"] = in.Reason
	}

	var prior sentProgress
	if activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &prior) == nil {
		// The previous attempt sent and failed only to record it.
		res.ProviderMessageID = prior.ProviderMessageID
		return res, a.record(ctx, key, prior.ProviderMessageID, detail)
	}
	if skip, err := a.nothingToSend(ctx, in); err != nil || skip != "" {
		res.Skipped, res.SkipReason = skip != "", skip
		return res, err
	}

	lease := info.Deadline
	if lease.IsZero() {
		lease = time.Now().Add(time.Minute)
	}
	claim, err := a.Mirror.ClaimDelivery(ctx, mirror.Claim{
		Key:        key,
		ReminderID: in.ReminderID,
		Purpose:    in.purpose(),
		Owner:      info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID,
		LeaseUntil: lease,
	})
	if errors.Is(err, mirror.ErrNotFound) {
		return res, temporal.NewNonRetryableApplicationError("reminder is not in the mirror", ErrTypeReminderNotFound, err)
	}
	if err != nil {
		return res, err
	}
	if in.purpose() != reminder.PurposeEscalation {
		channel = string(claim.Target.Reminder.Channel)
	}
	if info.Attempt > 1 {
		a.Metrics.Retry(channel)
	}
	switch claim.Outcome {
	case mirror.AlreadySent:
		logger.Info("delivery already sent; nothing to do")
		res.AlreadySent, res.ProviderMessageID = true, claim.ProviderMessageID
		return res, nil
	case mirror.AlreadyFailed:
		return res, temporal.NewNonRetryableApplicationError("delivery already failed permanently", ErrTypePermanentDelivery, nil)
	case mirror.HeldElsewhere:
		return res, temporal.NewApplicationError("another execution holds the delivery key", errTypeInProgress)
	}
	// The key names the due time the workflow asked for.
	claim.Target.Reminder.DueAt = in.DueAt

	var providerID string
	t := claim.Target
	if t.EndpointDisabled && t.Reminder.Channel == reminder.Webhook && in.purpose() != reminder.PurposeEscalation {
		err = &delivery.Error{Channel: "webhook receiver", Status: 410, Permanent: true, Detail: "endpoint disabled after an earlier 410 Gone"}
	} else {
		began := time.Now()
		providerID, err = a.send(ctx, in, t, key)
		took = time.Since(began)
	}
	var derr *delivery.Error
	if errors.As(err, &derr) {
		if derr.Permanent {
			if derr.Status == 410 && t.Reminder.Channel == reminder.Webhook && in.purpose() != reminder.PurposeEscalation {
				if rerr := a.Mirror.DisableEndpoint(ctx, t.Reminder.ID, t.Reminder.WebhookURL, derr.Error()); rerr != nil {
					return res, rerr
				}
			}
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
	if err := a.record(ctx, key, providerID, detail); err != nil {
		// Sent but not recorded: leave the proof with Temporal so the retry
		// records instead of sending twice.
		activity.RecordHeartbeat(ctx, sentProgress{ProviderMessageID: providerID})
		return res, err
	}
	logger.Info("delivery sent", "attempt", claim.Attempts, "took", took)
	return res, nil
}

func isNonRetryable(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}

// nothingToSend says why a notice has no one to go to, if it has none.
func (a *Activities) nothingToSend(ctx context.Context, in NotifyInput) (string, error) {
	switch in.purpose() {
	case reminder.PurposeCancellation:
		delivered, err := a.Mirror.WasDelivered(ctx, in.ReminderID)
		if err != nil || delivered {
			return "", err
		}
		return "the reminder was never delivered", nil
	case reminder.PurposeEscalation:
		contact, err := a.Mirror.EscalationContact(ctx, in.ReminderID)
		if err != nil || contact != "" {
			return "", err
		}
		return "the update names no escalation contact", nil
	}
	return "", nil
}

// record writes a completed send, retrying a short while within the attempt
// so a brief database outage does not turn into a second send.
func (a *Activities) record(ctx context.Context, key, providerID string, detail map[string]any) error {
	tries := a.RecordRetries
	if tries == 0 {
		tries = 5
	}
	wait := 200 * time.Millisecond
	var err error
	for i := 0; i < tries; i++ {
		if err = a.Mirror.RecordSent(ctx, key, providerID, detail); err == nil {
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

// RescheduleInput is a reminder's move to a new due time and delivery key.
type RescheduleInput struct {
	ReminderID  string
	DueAt       time.Time
	DeliveryKey string
	Detail      map[string]any
}

// RecordReschedule mirrors a reschedule: the new due time and key, and the
// "rescheduled" event. A local activity.
func (a *Activities) RecordReschedule(ctx context.Context, in RescheduleInput) error {
	return a.Mirror.Reschedule(ctx, in.ReminderID, in.DueAt, in.DeliveryKey, in.Detail)
}
