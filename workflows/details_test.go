package workflows_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// queryMetadataName is the SDK's built-in query that serves the current
// details (client.QueryTypeWorkflowMetadata is not exported in v1.51).
const queryMetadataName = "__temporal_workflow_metadata"

// currentDetails reads the workflow's current details as the Web UI does.
func (h *harness) currentDetails() string {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(queryMetadataName)
	require.NoError(h.t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(h.t, v.Get(&md))
	return md.GetCurrentDetails()
}

// detailsAt records the current details after d of workflow time.
func (h *harness) detailsAt(d time.Duration) *string {
	var got string
	h.env.RegisterDelayedCallback(func() { got = h.currentDetails() }, d)
	return &got
}

// The current details follow the reminder through its life: awaiting
// approval (then escalated), sleeping until the due time (the new one
// after a reschedule), sending, done.
func TestCurrentDetailsSayWhatTheReminderWaitsFor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 10*time.Minute)
	awaiting := h.detailsAt(time.Hour)
	escalated := h.detailsAt(day + time.Hour)
	h.update(2*day, workflows.UpdateApprove, workflows.Decision{By: "alice"})
	sleeping := h.detailsAt(2*day + time.Hour)
	h.update(3*day, workflows.UpdateReschedule, workflows.RescheduleRequest{DueAt: t0.Add(6 * day), By: "ops"})
	moved := h.detailsAt(3*day + time.Hour)
	sending := h.detailsAt(6*day + time.Minute)

	res := h.run(withApproval(input(t0.Add(5 * day))))

	require.Equal(t, reminder.Sent, res.State)
	require.Equal(t, "Waiting for approval until 2026-12-03 09:00 UTC (escalates at 2026-12-01 09:00 UTC); then due at 2026-12-05 09:00 UTC", *awaiting)
	require.Equal(t, "Waiting for approval until 2026-12-03 09:00 UTC (escalated at 2026-12-01 09:00 UTC); then due at 2026-12-05 09:00 UTC", *escalated)
	require.Equal(t, "Sleeping until due at 2026-12-05 09:00 UTC", *sleeping)
	require.Equal(t, "Sleeping until due at 2026-12-06 09:00 UTC", *moved, "the live due time, not the one the static summary names")
	require.Equal(t, "Sending (due at 2026-12-06 09:00 UTC); a failed attempt is retried until 2026-12-09 09:00 UTC: see Pending Activities for the attempt", *sending)
	require.Equal(t, "Done: sent at 2026-12-06 09:10 UTC", h.currentDetails())
}

// Each way a reminder ends has its own last line.
func TestCurrentDetailsSayHowTheReminderEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(h *harness)
		in    workflows.ReminderInput
		want  string
	}{
		{"rejected", func(h *harness) {
			// It lands a moment after its acceptance.
			h.update(time.Hour-landing, workflows.UpdateReject, workflows.Decision{By: "alice", Reason: "wrong window"})
		}, withApproval(input(t0.Add(2 * day))), "Done: rejected at 2026-11-30 10:00 UTC; nothing sent"},
		{"expired", func(*harness) {}, withApproval(input(t0.Add(5 * day))),
			"Done: expired at 2026-12-03 09:00 UTC, with no decision by the final deadline"},
		{"cancelled", func(h *harness) {
			h.update(time.Hour, workflows.UpdateCancel, workflows.CancelRequest{By: "tracker", Reason: "shipment cancelled"})
		}, input(t0.Add(2 * day)), "Done: cancelled at 2026-11-30 10:00 UTC; nothing sent"},
		{"failed", func(h *harness) {
			h.fail = temporal.NewNonRetryableApplicationError("mailbox unknown", activities.ErrTypePermanentDelivery, nil)
		}, input(t0), "Done: failed for good at 2026-11-30 09:00 UTC (the reminder's events say why, and whether the escalation contact was told)"},
		{"finished in the mirror", func(h *harness) {
			h.fail = temporal.NewNonRetryableApplicationError("finished", activities.ErrTypeReminderFinished, nil, reminder.Cancelled)
		}, input(t0), "Done: already cancelled in the mirror (by another path) at 2026-11-30 09:00 UTC; nothing sent"},
		{"suppressed", func(h *harness) {
			h.fail = temporal.NewNonRetryableApplicationError("suppressed", activities.ErrTypeReminderFinished, nil, reminder.Suppressed)
		}, input(t0), "Done: suppressed at 2026-11-30 09:00 UTC: the subscriber's address opted out of this tracker's mail; nothing sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			tc.setup(h)
			h.env.ExecuteWorkflow(workflows.ReminderWorkflow, tc.in)
			require.True(t, h.env.IsWorkflowCompleted())
			require.Equal(t, tc.want, h.currentDetails())
		})
	}
}

func TestCancellationNoticeCurrentDetails(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mayHaveSent = true
	h.env.ExecuteWorkflow(workflows.CancellationNoticeWorkflow, workflows.CancellationNoticeInput{
		ReminderID: "SHP-1/window-1/ops", ShipmentID: "SHP-1", UpdateID: "window-1", SubscriberID: "ops",
		By: "tracker", Reason: "shipment cancelled",
	})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	require.Equal(t, "Done: sent, then cancelled; the cancellation notice was sent at 2026-11-30 09:00 UTC", h.currentDetails())
}

// The static summary and details name the ids, the due time at start and
// the approval policy, and nothing else.
func TestStaticSummaryAndDetails(t *testing.T) {
	t.Parallel()
	in := withApproval(input(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)))
	require.Equal(t, "Reminder SHP-1/window-1/ops due 2026-12-03 08:00 UTC", workflows.ReminderSummary(in))
	details := workflows.ReminderDetails(in, false)
	for _, want := range []string{
		"**Shipment:** SHP-1 · **Update:** window-1 · **Subscriber:** ops  \n",
		"**Due at start:** 2026-12-03 08:00 UTC",
		"**Approval:** required: escalates 1d after scheduling, expires 3d after scheduling",
	} {
		require.Contains(t, details, want)
	}
	require.Contains(t, workflows.ReminderDetails(input(t0), false), "**Approval:** not required")
	require.Contains(t, workflows.ReminderDetails(input(t0), true),
		"**Due at start:** 2026-11-30 09:00 UTC (start delay: no Current Details until then)", "a delayed start says why there are no current details")
	require.Equal(t, "Reminder SHP-1/window-1/ops due 2026-11-30 09:00:01 UTC",
		workflows.ReminderSummary(input(t0.Add(time.Second+time.Millisecond))), "seconds when the due time has them")

	notice := workflows.CancellationNoticeInput{ReminderID: "SHP-1/window-1/ops", ShipmentID: "SHP-1", UpdateID: "window-1",
		SubscriberID: "ops", By: "alice@shipper.example", Reason: "customer called Ms Privacy"}
	require.Equal(t, "Cancellation notice for reminder SHP-1/window-1/ops", workflows.CancellationNoticeSummary(notice))
	nd := workflows.CancellationNoticeDetails(notice)
	require.Contains(t, nd, "**Subscriber:** ops")
	require.NotContains(t, nd, "alice", "who cancelled may be a person: it stays in the mirror")
	require.NotContains(t, nd, "Privacy")
}

// The server refuses a start whose encoded summary exceeds 400 bytes
// (limit.userMetadataSummarySize). The longest ids the update contract
// allows, encrypted under the longest key id the codec allows, stay within
// it.
func TestStaticSummaryFitsTheServerLimit(t *testing.T) {
	t.Parallel()
	keys, err := codec.ParseKeys(strings.NewReader(codec.NewKey(strings.Repeat("k", 64))))
	require.NoError(t, err)
	c, err := codec.New(keys, codec.Options{})
	require.NoError(t, err)
	dc := c.DataConverter()

	long := strings.Repeat("x", 64)
	in := workflows.ReminderInput{
		ReminderID: reminder.ID("", long, long, long), ShipmentID: long, UpdateID: long, SubscriberID: long,
		DueAt: time.Date(2026, 12, 3, 8, 0, 59, 1, time.UTC),
	}
	notice := workflows.CancellationNoticeInput{ReminderID: in.ReminderID, ShipmentID: long, UpdateID: long, SubscriberID: long}
	for _, s := range []string{workflows.ReminderSummary(in), workflows.CancellationNoticeSummary(notice)} {
		require.True(t, strings.HasSuffix(s, "…") || strings.HasSuffix(s, "due 2026-12-03 08:00:59 UTC"), s)
		p, err := dc.ToPayload(s)
		require.NoError(t, err)
		require.LessOrEqual(t, p.Size(), 400, "encoded summary of %q", s)
	}
	for _, d := range []string{workflows.ReminderDetails(withApproval(in), false), workflows.CancellationNoticeDetails(notice)} {
		require.Contains(t, d, "**Subscriber:** "+long, "the details carry the ids whole")
		p, err := dc.ToPayload(d)
		require.NoError(t, err)
		require.LessOrEqual(t, p.Size(), 20_000, "limit.userMetadataDetailsSize")
	}
}
