package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/reminder"
)

// What the Temporal Web UI shows of a workflow besides its history: a
// static summary and details, set at start by the starter and never
// changed, and a current-details line the workflow keeps saying what it
// waits for. All three carry opaque ids and times only, never an address,
// URL, secret or message text, like the search attributes. The summary and
// details are payloads, encrypted like the rest; the current details are
// the answer to the SDK's __temporal_workflow_metadata query, encrypted
// too. The UI shows them through the codec server.
//
// Setting the current details emits no command and no history event: a
// reminder started before it replays unchanged, and needs no GetVersion.

// maxSummaryBytes bounds a static summary. The server refuses a start
// whose encoded summary exceeds 400 bytes (limit.userMetadataSummarySize);
// the codec adds about 180 bytes at most (its envelope, a key id of up to
// 64 characters), so 200 bytes of text always fit.
const maxSummaryBytes = 200

// ReminderSummary is a reminder workflow's static summary, one line for the
// Web UI's list and header. It names the due time at start: a reschedule
// does not change it (the current details carry the live due time). A
// reminder id too long for maxSummaryBytes is cut short with "…" (the
// static details carry it whole).
func ReminderSummary(in ReminderInput) string {
	return summary("Reminder ", in.ReminderID, " due "+displayTime(in.DueAt))
}

// summary is prefix+id+suffix, the id cut to fit maxSummaryBytes. Ids are
// ASCII (their charset is checked at schedule time), so a byte cut is a
// character cut.
func summary(prefix, id, suffix string) string {
	if room := maxSummaryBytes - len(prefix) - len(suffix); len(id) > room {
		id = id[:room-len("…")] + "…"
	}
	return prefix + id + suffix
}

// ReminderDetails is a reminder workflow's static details (Temporal
// markdown): its ids, its due time at start and its approval policy. Four
// short lines with hard breaks: the Web UI shows the details in a box about
// five lines high, and list or paragraph margins would push lines out of it.
// delayed says the reminder starts with a start delay to its due time: the
// Web UI then shows no Current Details (no worker has run it) until then.
func ReminderDetails(in ReminderInput, delayed bool) string {
	approval := "not required"
	if in.Approval.Required {
		approval = fmt.Sprintf("required: escalates %s after scheduling, expires %s after scheduling",
			displayDuration(in.Approval.Timeout), displayDuration(in.Approval.ExpireAfter))
	}
	due := " (a reschedule moves it: see Current Details)"
	if delayed {
		due = " (start delay: no Current Details until then)"
	}
	return detailLines(
		ids(in.ShipmentID, in.UpdateID, in.SubscriberID),
		"**Due at start:** "+displayTime(in.DueAt)+due,
		"**Approval:** "+approval,
		"**Recipient and message:** in the mirror only (`shipnotify show`)",
	)
}

// CancellationNoticeSummary is a CancellationNoticeWorkflow's static summary.
func CancellationNoticeSummary(in CancellationNoticeInput) string {
	return summary("Cancellation notice for reminder ", in.ReminderID, "")
}

// CancellationNoticeDetails is a CancellationNoticeWorkflow's static details.
func CancellationNoticeDetails(in CancellationNoticeInput) string {
	return detailLines(
		ids(in.ShipmentID, in.UpdateID, in.SubscriberID),
		"**Why:** the reminder was sent before its shipment was cancelled; this tells the subscriber so, once",
		"**Recipient, who cancelled and why:** in the mirror only (`shipnotify show`)",
	)
}

// DeliveryEscalationSummary is a DeliveryEscalationWorkflow's static summary.
func DeliveryEscalationSummary(in DeliveryEscalationInput) string {
	return summary("Escalation ("+in.Reason+") for reminder ", in.ReminderID, "")
}

// DeliveryEscalationDetails is a DeliveryEscalationWorkflow's static details.
func DeliveryEscalationDetails(in DeliveryEscalationInput) string {
	return detailLines(
		ids(in.ShipmentID, in.UpdateID, in.SubscriberID),
		"**Why:** "+in.Detail,
		"**Escalation contact and the provider's events:** in the mirror only (`shipnotify show`)",
	)
}

func ids(shipmentID, updateID, subscriberID string) string {
	return "**Shipment:** " + shipmentID + " · **Update:** " + updateID + " · **Subscriber:** " + subscriberID
}

// detailLines joins lines with markdown hard line breaks.
func detailLines(lines ...string) string {
	return strings.Join(lines, "  \n")
}

// show sets the current details, the line the Web UI shows as what the
// workflow is doing now.
func show(ctx workflow.Context, format string, args ...any) {
	workflow.SetCurrentDetails(ctx, fmt.Sprintf(format, args...))
}

// showAwaitingApproval: waiting for a decision until the final deadline.
func (r *run) showAwaitingApproval(ctx workflow.Context, timeoutAt, expiresAt time.Time) {
	escalation := "escalates at " + displayTime(timeoutAt)
	if r.escalated {
		escalation = "escalated at " + displayTime(timeoutAt)
	}
	show(ctx, "Waiting for approval until %s (%s); then due at %s", displayTime(expiresAt), escalation, displayTime(r.due))
}

// showSleeping: on the durable timer until the due time.
func (r *run) showSleeping(ctx workflow.Context) {
	show(ctx, "Sleeping until due at %s", displayTime(r.due))
}

// showSending: the notify activity runs. Its attempts are retried by the
// server without a workflow task, so the workflow cannot tell a first
// attempt from a retry: the line says until when it retries, and the Web
// UI's Pending Activities show the attempt and its last failure.
func (r *run) showSending(ctx workflow.Context) {
	show(ctx, "Sending (due at %s); a failed attempt is retried until %s: see Pending Activities for the attempt",
		displayTime(r.due), displayTime(workflow.Now(ctx).Add(notifyRetryBudget)))
}

// showDone: the reminder reached its end, r.state.
func (r *run) showDone(ctx workflow.Context) {
	at := displayTime(workflow.Now(ctx))
	if r.state == reminder.Suppressed {
		// The notify activity found the address suppressed and wrote it.
		show(ctx, "Done: suppressed at %s: the subscriber's address opted out of this tracker's mail; nothing sent", at)
		return
	}
	if r.endedByMirror {
		show(ctx, "Done: already %s in the mirror (by another path) at %s; nothing sent", r.state, at)
		return
	}
	switch r.state {
	case reminder.Sent:
		show(ctx, "Done: sent at %s", at)
	case reminder.Failed:
		show(ctx, "Done: failed for good at %s (the reminder's events say why, and whether the escalation contact was told)", at)
	case reminder.Expired:
		show(ctx, "Done: expired at %s, with no decision by the final deadline", at)
	case reminder.Cancelled:
		if r.decision != nil && !r.decision.Approved {
			show(ctx, "Done: rejected at %s; nothing sent", at)
		} else {
			show(ctx, "Done: cancelled at %s; nothing sent", at)
		}
	default:
		show(ctx, "Done: %s at %s", r.state, at)
	}
}

// showCompensation: a cancel came after the send; outcome is the
// compensation's, "" while the notice is being sent.
func showCompensation(ctx workflow.Context, outcome string) {
	switch outcome {
	case "":
		show(ctx, "Sent, then cancelled: sending the cancellation notice; a failed attempt is retried until %s",
			displayTime(workflow.Now(ctx).Add(notifyRetryBudget)))
	case OutcomeCompensated:
		show(ctx, "Done: sent, then cancelled; the cancellation notice was sent at %s", displayTime(workflow.Now(ctx)))
	case OutcomeCompensationSkipped:
		show(ctx, "Done: sent, then cancelled; no cancellation notice went (nothing to compensate, or the address has opted out since)")
	default:
		show(ctx, "Done: sent, then cancelled; the cancellation notice failed for good at %s (the reminder's events say why)",
			displayTime(workflow.Now(ctx)))
	}
}

// displayTime is a time as the Web UI's texts give it: UTC, to the minute,
// or to the second when it has seconds.
func displayTime(t time.Time) string {
	t = t.UTC()
	if t.Second() == 0 && t.Nanosecond() == 0 {
		return t.Format("2006-01-02 15:04 UTC")
	}
	return t.Format("2006-01-02 15:04:05 UTC")
}

// displayDuration is a duration in whole days or hours when it is one.
func displayDuration(d time.Duration) string {
	switch {
	case d > 0 && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}
