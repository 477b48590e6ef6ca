package activities_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/reminder"
)

// fakeLinks stands in for links.Signer.
type fakeLinks struct{ expires time.Time }

func (l fakeLinks) DecisionLinks(reminderID string) (approve, reject string, expires time.Time) {
	return "https://console.example/approve/" + reminderID, "https://console.example/reject/" + reminderID, l.expires
}

// An overdue approval's escalation carries the approve and reject links
// (when a link maker is configured); other escalations, and a worker without
// one, send none. The subscriber's address is never in it.
func TestApprovalEscalationCarriesDecisionLinks(t *testing.T) {
	t.Parallel()
	f := setup(t)
	expires := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	f.acts.Links = fakeLinks{expires: expires}
	in := f.schedule(t, reminder.Email)
	_, err := f.db.Pool.Exec(context.Background(), `UPDATE updates SET escalation_email = 'lead@shipper.example'`)
	require.NoError(t, err)
	_, err = f.db.Pool.Exec(context.Background(), `UPDATE reminders SET state = 'awaiting_approval'`)
	require.NoError(t, err)

	escalate := func(reason string) string {
		t.Helper()
		before := len(f.mail.Mails())
		_, err := f.notify(t, activities.NotifyInput{Purpose: reminder.PurposeEscalation, ReminderID: in.ReminderID,
			SubscriberID: in.SubscriberID, Reason: reason})
		require.NoError(t, err)
		mails := f.mail.Mails()
		require.Len(t, mails, before+1)
		m := mails[len(mails)-1]
		require.Equal(t, []string{"lead@shipper.example"}, m.To)
		require.NotContains(t, m.Text, "ops@customer.example", "the escalation names ids, not the subscriber's address")
		return m.Text
	}
	text := escalate("approval_timeout")
	require.Contains(t, text, "Approve: https://console.example/approve/"+in.ReminderID+"\n")
	require.Contains(t, text, "Reject:  https://console.example/reject/"+in.ReminderID+"\n")
	require.Contains(t, text, "valid until 2027-01-15T08:00:00Z")
	html := f.mail.Mails()[len(f.mail.Mails())-1].HTML
	require.Contains(t, html, `href="https://console.example/approve/`+in.ReminderID+`"`, "the HTML part has the links as buttons")
	require.Contains(t, html, `href="https://console.example/reject/`+in.ReminderID+`"`)
	require.Contains(t, html, "What to do:")

	text = escalate("delivery_failed")
	require.NotContains(t, text, "https://console.example")

	f.acts.Links = nil
	_, err = f.db.Pool.Exec(context.Background(), `DELETE FROM deliveries WHERE purpose = 'escalation'`)
	require.NoError(t, err)
	text = escalate("approval_timeout")
	require.False(t, strings.Contains(text, "Approve:") || strings.Contains(text, "https://"), text)
}
