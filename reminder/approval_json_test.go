package reminder_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

// A workflow's input says its approval's durations in words as well as in
// the nanoseconds every release reads, and reads back as it was, from
// this release's form and from the one before's.
func TestApprovalDurationsReadAsTextInTheInput(t *testing.T) {
	a := reminder.Approval{Required: true, Timeout: 20 * time.Second, ExpireAfter: 72 * time.Hour}
	b, err := json.Marshal(a)
	require.NoError(t, err)
	require.JSONEq(t, `{"Required":true,"Timeout":20000000000,"TimeoutText":"20s","ExpireAfter":259200000000000,"ExpireAfterText":"72h0m0s"}`, string(b))
	var back reminder.Approval
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, a, back)
	// The release before wrote the nanoseconds alone.
	var old reminder.Approval
	require.NoError(t, json.Unmarshal([]byte(`{"Required":true,"Timeout":20000000000,"ExpireAfter":259200000000000}`), &old))
	require.Equal(t, a, old)
	// And the release before reads this one's, ignoring the text.
	var before struct {
		Required             bool
		Timeout, ExpireAfter time.Duration
	}
	require.NoError(t, json.Unmarshal(b, &before))
	require.Equal(t, a.Timeout, before.Timeout)
	require.Equal(t, a.ExpireAfter, before.ExpireAfter)
	// Unset durations (the defaults apply) carry no text.
	b, err = json.Marshal(reminder.Approval{})
	require.NoError(t, err)
	require.JSONEq(t, `{"Required":false,"Timeout":0,"ExpireAfter":0}`, string(b))
}
