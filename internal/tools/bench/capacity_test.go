package bench

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/capacity"
)

// shipnotify capacity reads the report this package writes without
// linking it (the product binary holds no benchmark): its reader agrees
// with MedianOf on which runs are compared and what their medians are.
func TestCapacityReadsTheReportAsTheBenchComparesIt(t *testing.T) {
	t.Parallel()
	withActions := func(r Result, total int) Result {
		r.Actions = &Actions{Total: total}
		return r
	}
	invalid := run("catchup", Full, 3, 1)
	invalid.Invalid = "partly drained"
	results := []Result{
		run("catchup", Full, 0, 5), // the warm-up
		run("catchup", Full, 1, 40), run("catchup", Full, 2, 60), invalid,
		run("catchup", Full, 4, 55), run("catchup", Naive, 1, 90),
		withActions(run("burst", Full, 0, 0), 99), withActions(run("burst", Full, 1, 0), 12),
		withActions(run("burst", Full, 2, 0), 14), withActions(run("burst", Lean, 1, 0), 3),
	}
	b, err := json.Marshal(map[string]any{"results": results})
	require.NoError(t, err)
	got, err := capacity.ReadMeasured(bytes.NewReader(b))
	require.NoError(t, err)

	drain, ok := MedianOf(results, "catchup", Full, func(r Result) (float64, bool) { return r.DrainRate, r.DrainRate > 0 })
	require.True(t, ok)
	actions, ok := MedianOf(results, "burst", Full, func(r Result) (float64, bool) {
		if r.Actions == nil {
			return 0, false
		}
		return float64(r.Actions.Total), true
	})
	require.True(t, ok)
	require.Equal(t, capacity.Measured{DrainRate: drain, ActionsPerDelivery: actions}, got)
	require.Equal(t, capacity.Measured{DrainRate: 55, ActionsPerDelivery: 13}, got)
}
