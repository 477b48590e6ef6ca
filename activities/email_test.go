package activities_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/letters"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// scheduleEmail mirrors one email reminder of u's shape (its first
// subscriber) and returns its notify input.
func (f *fixture) scheduleEmail(t *testing.T, msg reminder.Message, sub reminder.Subscriber) activities.NotifyInput {
	t.Helper()
	sub.ID, sub.Channel, sub.Email, sub.DueAt = "sub-1", reminder.Email, "ops@customer.example", f.now
	u := reminder.Update{
		ShipmentID: testenv.ID(t, "SHP"), UpdateID: "window-1", Kind: "delivery_window",
		WindowStart: f.now.Add(72 * time.Hour), Message: msg, Subscribers: []reminder.Subscriber{sub},
	}
	rems, err := u.Plan(reminder.PlanOptions{Now: f.now})
	require.NoError(t, err)
	r := rems[0]
	_, err = f.mirror.ScheduleUpdate(context.Background(), u, []mirror.NewReminder{{Reminder: r, WorkflowID: workflows.ReminderWorkflowID(r.ID)}})
	require.NoError(t, err)
	return activities.NotifyInput{ReminderID: r.ID, SubscriberID: r.SubscriberID, DueAt: r.DueAt}
}

func (f *fixture) lastMail(t *testing.T) sink.Mail {
	t.Helper()
	mails := f.mail.Mails()
	require.NotEmpty(t, mails)
	return mails[len(mails)-1]
}

// An update that names a dynamic template is sent with it, through
// sendgrid-go's template support: the template id, the caller's data, and
// ours (ids, the subscriber's name, each time in UTC and in the
// subscriber's zone), and no body of our own.
func TestAnUpdatesDynamicTemplateGetsItsDataInUTCAndLocalTime(t *testing.T) {
	t.Parallel()
	f := setup(t)
	msg := reminder.Message{Subject: "Window opens in 3 days", Text: "Dock 4.",
		TemplateID: testenv.TemplateID, TemplateData: []byte(`{"dock":"4","gates":["A","B"]}`)}
	in := f.scheduleEmail(t, msg, reminder.Subscriber{Name: "Rita Ops", TimeZone: "America/New_York", Locale: "en-US"})
	_, err := f.notify(t, in)
	require.NoError(t, err)

	m := f.lastMail(t)
	require.Equal(t, testenv.TemplateID, m.TemplateID)
	require.Empty(t, m.Text+m.HTML, "the template is the body")
	d := m.TemplateData
	require.Equal(t, "4", d["dock"], "the caller's data")
	require.Equal(t, []any{"A", "B"}, d["gates"])
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	due, window := in.DueAt, f.now.Add(72*time.Hour)
	clock := letters.NewClock(letters.Audience{TimeZone: "America/New_York"})
	want := map[string]any{
		"reminder_id": in.ReminderID, "subscriber_id": "sub-1", "subscriber_name": "Rita Ops", "update_id": "window-1",
		"kind": "delivery_window", "subject": "Window opens in 3 days", "text": "Dock 4.",
		"time_zone": "America/New_York", "locale": "en-US",
		"due_at_utc": due.UTC().Format(time.RFC3339), "due_at_local": due.In(ny).Format(time.RFC3339),
		"due_at_text":        clock.Text(due),
		"window_start_utc":   reminder.NormalizeTime(window).UTC().Format(time.RFC3339),
		"window_start_local": reminder.NormalizeTime(window).In(ny).Format(time.RFC3339),
		"window_start_text":  clock.Text(window),
	}
	for k, v := range want {
		require.Equal(t, v, d[k], k)
	}
	require.Regexp(t, ` E[SD]T$`, d["due_at_text"], "the zone is named")
	require.NotEqual(t, d["due_at_utc"], d["due_at_local"])
	ours := slices.DeleteFunc(slices.Sorted(maps.Keys(d)), func(k string) bool { return k == "dock" || k == "gates" })
	require.ElementsMatch(t, reminder.TemplateKeys, ours, "shipnotify sets exactly the keys the update may not")
}

// Without a template the subscriber gets shipnotify's own letter, text and
// HTML, in the subscriber's language, times in the subscriber's zone;
// without a locale or zone, English and UTC.
func TestWithoutATemplateTheEmailIsTheDefaultLetter(t *testing.T) {
	t.Parallel()
	f := setup(t)
	msg := reminder.Message{Subject: "Lieferfenster in 3 Tagen", Text: "Rampe 4."}
	in := f.scheduleEmail(t, msg, reminder.Subscriber{Name: "Rita Ops", TimeZone: "Europe/Berlin", Locale: "de-DE"})
	_, err := f.notify(t, in)
	require.NoError(t, err)
	m := f.lastMail(t)
	require.Empty(t, m.TemplateID)
	clock := letters.NewClock(letters.Audience{TimeZone: "Europe/Berlin", Locale: "de"})
	for _, part := range []string{m.Text, m.HTML} {
		require.Contains(t, part, "Guten Tag Rita Ops,")
		require.Contains(t, part, "Rampe 4.")
		require.Contains(t, part, clock.Text(in.DueAt))
		require.Contains(t, part, "Europe/Berlin")
	}
	require.Regexp(t, ` CES?T$`, clock.Text(in.DueAt))
	require.Contains(t, m.HTML, `<meta name="color-scheme" content="light dark">`)

	g := setup(t)
	in = g.scheduleEmail(t, msg, reminder.Subscriber{})
	_, err = g.notify(t, in)
	require.NoError(t, err)
	m = g.lastMail(t)
	require.Contains(t, m.Text, "Hello,")
	require.Contains(t, m.Text, letters.NewClock(letters.Audience{}).Text(in.DueAt))
	require.Regexp(t, ` UTC$`, letters.NewClock(letters.Audience{}).Text(in.DueAt))
	require.NotEmpty(t, m.HTML)
}

// The cancellation notice an email subscriber gets is a letter too, in the
// subscriber's language, saying what happened and what to do; a template
// the update named is for the reminder, not for it.
func TestTheCancellationNoticeIsALetterInTheSubscribersLanguage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	msg := reminder.Message{Subject: "Window opens in 3 days", Text: "Dock 4.", TemplateID: testenv.TemplateID}
	in := f.scheduleEmail(t, msg, reminder.Subscriber{TimeZone: "Europe/Berlin", Locale: "de-AT"})
	_, err := f.notify(t, in)
	require.NoError(t, err)
	_, err = f.notify(t, activities.NotifyInput{Purpose: reminder.PurposeCancellation, ReminderID: in.ReminderID, SubscriberID: in.SubscriberID})
	require.NoError(t, err)
	m := f.lastMail(t)
	require.Equal(t, "cancellation", m.CustomArgs["purpose"])
	require.Empty(t, m.TemplateID)
	require.Equal(t, "Storniert: Window opens in 3 days", m.Subject)
	require.Contains(t, m.Text, "wurde storniert")
	require.Contains(t, m.Text, "Was ist zu tun: nichts.")
	require.Contains(t, m.HTML, "wurde storniert")
}
