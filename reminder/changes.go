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
		// A window from the tenant's default is not the resubmission's
		// own: the default may have changed since, and a retry must not
		// conflict for it.
		named := now.SendWindow != nil || (i < len(now.Subscribers) && now.Subscribers[i].SendWindow != nil)
		diff(named && windowDiffers(s.Window, r.Window), field+".send_window")
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

// windowDiffers reports whether a resubmission's resolved window (now)
// differs from the one first scheduled (was). The holidays the first took
// from the tenant's file then are not the resubmission's to repeat: only
// the dates it names must be among those skipped.
func windowDiffers(was, now *SendWindow) bool {
	if was == nil || now == nil {
		return was != now
	}
	a, b := was.Window, now.Window
	for _, d := range b.Skip {
		if !slices.Contains(a.Skip, d) {
			return true
		}
	}
	return a.Days != b.Days || a.From != b.From || a.To != b.To || was.TimeZone != now.TimeZone || was.Policy != now.Policy
}
