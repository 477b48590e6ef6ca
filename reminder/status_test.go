package reminder_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

// Every status event a tracker is promised is made by a trail event the
// mirror writes, the one that records what happened: each move by what it
// did, a reschedule, an escalation sent, and a cancel, with whether its
// notice went out. The notes a tracker has no use for make none, nor does
// a cancel of a reminder that had already ended without a send.
func TestEveryStatusEventIsMadeByItsTrailEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ    string
		detail map[string]any
		state  reminder.State
		want   reminder.StatusType
		notice bool
	}{
		{"scheduled", map[string]any{"state": "awaiting_approval"}, reminder.AwaitingApproval, reminder.StatusScheduled, false},
		{"scheduled", nil, reminder.Scheduled, reminder.StatusScheduled, false},
		{"approved", nil, reminder.Scheduled, reminder.StatusApproved, false},
		{"rejected", nil, reminder.Cancelled, reminder.StatusRejected, false},
		{"sent", nil, reminder.Sent, reminder.StatusSent, false},
		{"delivered", nil, reminder.Delivered, reminder.StatusDelivered, false},
		{"provider_delivered", map[string]any{"state": "delivered"}, reminder.Delivered, reminder.StatusDelivered, false},
		{"provider_bounce", map[string]any{"state": "undeliverable"}, reminder.Undeliverable, reminder.StatusUndeliverable, false},
		{"undeliverable", nil, reminder.Undeliverable, reminder.StatusUndeliverable, false},
		{"failed", nil, reminder.Failed, reminder.StatusFailed, false},
		{"cancelled", nil, reminder.Cancelled, reminder.StatusCancelled, false},
		{"cancelled_late", nil, reminder.Sent, reminder.StatusCancelled, false},
		{"cancellation_sent", nil, reminder.Delivered, reminder.StatusCancelled, true},
		{"expired", nil, reminder.Expired, reminder.StatusExpired, false},
		{"suppressed", nil, reminder.Suppressed, reminder.StatusSuppressed, false},
		{"provider_dropped", map[string]any{"state": "suppressed"}, reminder.Suppressed, reminder.StatusSuppressed, false},
		{"rescheduled", nil, reminder.Scheduled, reminder.StatusRescheduled, false},
		{"escalation_sent", map[string]any{"reason": "approval_timeout"}, reminder.AwaitingApproval, reminder.StatusEscalated, false},
		{"repaired", map[string]any{"from": "scheduled", "to": "sent"}, reminder.Sent, reminder.StatusSent, false},
		{"repaired", map[string]any{"from": "awaiting_approval", "to": "scheduled"}, reminder.Scheduled, reminder.StatusApproved, false},
	} {
		got, ok := reminder.StatusOf(tc.typ, tc.detail, tc.state)
		require.True(t, ok, "%s %v", tc.typ, tc.detail)
		require.Equal(t, reminder.Status{Type: tc.want, NoticeSent: tc.notice}, got, "%s %v", tc.typ, tc.detail)
	}
	for _, tc := range []struct {
		typ    string
		detail map[string]any
		state  reminder.State
	}{
		{"cancelled_late", nil, reminder.Cancelled},
		{"cancelled_late", nil, reminder.Expired},
		{"sent_late", nil, reminder.Cancelled},
		{"provider_deferred", nil, reminder.Sent},
		{"provider_delivered", nil, reminder.Delivered},
		{"repaired", map[string]any{"from": "sent", "to": "sent"}, reminder.Sent},
		{"send_unconfirmed", nil, reminder.Scheduled},
		{"cancel_requested", nil, reminder.Scheduled},
		{"escalation_failed", nil, reminder.Failed},
	} {
		_, ok := reminder.StatusOf(tc.typ, tc.detail, tc.state)
		require.False(t, ok, "%s %v in %s", tc.typ, tc.detail, tc.state)
	}
	require.Len(t, reminder.StatusTypes, 12)
	for _, st := range reminder.StatusTypes {
		require.Equal(t, 1, len(slices.DeleteFunc(slices.Clone(reminder.StatusTypes), func(x reminder.StatusType) bool { return x != st })), st)
	}
}
