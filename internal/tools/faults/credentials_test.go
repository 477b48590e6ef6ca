package faults

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// The mail API refuses our key (401) for a while, then accepts it: the
// reminder is not failed for it, is retried the sender's credentials wait
// apart, and goes out once, after the key works again.
func TestMailAPIRefusingOurKeyForAWhile(t *testing.T) {
	t.Parallel()
	const refusals, wait = 3, 4 * time.Second
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	// A shorter wait than the minute a worker uses, still longer than the
	// retry policy's own 1 s, 2 s, 4 s, so the test shows it is honoured.
	sender := email.NewSender(email.Options{
		APIKey: testenv.MailAPIKey, BaseURL: s.Mail.URL(), FromEmail: "reminders@shipnotify.example", CredentialsRetry: wait,
	})
	s.Activities.Email = sender
	reg := prometheus.NewRegistry()
	s.Activities.Metrics = metrics.New(reg)
	s.StartWorker(t)
	s.Mail.Fail(sink.Answer{Status: 401}, sink.Answer{Status: 401}, sink.Answer{Status: 401})

	ctx := context.Background()
	results, err := s.Starter.Schedule(ctx, emailUpdate(t, 1, time.Now(), 0))
	require.NoError(t, err)
	r := results[0]

	// While the key is refused the sender says so, dated from the first 401.
	var since time.Time
	require.Eventually(t, func() bool {
		c := sender.Credentials()
		since = c.Since
		return c.Refused
	}, 30*time.Second, 20*time.Millisecond, "the sender never saw the 401")

	waitAll(t, s, results, time.Minute)
	require.Zero(t, audit(t, s, results))
	mails := s.Mail.Mails()
	require.Len(t, mails, 1, "one mail accepted, once the key works")
	require.Equal(t, 1+refusals, s.Mail.Requests(), "each refused call was retried")
	require.GreaterOrEqual(t, mails[0].Received.Sub(since), refusals*wait, "retries waited the credentials wait")
	require.Equal(t, email.CredentialState{Refusals: refusals}, sender.Credentials(), "accepted again: no longer refused")

	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, r.WorkflowID, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())
	var res workflows.ReminderResult
	require.NoError(t, s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &res))
	require.Equal(t, reminder.Sent, res.State)
	events, err := s.Mirror.Events(ctx, r.ReminderID)
	require.NoError(t, err)
	require.Len(t, events, 2, "scheduled and sent: no failure, no escalation")

	fams, err := reg.Gather()
	require.NoError(t, err)
	outcomes := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "shipnotify_deliveries_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					outcomes[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	require.Equal(t, map[string]float64{"retry": refusals, "sent": 1}, outcomes, "refusals are retries, not failures")
}
