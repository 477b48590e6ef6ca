// Package workflows holds ReminderWorkflow, the durable life of one reminder
// (one shipment update for one subscriber), CancellationNoticeWorkflow, and
// the contract the starter, the CLI and operators share with them: task
// queue, ids, update and query names, search attributes.
//
// It is part of shipnotify's Go contract, with reminder, starter and codec
// (docs/architecture.md, "Where the code lives").
package workflows

import (
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/reminder"
)

// DefaultTaskQueue is the task queue workers poll unless configured otherwise.
const DefaultTaskQueue = "shipnotify"

// Workflow type names, as operators see them in the Web UI.
const (
	ReminderWorkflowName           = "ReminderWorkflow"
	CancellationNoticeWorkflowName = "CancellationNoticeWorkflow"
	DeliveryEscalationWorkflowName = "DeliveryEscalationWorkflow"
)

// ChangeLocalFirstAttempt is the change id under which ReminderWorkflow's
// notify ran its first attempt as a local activity (version 1) until it was
// retired (version 2); reminders that recorded version 1 keep that path. A
// worker may pin it (worker.Options.Versions) to walk that path.
const ChangeLocalFirstAttempt = changeLocalFirstAttempt

// ChangeFollowsTheMirrorsMove is the change id under which a reminder
// whose send was refused because its mirror row moved (another due time
// and key) takes the row's and sleeps again (version 1); before it
// (workflow.DefaultVersion) the reminder ended in its pending state and
// reconcile --verify started it again. A worker may pin it to walk that
// path.
const ChangeFollowsTheMirrorsMove = changeFollowsTheMirrorsMove

// Update and query names of ReminderWorkflow.
const (
	// UpdateReschedule moves the due time (RescheduleRequest → RescheduleResult).
	UpdateReschedule = "reschedule"
	// UpdateApprove and UpdateReject decide a reminder awaiting approval
	// (Decision → DecisionResult).
	UpdateApprove = "approve"
	UpdateReject  = "reject"
	// UpdateCancel cancels the reminder (CancelRequest → CancelResult).
	UpdateCancel = "cancel"
	// QueryStatus returns the reminder's Status.
	QueryStatus = "status"
)

// Search attributes set at start and upserted on every state change, so an
// operator can filter in the Web UI (ShipmentId="S-1" AND
// ReminderState="awaiting_approval"). Opaque ids only: never an address or
// URL. A tenant's ShipmentId leads with the tenant, as its ids do
// ("acme/S-1"; reminder.TenantShipment).
var (
	ShipmentIDKey    = temporal.NewSearchAttributeKeyKeyword("ShipmentId")
	UpdateIDKey      = temporal.NewSearchAttributeKeyKeyword("UpdateId")
	ReminderStateKey = temporal.NewSearchAttributeKeyKeyword("ReminderState")
	DueAtKey         = temporal.NewSearchAttributeKeyTime("DueAt")
)

// SearchAttributeTypes lists the custom search attributes a namespace needs,
// for `shipnotify setup` (scripts/dev.sh passes the same to the dev server).
var SearchAttributeTypes = map[string]enums.IndexedValueType{
	ShipmentIDKey.GetName():    enums.INDEXED_VALUE_TYPE_KEYWORD,
	UpdateIDKey.GetName():      enums.INDEXED_VALUE_TYPE_KEYWORD,
	ReminderStateKey.GetName(): enums.INDEXED_VALUE_TYPE_KEYWORD,
	DueAtKey.GetName():         enums.INDEXED_VALUE_TYPE_DATETIME,
}

// ReminderWorkflowID is the workflow id of a reminder: derived from its id
// (opaque ids only, reminder.ID), so scheduling the same update twice names
// the same workflow, and two tenants' never meet.
func ReminderWorkflowID(reminderID string) string {
	return "reminder/" + reminderID
}

// CancellationNoticeWorkflowID names the one compensation workflow of a
// reminder whose workflow had already finished when its shipment was cancelled.
func CancellationNoticeWorkflowID(reminderID string) string {
	return "cancellation/" + reminderID
}

// DeliveryEscalationWorkflowID names the one escalation of a reminder for a
// reason a provider's outcome gave (undeliverable, delivery_deferred).
func DeliveryEscalationWorkflowID(reminderID, reason string) string {
	return "escalation/" + reason + "/" + reminderID
}

// DeliveryEscalationInput names a reminder the provider could not deliver
// (or deferred too long) and why; Detail carries the provider's reason
// codes, never an address.
type DeliveryEscalationInput struct {
	ReminderID   string
	ShipmentID   string
	UpdateID     string
	SubscriberID string
	Reason       string
	Detail       string
}

// ReminderInput starts a reminder. It carries ids, the due time and the
// approval policy only; the recipient and the message stay in the mirror, out
// of the engine's history.
type ReminderInput struct {
	ReminderID string
	// Tenant owns the reminder ("" is the default tenant, and is left out
	// of the payload, so a default tenant's input is as it was before
	// tenancy). The workflow does not read it: it qualifies the ShipmentId
	// search attribute at start.
	Tenant       string `json:",omitempty"`
	ShipmentID   string
	UpdateID     string
	SubscriberID string
	DueAt        time.Time
	Approval     reminder.Approval
	// Window is the send window the reminder goes out in (nil: at its due
	// time, and left out of the payload, so an input without one is as it
	// was before windows).
	Window *reminder.SendWindow `json:",omitempty"`
	// Digest is the interval its address's reminders are gathered over
	// into one message (0: it goes out alone, and is left out of the
	// payload). A member goes out at the interval's boundary, and its
	// cancel is settled as one during a send: another member's attempt
	// may hold its key.
	Digest time.Duration `json:",omitempty"`
	// Level is the workflow behaviour the reminder was started at
	// (CurrentLevel): it fixes the versions of the changes made up to it,
	// so the reminder asks GetVersion for none of them. 0: started before
	// levels, it asks.
	Level int `json:",omitempty"`
	// Carried is the state a run hands to its continuation
	// (continue-as-new); nil on the first run.
	Carried *Carried `json:",omitempty"`
}

// Carried is what a reminder has been through, kept across continue-as-new.
type Carried struct {
	State               reminder.State
	ApprovalRequestedAt time.Time
	Decision            *DecisionRecord `json:",omitempty"`
	Escalated           bool
	Reschedules         int
	Transitions         []Transition
	TransitionCount     int
}

// ReminderResult is how a reminder ended.
type ReminderResult struct {
	State             reminder.State
	DeliveryKey       string
	ProviderMessageID string
	// Compensated: the shipment was cancelled after this reminder was sent,
	// and the provider accepted the cancellation notice.
	Compensated bool
	// NotifyStartedAt is when the notify attempt that sent began: the
	// instant the benchmark times a reminder's lag from.
	NotifyStartedAt time.Time `json:",omitempty"`
}

// RescheduleRequest moves a pending reminder's due time.
type RescheduleRequest struct {
	DueAt  time.Time
	By     string
	Reason string
	// Key is the credential the request came with (the API key's name, or
	// the console's approver), recorded apart from By: By is the caller's
	// words and never passes for a key. Empty for the CLI.
	Key string `json:",omitempty"`
	// Deadline, when set, is when the caller stops waiting: a request that
	// reaches the workflow later is refused, so a reschedule reported as
	// failed never lands afterwards.
	Deadline time.Time `json:",omitempty"`
}

// RescheduleResult is the reminder's new due time and delivery key.
type RescheduleResult struct {
	DueAt       time.Time
	DeliveryKey string
	// Unchanged: the reminder was due at that time already.
	Unchanged bool `json:",omitempty"`
}

// Decision approves or rejects a reminder; who and why are recorded.
type Decision struct {
	By     string
	Reason string
	// Key works as RescheduleRequest's.
	Key string `json:",omitempty"`
	// Deadline works as RescheduleRequest's.
	Deadline time.Time `json:",omitempty"`
}

// DecisionRecord is a decision as taken.
type DecisionRecord struct {
	Approved bool
	By       string
	Reason   string
	At       time.Time
	Key      string `json:",omitempty"`
}

// DecisionResult is the reminder's state after a decision.
type DecisionResult struct {
	State reminder.State
}

// CancelRequest cancels a reminder because its shipment was cancelled.
type CancelRequest struct {
	By     string
	Reason string
	// Key works as RescheduleRequest's.
	Key string `json:",omitempty"`
}

// CancelResult says what cancelling did.
type CancelResult struct {
	// Outcome is one of the Outcome constants, or "already_" and the state
	// the reminder had already ended in (rejected: already_cancelled).
	Outcome string
	State   reminder.State
}

// Cancel outcomes.
const (
	// OutcomeCancelled: nothing was sent, and nothing will be.
	OutcomeCancelled = "cancelled"
	// OutcomeCompensated: it had been sent; the cancellation notice was
	// accepted by the provider.
	OutcomeCompensated = "compensated"
	// OutcomeCompensationSkipped: it had been sent (or may have been: a
	// maybe-sent send is a send), and no notice went: the notice found
	// nothing to compensate (no delivery recorded as sent, or its provider
	// bounced it), or the address has opted out since.
	OutcomeCompensationSkipped = "compensation_skipped"
	// OutcomeCompensationFailed: it had been sent, and the notice failed for
	// good; the audit trail says why.
	OutcomeCompensationFailed = "compensation_failed"
)

// Transition is one step of a reminder's life, as the status query shows it.
type Transition struct {
	At     time.Time
	Event  string
	State  reminder.State
	Detail string `json:",omitempty"`
}

// Status is what the status query returns.
type Status struct {
	State reminder.State
	DueAt time.Time
	// GoesOutAt is when it goes out in its send window, once the workflow
	// has worked it out (zero without a window, and before it has).
	GoesOutAt       time.Time `json:",omitzero"`
	DeliveryKey     string
	Approval        ApprovalStatus
	CancelRequested bool
	Reschedules     int
	// Transitions are the most recent steps (at most maxTransitions);
	// TransitionCount counts them all. The mirror's events keep every one.
	Transitions     []Transition
	TransitionCount int
	// WaitingUntil is set only for a workflow the engine holds in its start
	// delay: it has run no task, so this account is not the workflow's but
	// what its start recorded (starter.LiveStatus), and the engine runs its
	// first task at WaitingUntil. The workflow itself never sets it.
	WaitingUntil time.Time `json:",omitzero"`
}

// ApprovalStatus is where a reminder stands on approval.
type ApprovalStatus struct {
	Required  bool
	TimeoutAt time.Time       `json:",omitempty"`
	ExpiresAt time.Time       `json:",omitempty"`
	Escalated bool            `json:",omitempty"`
	Decision  *DecisionRecord `json:",omitempty"`
}

// CancellationNoticeInput names a delivered reminder whose shipment was
// cancelled after its workflow had finished.
type CancellationNoticeInput struct {
	ReminderID   string
	ShipmentID   string
	UpdateID     string
	SubscriberID string
	By           string
	Reason       string
	// Key works as RescheduleRequest's.
	Key string `json:",omitempty"`
}

// StartSearchAttributes are a new reminder's search attributes.
func StartSearchAttributes(in ReminderInput) temporal.SearchAttributes {
	state := reminder.Scheduled
	if in.Approval.Required {
		state = reminder.AwaitingApproval
	}
	return temporal.NewSearchAttributes(
		ShipmentIDKey.ValueSet(reminder.TenantShipment(in.Tenant, in.ShipmentID)),
		UpdateIDKey.ValueSet(in.UpdateID),
		ReminderStateKey.ValueSet(string(state)),
		DueAtKey.ValueSet(in.DueAt),
	)
}
