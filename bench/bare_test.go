package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
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
	val, err := env.ExecuteActivity(n.Run)
	require.NoError(t, err)
	var res BareResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, 1, res.Executions)
	require.False(t, res.StartedAt.IsZero())
}
