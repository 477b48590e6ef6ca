package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
)

// Both baselines sleep until due, run the no-op once and report when it
// started, by the worker's clock, and that it ran once.
func TestBaselinesSleepThenRunTheNoopOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fn   any
	}{{"naive", NaiveWorkflow}, {"lean", LeanWorkflow}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterActivity(NewNoop())
			begin := env.Now()
			due := begin.Add(90 * 24 * time.Hour)
			env.ExecuteWorkflow(tc.fn, BareInput{DueAt: due})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res BareResult
			require.NoError(t, env.GetWorkflowResult(&res))
			require.Equal(t, 1, res.Executions)
			require.False(t, res.StartedAt.IsZero())
			require.False(t, env.Now().Before(due), "the timer ran to the due time")
		})
	}
}

// The no-op counts its runs per workflow: a second run for one workflow
// reports 2, a duplicate.
func TestNoopCountsRunsPerWorkflow(t *testing.T) {
	t.Parallel()
	n := NewNoop()
	require.Equal(t, []int{1, 1, 2, 3}, []int{n.count("a"), n.count("b"), n.count("a"), n.count("a")})

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(n)
	val, err := env.ExecuteActivity(n.Run, NoopInput{})
	require.NoError(t, err)
	var res BareResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, 1, res.Executions)
	require.False(t, res.StartedAt.IsZero())
}

// Asked to send, the no-op pays the full path's provider through the real
// client, under its workflow id: an accepted mail is counted; a 429 fails
// the attempt with the provider's wait as the next retry's delay, and is
// not counted; a no-op with no provider refuses rather than skip the cost.
func TestSendingNoopPaysTheProvider(t *testing.T) {
	t.Parallel()
	mail, err := sink.StartMail("", "SG.bench")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mail.Close() })
	n := NewSendingNoop(email.NewSender(email.Options{APIKey: "SG.bench", BaseURL: mail.URL(), FromEmail: "r@bench.example"}))
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(n)

	val, err := env.ExecuteActivity(n.Run, NoopInput{Send: true})
	require.NoError(t, err)
	var res BareResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, 1, res.Executions)
	mails := mail.Mails()
	require.Len(t, mails, 1)
	require.Equal(t, "default-test-workflow-id", mails[0].CustomArgs["delivery_key"], "keyed by the workflow id")

	mail.Fail(sink.Answer{Status: 429, Headers: map[string]string{"Retry-After": "7"}})
	_, err = env.ExecuteActivity(n.Run, NoopInput{Send: true})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.False(t, appErr.NonRetryable())
	require.Equal(t, 7*time.Second, appErr.NextRetryDelay())
	require.Len(t, mail.Mails(), 1, "a refused send is not accepted")
	require.Equal(t, 2, n.count("default-test-workflow-id"), "and not counted: the next run is the second")

	silent := NewNoop()
	env.RegisterActivity(silent)
	_, err = env.ExecuteActivity(silent.Run, NoopInput{Send: true})
	require.ErrorAs(t, err, &appErr)
	require.True(t, appErr.NonRetryable())
}
