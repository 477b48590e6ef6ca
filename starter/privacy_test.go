package starter_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// Email addresses, webhook URLs, secrets, message text, dynamic template
// data and subscribers' names never show in plain text in a Temporal history, nor in the logs of an end-to-end run,
// nor decoded in what the Web UI shows of a workflow (its summary, details
// and current details).
func TestPersonalDataStaysOutOfHistoriesAndLogs(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Second), reminder.Email, reminder.Email, reminder.Webhook, reminder.Email)
	u.Message = reminder.Message{Subject: "Dock 4 slot for Ms Privacy", Text: "Gate code 4711, ask for Ms Privacy at the ramp.",
		TemplateID: testenv.TemplateID, TemplateData: []byte(`{"door":"Door code ZQ5521 for Mr Secret"}`)}
	// The fourth is sent with the template, its data kept in the mirror.
	u.Subscribers[3].Name, u.Subscribers[3].TimeZone, u.Subscribers[3].Locale = "Mr Secret Reader", "Europe/Berlin", "de"
	u.EscalationEmail = "escalations.private@shipper.example"
	u.Subscribers[1].RequiresApproval = true
	u.Subscribers[1].DueAt = time.Now().Add(-time.Minute)
	u.Subscribers[2].URL = s.Hooks.URL() + "/hooks/tenant-9931/token-cafebabe"
	u.Approval = reminder.Approval{Timeout: time.Second, ExpireAfter: 2 * time.Second}
	// The first subscriber's mail is refused for good: error text and an
	// escalation go through the engine too.
	s.Mail.Refuse(u.Subscribers[0].Email, 400)

	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	states := map[reminder.State]int{}
	for _, r := range results {
		states[waitFor(t, s, r.WorkflowID).State]++
	}
	require.Equal(t, map[reminder.State]int{reminder.Failed: 1, reminder.Expired: 1, reminder.Sent: 2}, states)
	outs, err := s.Starter.Cancel(ctx, "", u.ShipmentID, starter.Actor{By: "tracker", Reason: "privacy test"})
	require.NoError(t, err)
	require.Len(t, outs, 4)
	waitFor(t, s, workflows.CancellationNoticeWorkflowID(results[2].ReminderID))
	waitFor(t, s, workflows.CancellationNoticeWorkflowID(results[3].ReminderID))
	templated := 0
	for _, m := range s.Mail.Mails() {
		if m.TemplateID != "" {
			templated++
			require.Equal(t, "Door code ZQ5521 for Mr Secret", m.TemplateData["door"], "the data reached SendGrid")
			require.Equal(t, "Mr Secret Reader", m.TemplateData["subscriber_name"])
		}
	}
	require.Equal(t, 1, templated)

	personal := []string{
		u.Subscribers[0].Email, u.Subscribers[1].Email, u.EscalationEmail,
		u.Subscribers[2].URL, "tenant-9931", "token-cafebabe", s.HookSecret,
		strings.TrimPrefix(s.HookSecret, "whsec_"), u.Message.Subject, u.Message.Text, "Ms Privacy", "Gate code",
		// The code alone, with letters no id's hex can hold: a bare "5521"
		// once matched a run id, not the data.
		u.Subscribers[3].Email, "Door code", "ZQ5521", "Mr Secret",
	}
	workflowIDs := []string{workflows.CancellationNoticeWorkflowID(results[2].ReminderID),
		workflows.CancellationNoticeWorkflowID(results[3].ReminderID)}
	for _, r := range results {
		workflowIDs = append(workflowIDs, r.WorkflowID)
	}
	for _, id := range workflowIDs {
		text := testenv.HistoryText(testenv.History(t, s.Temporal, id))
		require.Contains(t, text, u.ShipmentID, "the search sees the history's text (ids are plain)")
		require.Contains(t, text, codec.Encoding, "payloads are encrypted")
		for _, p := range personal {
			require.NotContains(t, text, p, "history of %s", id)
		}
		// What the Web UI shows decoded: the static summary and details, and
		// the current details (here the last line, of a finished workflow).
		summary, details := userMetadata(t, s, id)
		shown := summary + "\n" + details + "\n" + currentDetails(t, s, id)
		require.Contains(t, shown, u.ShipmentID)
		require.Contains(t, shown, "Done: ")
		for _, p := range personal {
			require.NotContains(t, shown, p, "summary and details of %s", id)
		}
	}

	logs := s.Logs.String()
	require.Contains(t, logs, "delivery sent", "the worker's logs were captured")
	for _, p := range personal {
		require.NotContains(t, logs, p, "logs")
	}
	if os.Getenv("SHIPNOTIFY_PRINT_LOGS") != "" {
		t.Log(logs)
	}
}
