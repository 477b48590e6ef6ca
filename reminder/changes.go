package reminder

import (
	"fmt"
	"slices"
)

// Changes names the fields in which a resubmitted update differs from the
// one first scheduled under the same shipment and update ids, each as the
// resubmission spells it ("message.subject", "subscribers[2].due_at"). Both
// sides are planned (due times resolved, approval applied). Values are never
// repeated: they may be personal data. No changes means the resubmission is
// the same update, sent again.
//
// A subscriber added or left out is a change: an update's fan-out is fixed
// when it is first scheduled.
func Changes(was Update, wasRems []Reminder, now Update, nowRems []Reminder) []string {
	var out []string
	diff := func(differs bool, field string) {
		if differs {
			out = append(out, field)
		}
	}
	diff(was.Kind != now.Kind, "kind")
	// The mirror keeps microseconds: a window sent with nanoseconds is the
	// same window sent again.
	diff(!NormalizeTime(was.WindowStart).Equal(NormalizeTime(now.WindowStart)), "window_start")
	diff(was.Message.Subject != now.Message.Subject, "message.subject")
	diff(was.Message.Text != now.Message.Text, "message.text")
	diff(was.Message.TemplateID != now.Message.TemplateID, "message.template_id")
	diff(!sameJSON(was.Message.TemplateData, now.Message.TemplateData), "message.template_data")
	diff(was.EscalationEmail != now.EscalationEmail, "escalation.email")

	stored := make(map[string]Reminder, len(wasRems))
	for _, r := range wasRems {
		stored[r.SubscriberID] = r
	}
	seen := make(map[string]bool, len(nowRems))
	for i, r := range nowRems {
		field := fmt.Sprintf("subscribers[%d]", i)
		seen[r.SubscriberID] = true
		s, ok := stored[r.SubscriberID]
		if !ok {
			out = append(out, field+" (new subscriber "+r.SubscriberID+")")
			continue
		}
		diff(s.Channel != r.Channel, field+".channel")
		diff(s.Email != r.Email, field+".email")
		diff(s.WebhookURL != r.WebhookURL, field+".url")
		diff(s.WebhookSecret != r.WebhookSecret, field+".secret")
		diff(s.Address != r.Address, field+".address")
		diff(!s.DueAt.Equal(r.DueAt), field+".due_at")
		diff(s.Name != r.Name, field+".name")
		diff(s.TimeZone != r.TimeZone, field+".time_zone")
		diff(s.Locale != r.Locale, field+".locale")
		diff(s.Approval != r.Approval, field+".approval")
	}
	var missing []string
	for id := range stored {
		if !seen[id] {
			missing = append(missing, "subscriber "+id+" (left out)")
		}
	}
	slices.Sort(missing)
	return append(out, missing...)
}
