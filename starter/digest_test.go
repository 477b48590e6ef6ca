package starter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// digestEvery is the tests' digest interval: a minute, so a digest's
// boundary is at most a minute and a half away.
const digestEvery = time.Minute

// inboxUpdates schedules n updates (n shipments) with one email subscriber
// each, all to inbox, due one after another inside one digest interval,
// the last a second before its boundary, which it returns.
func inboxUpdates(t *testing.T, s *testenv.Stack, n int, inbox string, change func(i int, u *reminder.Update)) ([]starter.Result, time.Time) {
	t.Helper()
	// Far enough ahead that every reminder is scheduled before it is due.
	boundary := reminder.DigestAt(time.Now().Add(30*time.Second), digestEvery)
	every := digestEvery
	var out []starter.Result
	for i := range n {
		u := s.Update(t, boundary.Add(-time.Second-time.Duration(i)*200*time.Millisecond), reminder.Email)
		u.ShipmentID = fmt.Sprintf("%s-%02d", u.ShipmentID, i)
		u.Message.Subject = fmt.Sprintf("Shipment %02d: dock 4 at 10:00", i)
		u.Message.Text = fmt.Sprintf("Bring the papers for shipment %02d.", i)
		u.Subscribers[0].Email = inbox
		u.Digest = &every
		if change != nil {
			change(i, &u)
		}
		results, err := s.Starter.Schedule(context.Background(), u)
		require.NoError(t, err)
		require.Len(t, results, 1)
		require.True(t, boundary.Equal(results[0].GoesOutAt), "goes out at the boundary %s, not %s", boundary, results[0].GoesOutAt)
		out = append(out, results[0])
	}
	return out, boundary
}

// mailsTo are the mails the sink took for address, by purpose.
func mailsTo(s *testenv.Stack, address string, purpose reminder.Purpose) []sink.Mail {
	var out []sink.Mail
	for _, m := range s.Mail.Mails() {
		if len(m.To) == 1 && m.To[0] == address && m.CustomArgs["purpose"] == string(purpose) {
			out = append(out, m)
		}
	}
	return out
}

// waitEnded waits for each reminder's workflow and returns how it ended.
func waitEnded(t *testing.T, s *testenv.Stack, results []starter.Result, by time.Time) map[string]workflows.ReminderResult {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	out := map[string]workflows.ReminderResult{}
	for _, r := range results {
		var res workflows.ReminderResult
		require.NoError(t, s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &res), r.ReminderID)
		out[r.ReminderID] = res
	}
	return out
}

// Forty reminders for forty shipments, due within one digest interval to
// one ops inbox, arrive as one mail that lists every shipment with its own
// text, sent at the interval's boundary. Each reminder keeps its own row:
// forty rows sent under one provider message id, each under its own
// delivery key, the digest's key shared; each workflow ends sent.
func TestFortyRemindersToOneInboxArriveAsOneDigest(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	const inbox = "ops@consignee.example"
	results, boundary := inboxUpdates(t, s, 40, inbox, nil)

	ended := waitEnded(t, s, results, boundary.Add(2*time.Minute))
	mails := mailsTo(s, inbox, reminder.PurposeReminder)
	require.Len(t, mails, 1, "one mail for forty reminders")
	m := mails[0]
	require.False(t, m.Received.Before(boundary), "sent at %s, before the digest's boundary %s", m.Received, boundary)
	require.Equal(t, "40", m.CustomArgs["digest_size"])
	require.True(t, strings.HasPrefix(m.CustomArgs["delivery_key"], reminder.DigestKeyPrefix), m.CustomArgs["delivery_key"])
	require.Equal(t, "40 shipment reminders", m.Subject)
	var keys []string
	for i, r := range results {
		require.Equal(t, reminder.Sent, ended[r.ReminderID].State, r.ReminderID)
		require.Contains(t, m.Text, fmt.Sprintf("Shipment %02d: dock 4 at 10:00", i))
		require.Contains(t, m.Text, fmt.Sprintf("Bring the papers for shipment %02d.", i))
		keys = append(keys, r.DeliveryKey)
	}
	require.Equal(t, reminder.DigestKey(keys), m.CustomArgs["delivery_key"], "the digest's key is its members'")

	var sent, providerIDs, digestKeys int
	require.NoError(t, s.DB.Pool.QueryRow(ctx, `
SELECT count(*), count(DISTINCT provider_message_id), count(DISTINCT digest_key) FROM deliveries
 WHERE delivery_key = ANY($1) AND purpose = 'reminder' AND status = 'sent' AND provider_message_id = $2`,
		keys, m.MessageID).Scan(&sent, &providerIDs, &digestKeys))
	require.Equal(t, 40, sent, "forty deliveries recorded sent under the digest's provider message id")
	require.Equal(t, 1, providerIDs)
	require.Equal(t, 1, digestKeys)
	for _, r := range results {
		got := row(t, s, r.ReminderID)
		require.Equal(t, reminder.Sent, got.State)
		require.Equal(t, m.CustomArgs["delivery_key"], got.DigestKey)
		require.Equal(t, digestEvery, got.Digest)
	}
	// A member whose send found its key in the leader's hands read how the
	// digest went in that one attempt (awaitDigest), not in retries.
	for _, r := range results {
		for _, ev := range testenv.History(t, s.Temporal, r.WorkflowID).GetEvents() {
			if started := ev.GetActivityTaskStartedEventAttributes(); started != nil {
				require.EqualValues(t, 1, started.GetAttempt(), "%s's notify took one attempt", r.ReminderID)
			}
		}
	}
	testenv.RecordHistory(t, s.Temporal, results[0].WorkflowID, testenv.AtCurrentLevel("sent-in-a-digest"))
}

// A member cancelled before the digest goes out is left out of it and
// gets nothing; one cancelled after it went out gets the cancellation
// notice, as any reminder sent before its cancel does.
func TestADigestLeavesOutACancelledMemberAndCompensatesALateOne(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	ctx := context.Background()
	const inbox = "desk@consignee.example"
	results, boundary := inboxUpdates(t, s, 3, inbox, nil)
	early, late := results[0], results[1]

	outs, err := s.Starter.Cancel(ctx, "", row(t, s, early.ReminderID).ShipmentID, starter.Actor{By: "ops"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusCancelled, outs[0].Status)

	waitCtx, cancel := context.WithDeadline(ctx, boundary.Add(2*time.Minute))
	defer cancel()
	_, err = s.Mail.Wait(waitCtx, func([]sink.Mail) bool { return len(mailsTo(s, inbox, reminder.PurposeReminder)) > 0 })
	require.NoError(t, err)
	waitEnded(t, s, results[1:], boundary.Add(2*time.Minute))
	mails := mailsTo(s, inbox, reminder.PurposeReminder)
	require.Len(t, mails, 1)
	require.Equal(t, "2 shipment reminders", mails[0].Subject)
	require.NotContains(t, mails[0].Text, "Shipment 00", "the member cancelled before the send is not in it")
	require.Contains(t, mails[0].Text, "Shipment 01")
	require.Contains(t, mails[0].Text, "Shipment 02")
	require.Equal(t, reminder.Cancelled, row(t, s, early.ReminderID).State)
	require.Empty(t, mailsFor(s, early.ReminderID, reminder.PurposeCancellation), "nothing reached it: no notice")
	testenv.RecordHistory(t, s.Temporal, early.WorkflowID, testenv.AtCurrentLevel("digest-member-cancelled-before-its-send"))

	outs, err = s.Starter.Cancel(ctx, "", row(t, s, late.ReminderID).ShipmentID, starter.Actor{By: "ops"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusCompensated, outs[0].Status)
	require.Len(t, mailsFor(s, late.ReminderID, reminder.PurposeCancellation), 1, "the member sent in the digest gets the notice")
}

// The provider bounces the digest: every member is undeliverable, and the
// escalation contact hears once per update, as for any bounced reminder.
func TestABouncedDigestMakesEveryMemberUndeliverable(t *testing.T) {
	t.Parallel()
	const inbox = "gone@consignee.example"
	s := testenv.NewStackWith(t, testenv.StackOptions{Events: true, Bounce: []string{inbox}})
	results, boundary := inboxUpdates(t, s, 3, inbox, func(i int, u *reminder.Update) {
		u.EscalationEmail = fmt.Sprintf("lead-%d@shipper.example", i)
	})
	waitEnded(t, s, results, boundary.Add(2*time.Minute))
	require.Len(t, mailsTo(s, inbox, reminder.PurposeReminder), 1)
	for i, r := range results {
		require.Eventually(t, func() bool { return row(t, s, r.ReminderID).State == reminder.Undeliverable },
			time.Minute, 100*time.Millisecond, "member %d is undeliverable", i)
		contact := fmt.Sprintf("lead-%d@shipper.example", i)
		require.Eventually(t, func() bool { return len(mailsTo(s, contact, reminder.PurposeEscalation)) == 1 },
			time.Minute, 100*time.Millisecond, "update %d escalated", i)
	}
	// And only once each, after the batch's repeats.
	require.Eventually(t, func() bool { return len(s.Mail.PostedEvents()) > 0 }, 10*time.Second, 100*time.Millisecond)
	for i := range results {
		require.Len(t, mailsTo(s, fmt.Sprintf("lead-%d@shipper.example", i), reminder.PurposeEscalation), 1)
	}
}
