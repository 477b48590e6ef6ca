package examples

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

func TestExamplesAreValidUpdates(t *testing.T) {
	files, err := filepath.Glob("*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	// The examples' dates are fixed; check them against the day they were written.
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, f := range files {
		r, err := os.Open(f)
		require.NoError(t, err)
		u, err := reminder.ParseUpdate(r)
		r.Close()
		require.NoError(t, err, f)
		_, err = u.Plan(reminder.PlanOptions{Now: now})
		require.NoError(t, err, f)
	}
}
