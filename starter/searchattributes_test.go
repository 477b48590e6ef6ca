package starter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// On a namespace that has none of shipnotify's search attributes, the
// check, the probe and a start all fail with the one error that names the
// namespace and says to run setup; the rows Schedule wrote stay unstarted
// for a second run.
func TestANamespaceWithoutTheAttributesIsToldToRunSetup(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	ns, c := testenv.Namespace(t)
	st := &starter.Starter{Temporal: c, Namespace: ns, Mirror: s.Mirror, TaskQueue: s.TaskQueue, Now: time.Now}
	ctx := context.Background()

	want := `the Temporal namespace "` + ns + `" does not know shipnotify's search attribute `
	err := st.CheckSearchAttributes(ctx)
	require.ErrorIs(t, err, starter.ErrSearchAttributesUnknown)
	require.Contains(t, err.Error(), want)
	require.Contains(t, err.Error(), "run `shipnotify setup` (it waits until the server accepts them)")

	err = starter.ProbeSearchAttributes(ctx, c, ns, testenv.ID(t, "shipnotify-setup-probe"))
	require.ErrorIs(t, err, starter.ErrSearchAttributesUnknown)
	require.Contains(t, err.Error(), want)

	u := s.Update(t, time.Now().Add(time.Hour), reminder.Email, reminder.Email)
	results, err := st.Schedule(ctx, u)
	require.ErrorIs(t, err, starter.ErrSearchAttributesUnknown)
	var saErr *starter.SearchAttributesError
	require.True(t, errors.As(err, &saErr), "%v", err)
	require.Equal(t, ns, saErr.Namespace)
	require.Contains(t, []string{"ShipmentId", "UpdateId", "ReminderState", "DueAt"}, saErr.Attribute)
	for _, r := range results {
		require.NotEqual(t, starter.Scheduled, r.Status, "nothing started")
	}
	unstarted, err := s.Mirror.Unstarted(ctx, time.Now().Add(time.Minute), 10)
	require.NoError(t, err)
	require.Len(t, unstarted, 2, "the rows wait for a second run")
}

// On a namespace with the attributes the check passes, and the probe is
// accepted and leaves only a terminated workflow of a type no worker has,
// on a queue no worker polls.
func TestTheProbeIsAcceptedAndTerminated(t *testing.T) {
	t.Parallel()
	c := testenv.Temporal(t)
	ctx := context.Background()
	st := &starter.Starter{Temporal: c, Namespace: "default"}
	require.NoError(t, st.CheckSearchAttributes(ctx))

	id := testenv.ID(t, "shipnotify-setup-probe")
	require.NoError(t, starter.ProbeSearchAttributes(ctx, c, "default", id))
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	info := desc.GetWorkflowExecutionInfo()
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, info.GetStatus())
	require.Equal(t, starter.ProbeWorkflowType, info.GetType().GetName())
	require.Equal(t, starter.ProbeTaskQueue, info.GetTaskQueue())
}
