package starter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// queryWorkflowMetadata is the SDK's built-in query serving a workflow's
// current details, as the Web UI asks it.
const queryWorkflowMetadata = "__temporal_workflow_metadata"

// userMetadata is a workflow's static summary and details as the server
// keeps them (encrypted) and as the codec server gives them to the Web UI.
func userMetadata(t *testing.T, s *testenv.Stack, workflowID string) (summary, details string) {
	t.Helper()
	desc, err := s.Temporal.DescribeWorkflowExecution(context.Background(), workflowID, "")
	require.NoError(t, err)
	md := desc.GetExecutionConfig().GetUserMetadata()
	dc := testenv.Codec(t).DataConverter()
	decode := func(p *commonpb.Payload) string {
		require.NotNil(t, p, "%s has no summary or details", workflowID)
		require.Equal(t, codec.Encoding, string(p.GetMetadata()["encoding"]), "encrypted like every payload")
		var text string
		require.NoError(t, dc.FromPayload(p, &text))
		return text
	}
	return decode(md.GetSummary()), decode(md.GetDetails())
}

// currentDetails is a running workflow's current-details line.
func currentDetails(t *testing.T, s *testenv.Stack, workflowID string) string {
	t.Helper()
	v, err := s.Temporal.QueryWorkflow(context.Background(), workflowID, "", queryWorkflowMetadata)
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}

// waitForDetails waits until the workflow's current details start with
// prefix and returns them.
func waitForDetails(t *testing.T, s *testenv.Stack, workflowID, prefix string) string {
	t.Helper()
	var got string
	require.Eventually(t, func() bool {
		got = currentDetails(t, s, workflowID)
		return strings.HasPrefix(got, prefix)
	}, 30*time.Second, 20*time.Millisecond, "current details of %s: want %q…, last %q", workflowID, prefix, got)
	return got
}

// The Web UI shows each reminder's ids and due time (its static summary
// and details) and what it waits for (its current details): awaiting
// approval, sleeping until the due time, the new due time after a
// reschedule; a reminder in its start delay, which no worker has run, says
// so in its static details and shows its due time as its Execution Time. None of it carries the subscriber's address or URL, the
// secret or the message.
func TestWebUIShowsIdsAndWhatTheReminderWaitsFor(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{DelayedStart: true})
	ctx := context.Background()
	due := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Minute)
	u := s.Update(t, due, reminder.Email, reminder.Webhook)
	u.Message = reminder.Message{Subject: "Dock 4 slot for Ms Privacy", Text: "Gate code 4711, ask for Ms Privacy."}
	u.Subscribers[0].RequiresApproval = true
	u.Approval = reminder.Approval{Timeout: 24 * time.Hour, ExpireAfter: 72 * time.Hour}
	u.EscalationEmail = escalationContact
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	require.Len(t, results, 2)
	t.Cleanup(func() {
		_, _ = s.Starter.Cancel(context.Background(), "", u.ShipmentID, starter.Actor{By: "test", Reason: "test over"})
	})
	personal := []string{u.Subscribers[0].Email, u.EscalationEmail, u.Subscribers[1].URL, "/hooks/", s.HookSecret,
		strings.TrimPrefix(s.HookSecret, "whsec_"), u.Message.Subject, u.Message.Text, "Ms Privacy", "Gate code"}
	noPersonalData := func(where, text string) {
		t.Helper()
		for _, p := range personal {
			require.NotContains(t, text, p, where)
		}
	}
	dueText := due.Format("2006-01-02 15:04 UTC")

	approval, hook := results[0], results[1]
	for _, r := range results {
		summary, details := userMetadata(t, s, r.WorkflowID)
		require.Equal(t, "Reminder "+r.ReminderID+" due "+dueText, summary)
		for _, want := range []string{
			"**Shipment:** " + u.ShipmentID + " ", "**Update:** " + u.UpdateID + " ",
			"**Subscriber:** " + r.SubscriberID + "  \n", "**Due at start:** " + dueText,
		} {
			require.Contains(t, details, want, r.WorkflowID)
		}
		noPersonalData("summary of "+r.WorkflowID, summary)
		noPersonalData("details of "+r.WorkflowID, details)
	}
	_, details := userMetadata(t, s, approval.WorkflowID)
	require.Contains(t, details, "**Approval:** required: escalates 1d after scheduling, expires 3d after scheduling")
	require.Contains(t, details, "(a reschedule moves it: see Current Details)", "an approval reminder starts at once")
	_, details = userMetadata(t, s, hook.WorkflowID)
	require.Contains(t, details, "**Approval:** not required")

	waiting := waitForDetails(t, s, approval.WorkflowID, "Waiting for approval until ")
	require.Contains(t, waiting, "(escalates at ")
	require.True(t, strings.HasSuffix(waiting, "; then due at "+dueText), waiting)

	// The plain reminder is in its start delay: no worker has run it, so it
	// has no current details; its static details say why, and its
	// Execution Time is its due time.
	require.Contains(t, details, "**Due at start:** "+dueText+" (start delay: no Current Details until then)")
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, hook.WorkflowID, "")
	require.NoError(t, err)
	require.WithinDuration(t, due, desc.GetWorkflowExecutionInfo().GetExecutionTime().AsTime(), time.Second)
	_, err = s.Temporal.QueryWorkflow(ctx, hook.WorkflowID, "", queryWorkflowMetadata)
	var notReady *serviceerror.WorkflowNotReady
	require.ErrorAs(t, err, &notReady, "no worker has run it")
	hookMoved := due.Add(2 * time.Hour)
	out, err := s.Starter.RescheduleReminder(ctx, "", hook.ReminderID, hookMoved, starter.Actor{By: "ops"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRescheduled, out.Status, out.Error)
	require.Equal(t, "Sleeping until due at "+hookMoved.Format("2006-01-02 15:04 UTC"), currentDetails(t, s, hook.WorkflowID),
		"a reschedule wakes it, and it sleeps on a timer from then")

	outs, err := s.Starter.Decide(ctx, starter.Selection{ReminderID: approval.ReminderID}, true, starter.Actor{By: "alice"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusApproved, outs[0].Status)
	require.Equal(t, "Sleeping until due at "+dueText, waitForDetails(t, s, approval.WorkflowID, "Sleeping"))

	moved := due.Add(26 * time.Hour)
	out, err = s.Starter.RescheduleReminder(ctx, "", approval.ReminderID, moved, starter.Actor{By: "ops"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusRescheduled, out.Status)
	require.Equal(t, "Sleeping until due at "+moved.Format("2006-01-02 15:04 UTC"), currentDetails(t, s, approval.WorkflowID),
		"the current details carry the live due time")
	summary, _ := userMetadata(t, s, approval.WorkflowID)
	require.Contains(t, summary, "due "+dueText, "the static summary keeps the due time at start")

	for _, r := range results {
		noPersonalData("current details of "+r.WorkflowID, currentDetails(t, s, r.WorkflowID))
	}
}
