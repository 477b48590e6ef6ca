// Package activities holds shipnotify's side effects, run by Temporal at
// least once: the idempotent notify activity (claim the delivery key, send,
// record) and the small mirror writes the workflow's branches make.
package activities

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// Error types the workflow tells apart; the exported ones are non-retryable.
const (
	// ErrTypePermanentDelivery: the provider refused the delivery for good.
	ErrTypePermanentDelivery = "PermanentDeliveryFailure"
	// ErrTypeReminderNotFound: the mirror has no such reminder.
	ErrTypeReminderNotFound = "ReminderNotFound"
	// ErrTypeReminderFinished: the mirror row is finished (cancelled,
	// expired, failed, or sent under another key), so the reminder's own
	// delivery is refused. The error's details carry the row's state.
	ErrTypeReminderFinished = "ReminderFinished"
	// ErrTypeReminderMoved: the mirror row is pending under another key
	// (a window move reached it and not the workflow), so the delivery
	// under the workflow's key, which names its old due time, is refused,
	// and nothing was claimed or sent. The error's details carry the row's
	// state, then where it moved to (MovedTo). Only for a workflow that
	// follows a move (NotifyInput.FollowsMoves); others get
	// ErrTypeReminderFinished with the pending state.
	ErrTypeReminderMoved = "ReminderMoved"
	// errTypeInProgress: another live execution holds the delivery key.
	errTypeInProgress = "DeliveryInProgress"
	// ErrTypeSentNotRecorded: the provider accepted but the mirror did not
	// take the record; the error's details carry the provider's message id
	// (SentProof), so whatever retries records instead of sending again.
	ErrTypeSentNotRecorded = "SentNotRecorded"
	// ErrTypeSendUnconfirmed: an attempt may have sent the key (no answer
	// after its request left, or its claim lapsed with no record); the key
	// stays claimed, and the retries wait for the provider's evidence.
	ErrTypeSendUnconfirmed = "SendUnconfirmed"
	// errTypeRateCapped: the provider's rate cap has no slot near enough;
	// nothing was claimed or sent.
	errTypeRateCapped = "RateCapped"
	// errTypeDeliveryFailed: the provider refused for now, or could not be
	// reached; nothing was sent.
	errTypeDeliveryFailed = "DeliveryFailed"
)

// recordTimeout bounds the write of a completed send. It runs on a context
// that outlives the attempt's cancellation (a deploy stopping the worker, a
// cancel from the workflow), so a send the provider accepted is recorded
// rather than abandoned; the claim's lease covers it.
const recordTimeout = budget.Record

// The notify retry policy's backoff: the workflows set it on the activity,
// and a retry after a provider's failure reads it to follow an outage.
const (
	NotifyInitialInterval = time.Second
	NotifyMaximumInterval = delivery.MaxBackoff
)

// maxSlotWait bounds how long an attempt waits in place for its slot of the
// provider's rate cap; a slot further out is asked for again by a retry.
const maxSlotWait = budget.SlotWait

// outageQuiet is how long a provider must go without failing for its next
// failure to start a new outage.
const outageQuiet = 30 * time.Second

// DefaultEvidenceWait is how long a maybe-sent email waits for SendGrid's
// events before it is sent again under the same key. SendGrid posts its
// Event Webhook batches within about 30 seconds of processing a mail. The
// one home of the number: SHIPNOTIFY_UNCONFIRMED_SEND_WAIT defaults to it.
const DefaultEvidenceWait = 5 * time.Minute

// Activities are the worker's activities and what they need. The worker
// registers one value; workflows call its methods through a nil pointer.
type Activities struct {
	Mirror  *mirror.Store
	Email   *email.Sender
	Webhook *webhook.Sender
	// Senders are the senders of the channels beyond email and webhook
	// (reminder.PlanOptions.Channels), by channel. Their deliveries are
	// keyed, claimed, paced and classified as email's and webhook's are;
	// a channel with no sender here fails its deliveries for good.
	Senders map[reminder.Channel]delivery.Sender
	// RecordRetries bounds how often a failed write of a completed send is
	// retried within the attempt before it gives up (0 means 5).
	RecordRetries int
	// Metrics records lag, durations and outcomes; nil records nothing.
	Metrics *metrics.Metrics
	// Links makes the approve and reject links an overdue-approval
	// escalation carries; nil sends it without links.
	Links DecisionLinks
	// Unsubscribe says how a subscriber's email (a reminder, its
	// cancellation notice) lets them opt out (SHIPNOTIFY_UNSUBSCRIBE); nil
	// leaves it to the SendGrid account's settings.
	Unsubscribe func(reminderID string) email.Unsubscribe
	// EvidenceWait is how long a maybe-sent email (its call got no answer
	// after the request left, or its attempt died mid-call) waits for the
	// provider's event for its key before it is sent again under the same
	// key; 0 sends it again at once. Set it when SendGrid's Event Webhook
	// reaches serve (DefaultEvidenceWait); without it no evidence comes.
	EvidenceWait time.Duration
	// SendsPerSecond caps provider calls across every worker sharing the
	// mirror, whatever path or task-queue partition reached them; 0 is no
	// cap.
	SendsPerSecond float64
	// OwnBackoffOnly leaves every retry's wait to the retry policy and the
	// provider's Retry-After, as before retries followed the provider's
	// outage; the benchmark's provider-outage workload compares the two in
	// one run. It neither reads nor writes the shared outage record.
	OwnBackoffOnly bool

	// failing remembers the providers this worker saw fail, so the first
	// answer after tells the shared record the outage is over, and a
	// healthy provider's sends write nothing there.
	failing sync.Map
}

// unsubscribe is how r's email lets its subscriber opt out.
func (a *Activities) unsubscribe(reminderID string) email.Unsubscribe {
	if a.Unsubscribe == nil {
		return email.Unsubscribe{}
	}
	return a.Unsubscribe(reminderID)
}

// DecisionLinks makes the signed one-click links to approve or reject one
// reminder (links.Signer is the product's); each opens a confirmation page
// and acts only on its button. The links name the reminder only.
type DecisionLinks interface {
	DecisionLinks(reminderID string) (approve, reject string, expires time.Time)
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
	// Reason names an escalation: "approval_timeout", "delivery_failed",
	// or a provider's outcome: "undeliverable", "delivery_deferred".
	Reason string
	// Detail explains an escalation to its contact; ids and provider
	// answers only, never a subscriber's address.
	Detail string
	// Fallback: a first attempt (the workflow's local one) already failed;
	// this activity's attempts are retries.
	Fallback bool `json:",omitempty"`
	// SentAs is the provider's message id for a send an earlier attempt
	// made but could not record (a local attempt has no heartbeat to keep
	// it in): this execution records it and sends nothing.
	SentAs string `json:",omitempty"`
	// FollowsMoves: the workflow takes a moved row's due time and key
	// (ErrTypeReminderMoved). A workflow of a release before it does not
	// know that error and would fail the reminder for it; it hears
	// ErrTypeReminderFinished with the pending state, as before, and
	// ends as the mirror says (reconcile --verify starts it again).
	FollowsMoves bool `json:",omitempty"`
	// GoesOutAt is when a reminder with a send window was to go out (zero
	// without one): its scheduling lag counts from it, not from the due
	// time a window put off.
	GoesOutAt time.Time `json:",omitzero"`
	// Digest: the reminder is a digest's member. Its attempt takes the
	// digest's lock before it claims, and one that claims its own key
	// claims every member's and sends them as one message.
	Digest bool `json:",omitempty"`
}

// MovedTo is where a reminder's row moved while its workflow did not hear:
// the due time and the delivery key the row holds.
type MovedTo struct {
	DueAt       time.Time
	DeliveryKey string
}

// SentProof is what a failed attempt that did send says about it.
type SentProof struct {
	ProviderMessageID string
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
	// StartedAt is when this attempt began (the worker's StartedTime).
	StartedAt time.Time `json:",omitempty"`
}

// sentProgress is what an attempt heartbeats: at its start an empty one
// (that heartbeat is how a cancel reaches an attempt before it calls the
// provider), and the provider's message id the moment the provider accepts,
// so a retry after a failed record records instead of sending again.
type sentProgress struct {
	Sent              bool `json:",omitempty"`
	ProviderMessageID string
}

// sent reports whether an earlier attempt's send was accepted. (Attempts of
// older releases heartbeated only the provider id, and only after a send.)
func (p sentProgress) sent() bool { return p.Sent || p.ProviderMessageID != "" }

// Notify makes one delivery exactly once per delivery key, as far as a crash
// allows. It is a pipeline of named steps, each with its own contract:
//
//  1. claimKey: claim the key in the mirror, so a second execution for the
//     same key finds it and sends nothing (or answer why there is nothing
//     to send: notClaimed);
//  2. clearToSend: wait for the provider's rate cap to give the call its
//     slot, then look again for a cancel, since a wait may have let one in
//     (releasing the claim if either stops the send);
//  3. call: send;
//  4. recordAccepted, or notSent: record the provider's message id and the
//     event, or settle a call that was not accepted.
//
// Before them, an attempt that follows one which sent and failed only to
// record records instead (recordEarlierSend), and one that has no one to
// send to says so (nothingToSend). The one window it cannot close is a
// crash after the provider accepted and before the record or heartbeat is
// written.
func (a *Activities) Notify(ctx context.Context, in NotifyInput) (res NotifyResult, err error) {
	n := a.beginNotify(ctx, in)
	res.DeliveryKey, res.StartedAt = n.key, n.info.StartedTime
	defer func() { err = withOwnBackoff(err, n.info.Attempt) }()
	defer func() { a.countNotify(n, res, err) }()

	if proof, ok := earlierSend(ctx, in); ok {
		res.ProviderMessageID = proof.ProviderMessageID
		return res, a.recordEarlierSend(ctx, n, proof)
	}
	if err := n.hearFirst(ctx); err != nil {
		return res, err
	}
	skip, err := a.nothingToSend(ctx, in)
	if errors.Is(err, mirror.ErrNotFound) {
		return res, notInTheMirror(err)
	}
	if err != nil || skip != "" {
		res.Skipped, res.SkipReason = skip != "", skip
		return res, err
	}

	// 1. Claim the key (a digest member's leads its digest: it claims
	// the other members' keys too).
	claim, members, err := a.claimKey(ctx, n)
	if err != nil {
		return res, err
	}
	if claim.Verdict == mirror.HeldElsewhere && claim.HeldByDigest && a.awaitDigest(ctx, n, claim.Until) {
		if claim, members, err = a.claimKey(ctx, n); err != nil {
			return res, err
		}
	}
	if done, err := a.notClaimed(ctx, in, claim, &res, n.detail, n.logger); done {
		return res, err
	}
	// From here on this attempt holds the key: anything that ends it
	// without a send releases it, so the next attempt need not wait out
	// the lease.

	// 2. Wait for the call's slot, and look again for a cancel.
	if err := a.clearToSend(ctx, n); err != nil {
		return res, err
	}

	// 3. Seal the digest, if the attempt leads one, and send.
	t := n.target(claim)
	var dg mirror.Digest
	if members > 0 {
		if dg, err = a.sealDigest(ctx, n); err != nil {
			return res, err
		}
	}
	providerID, took, err := a.call(ctx, in, t, n.key, dg)
	n.took = took

	// 4. Record what came of it.
	if err != nil {
		return res, a.notSent(ctx, in, t, n.key, n.owner, err, n.logger)
	}
	res.ProviderMessageID = providerID
	return res, a.recordAccepted(ctx, n, t, providerID, claim.Attempts)
}

// notifyAttempt is what the steps of one Notify attempt share: the
// delivery, its key, the attempt (and the owner its claim is held by), and
// what the attempt's metrics report.
type notifyAttempt struct {
	in     NotifyInput
	key    string
	info   activity.Info
	owner  string
	logger log.Logger
	// retry: an earlier attempt of this delivery ran (the fallback
	// activity's attempts all follow a failed local one).
	retry bool
	// detail is added to the delivery's sent event.
	detail map[string]any
	// heard is when the attempt's first heartbeat went (hearFirst).
	heard time.Time
	// channel and took are what the metrics report: the channel the
	// claim found, and how long the provider call took.
	channel string
	took    time.Duration
}

// beginNotify starts an attempt of in: it names its key and owner, and, on
// the first attempt of a reminder's own delivery, observes the scheduling
// lag. It writes nothing.
func (a *Activities) beginNotify(ctx context.Context, in NotifyInput) *notifyAttempt {
	info := activity.GetInfo(ctx)
	n := &notifyAttempt{
		in: in, key: in.Key(), info: info, owner: ownerOf(info),
		retry: info.Attempt > 1 || in.Fallback, detail: map[string]any{}, channel: "email",
	}
	n.logger = log.With(activity.GetLogger(ctx), "reminder_id", in.ReminderID, "delivery_key", n.key, "purpose", string(in.purpose()))
	if in.Reason != "" {
		n.detail["reason"] = in.Reason
	}
	if in.purpose() == reminder.PurposeReminder && !n.retry {
		a.Metrics.SchedulingLag(info.StartedTime.Sub(cmp.Or(in.GoesOutAt, in.DueAt)))
	}
	return n
}

// countNotify reports what the attempt came to, for the metrics.
func (a *Activities) countNotify(n *notifyAttempt, res NotifyResult, err error) {
	outcome := "retry"
	switch {
	case err == nil && res.Skipped:
		outcome = "skipped"
	case err == nil && res.AlreadySent:
		outcome = "already_sent"
	case err == nil:
		outcome = "sent"
	case isNonRetryable(err):
		outcome = "failed"
	case errType(err) == ErrTypeSendUnconfirmed:
		// The provider may have it; the key waits for its evidence.
		outcome = "unconfirmed"
	}
	a.Metrics.Delivery(n.channel, string(n.in.purpose()), outcome, n.took)
}

// earlierSend is the proof of a send an earlier attempt made and failed
// only to record: the workflow's (in.SentAs, from a local attempt), or the
// attempt's last heartbeat. ok is false when there is none.
func earlierSend(ctx context.Context, in NotifyInput) (proof sentProgress, ok bool) {
	if in.SentAs != "" {
		return sentProgress{Sent: true, ProviderMessageID: in.SentAs}, true
	}
	if activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &proof) == nil && proof.sent() {
		return proof, true
	}
	return sentProgress{}, false
}

// recordEarlierSend records the send an earlier attempt made (proof),
// keeping the proof in the heartbeat for a further retry; it claims and
// sends nothing.
func (a *Activities) recordEarlierSend(ctx context.Context, n *notifyAttempt, proof sentProgress) error {
	activity.RecordHeartbeat(ctx, proof)
	return a.recordSent(ctx, n.key, proof.ProviderMessageID, n.detail)
}

// hearFirst sends the attempt's first heartbeat: a cancel requested while
// the attempt was scheduled arrives with its answer (an attempt's first
// heartbeat reaches the server at once), before anything is claimed or
// sent. It returns ctx's error if the attempt is already over.
func (n *notifyAttempt) hearFirst(ctx context.Context) error {
	activity.RecordHeartbeat(ctx, sentProgress{})
	n.heard = time.Now()
	return ctx.Err()
}

// claimKey claims the delivery key for this attempt (n.owner), its lease
// covering the rest of the attempt and the record after it. The result
// says whether the attempt holds the key (mirror.Claimed) or why not, for
// notClaimed; an error means nothing was claimed, and a reminder missing
// from the mirror fails for good.
func (a *Activities) claimKey(ctx context.Context, n *notifyAttempt) (claim mirror.ClaimResult, members int, err error) {
	c := mirror.Claim{
		Key: n.key, ReminderID: n.in.ReminderID, Purpose: n.in.purpose(), Owner: n.owner, LeaseFor: leaseFor(ctx),
		EvidenceWait: a.EvidenceWait,
	}
	if n.in.Digest && n.in.purpose() == reminder.PurposeReminder {
		claim, members, err = a.Mirror.ClaimDigest(ctx, c)
	} else {
		claim, err = a.Mirror.ClaimDelivery(ctx, c)
	}
	if errors.Is(err, mirror.ErrNotFound) {
		return claim, 0, notInTheMirror(err)
	}
	if err != nil {
		return claim, 0, err
	}
	if n.in.purpose() != reminder.PurposeEscalation {
		n.channel = string(claim.Target.Reminder.Channel)
	}
	if n.retry {
		a.Metrics.Retry(n.channel)
	}
	return claim, members, nil
}

// digestPoll is how often a member whose key a digest's leader holds
// looks whether the digest's send has settled it.
const digestPoll = 250 * time.Millisecond

// awaitDigest waits, in place, for the digest's leader that holds the
// attempt's key to settle it (sent, failed, released), until the leader's
// lease lapses or the attempt has only its record's time left: a member
// whose own send came while the digest was on its way then reads how it
// went in one attempt, instead of retrying on a backoff while the provider
// answers (each retry an activity attempt, and an action). It reports
// whether the key settled. It sends nothing, so it neither heartbeats nor
// hears a cancel: one that comes meanwhile is settled by the digest's
// outcome, after at most this wait.
func (a *Activities) awaitDigest(ctx context.Context, n *notifyAttempt, until time.Time) bool {
	by := attemptDeadline(ctx).Add(-recordTimeout)
	if until.Before(by) {
		by = until
	}
	for time.Now().Before(by) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(digestPoll):
		}
		status, err := a.Mirror.DeliveryStatus(ctx, n.key)
		if err != nil {
			n.logger.Warn("could not read the digest's progress", "error", err)
			return false
		}
		if status != "sending" {
			return true
		}
	}
	return false
}

// sealDigest seals the digest the attempt leads, after its wait for the
// rate cap's slot and its look for its own cancel: the members cancelled
// or moved meanwhile are left out. A digest left with the leader alone is
// none: the reminder goes out alone. On an error nothing was sent, and the
// claims are released.
func (a *Activities) sealDigest(ctx context.Context, n *notifyAttempt) (mirror.Digest, error) {
	dg, err := a.Mirror.SealDigest(ctx, n.key, n.owner)
	if err != nil {
		a.release(ctx, n.key, n.owner, n.logger)
		return mirror.Digest{}, err
	}
	if dg.Key != "" {
		n.logger.Info("sending a digest", "digest_key", dg.Key, "members", len(dg.Members))
	}
	return dg, nil
}

// clearToSend runs between the claim and the call: it waits for the call's
// slot of the provider's rate cap, heartbeating (waitForSendSlot), then
// looks for a cancel, since one may have reached Temporal during a wait
// (the slot's, or a slow claim's). nil means the call may go; on any error
// nothing was sent and the claim is released, so the next attempt takes
// the key at once.
func (a *Activities) clearToSend(ctx context.Context, n *notifyAttempt) error {
	waited, err := a.waitForSendSlot(ctx)
	if err == nil {
		err = a.lookForCancel(ctx, waited || time.Since(n.heard) >= budget.HeartbeatThrottle)
	}
	if err != nil {
		a.release(ctx, n.key, n.owner, n.logger)
	}
	return err
}

// target is what the claimed delivery sends: the claim's, with a reminder's
// due time the one its key names (the workflow's).
func (n *notifyAttempt) target(claim mirror.ClaimResult) mirror.Target {
	t := claim.Target
	if n.in.purpose() == reminder.PurposeReminder {
		t.Reminder.DueAt = n.in.DueAt
	}
	return t
}

// recordAccepted records a send the provider accepted (providerID): the
// proof goes to Temporal first (the SDK flushes it within its heartbeat
// throttle, and at once when the attempt fails or the worker stops), then
// to the mirror, on a context that outlives the attempt's cancellation
// (recordSent). A failed record returns ErrTypeSentNotRecorded with the
// proof, so whatever retries records instead of sending again.
func (a *Activities) recordAccepted(ctx context.Context, n *notifyAttempt, t mirror.Target, providerID string, attempts int) error {
	a.answered(ctx, providerOf(n.in, t), n.logger)
	activity.RecordHeartbeat(ctx, sentProgress{Sent: true, ProviderMessageID: providerID})
	if err := a.recordSent(ctx, n.key, providerID, n.detail); err != nil {
		return err
	}
	n.logger.Info("delivery sent", "attempt", attempts, "took", n.took)
	return nil
}

// ownerOf names the attempt that claims a key; only it may release the
// claim early or record its failure.
func ownerOf(info activity.Info) string {
	if info.IsLocalActivity {
		// Local and regular activities number their ids apart.
		return fmt.Sprintf("%s/%s/local-%s#%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID, info.Attempt)
	}
	return fmt.Sprintf("%s/%s/%s#%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID, info.Attempt)
}

// notClaimed answers a claim that did not give this attempt the key to
// send (done is false when it did): the reminder finished or moved to
// another key while its workflow did not hear, the key was
// sent or failed already, another live execution holds it, or an earlier
// attempt may have sent it (settled by the provider's event, or waiting
// for one).
func (a *Activities) notClaimed(ctx context.Context, in NotifyInput, claim mirror.ClaimResult, res *NotifyResult, detail map[string]any, logger log.Logger) (done bool, err error) {
	attempt := activity.GetInfo(ctx).Attempt
	switch claim.Verdict {
	case mirror.Moved:
		to := MovedTo{DueAt: claim.Target.Reminder.DueAt, DeliveryKey: claim.Target.DeliveryKey}
		logger.Info("the reminder moved in the mirror; nothing sent at the old due time",
			"state", string(claim.Target.State), "due_at", to.DueAt)
		if !in.FollowsMoves {
			return true, temporal.NewNonRetryableApplicationError("the reminder is "+string(claim.Target.State)+
				" in the mirror under another key; nothing was sent", ErrTypeReminderFinished, nil, claim.Target.State)
		}
		return true, temporal.NewNonRetryableApplicationError("the reminder moved in the mirror to "+
			to.DueAt.UTC().Format(time.RFC3339)+"; nothing was sent at the old due time", ErrTypeReminderMoved, nil,
			claim.Target.State, to)
	case mirror.Refused:
		logger.Info("reminder finished in the mirror; nothing sent", "state", string(claim.Target.State))
		return true, temporal.NewNonRetryableApplicationError("the reminder is "+string(claim.Target.State)+
			" in the mirror; nothing was sent", ErrTypeReminderFinished, nil, claim.Target.State)
	case mirror.AlreadySent:
		logger.Info("delivery already sent; nothing to do")
		res.AlreadySent, res.ProviderMessageID = true, claim.ProviderMessageID
		return true, nil
	case mirror.NoticeSuppressed:
		// The address opted out after the reminder reached it: no more
		// mail, a notice included.
		res.Skipped, res.SkipReason = true, "the subscriber's address has since unsubscribed (suppressed)"
		return true, nil
	case mirror.AlreadyFailed:
		return true, temporal.NewNonRetryableApplicationError("delivery already failed permanently", ErrTypePermanentDelivery, nil)
	case mirror.HeldElsewhere:
		// Looked at again when its holder's lease lapses, if not sooner.
		return true, temporal.NewApplicationErrorWithOptions("another execution holds the delivery key", errTypeInProgress,
			temporal.ApplicationErrorOptions{NextRetryDelay: max(min(ownBackoff(attempt), time.Until(claim.Until)+500*time.Millisecond), 500*time.Millisecond)})
	case mirror.Settled:
		// The provider reported on the key: the unconfirmed send was a
		// send. Record it; send nothing.
		logger.Info("an unconfirmed send is settled by the provider's event; nothing sent again")
		res.AlreadySent, res.ProviderMessageID = true, claim.ProviderMessageID
		return true, a.recordSent(ctx, res.DeliveryKey, claim.ProviderMessageID, withDetail(detail, "settled_by", "the provider's event for the key"))
	case mirror.Unconfirmed:
		left := time.Until(claim.Until)
		logger.Info("an earlier attempt may have sent this key; waiting for the provider's event", "left", left)
		return true, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("an earlier attempt may have sent this key; nothing is sent again until the provider's event for it settles it, or %s pass without one",
				left.Round(time.Second)),
			ErrTypeSendUnconfirmed, temporal.ApplicationErrorOptions{NextRetryDelay: evidencePoll(attempt, left)})
	}
	if !claim.MaybeSentBefore.IsZero() {
		// No evidence came: sent again under the same key, which the
		// receiver can deduplicate on. The record says so.
		logger.Warn("sending again a key an earlier attempt may have sent", "maybe_sent_at", claim.MaybeSentBefore)
	}
	return false, nil
}

// call makes the provider call. Once begun it is not cut short by a
// cancel: its answer decides whether anything was sent.
func (a *Activities) call(ctx context.Context, in NotifyInput, t mirror.Target, key string, dg mirror.Digest) (providerID string, took time.Duration, err error) {
	if t.EndpointDisabled && t.Reminder.Channel == reminder.Webhook && in.purpose() != reminder.PurposeEscalation {
		return "", 0, &delivery.Error{Channel: "webhook receiver", Status: 410, Permanent: true, Detail: "endpoint disabled after an earlier 410 Gone"}
	}
	sendBy := attemptDeadline(ctx)
	if activity.GetInfo(ctx).IsLocalActivity {
		// A local activity cannot heartbeat the provider's message id:
		// its record must finish, or fail with the proof, first.
		sendBy = sendBy.Add(-budget.LocalRecordReserve)
	}
	sendCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), sendBy)
	defer cancel()
	began := time.Now()
	if dg.Key != "" {
		providerID, err = a.sendDigest(sendCtx, t, dg)
	} else {
		providerID, err = a.send(sendCtx, in, t, key)
	}
	return providerID, time.Since(began), err
}

// notSent settles a call that did not end in the provider's acceptance: a
// permanent refusal fails the key; an ambiguous outcome keeps the claim
// (an ambiguous outcome is a send); a refusal for now, or no request at
// all, releases it. It returns the attempt's error.
func (a *Activities) notSent(ctx context.Context, in NotifyInput, t mirror.Target, key, owner string, err error, logger log.Logger) error {
	provider := providerOf(in, t)
	var derr *delivery.Error
	if errors.As(err, &derr) && derr.OperatorDetail != "" {
		// For the operator only (the address a guard refused, a lookup's
		// or a socket's verdict): the reminder's trail gets derr.Error().
		logger.Warn("delivery not made", "error", derr.Error(), "detail", derr.OperatorDetail)
	}
	switch {
	case errors.As(err, &derr) && derr.Permanent:
		return a.failed(ctx, key, owner, t, in, derr)
	case errors.As(err, &derr) && derr.MaybeSent:
		// An ambiguous outcome is a send: the claim is kept, and nothing
		// sends the key again before the provider's evidence, or the
		// wait for it, says whether it went.
		a.unconfirmed(ctx, key, owner, derr, logger)
		delay := evidencePoll(1, a.EvidenceWait)
		if t.Reminder.Channel != reminder.Email && in.purpose() != reminder.PurposeEscalation {
			// No provider reports on it (the mirror's claim waits for
			// evidence on email only): its receiver drops the repeat by
			// the key, and the retry follows the backoff.
			delay = a.backoff(ctx, provider, derr, activity.GetInfo(ctx).Attempt)
		}
		return temporal.NewApplicationErrorWithOptions(derr.Error(), ErrTypeSendUnconfirmed,
			temporal.ApplicationErrorOptions{NextRetryDelay: delay})
	case errors.As(err, &derr):
		a.release(ctx, key, owner, logger)
		return temporal.NewApplicationErrorWithOptions(derr.Error(), errTypeDeliveryFailed,
			temporal.ApplicationErrorOptions{NextRetryDelay: a.backoff(ctx, provider, derr, activity.GetInfo(ctx).Attempt)})
	}
	// Refused before any request was made (the body, the signature).
	a.release(ctx, key, owner, logger)
	return err
}

// failed records a permanent refusal (and, for a webhook's 410 Gone,
// disables the endpoint) and returns the non-retryable error.
func (a *Activities) failed(ctx context.Context, key, owner string, t mirror.Target, in NotifyInput, derr *delivery.Error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if derr.Status == 410 && t.Reminder.Channel == reminder.Webhook && in.purpose() != reminder.PurposeEscalation {
		if err := a.Mirror.DisableEndpoint(ctx, t.Reminder.ID, t.Reminder.WebhookURL, derr.Error()); err != nil {
			return err
		}
	}
	if err := a.Mirror.RecordDeliveryFailed(ctx, key, owner, derr.Error()); err != nil {
		return err
	}
	return temporal.NewNonRetryableApplicationError(derr.Error(), ErrTypePermanentDelivery, nil)
}

// unconfirmed keeps the claim of a call that got no answer after its
// request may have left, marked maybe sent; if that write fails, the lease
// lapses and the next claim finds it the same.
func (a *Activities) unconfirmed(ctx context.Context, key, owner string, derr *delivery.Error, logger log.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	logger.Warn("the provider gave no answer after the request may have reached it; the key stays claimed", "error", derr.Error())
	if err := a.Mirror.MarkMaybeSent(ctx, key, owner, derr.Error()); err != nil {
		logger.Warn("could not record the unconfirmed send; the claim lapses with its lease instead", "error", err)
	}
}

// backoff is the wait before the next attempt after the provider failed
// this one: as long as it asked, and at least what its outage, shared by
// every worker through the mirror, calls for (delivery.Backoff); outside
// an outage, what it asked or else the reminder's own backoff. A refusal
// of our own key is no outage.
func (a *Activities) backoff(ctx context.Context, provider string, derr *delivery.Error, attempt int32) time.Duration {
	own := derr.RetryAfter
	if own <= 0 {
		own = ownBackoff(attempt)
	}
	if derr.Credentials || a.OwnBackoffOnly {
		return own
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	a.failing.Store(provider, true)
	outage, err := a.Mirror.NoteProviderFailure(ctx, provider, outageQuiet)
	if err != nil {
		return own
	}
	if paced := delivery.Backoff(ownBackoff(attempt), outage.For, rand.Float64()); paced > 0 {
		return max(derr.RetryAfter, paced)
	}
	return own
}

// withOwnBackoff gives a retryable failure of Notify's that names no wait
// the one the reminder's own backoff gives attempt (ownBackoff), so every
// failure Notify reports names its wait, and the retry policy's shorter
// ceiling (workflows' changeTimeoutRetryCeiling) bounds only an attempt
// that could report nothing: one that timed out, or whose worker stopped.
// Typed failures name their waits where they are made.
func withOwnBackoff(err error, attempt int32) error {
	var appErr *temporal.ApplicationError
	if err == nil || errors.As(err, &appErr) || errors.Is(err, context.Canceled) {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), "", temporal.ApplicationErrorOptions{
		NextRetryDelay: ownBackoff(attempt), Cause: err,
	})
}

// answered tells the shared record that a provider this worker saw fail
// answers again, ending its outage; for a healthy provider it does nothing.
func (a *Activities) answered(ctx context.Context, provider string, logger log.Logger) {
	if _, saw := a.failing.LoadAndDelete(provider); !saw {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := a.Mirror.NoteProviderSuccess(ctx, provider); err != nil {
		logger.Warn("could not record that the provider answers again", "error", err)
	}
}

// ownBackoff is the wait the notify retry policy gives before attempt+1.
func ownBackoff(attempt int32) time.Duration {
	d := NotifyInitialInterval
	for i := int32(1); i < attempt && d < NotifyMaximumInterval; i++ {
		d *= 2
	}
	return min(d, NotifyMaximumInterval)
}

// evidencePoll is how soon an attempt that found a key maybe sent looks for
// the provider's event again: soon at first (events come within seconds),
// then less often, and just after the wait for it ends.
func evidencePoll(attempt int32, left time.Duration) time.Duration {
	return max(min(ownBackoff(attempt), 30*time.Second, left+500*time.Millisecond), time.Second)
}

// providerOf names the provider a delivery calls, for its shared health
// record: the mail API, the webhook receiver's host (never its URL), or a
// channel beyond them by its name.
func providerOf(in NotifyInput, t mirror.Target) string {
	switch {
	case t.Reminder.Channel == reminder.Email || in.purpose() == reminder.PurposeEscalation:
		return "email"
	case t.Reminder.Channel != reminder.Webhook:
		return "channel:" + string(t.Reminder.Channel)
	}
	host := t.Reminder.WebhookURL
	if u, err := url.Parse(t.Reminder.WebhookURL); err == nil {
		host = u.Host
	}
	sum := sha256.Sum256([]byte(host))
	return "webhook:" + hex.EncodeToString(sum[:8])
}

// waitForSendSlot holds a call to the provider's rate cap, kept in the
// mirror for every worker: it waits in place for a slot up to maxSlotWait
// (leaving the look for a cancel and the call their budgets), heartbeating
// as it waits, and past that asks to be retried when one is near. waited
// says whether it waited. Nothing has been sent; the caller releases its
// claim if it fails.
func (a *Activities) waitForSendSlot(ctx context.Context) (waited bool, err error) {
	if a.SendsPerSecond <= 0 {
		return false, nil
	}
	every := time.Duration(float64(time.Second) / a.SendsPerSecond)
	ahead := max(min(maxSlotWait, time.Until(attemptDeadline(ctx))-budget.CancelLook-budget.SendAllowance-time.Second), 0)
	wait, ok, err := a.Mirror.TakeSendSlot(ctx, "notify", every, ahead)
	if err != nil {
		return false, err
	}
	if !ok {
		// Spread the retries over the wait, so they do not all come back
		// for the same slot.
		retry := wait + time.Duration(rand.Float64()*float64(max(wait, every)))
		return false, temporal.NewApplicationErrorWithOptions("the provider's rate cap has no slot within "+maxSlotWait.String()+
			"; nothing was sent", errTypeRateCapped, temporal.ApplicationErrorOptions{NextRetryDelay: retry})
	}
	if wait <= 0 {
		return false, nil
	}
	return true, waitHearing(ctx, wait)
}

// waitHearing waits d, heartbeating as it goes, so a cancel that reaches
// Temporal meanwhile ends the wait early: the SDK cancels ctx when a
// heartbeat's answer says so. Its heartbeats may be held for the SDK's
// throttle, so a wait that ends is followed by lookForCancel all the same.
func waitHearing(ctx context.Context, d time.Duration) error {
	end := time.NewTimer(d)
	defer end.Stop()
	beat := time.NewTicker(budget.HeartbeatThrottle)
	defer beat.Stop()
	for {
		select {
		case <-end.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-beat.C:
			activity.RecordHeartbeat(ctx, sentProgress{})
		}
	}
}

// lookForCancel asks Temporal, just before the provider call, whether this
// attempt was cancelled; after a wait (asked) the answer to the attempt's
// first heartbeat is no longer news. activity.RecordHeartbeat cannot be
// the look: the SDK sends a heartbeat to the server only when none went in
// its throttle interval (a second), holds it otherwise, and returns
// nothing either way, so a heartbeat made after the wait may not reach the
// server before the call. The look is its own RecordActivityTaskHeartbeat
// call, bounded by budget.CancelLook, whose answer says whether a cancel
// (or a pause or reset) was requested. On a cancel, the SDK's own heartbeat
// then cancels ctx, so the attempt ends as cancelled, and nothing is sent.
// A look that gets no answer sends nothing either: the attempt is retried.
// A local attempt, which no cancel stops, is not looked for.
func (a *Activities) lookForCancel(ctx context.Context, asked bool) error {
	if err := ctx.Err(); err != nil || !asked {
		return err
	}
	info := activity.GetInfo(ctx)
	c := activity.GetClient(ctx)
	if info.IsLocalActivity || c == nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, budget.CancelLook)
	defer cancel()
	// No details: the server keeps the heartbeat's details as the
	// attempt's progress, and before the send there is none (the first
	// heartbeat's sentProgress{} says as much).
	resp, err := c.WorkflowService().RecordActivityTaskHeartbeat(lctx, &workflowservice.RecordActivityTaskHeartbeatRequest{
		TaskToken: info.TaskToken, Namespace: info.WorkflowNamespace, Identity: "shipnotify notify: look for a cancel",
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("error looking for a cancel before the send (nothing was sent): %w", err)
	case resp.GetCancelRequested() || resp.GetActivityPaused() || resp.GetActivityReset():
		return heardCancel(ctx)
	}
	return nil
}

// heardCancel ends an attempt whose look found it cancelled: the SDK's own
// heartbeat (sent at once, or when its throttle interval ends) hears the
// same answer and cancels ctx, and the attempt reports itself cancelled.
func heardCancel(ctx context.Context) error {
	activity.RecordHeartbeat(ctx, sentProgress{})
	wait := time.NewTimer(2*budget.HeartbeatThrottle + time.Second)
	defer wait.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wait.C:
		return temporal.NewCanceledError("the attempt was cancelled before the send; nothing was sent")
	}
}

func withDetail(detail map[string]any, k string, v any) map[string]any {
	out := map[string]any{k: v}
	for dk, dv := range detail {
		out[dk] = dv
	}
	return out
}

// release gives the claim up; if that fails too, the lease runs out instead.
func (a *Activities) release(ctx context.Context, key, owner string, logger log.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := a.Mirror.ReleaseDelivery(ctx, key, owner); err != nil {
		logger.Warn("could not release the delivery claim; it lapses with its lease", "error", err)
	}
}

// attemptDeadline is when Temporal gives up on this attempt.
func attemptDeadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// leaseFor is how long this attempt's claim must hold: the rest of the
// attempt, then the record that may outlive it, with a margin.
func leaseFor(ctx context.Context) time.Duration {
	return time.Until(attemptDeadline(ctx)) + recordTimeout + budget.LeaseMargin
}

// notInTheMirror fails a delivery for good: no retry brings the row back.
func notInTheMirror(err error) error {
	return temporal.NewNonRetryableApplicationError("reminder is not in the mirror", ErrTypeReminderNotFound, err)
}

func errType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

func isNonRetryable(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}

// nothingToSend says why a notice has no one to go to, if it has none.
func (a *Activities) nothingToSend(ctx context.Context, in NotifyInput) (string, error) {
	switch in.purpose() {
	case reminder.PurposeCancellation:
		// No attempt of the reminder's own delivery runs any more: a claim
		// one left without a word may have sent, and says so from now.
		if err := a.Mirror.AbandonClaims(ctx, in.ReminderID); err != nil {
			return "", err
		}
		delivered, err := a.Mirror.WasDelivered(ctx, in.ReminderID)
		if err != nil || delivered {
			return "", err
		}
		return "the reminder was never delivered (or its provider bounced it)", nil
	case reminder.PurposeEscalation:
		contact, state, err := a.Mirror.EscalationContact(ctx, in.ReminderID)
		switch {
		case err != nil:
			return "", err
		case contact == "":
			return "the update names no escalation contact", nil
		case in.Reason == "approval_timeout" && state != reminder.AwaitingApproval:
			return "the reminder no longer awaits approval (" + string(state) + ")", nil
		case in.Reason == "delivery_deferred" && state != reminder.Sent:
			return "the reminder is no longer deferred (" + string(state) + ")", nil
		}
	}
	return "", nil
}

// recordSent records a completed send; if the mirror does not take it, the
// error carries the proof of the send to whatever retries.
func (a *Activities) recordSent(ctx context.Context, key, providerID string, detail map[string]any) error {
	delivered, err := a.record(ctx, key, providerID, detail)
	if err == nil {
		// A webhook's 2xx is its delivery, and an email SendGrid reported
		// before this record is delivered by it: the SLO's observation is
		// here, whichever attempt recorded (serve observes the rest).
		for _, d := range delivered {
			a.Metrics.Delivered(string(d.Channel), d.DeliveredAt.Sub(d.DueAt))
		}
		return nil
	}
	return temporal.NewApplicationErrorWithOptions("sent, but not recorded: "+err.Error(), ErrTypeSentNotRecorded,
		temporal.ApplicationErrorOptions{Cause: err, Details: []any{SentProof{ProviderMessageID: providerID}},
			NextRetryDelay: ownBackoff(activity.GetInfo(ctx).Attempt)})
}

// record writes a completed send, retrying a short while so a brief
// database outage does not turn into a second send. It runs on a context
// that outlives the attempt's cancellation, under its own timeout.
func (a *Activities) record(ctx context.Context, key, providerID string, detail map[string]any) ([]mirror.DeliveredReminder, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	tries := a.RecordRetries
	if tries == 0 {
		tries = 5
	}
	wait := 200 * time.Millisecond
	for i := 0; ; i++ {
		delivered, err := a.Mirror.RecordSent(ctx, key, providerID, detail)
		if err == nil || i == tries-1 {
			return delivered, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// TransitionInput is a state change of a reminder to mirror.
type TransitionInput struct {
	ReminderID string
	// From, when set, are the states the change may leave: from any other
	// it is refused (ErrTypeTransitionRefused) and nothing is written.
	// Without it, the change is made unless the reminder is finished, and
	// its event is appended either way (as a note when nothing moved:
	// "cancelled_late" after sent, reminder.LateEvent).
	From   []reminder.State `json:",omitempty"`
	To     reminder.State
	Event  string
	Detail map[string]any
}

// ErrTypeTransitionRefused: the mirror did not make a state change because
// the reminder was not in a state it may leave by it; the error's details
// carry the state it found. Not retried.
const ErrTypeTransitionRefused = "TransitionRefused"

// RecordTransition mirrors a workflow's state change and appends its event.
// Small and idempotent enough to run as a local activity.
func (a *Activities) RecordTransition(ctx context.Context, in TransitionInput) error {
	if len(in.From) == 0 {
		_, err := a.Mirror.Transition(ctx, in.ReminderID, in.To, in.Event, in.Detail)
		return err
	}
	return refusal(a.Mirror.TransitionFrom(ctx, in.ReminderID, in.From, in.To, in.Event, in.Detail))
}

// refusal turns the mirror's refusal of a change into the workflow's
// non-retryable answer, with the state the mirror holds.
func refusal(err error) error {
	var refused *mirror.RefusedError
	if errors.As(err, &refused) {
		return temporal.NewNonRetryableApplicationError(refused.Error(), ErrTypeTransitionRefused, nil, refused.State)
	}
	return err
}

// RecordCancel mirrors a cancel that met a send which did not report one:
// a pending reminder whose own delivery may have reached the provider ends
// sent, as a sent one would, with "cancelled_late" after it; otherwise it
// ends cancelled, and "cancelled" is appended ("cancelled_late" when the
// send was recorded first). It returns the state the row is in after
// (cancelled, sent, or the final state it had reached), which the workflow
// takes; the notice goes exactly when it is sent (nothingToSend). A local
// activity (mirror.Store.CancelDuringSend).
func (a *Activities) RecordCancel(ctx context.Context, in TransitionInput) (reminder.State, error) {
	return a.Mirror.CancelDuringSend(ctx, in.ReminderID, in.Event, in.Detail)
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
	return refusal(a.Mirror.Reschedule(ctx, in.ReminderID, in.DueAt, in.DeliveryKey, in.Detail))
}
