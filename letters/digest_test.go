package letters_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/letters"
)

// digestItems are three reminders for one inbox: the usual one with a
// window, one without, and one due in summer time. The digest's HTML
// checks (plain-text parity, dark mode and phone) read them through every.
func digestItems() []letters.Shipment {
	second := letters.Shipment{Name: "Someone Else", Subject: "Customs papers needed",
		Text:       "Send the commercial invoice before loading.",
		ShipmentID: "SHP-2002", UpdateID: "customs-1", ReminderID: "SHP-2002/customs-1/ops",
		DueAt: due.Add(24*time.Hour + 30*time.Minute)}
	third := letters.Shipment{Subject: "Pallets are being collected",
		Text:       "Collection from bay 2.\n\nNo signature is needed.",
		ShipmentID: "SHP-3003", UpdateID: "pickup-1", ReminderID: "SHP-3003/pickup-1/ops",
		DueAt: time.Date(2027, 7, 1, 6, 0, 0, 0, time.UTC)}
	return []letters.Shipment{shipment(), second, third}
}

// A digest of several reminders lists each one, in the order given, with
// its subject, text, ids and times, in the reader's language and zone;
// the reader is greeted once, by the name given, and the zone is named
// once.
func TestADigestListsEachReminderInTheReadersLanguageAndZone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		locale, subject, greeting, zone string
		// times are the first item's window and each item's due time,
		// local.
		times []string
	}{
		{"", "3 shipment reminders", "Hello Rita Ops,", "Times are in Europe/Berlin.",
			[]string{"Delivery window opens: Fri 15 Jan, 08:00 CET", "Reminder sent: Tue 12 Jan, 08:00 CET",
				"Reminder sent: Wed 13 Jan, 08:30 CET", "Reminder sent: Thu 1 Jul, 08:00 CEST"}},
		{"de-DE", "3 Sendungserinnerungen", "Guten Tag Rita Ops,", "Alle Zeiten in Europe/Berlin.",
			[]string{"Lieferfenster ab: Fr. 15. Jan., 08:00 CET", "Erinnerung gesendet: Di. 12. Jan., 08:00 CET",
				"Erinnerung gesendet: Mi. 13. Jan., 08:30 CET", "Erinnerung gesendet: Do. 1. Juli, 08:00 CEST"}},
	} {
		t.Run(tc.subject, func(t *testing.T) {
			t.Parallel()
			l, err := letters.Digest("Rita Ops", digestItems(), letters.Audience{Locale: tc.locale, TimeZone: "Europe/Berlin"})
			require.NoError(t, err)
			require.Equal(t, tc.subject, l.Subject)

			chunks, _ := visible(t, l.HTML)
			html := strings.Join(chunks, "\n")
			for name, part := range map[string]string{"text": l.Text, "HTML": html} {
				require.Equal(t, 1, strings.Count(part, tc.greeting), "%s: greeted once, by name", name)
				require.NotContains(t, part, "Someone Else", "%s: an item's own name is not the reader's", name)
				require.Equal(t, 1, strings.Count(part, tc.zone), "%s: the zone named once", name)
				require.NotContains(t, part, "07:", "%s: no UTC time where the reader has a zone", name)

				// Each item in the order given: subject, text, times, ids.
				at := 0
				for _, want := range []string{
					"Delivery window opens in 3 days", "Dock 4, 08:00-12:00.", "Bring the gate pass.", "Call us if the slot does not suit you.",
					tc.times[0], tc.times[1], "SHP-1001", "window-1", "SHP-1001/window-1/ops",
					"Customs papers needed", "Send the commercial invoice before loading.", tc.times[2], "SHP-2002", "customs-1", "SHP-2002/customs-1/ops",
					"Pallets are being collected", "Collection from bay 2.", "No signature is needed.", tc.times[3], "SHP-3003", "pickup-1", "SHP-3003/pickup-1/ops",
					tc.zone,
				} {
					// The HTML puts a fact's label and value in two cells.
					if name == "HTML" {
						want = strings.Replace(want, ": ", "\n", 1)
					}
					i := strings.Index(part[at:], want)
					require.GreaterOrEqual(t, i, 0, "%s: %q missing or out of order in\n%s", name, want, part[at:])
					at += i + len(want)
				}
			}
			require.Contains(t, l.HTML, `<p style="margin:0 0 12px;">Collection from bay 2.</p>`, "paragraphs kept apart")
		})
	}
}

// A digest of one reminder takes that reminder's subject, so it reads as
// the reminder would.
func TestADigestOfOneTakesThatRemindersSubject(t *testing.T) {
	t.Parallel()
	for _, locale := range []string{"", "de-DE"} {
		s := shipment()
		s.Subject = "Delivery window opens in 3 days\nat dock 4"
		l, err := letters.Digest("", []letters.Shipment{s}, letters.Audience{Locale: locale, TimeZone: "Europe/Berlin"})
		require.NoError(t, err, locale)
		require.Equal(t, "Delivery window opens in 3 days at dock 4", l.Subject, "%s: one line", locale)
		require.Contains(t, l.HTML, "<title>Delivery window opens in 3 days at dock 4</title>", locale)
		require.NotContains(t, l.Subject+l.Text+l.HTML, "reminders", locale)
		require.NotContains(t, l.Subject+l.Text+l.HTML, "Sendungserinnerungen", locale)
		require.NotContains(t, l.Text+l.HTML, "Rita Ops", "%s: \"\" greets no one by name", locale)
		require.Contains(t, l.Text, "SHP-1001/window-1/ops", locale)
	}
}

// The tracker's words in a digest are text in the HTML, never markup,
// in every item's heading and text and in the greeting.
func TestTheTrackersWordsAreEscapedInADigest(t *testing.T) {
	t.Parallel()
	items := digestItems()
	items[1].Subject, items[1].Text = `<img src="https://evil.example/p.gif">`, "<script>alert(1)</script>"
	// With one item its subject is the letter's heading and title; with
	// three, an item's heading.
	for n, in := range map[int][]letters.Shipment{1: items[1:2], 3: items} {
		l, err := letters.Digest("<b>Rita</b>", in, letters.Audience{})
		require.NoError(t, err)
		require.NotContains(t, l.HTML, "<img", n)
		require.NotContains(t, l.HTML, "<script>", n)
		require.NotContains(t, l.HTML, "<b>Rita", n)
		require.Contains(t, l.HTML, "&lt;script&gt;", n)
		require.Contains(t, l.HTML, "&lt;img src=", n)
		require.Contains(t, l.Text, "<script>alert(1)</script>", "the text part is plain text")
	}
}

// A digest of nothing is refused rather than sent empty.
func TestADigestOfNothingIsAnError(t *testing.T) {
	t.Parallel()
	_, err := letters.Digest("Rita Ops", nil, letters.Audience{})
	require.Error(t, err)
}
