package sendgridevents_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// scheduleFor is schedule for tenant's update.
func (r *rig) scheduleFor(t *testing.T, tenant, addr string) starter.Result {
	t.Helper()
	u := r.s.Update(t, time.Now(), reminder.Email)
	u.Tenant, u.Subscribers[0].Email, u.EscalationEmail = tenant, addr, escalationContact
	res, err := r.s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	return res[0]
}

// result waits for the reminder's workflow to end and returns how.
func (r *rig) result(t *testing.T, res starter.Result) workflows.ReminderResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out workflows.ReminderResult
	require.NoError(t, r.s.Temporal.GetWorkflow(ctx, res.WorkflowID, "").Get(ctx, &out))
	return out
}

// waitSuppressed waits until addr is suppressed for tenant.
func (r *rig) waitSuppressed(t *testing.T, tenant, addr string) mirror.Suppression {
	t.Helper()
	var got []mirror.Suppression
	require.Eventually(t, func() bool {
		var err error
		got, err = r.s.Mirror.Suppressions(context.Background(), mirror.SuppressionFilter{Tenant: tenant, Address: addr})
		require.NoError(t, err)
		return len(got) == 1
	}, 30*time.Second, 20*time.Millisecond, "%s never suppressed", addr)
	return got[0]
}

// noEscalation requires that the reminder started no escalation of any
// reason a delivery may owe, and that the sink got none for it.
func (r *rig) noEscalation(t *testing.T, id string) {
	t.Helper()
	for _, reason := range []string{"undeliverable", "delivery_failed", "delivery_deferred"} {
		_, err := r.s.Temporal.DescribeWorkflowExecution(context.Background(), workflows.DeliveryEscalationWorkflowID(id, reason), "")
		require.Error(t, err, "no %s escalation workflow", reason)
		require.Zero(t, r.escalations(id, reason), "no %s escalation mail", reason)
	}
	var n int
	require.NoError(t, r.s.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outcome_escalations WHERE reminder_id = $1`, id).Scan(&n))
	require.Zero(t, n, "no escalation owed")
}

// A signed unsubscribe or spam report, through the Event Webhook as
// SendGrid posts it, suppresses its address for the reminder's tenant:
// that tenant's next reminder to it ends suppressed, with nothing sent and
// nothing escalated, while another tenant's reminder to the same address
// goes out. Run as the runtime role, which the state machine's triggers
// hold to its moves.
func TestAnOptOutEventSuppressesTheAddressForItsTenantOnly(t *testing.T) {
	t.Parallel()
	const unsub, spam = "leaver@customer.example", "annoyed@customer.example"
	r := newRigWith(t, sink.EventOptions{Unsubscribe: []string{unsub}, SpamReport: []string{spam}},
		testenv.StackOptions{RuntimeRole: true})
	for _, tc := range []struct{ addr, reason string }{{unsub, "unsubscribe"}, {spam, "spamreport"}} {
		first := r.schedule(t, tc.addr)
		r.waitState(t, first.ReminderID, reminder.Delivered)
		got := r.waitSuppressed(t, "", tc.addr)
		require.Equal(t, tc.reason, got.Reason)
		require.Equal(t, first.ReminderID, got.ReminderID)

		next := r.schedule(t, tc.addr)
		require.Equal(t, reminder.Suppressed, r.result(t, next).State, "the workflow ends suppressed")
		require.Equal(t, reminder.Suppressed, r.row(t, next.ReminderID).State, "and so does the mirror")
		require.Contains(t, r.trail(t, next.ReminderID), "suppressed")
		accepted, _ := r.s.Mail.DeliveryKeys()
		require.Zero(t, accepted[r.row(t, next.ReminderID).Key], "the sink received nothing for it")
		r.noEscalation(t, next.ReminderID)

		other := r.scheduleFor(t, "acme", tc.addr)
		require.Equal(t, reminder.Sent, r.result(t, other).State, "another tenant's reminder to the address is sent")
		accepted, _ = r.s.Mail.DeliveryKeys()
		require.Equal(t, 1, accepted[r.row(t, other.ReminderID).Key])
	}
}

// A drop because the address is on SendGrid's unsubscribe list makes the
// reminder suppressed, not undeliverable, escalates nothing, and
// suppresses the address.
func TestADropForAnUnsubscribedAddressIsSuppressedNotUndeliverable(t *testing.T) {
	t.Parallel()
	const addr = "unsubscribed@customer.example"
	r := newRigWith(t, sink.EventOptions{DropUnsubscribed: []string{addr}}, testenv.StackOptions{RuntimeRole: true})
	res := r.schedule(t, addr)
	got := r.waitState(t, res.ReminderID, reminder.Suppressed)
	require.Equal(t, "dropped", got.Outcome)
	require.Equal(t, "dropped", r.waitSuppressed(t, "", addr).Reason)
	// Another escalator pass starts nothing: nothing was owed.
	require.NoError(t, sendgridevents.NewEscalator(r.s.Mirror, r.s.Temporal, r.s.TaskQueue).Pass(context.Background()))
	r.noEscalation(t, res.ReminderID)
}

// An address that unsubscribes after its reminder reached it gets no
// cancellation notice either: a cancel then tells no one, and says why.
func TestAnAddressThatUnsubscribedAfterItsReminderGetsNoCancellationNotice(t *testing.T) {
	t.Parallel()
	const addr = "gone-quiet@customer.example"
	r := newRigWith(t, sink.EventOptions{Unsubscribe: []string{addr}}, testenv.StackOptions{RuntimeRole: true})
	res := r.schedule(t, addr)
	r.waitState(t, res.ReminderID, reminder.Delivered)
	r.waitSuppressed(t, "", addr)

	shipment, _, _ := strings.Cut(res.ReminderID, "/")
	outs, err := r.s.Starter.Cancel(context.Background(), "", shipment, starter.Actor{By: "tracker"})
	require.NoError(t, err)
	require.Len(t, outs, 1)
	require.Equal(t, starter.StatusCompensationSkipped, outs[0].Status, "%+v", outs[0])
	accepted, _ := r.s.Mail.DeliveryKeys()
	require.Zero(t, accepted[reminder.CancellationKey(res.ReminderID, res.SubscriberID)], "no notice reached the sink")
	require.Equal(t, reminder.Delivered, r.row(t, res.ReminderID).State, "the reminder it would have taken back stays delivered")
}
