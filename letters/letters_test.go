package letters_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/shipnotify/shipnotify/letters"
)

var (
	due    = time.Date(2027, 1, 12, 7, 0, 0, 0, time.UTC)
	window = due.Add(72 * time.Hour)
)

func shipment() letters.Shipment {
	return letters.Shipment{Name: "Rita Ops", Subject: "Delivery window opens in 3 days",
		Text:       "Dock 4, 08:00-12:00.\nBring the gate pass.\n\nCall us if the slot does not suit you.",
		ShipmentID: "SHP-1001", UpdateID: "window-1", ReminderID: "SHP-1001/window-1/ops",
		WindowStart: window, DueAt: due}
}

func escalation(reason string) letters.Escalation {
	return letters.Escalation{ReminderID: "SHP-1001/window-1/ops", ShipmentID: "SHP-1001", UpdateID: "window-1",
		SubscriberID: "ops", Channel: "email", State: "awaiting_approval", Reason: reason, DueAt: due}
}

// every is every letter in every language and shape it comes in.
func every(t *testing.T) map[string]letters.Letter {
	t.Helper()
	out := map[string]letters.Letter{}
	add := func(name string, l letters.Letter, err error) {
		t.Helper()
		require.NoError(t, err, name)
		out[name] = l
	}
	for _, locale := range []string{"", "de-DE"} {
		a := letters.Audience{Locale: locale, TimeZone: "Europe/Berlin"}
		s := shipment()
		l, err := letters.Reminder(s, a)
		add("reminder "+locale, l, err)
		l, err = letters.Cancellation(s, a)
		add("cancellation "+locale, l, err)
		s.Name, s.WindowStart = "", time.Time{}
		l, err = letters.Reminder(s, a)
		add("reminder without name or window "+locale, l, err)
		l, err = letters.Cancellation(s, a)
		add("cancellation without name or window "+locale, l, err)
		l, err = letters.Digest("Rita Ops", digestItems(), a)
		add("digest "+locale, l, err)
		l, err = letters.Digest("", []letters.Shipment{s}, a)
		add("digest of one without name or window "+locale, l, err)
	}
	for _, reason := range []string{"approval_timeout", "delivery_failed", "undeliverable", "delivery_deferred", "other_reason"} {
		l, err := letters.Escalate(escalation(reason))
		add("escalation "+reason, l, err)
	}
	e := escalation("approval_timeout")
	e.Approve, e.Reject, e.LinksExpire = "https://console.example/link/a.b", "https://console.example/link/c.d", due.Add(48*time.Hour)
	e.Detail = "mail API answered 400"
	l, err := letters.Escalate(e)
	add("escalation with links", l, err)
	return out
}

// visible is the text a reader of the HTML sees, chunk by chunk, and the
// links it holds; the head (title, style) is not read.
func visible(t *testing.T, doc string) (chunks, links []string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(doc))
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return chunks, links
		case html.StartTagToken:
			tok := z.Token()
			switch tok.Data {
			case "head", "style", "title":
				skip++
			case "a":
				for _, a := range tok.Attr {
					if a.Key == "href" {
						links = append(links, a.Val)
					}
				}
			}
		case html.EndTagToken:
			switch z.Token().Data {
			case "head", "style", "title":
				skip--
			}
		case html.TextToken:
			if skip == 0 {
				if c := squash(string(z.Text())); c != "" {
					chunks = append(chunks, c)
				}
			}
		}
	}
}

func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// Plain-text parity: every piece of text and every link of the HTML part is
// in the text part too, so a reader without HTML misses nothing.
func TestTheTextPartSaysEverythingTheHTMLDoes(t *testing.T) {
	t.Parallel()
	for name, l := range every(t) {
		chunks, links := visible(t, l.HTML)
		require.NotEmpty(t, chunks, name)
		text := squash(l.Text)
		for _, c := range chunks {
			require.Contains(t, text, c, "%s: the text part lacks what the HTML says", name)
		}
		for _, href := range links {
			require.Contains(t, l.Text, href, "%s: the text part lacks a link", name)
		}
		require.NotContains(t, l.Subject, "\n", name)
	}
}

// The HTML reads in dark mode and on a phone and loads nothing remote:
// a color-scheme meta and dark styles, a viewport and a narrow card, CSS
// inline, no image, stylesheet, font or script from anywhere.
func TestTheHTMLReadsInDarkModeAndOnAPhone(t *testing.T) {
	t.Parallel()
	remote := regexp.MustCompile(`(?i)<img|<link|<script|<iframe|@import|url\(|src=`)
	for name, l := range every(t) {
		require.Contains(t, l.HTML, `<meta name="color-scheme" content="light dark">`, name)
		require.Contains(t, l.HTML, `@media (prefers-color-scheme: dark)`, name)
		require.Contains(t, l.HTML, `<meta name="viewport" content="width=device-width, initial-scale=1">`, name)
		require.Contains(t, l.HTML, `max-width:560px`, name)
		require.Contains(t, l.HTML, `<body class="page" style=`, name, "styles inline, for clients that drop <style>")
		require.NotRegexp(t, remote, l.HTML, name)
	}
}

// Times are stated in the subscriber's zone with the zone named, in the
// subscriber's language; without a zone, in UTC.
func TestTimesAreInTheSubscribersZoneWithTheZoneNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a    letters.Audience
		at   time.Time
		want string
	}{
		{letters.Audience{TimeZone: "Europe/Berlin"}, due, "Tue 12 Jan, 08:00 CET"},
		{letters.Audience{TimeZone: "Europe/Berlin"}, due.AddDate(0, 6, 0), "Mon 12 Jul, 09:00 CEST"},
		{letters.Audience{TimeZone: "Europe/Berlin", Locale: "de"}, due, "Di. 12. Jan., 08:00 CET"},
		{letters.Audience{TimeZone: "America/New_York", Locale: "en-US"}, due, "Tue 12 Jan, 02:00 EST"},
		{letters.Audience{TimeZone: "Asia/Dubai"}, due, "Tue 12 Jan, 11:00 UTC+04"},
		{letters.Audience{}, due, "Tue 12 Jan, 07:00 UTC"},
	} {
		require.Equal(t, tc.want, letters.NewClock(tc.a).Text(tc.at), "%+v", tc.a)
	}
	l, err := letters.Reminder(shipment(), letters.Audience{TimeZone: "Europe/Berlin"})
	require.NoError(t, err)
	for _, part := range []string{l.Text, l.HTML} {
		require.Contains(t, part, "Tue 12 Jan, 08:00 CET", "the due time, local")
		require.Contains(t, part, "Fri 15 Jan, 08:00 CET", "the window, local")
		require.Contains(t, part, "Europe/Berlin")
		require.NotContains(t, part, "07:00", "no UTC time where the subscriber has a zone")
	}
}

// The default letters are written in English and German, chosen by the
// subscriber's locale; a locale with no translation reads English.
func TestTheLanguageFollowsTheLocaleWithEnglishAsFallback(t *testing.T) {
	t.Parallel()
	for locale, want := range map[string]string{"": "Hello Rita Ops,", "en-GB": "Hello Rita Ops,", "fr-FR": "Hello Rita Ops,",
		"de": "Guten Tag Rita Ops,", "de-AT": "Guten Tag Rita Ops,", "de-CH-1901": "Guten Tag Rita Ops,"} {
		l, err := letters.Reminder(shipment(), letters.Audience{Locale: locale})
		require.NoError(t, err)
		require.Contains(t, l.Text, want, locale)
		require.Contains(t, l.HTML, want, locale)
		lang := "en"
		if strings.HasPrefix(want, "Guten") {
			lang = "de"
		}
		require.Contains(t, l.HTML, fmt.Sprintf(`<html lang="%s">`, lang), locale)
	}
	l, err := letters.Cancellation(shipment(), letters.Audience{Locale: "de-DE"})
	require.NoError(t, err)
	require.Equal(t, "Storniert: Delivery window opens in 3 days", l.Subject)
	require.Contains(t, l.Text, "Sendung SHP-1001 wurde storniert")
}

// Each letter says what happened and what to do, with the shipment's ids.
func TestEachLetterSaysWhatHappenedAndWhatToDo(t *testing.T) {
	t.Parallel()
	all := every(t)
	r := all["reminder "]
	require.Equal(t, "Delivery window opens in 3 days", r.Subject)
	for _, want := range []string{"Dock 4, 08:00-12:00.\nBring the gate pass.", "Shipment: SHP-1001", "Update: window-1",
		"Delivery window opens: Fri 15 Jan, 08:00 CET", "Reference: SHP-1001/window-1/ops"} {
		require.Contains(t, r.Text, want)
	}
	require.Contains(t, r.HTML, "<p style=\"margin:0 0 12px;\">Dock 4, 08:00-12:00.<br>Bring the gate pass.</p>", "paragraphs and lines kept")

	c := all["cancellation "]
	require.Equal(t, "Cancelled: Delivery window opens in 3 days", c.Subject)
	require.Contains(t, c.Text, "Shipment SHP-1001 has been cancelled")
	require.Contains(t, c.Text, "What to do: nothing.")

	for reason, want := range map[string][2]string{
		"approval_timeout":  {"is waiting for approval past its approval timeout", "shipnotify approve --reminder SHP-1001/window-1/ops"},
		"delivery_failed":   {"could not be delivered and has failed", "It will not be sent again."},
		"undeliverable":     {"was bounced or dropped by the mail provider: the subscriber did not get it", "Check the subscriber's address"},
		"delivery_deferred": {"is still deferred by the mail provider: the subscriber has not got it yet", "the mail provider keeps trying"},
		"other_reason":      {"needs attention (other_reason)", "Read the reminder's trail."},
	} {
		e := all["escalation "+reason]
		require.Equal(t, "[shipnotify] Reminder SHP-1001/window-1/ops "+want[0], e.Subject)
		require.Contains(t, e.Text, "\n\nWhat to do: ", reason)
		require.Contains(t, e.Text, want[1], reason)
		require.Contains(t, e.Text, "Inspect it with: shipnotify show SHP-1001/window-1/ops\n", reason)
	}
	e := all["escalation with links"]
	require.Contains(t, e.Text, "  Approve: https://console.example/link/a.b\n")
	require.Contains(t, e.Text, "  Reject:  https://console.example/link/c.d\n")
	require.Contains(t, e.Text, "valid until 2027-01-14T07:00:00Z")
	require.Contains(t, e.Text, "Detail: mail API answered 400")
	require.Contains(t, e.HTML, `href="https://console.example/link/a.b"`)
	require.NotContains(t, e.Text, "shipnotify approve", "the links replace the command")
}

// The tracker's words are text in the HTML, never markup.
func TestTheTrackersWordsAreEscapedInTheHTML(t *testing.T) {
	t.Parallel()
	s := shipment()
	s.Subject, s.Text, s.Name = `<img src="https://evil.example/p.gif">`, "<script>alert(1)</script>", "<b>Rita</b>"
	l, err := letters.Reminder(s, letters.Audience{})
	require.NoError(t, err)
	require.NotContains(t, l.HTML, "<img")
	require.NotContains(t, l.HTML, "<script>")
	require.NotContains(t, l.HTML, "<b>Rita")
	require.Contains(t, l.HTML, "&lt;script&gt;")
	require.Contains(t, l.Text, "<script>alert(1)</script>", "the text part is plain text")
}
