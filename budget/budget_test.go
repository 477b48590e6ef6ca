package budget

import (
	"testing"
	"time"
)

// The relations between the budgets that no derivation makes hold by
// itself. Each says what breaks when it does not hold.
func TestTheBudgetsOutlastWhatTheyMust(t *testing.T) {
	for _, r := range []struct {
		holds bool
		what  string
	}{
		{SendAllowance >= EmailCall && SendAllowance >= WebhookCall,
			"a provider call is given at least its client's own timeout on every path"},
		{NotifyAttempt >= SlotWait+CancelLook+SendAllowance+time.Second,
			"an attempt can wait its whole slot, look for a cancel and still give the call its allowance"},
		{WorkerStop > NotifyAttempt+Record,
			"a stopping worker lets an attempt and its record finish: a deploy cuts no accepted send"},
		{HeartbeatThrottle < Record,
			"the proof of a send reaches Temporal before a failed record's retry would look for it"},
		{LeaseMargin > 0,
			"a claim's lease outlives its attempt and the record after it"},
		{LocalAttempt > LocalRecordReserve+SendAllowance,
			"a local attempt gives its call the allowance and keeps the record's reserve"},
		{LocalRecordReserve > Record,
			"a local attempt's record finishes, or fails with the proof, before its deadline"},
		{NotifyAttempt+TimedOutRetryCeiling <= Recovery,
			"an attempt that timed out as the provider recovered is back within Recovery"},
		{OperatorWrite < UpdateWait/2,
			"the workflow's write of an operator's change ends before the starter's caller gives up (before changeAcceptedFirst)"},
		{UpdateWait/2 >= LateAcceptance,
			"a change the starter stopped waiting for unaccepted can no longer be accepted: its deadline, half the wait, is followed by a late acceptance's window inside the wait"},
		{LateAcceptance > WorkflowTask,
			"a task that started at the deadline may complete a workflow task later"},
		{MinAPIRequest > UpdateWait && MinAPIRequest > CancelWait,
			"an API request outlasts the starter's waits, so it answers with outcomes, not a timeout"},
		{APIRequest >= MinAPIRequest,
			"the API's default deadline is one it accepts"},
		{NotifyRetries > 24*time.Hour,
			"a provider down for a day loses no reminder"},
		{IdleInTransaction > 2*EscalationStart,
			"the server ends no transaction while the escalator waits on a slow Temporal start"},
		{Transaction > EscalationBatch*EscalationStart,
			"the server ends no escalator's pass, each of its starts taking its whole bound"},
		{Transaction > IdleInTransaction,
			"a transaction may outlive its longest idle wait"},
	} {
		if !r.holds {
			t.Errorf("broken: %s", r.what)
		}
	}
}
