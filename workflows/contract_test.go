package workflows_test

import (
	"os"
	"strings"
	"testing"

	"github.com/shipnotify/shipnotify/reminder"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/workflows"
)

// The dev server registers the same search attributes `shipnotify setup`
// does; scripts/dev.sh lists them by hand, so this keeps them in step.
func TestDevServerRegistersOurSearchAttributes(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../scripts/dev.sh")
	require.NoError(t, err)
	for name, typ := range workflows.SearchAttributeTypes {
		kind := strings.TrimPrefix(typ.String(), "INDEXED_VALUE_TYPE_")
		want := name + "=" + kind[:1] + strings.ToLower(kind[1:])
		require.Contains(t, string(script), want)
	}
}

func TestWorkflowIDsAreOpaque(t *testing.T) {
	t.Parallel()
	id := workflows.ReminderWorkflowID(reminder.ID("", "SHP-1", "window-1", "consignee-hook"))
	require.Equal(t, "reminder/SHP-1/window-1/consignee-hook", id)
}
