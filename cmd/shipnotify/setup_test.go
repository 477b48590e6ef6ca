package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// setup registers the search attributes on a namespace that lacks them and
// returns only once the server accepted a start carrying them (a probe,
// terminated at once), saying how long that took; the second time they
// are present, and it still checks.
func TestSetupWaitsUntilTheServerAcceptsTheAttributes(t *testing.T) {
	t.Parallel()
	ns, tc := testenv.Namespace(t)
	ctx := context.Background()
	c := cmdline{env: map[string]string{
		"TEMPORAL_ADDRESS":      testenv.TemporalAddress(t),
		"TEMPORAL_NAMESPACE":    ns,
		"TEMPORAL_CONFIG_FILE":  "/nonexistent",
		"SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys,
	}}
	// Before: a start carrying them is refused.
	require.ErrorIs(t, starter.ProbeSearchAttributes(ctx, tc, ns, testenv.ID(t, "before")), starter.ErrSearchAttributesUnknown)

	accepted := regexp.MustCompile(`(?m)^waiting for the server to accept the search attributes…\n` +
		`the server accepts them after \S+ \(\d+ probes?; the last, (shipnotify-setup-probe-[0-9a-f]{16}), was accepted and terminated\)\n\z`)
	code, stdout, stderr := c.run(t, "", "setup")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 4, strings.Count(stdout, "added"), stdout)
	m := accepted.FindStringSubmatch(stdout)
	require.NotNil(t, m, stdout)

	resp, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	require.NoError(t, err)
	for name, typ := range workflows.SearchAttributeTypes {
		require.Equal(t, typ, resp.GetCustomAttributes()[name], name)
	}
	// The probe it names ran nothing, and is over.
	desc, err := tc.DescribeWorkflowExecution(ctx, m[1], "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, desc.GetWorkflowExecutionInfo().GetStatus())
	require.Equal(t, starter.ProbeWorkflowType, desc.GetWorkflowExecutionInfo().GetType().GetName())
	require.NoError(t, starter.ProbeSearchAttributes(ctx, tc, ns, testenv.ID(t, "after")))

	code, stdout, stderr = c.run(t, "", "setup")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 4, strings.Count(stdout, "present"), stdout)
	require.Regexp(t, accepted, stdout)

	code, stdout, stderr = c.run(t, "", "setup", "--wait", "0")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stdout, "waiting", "--wait 0 does not wait")
	code, _, stderr = c.run(t, "", "setup", "--wait", "-1s")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--wait")
}

// The wait retries while the server refuses for want of the attributes,
// backing off, and ends at once on any other failure, or with the
// server's last refusal when the bound passes.
func TestSetupWaitsOutOnlyTheRefusal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	refusal := &starter.SearchAttributesError{Namespace: "default", Attribute: "DueAt",
		Err: serviceerror.NewInvalidArgument("Namespace default has no mapping defined for search attribute DueAt")}

	calls := 0
	took, tries, err := awaitAccepted(ctx, time.Minute, time.Millisecond, func(context.Context) error {
		if calls++; calls < 4 {
			return refusal
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 4, tries)
	require.Less(t, took, 10*time.Second)

	other := errors.New("error starting the probe workflow: permission denied")
	_, tries, err = awaitAccepted(ctx, time.Minute, time.Millisecond, func(context.Context) error { return other })
	require.ErrorIs(t, err, other)
	require.Equal(t, 1, tries, "another failure is not waited out")

	start := time.Now()
	_, tries, err = awaitAccepted(ctx, 300*time.Millisecond, time.Millisecond, func(context.Context) error { return refusal })
	require.Error(t, err)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Greater(t, tries, 2)
	require.ErrorIs(t, err, refusal.Err)
	require.Contains(t, err.Error(), "not accepted within 300ms")
	require.Contains(t, err.Error(), "no mapping defined for search attribute DueAt")
	require.Contains(t, err.Error(), "--wait")
	require.NotContains(t, err.Error(), "run `shipnotify setup`", "setup does not tell itself to run")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = awaitAccepted(cancelled, time.Minute, time.Millisecond, func(ctx context.Context) error { return ctx.Err() })
	require.ErrorIs(t, err, context.Canceled)
}
