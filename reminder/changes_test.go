package reminder_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

func planned(t *testing.T, u reminder.Update) []reminder.Reminder {
	t.Helper()
	rems, err := u.Plan(reminder.PlanOptions{Now: now, WebhookDestination: func(string) error { return nil }})
	require.NoError(t, err)
	return rems
}

func changesUpdate() reminder.Update {
	return reminder.Update{
		ShipmentID: "SHP-1", UpdateID: "window-1", Kind: "delivery_window",
		WindowStart: now.Add(96 * time.Hour),
		Message: reminder.Message{Subject: "Window opens soon", Text: "Dock 4.",
			TemplateID: "d-0123456789abcdef0123456789abcdef", TemplateData: []byte(`{"dock":"4","gate":"B"}`)},
		EscalationEmail: "lead@shipper.example",
		Subscribers: []reminder.Subscriber{
			{ID: "ops", Channel: reminder.Email, Email: "ops@customer.example", RemindBefore: 72 * time.Hour,
				Name: "Ops desk", TimeZone: "Europe/Berlin", Locale: "de"},
			{ID: "hook", Channel: reminder.Webhook, URL: "https://hooks.customer.example/in",
				Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", DueAt: now.Add(time.Hour), RequiresApproval: true},
		},
	}
}

func TestChangesOfAnIdenticalResubmissionAreNone(t *testing.T) {
	t.Parallel()
	u := changesUpdate()
	require.Empty(t, reminder.Changes(u, planned(t, u), u, planned(t, u)))
}

// Each change is named by the field that carries it, never by its value.
func TestChangesNameWhatDiffers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(*reminder.Update)
		want   []string
	}{
		{"subject", func(u *reminder.Update) { u.Message.Subject = "Other" }, []string{"message.subject"}},
		{"text", func(u *reminder.Update) { u.Message.Text = "Dock 5." }, []string{"message.text"}},
		{"kind", func(u *reminder.Update) { u.Kind = "eta_changed" }, []string{"kind"}},
		{"escalation", func(u *reminder.Update) { u.EscalationEmail = "boss@shipper.example" }, []string{"escalation.email"}},
		{"window moves the remind_before due time", func(u *reminder.Update) { u.WindowStart = u.WindowStart.Add(time.Hour) },
			[]string{"window_start", "subscribers[0].due_at"}},
		{"due time", func(u *reminder.Update) { u.Subscribers[1].DueAt = now.Add(2 * time.Hour) }, []string{"subscribers[1].due_at"}},
		{"address", func(u *reminder.Update) { u.Subscribers[0].Email = "other@customer.example" }, []string{"subscribers[0].email"}},
		{"url", func(u *reminder.Update) { u.Subscribers[1].URL = "https://hooks.customer.example/other" }, []string{"subscribers[1].url"}},
		{"secret", func(u *reminder.Update) { u.Subscribers[1].Secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD" }, []string{"subscribers[1].secret"}},
		{"approval", func(u *reminder.Update) { u.Subscribers[1].RequiresApproval = false }, []string{"subscribers[1].approval"}},
		{"approval policy", func(u *reminder.Update) { u.Approval.Timeout = 2 * time.Hour }, []string{"subscribers[1].approval"}},
		{"new subscriber", func(u *reminder.Update) {
			u.Subscribers = append(u.Subscribers, reminder.Subscriber{ID: "late", Channel: reminder.Email, Email: "late@customer.example", DueAt: now})
		}, []string{"subscribers[2] (new subscriber late)"}},
		{"left out", func(u *reminder.Update) { u.Subscribers = u.Subscribers[1:] }, []string{"subscriber ops (left out)"}},
		{"template", func(u *reminder.Update) { u.Message.TemplateID = "d-ffffffffffffffffffffffffffffffff" }, []string{"message.template_id"}},
		{"template data", func(u *reminder.Update) { u.Message.TemplateData = []byte(`{"dock":"5","gate":"B"}`) }, []string{"message.template_data"}},
		{"template data spelled otherwise", func(u *reminder.Update) { u.Message.TemplateData = []byte(`{ "gate": "B", "dock": "4" }`) }, nil},
		{"name", func(u *reminder.Update) { u.Subscribers[0].Name = "Rita" }, []string{"subscribers[0].name"}},
		{"time zone", func(u *reminder.Update) { u.Subscribers[0].TimeZone = "Europe/Vienna" }, []string{"subscribers[0].time_zone"}},
		{"locale", func(u *reminder.Update) { u.Subscribers[0].Locale = "de-AT" }, []string{"subscribers[0].locale"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			was := changesUpdate()
			now := changesUpdate()
			tc.change(&now)
			got := reminder.Changes(was, planned(t, was), now, planned(t, now))
			require.Equal(t, tc.want, got)
			for _, f := range got {
				require.NotContains(t, f, "@", "no address in the names")
				require.NotContains(t, f, "whsec_", "no secret in the names")
			}
		})
	}
}

// The mirror keeps a window's start to the microsecond: the same update
// sent again with its window to the nanosecond (a retry after a 504) is
// the same update, not a changed window_start.
func TestAWindowSentToTheNanosecondIsTheSameWindow(t *testing.T) {
	t.Parallel()
	sent := changesUpdate()
	sent.WindowStart = sent.WindowStart.Add(123456 * time.Nanosecond)
	stored := sent
	stored.WindowStart = reminder.NormalizeTime(sent.WindowStart)
	require.Empty(t, reminder.Changes(stored, planned(t, stored), sent, planned(t, sent)))
}
