// Package budget holds shipnotify's time budgets in one place: how long a
// provider call, a notify attempt, its record, a stopping worker, the
// starter's waits and an API request may take. Each is derived from the
// budgets it must outlast where it can be; the other relations are
// asserted in budget_test.go, so changing one says which others must move.
// The packages that apply a budget name it where they use it
// (activities.SendAllowance, worker.StopTimeout, ...). It is a leaf, importing
// nothing of shipnotify's, so it stands at the top beside reminder and
// delivery, below every package that applies it.
package budget

import "time"

// The provider calls.
const (
	// EmailCall bounds one SendGrid API call, connection to last byte
	// (email.DefaultTimeout).
	EmailCall = 20 * time.Second
	// WebhookCall bounds one webhook delivery (webhook.Timeout).
	WebhookCall = 15 * time.Second
	// SendAllowance is the least time a provider call is given on every
	// path: the longer client timeout, so the client, never a shorter
	// deadline of ours, decides when a provider is too slow.
	SendAllowance = max(EmailCall, WebhookCall)
)

// A notify attempt.
const (
	// NotifyAttempt is one notify attempt's StartToCloseTimeout: its wait
	// for a slot of the rate cap, the provider call, and the record.
	NotifyAttempt = 30 * time.Second
	// SlotWait is the longest an attempt waits in place for its slot of
	// the provider's rate cap; a slot further out is asked for by a retry.
	SlotWait = 5 * time.Second
	// CancelLook bounds the look for a cancel an attempt makes after a
	// wait, just before the provider call (a heartbeat that reaches the
	// server); without an answer in it nothing is sent.
	CancelLook = 2 * time.Second
	// Record bounds the write of a completed send (and the claim's other
	// writes after the call). It runs on a context the attempt's cancel
	// does not end; the claim's lease covers it.
	Record = 10 * time.Second
	// LeaseMargin is how much longer a claim's lease runs than its
	// attempt's deadline plus Record, so the lease never lapses under a
	// record still being written.
	LeaseMargin = 2 * time.Second
	// LocalRecordReserve is the part of a local attempt (reminders at
	// changeLocalFirstAttempt's version 1) kept for the record: a local
	// activity cannot heartbeat the provider's message id, so its call ends
	// this long before the attempt's deadline.
	LocalRecordReserve = Record + time.Second
	// LocalAttempt bounds that local attempt: an honest provider call, a
	// second for the claim, and the record's reserve.
	LocalAttempt = SendAllowance + time.Second + LocalRecordReserve
	// NotifyRetries bounds all of a notify's attempts (its
	// ScheduleToCloseTimeout): about three days, as Stripe and Svix give
	// webhooks; after it the reminder fails.
	NotifyRetries = 72 * time.Hour
	// TimedOutRetryCeiling is the notify retry policy's MaximumInterval
	// from level 2: what an attempt that timed out, or whose worker
	// stopped, waits at most (every failure the activity reports names its
	// own wait).
	TimedOutRetryCeiling = 30 * time.Second
	// Recovery is how soon after a provider answers again an attempt that
	// timed out during its outage is back.
	Recovery = time.Minute
)

// A stopping worker.
const (
	// WorkerStop is how long a stopping worker lets its activities finish
	// before it cancels them: a notify attempt, the record that may follow
	// it, and a margin, so a deploy never cuts a provider call short and
	// turns an accepted send into a second one. Give the process a grace
	// period above it (compose's stop_grace_period, which
	// deploy.TestComposeFile holds above it; Kubernetes'
	// terminationGracePeriodSeconds).
	WorkerStop = NotifyAttempt + Record + 5*time.Second
	// HeartbeatThrottle is how long the SDK may hold an activity's
	// heartbeat: the provider's message id reaches Temporal within it, not
	// the SDK's default 30 s, so a retry finds it.
	HeartbeatThrottle = time.Second
)

// The operator's changes and the API.
const (
	// OperatorWrite bounded the workflow's mirror write of an operator's
	// change (a reschedule, a decision) in reminders before
	// changeAcceptedFirst; from it the write, made once the change is
	// accepted, is retried until the mirror takes or refuses it.
	OperatorWrite = 20 * time.Second
	// UpdateWait is how long the starter waits for a workflow to take a
	// reschedule or a decision. The request's deadline is half of it: a
	// change the workflow had not accepted by the end of the wait can no
	// longer be (LateAcceptance), and one it accepted lands.
	UpdateWait = time.Minute
	// WorkflowTask is a workflow task's timeout: Temporal's default, which
	// the starter sets on every reminder it starts (a continue-as-new
	// keeps it). A task that outlives it cannot complete,
	// so a change its update validator passed is accepted within it or not
	// at all.
	WorkflowTask = 10 * time.Second
	// CallerClockAhead is the most a caller's clock (serve's, the CLI's)
	// may run ahead of Temporal's for a change's deadline to hold.
	CallerClockAhead = 5 * time.Second
	// LateAcceptance is how long after its deadline, by the caller's
	// clock, a change may still be accepted: its validator passed in a
	// task started by the deadline, which completes within WorkflowTask.
	LateAcceptance = WorkflowTask + CallerClockAhead
	// CancelWait is how long the starter waits for a workflow to take a
	// cancel before it cancels the workflow itself.
	CancelWait = 20 * time.Second
	// MinAPIRequest is the shortest request deadline the API accepts:
	// above the starter's waits, so an operation answers with its outcomes
	// rather than a timeout.
	MinAPIRequest = max(UpdateWait, CancelWait) + 5*time.Second
	// APIRequest is the API's default request deadline.
	APIRequest = 90 * time.Second
	// ServeShutdownMargin is how much longer than its request deadline a
	// stopping serve waits for the requests in flight. Give the process a
	// grace period above both (compose's stop_grace_period, the chart's
	// terminationGracePeriodSeconds).
	ServeShutdownMargin = 5 * time.Second
	// ApproversReload bounds how long a reload of the console's approvers
	// file waits for the mirror to end a removed approver's sessions
	// (cli.ServeKeyFiles); past it the console tries at the next reload.
	ApproversReload = 10 * time.Second
)

// The product's own transactions on the mirror, as its runtime role (the
// pool DATABASE_URL opens): bounds PostgreSQL enforces on each session, so
// a transaction the product leaves open, or a frozen process holds, ends
// on the server instead of holding back the trail's dates, the change
// feed and the locks. migrate and prune, as their own roles, are not
// bounded.
const (
	// EscalationStart bounds one escalation's start in Temporal, the
	// longest wait the product makes inside a transaction: the escalator
	// holds the rows it starts.
	EscalationStart = 10 * time.Second
	// EscalationBatch is how many escalations one transaction starts.
	EscalationBatch = 100
	// IdleInTransaction is the session's
	// idle_in_transaction_session_timeout: the longest a transaction may
	// sit between statements.
	IdleInTransaction = time.Minute
	// Transaction is the session's transaction_timeout (PostgreSQL 17
	// and later; an older server has none): the longest a transaction may
	// last, above a pass of escalation starts.
	Transaction = 30 * time.Minute
)
