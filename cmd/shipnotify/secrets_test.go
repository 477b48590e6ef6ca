package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// reseal-secrets seals the webhook secrets stored in the clear (or under
// a key being rotated out) with the current key, once.
func TestResealSecrets(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	c := stackCLI(s)
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Hour), reminder.Webhook)
	rems, err := s.Starter.Plan(ctx, u)
	require.NoError(t, err)
	rows := []mirror.NewReminder{{Reminder: rems[0], WorkflowID: "reminder/" + rems[0].ID}}
	_, err = mirror.New(s.DB.Pool).ScheduleUpdate(ctx, u, rows) // no sealer: in the clear
	require.NoError(t, err)

	code, out, errOut := c.run(t, "", "reseal-secrets")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "1 webhook secret resealed\n", out)
	var stored string
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `SELECT webhook_secret FROM reminders`).Scan(&stored))
	require.True(t, strings.HasPrefix(stored, "sealed:v1:"))
	require.NotContains(t, stored, s.HookSecret)
	_, out, _ = c.run(t, "", "reseal-secrets")
	require.Equal(t, "0 webhook secrets resealed\n", out)
}
