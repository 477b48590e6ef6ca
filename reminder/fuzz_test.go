package reminder_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shipnotify/shipnotify/reminder"
)

var reminderIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Whatever the bytes, the parser and the planner either refuse with a
// one-line *FieldError or return reminders that keep every rule.
// Seeds: testdata/fuzz/FuzzUpdate.
func FuzzUpdate(f *testing.F) {
	f.Add([]byte(`{"shipment_id":"S","update_id":"U","kind":"k","message":{"subject":"s","text":"t"},"subscribers":[{"id":"a","channel":"email","email":"a@b.example","due_at":"2026-12-01T00:00:00Z"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := reminder.ParseUpdate(bytes.NewReader(data))
		var rems []reminder.Reminder
		if err == nil {
			rems, err = u.Plan(reminder.PlanOptions{Now: now})
		}
		if err != nil {
			var fe *reminder.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("want a *FieldError, got %T: %v", err, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		if len(rems) != len(u.Subscribers) || len(rems) == 0 {
			t.Fatalf("%d reminders for %d subscribers", len(rems), len(u.Subscribers))
		}
		seen := map[string]bool{}
		for _, r := range rems {
			if !reminderIDPattern.MatchString(r.ID) || seen[r.ID] {
				t.Fatalf("bad or repeated reminder id %q", r.ID)
			}
			seen[r.ID] = true
			if r.DueAt.Before(now.Add(-reminder.MaxPastDue)) || r.DueAt.After(now.Add(reminder.MaxHorizon)) {
				t.Fatalf("due time %s out of bounds", r.DueAt)
			}
			if !r.DueAt.Equal(reminder.NormalizeTime(r.DueAt)) {
				t.Fatalf("due time %s not normalised", r.DueAt)
			}
			if (r.Channel == reminder.Email) == (r.Email == "") || (r.Channel == reminder.Webhook) == (r.WebhookURL == "") {
				t.Fatalf("channel %q with email %q url %q", r.Channel, r.Email, r.WebhookURL)
			}
		}
	})
}

// The delivery key is 64 hex digits, the same for the same instant in any
// zone, and different when the due time moves. Seeds: testdata/fuzz/FuzzDeliveryKey.
func FuzzDeliveryKey(f *testing.F) {
	f.Add("SHP-1/u/a", "a", int64(1796017488000000000), int64(1))
	f.Fuzz(func(t *testing.T, id, sub string, nanos, shift int64) {
		due := time.Unix(0, nanos)
		key := reminder.DeliveryKey(id, sub, due)
		if b, err := hex.DecodeString(key); err != nil || len(b) != 32 {
			t.Fatalf("key %q is not 64 hex digits", key)
		}
		if key != reminder.DeliveryKey(id, sub, due.In(time.FixedZone("X", 5*3600+1800))) {
			t.Fatal("the zone changed the key")
		}
		if shift != 0 && key == reminder.DeliveryKey(id, sub, due.Add(time.Duration(shift))) {
			t.Fatal("moving the due time kept the key")
		}
	})
}
