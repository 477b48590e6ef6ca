package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// show prints the provider's outcome and the delivered time, and reads a
// provider event as a sentence: what was reported, when by the provider's
// clock, why, of which delivery, and what it made of the reminder. Other
// events keep their JSON.
func TestShowReadsTheProviderOutcome(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	bounced, delivered := at.Add(2*time.Minute), at.Add(time.Minute)
	out := showOutput{
		Reminder: api.Reminder{ID: "S/u/a", Channel: reminder.Email, DueAt: at, State: reminder.Undeliverable,
			DeliveryKey: "k1", SentAt: &at, ProviderOutcome: reminder.OutcomeBounce, ProviderOutcomeAt: &bounced,
			DeliveredAt: &delivered},
		Events: []api.Event{
			{Type: "sent", At: at, Detail: map[string]any{"delivery_key": "k1", "attempts": 1}},
			{Type: "provider_delivered", At: at.Add(3 * time.Minute), Detail: map[string]any{
				"delivery_key": "k1", "event_id": "sg-1", "provider_at": "2026-12-08T10:01:00Z", "state": "delivered"}},
			{Type: "provider_bounce", At: at.Add(4 * time.Minute), Detail: map[string]any{
				"delivery_key": "k1", "event_id": "sg-2", "provider_at": "2026-12-08T10:02:00Z", "reason": "550 5.1.1",
				"state": "undeliverable"}},
			{Type: "provider_deferred", At: at.Add(5 * time.Minute), Detail: map[string]any{
				"delivery_key": "k2", "event_id": "sg-3", "provider_at": "2026-12-08T10:03:00Z", "purpose": "escalation",
				"attempt": 2}},
		},
		Workflow: workflowStatus{Status: "COMPLETED"},
	}
	var b bytes.Buffer
	require.NoError(t, printShow(cli.Env{Stdout: &b}, out))
	got := b.String()
	require.Regexp(t, `(?m)^Sent +2026-12-08T10:00:00Z$`, got)
	require.Regexp(t, `(?m)^Provider outcome +bounce at 2026-12-08T10:02:00Z$`, got)
	require.Regexp(t, `(?m)^Delivered +2026-12-08T10:01:00Z$`, got)
	require.Regexp(t, `(?m) sent +\{"attempts":1,"delivery_key":"k1"\}$`, got)
	require.Regexp(t, `(?m) provider_delivered +provider reported delivered at 2026-12-08T10:01:00Z; now delivered; event sg-1, delivery k1$`, got)
	require.Regexp(t, `(?m) provider_bounce +provider reported bounce at 2026-12-08T10:02:00Z \(550 5\.1\.1\); now undeliverable; event sg-2, delivery k1$`, got)
	require.Regexp(t, `(?m) provider_deferred +provider reported deferred at 2026-12-08T10:03:00Z of its escalation; event sg-3, delivery k2; attempt=2$`, got)

	// Nothing reported: said so, not left blank.
	out.Reminder.ProviderOutcome, out.Reminder.ProviderOutcomeAt, out.Reminder.DeliveredAt = "", nil, nil
	out.Events = nil
	b.Reset()
	require.NoError(t, printShow(cli.Env{Stdout: &b}, out))
	require.Regexp(t, `(?m)^Provider outcome +none reported$`, b.String())
	require.Regexp(t, `(?m)^Delivered +-$`, b.String())
	require.False(t, strings.Contains(b.String(), "provider reported"))
}

// show prints a live decision's by quoted and its key apart, so a by that
// imitates a key ("alice (key admin)") reads as the words it is.
func TestShowPrintsTheDecisionsKeyApartFromBy(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	out := showOutput{
		Reminder: api.Reminder{ID: "S/u/a", Channel: reminder.Email, DueAt: at, State: reminder.Scheduled},
		Workflow: workflowStatus{Status: "RUNNING"},
		Live: &workflows.Status{State: reminder.Scheduled, DueAt: at, Approval: workflows.ApprovalStatus{
			Required: true, TimeoutAt: at, ExpiresAt: at,
			Decision: &workflows.DecisionRecord{Approved: true, By: "alice (key admin)", Key: "tracker-eu", At: at},
		}},
	}
	var b bytes.Buffer
	require.NoError(t, printShow(cli.Env{Stdout: &b}, out))
	require.Regexp(t, `(?m)^  Approval +approved by "alice \(key admin\)", key tracker-eu \(times out `, b.String())
}

// Issue 35: show given something that is not a reminder id (a shipment's,
// say) says what one looks like, and what lists a shipment's, before it
// connects to anything.
func TestShowHintsAtTheReminderIDForm(t *testing.T) {
	t.Parallel()
	c := cmdline{env: map[string]string{}}
	code, _, stderr := c.run(t, "", "show", "SHP-1")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, `"SHP-1" is not a reminder id: one is shipment/update/subscriber`)
	require.Contains(t, stderr, "shipnotify list --shipment SHP-1 lists a shipment's reminders")
	code, _, stderr = c.run(t, "", "show", "SHP-1/window-1")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "is not a reminder id")
	require.NotContains(t, stderr, "list --shipment", "not an id of anything")
}
