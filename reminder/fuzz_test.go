package reminder_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

var reminderIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Whatever the bytes, the parser and the planner either refuse with a
// one-line *FieldError or return reminders that keep every rule.
// Seeds: testdata/fuzz/FuzzUpdate.
func FuzzUpdate(f *testing.F) {
	f.Add([]byte(`{"shipment_id":"S","update_id":"U","kind":"k","message":{"subject":"s","text":"t"},"subscribers":[{"id":"a","channel":"email","email":"a@b.example","due_at":"2026-12-01T00:00:00Z"}]}`))
	// The starter's guard, its lookups stubbed: names resolve to a public
	// address, so the verdict rests on the document alone.
	guard := webhook.Guard{Resolver: webhook.ResolverFunc(func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	})}
	destination := func(raw string) error { return guard.CheckURL(context.Background(), raw) }
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := reminder.ParseUpdate(bytes.NewReader(data))
		var rems []reminder.Reminder
		if err == nil {
			rems, err = u.Plan(reminder.PlanOptions{Now: now, WebhookDestination: destination})
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
		for _, text := range []string{u.Message.Subject, u.Message.Text} {
			if i := strings.IndexFunc(text, hidden); i >= 0 {
				t.Fatalf("accepted %U in the message", []rune(text[i:])[0])
			}
		}
		seen := map[string]bool{}
		for _, r := range rems {
			if r.Channel == reminder.Webhook {
				parsed, err := url.Parse(r.WebhookURL)
				if err != nil {
					t.Fatalf("accepted an unparsable URL %q", r.WebhookURL)
				}
				if ip, err := netip.ParseAddr(parsed.Hostname()); err == nil && guard.CheckAddr(ip, 443) != nil {
					t.Fatalf("accepted forbidden address %s", ip)
				}
			}
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

// hidden is a character an accepted message never holds: a control but tab
// and line breaks, a bidi override or isolate, or U+2028/U+2029.
func hidden(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return false
	case unicode.IsControl(r), r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
		return true
	}
	return false
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
