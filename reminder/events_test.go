package reminder_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

// The trail's vocabulary holds its shape: every type is a name the
// schema's CHECK takes; a note records no move, whatever its detail says;
// a late arrival is a note; every move goes into a known state.
func TestTheTrailsVocabularyHoldsItsShape(t *testing.T) {
	t.Parallel()
	name := regexp.MustCompile(`^[a-z][a-z_]*$`)
	moves := reminder.MoveEvents()
	for _, typ := range slices.Concat(moves, reminder.NoteEvents) {
		require.Regexp(t, name, typ)
	}
	details := []map[string]any{nil, {"state": "sent"}, {"from": "scheduled", "to": "cancelled"}}
	for _, note := range reminder.NoteEvents {
		require.NotContains(t, moves, note)
		for _, d := range details {
			_, ok := reminder.EventInto(note, d)
			require.False(t, ok, "%s %v records no move", note, d)
		}
	}
	for _, typ := range moves {
		if late := reminder.LateEvent(typ); late != typ {
			_, ok := reminder.EventInto(late, details[1])
			require.False(t, ok, "the late arrival of %s is a note", typ)
			require.Regexp(t, name, late)
		}
		into, ok := reminder.EventInto(typ, map[string]any{"state": "delivered", "from": "sent", "to": "delivered"})
		require.True(t, ok, typ)
		require.True(t, into.Known(), "%s moves into %s", typ, into)
	}
	require.Equal(t, "cancelled_late", reminder.LateEvent("cancelled"))
	require.Equal(t, "rescheduled", reminder.LateEvent("rescheduled"), "a note is its own late arrival")
}

// An event follows only the move it records: its from state, and its
// into state or a provider's outcome past it in the same write.
func TestAnEventFollowsOnlyItsMove(t *testing.T) {
	t.Parallel()
	const (
		created = reminder.State("")
		sch     = reminder.Scheduled
		aw      = reminder.AwaitingApproval
	)
	for _, tc := range []struct {
		typ      string
		detail   map[string]any
		from, to reminder.State
		follows  bool
	}{
		{"approved", nil, aw, sch, true},
		{"approved", nil, aw, reminder.Cancelled, false},
		{"approved", nil, sch, reminder.Sent, false},
		{"approved", nil, created, aw, false},
		{"rejected", nil, aw, reminder.Cancelled, true},
		{"rejected", nil, sch, reminder.Cancelled, false},
		{"cancelled", nil, sch, reminder.Cancelled, true},
		{"cancelled", nil, reminder.Sent, reminder.Delivered, false},
		{"sent", nil, sch, reminder.Sent, true},
		{"sent", nil, sch, reminder.Delivered, true},
		{"sent", nil, sch, reminder.Cancelled, false},
		{"delivered", nil, sch, reminder.Delivered, true},
		{"expired", nil, aw, reminder.Expired, true},
		{"expired", nil, created, reminder.Expired, false},
		{"scheduled", map[string]any{"state": "awaiting_approval"}, created, aw, true},
		{"scheduled", map[string]any{"state": "scheduled"}, created, aw, false},
		{"scheduled", nil, created, sch, true},
		{"scheduled", nil, aw, sch, false},
		{"repaired", map[string]any{"from": "scheduled", "to": "sent"}, sch, reminder.Delivered, true},
		{"repaired", map[string]any{"from": "awaiting_approval", "to": "sent"}, sch, reminder.Sent, false},
		{"repaired", map[string]any{"from": "scheduled", "to": "scheduled"}, "", "", true},
		{"provider_bounce", map[string]any{"state": "undeliverable"}, reminder.Sent, reminder.Undeliverable, true},
		{"provider_delivered", map[string]any{"state": "delivered"}, reminder.Sent, reminder.Undeliverable, true},
		{"provider_delivered", map[string]any{"state": "delivered"}, sch, reminder.Cancelled, false},
		{"provider_delivered", nil, "", "", true},
		{"rescheduled", map[string]any{"state": "cancelled"}, "", "", true},
	} {
		require.Equal(t, tc.follows, reminder.EventFollows(tc.typ, tc.detail, tc.from, tc.to),
			"%s %v after %q → %q", tc.typ, tc.detail, tc.from, tc.to)
	}
	require.True(t, reminder.EventReaches("sent", nil, reminder.Undeliverable), "a bounce follows a send")
	require.True(t, reminder.EventReaches("rejected", nil, reminder.Cancelled))
	require.False(t, reminder.EventReaches("cancelled_late", nil, reminder.Cancelled), "a late arrival finishes nothing")
	require.False(t, reminder.EventReaches("cancelled", nil, reminder.Sent), "a cancel does not finish a sent reminder")
	require.False(t, reminder.EventReaches("approved", nil, reminder.Cancelled))
}
