package mirror

import (
	"regexp"
	"slices"
	"strings"

	"github.com/shipnotify/shipnotify/reminder"
)

// The state lists the statements use, rendered from the reminder's state
// machine. A list fixed for a statement is rendered into its text, not
// passed as a parameter, so the planner sees it: the partial indexes on
// the pending reminders (migration 00006) serve only statements whose
// predicate it can prove from constants. A list that depends on the call
// (reminder.Into a state) is a parameter (= ANY($n)).
var (
	sqlPending     = inStates(reminder.PendingStates)
	sqlFinal       = inStates(reminder.FinalStates)
	sqlUnsentFinal = inStates(reminder.UnsentFinalStates)
	sqlIntoSent    = inStates(reminder.Into(reminder.Sent))
	sqlIntoCancel  = inStates(reminder.Into(reminder.Cancelled))
)

// FilterStates are the states a Filter selects by: each state, and Pending.
var FilterStates = append(slices.Clip(reminder.States), Pending)

// FilterStatesText is FilterStates for a message: "scheduled, …, expired or pending".
func FilterStatesText() string {
	return reminder.OneOf(statesText(FilterStates))
}

var stateName = regexp.MustCompile(`^[a-z][a-z_]*$`)

// inStates renders states as an SQL list: ('scheduled', 'awaiting_approval').
// The states are the domain's constants, never input; one that is not a
// plain lowercase name is a programming error.
func inStates(states []reminder.State) string {
	quoted := make([]string, len(states))
	for i, s := range states {
		if !stateName.MatchString(string(s)) {
			panic("mirror: state " + string(s) + " is not a plain name")
		}
		quoted[i] = "'" + string(s) + "'"
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}

// statesText is states as a text[] parameter.
func statesText(states []reminder.State) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return out
}
