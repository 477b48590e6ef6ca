// Package letters writes the emails shipnotify sends in its own words: a
// reminder without a dynamic template, the cancellation notice, the digest
// of several reminders and the escalation. Each is a text part and an HTML
// part that say the same (plain-text parity), from embedded templates: the
// HTML has its CSS inline, a color-scheme for dark mode, a width a phone
// can read and no remote images. Times are stated in the reader's zone,
// the zone named, in the reader's language where a translation exists
// (Languages).
package letters

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"io/fs"
	"strings"
	texttemplate "text/template"
	"time"

	"golang.org/x/text/language"

	"github.com/shipnotify/shipnotify/reminder"
)

//go:embed templates
var files embed.FS

// Letter is one email: its subject and its two parts.
type Letter struct {
	Subject, Text, HTML string
}

// Shipment is what a reminder and its cancellation notice tell the
// subscriber: the tracker's message, the ids and the times.
type Shipment struct {
	// Name greets the subscriber ("" greets no one by name).
	Name                             string
	Subject, Text                    string
	ShipmentID, UpdateID, ReminderID string
	// WindowStart is zero when the update has no window.
	WindowStart, DueAt time.Time
}

// Escalation is what the escalation contact is told about a reminder: ids
// and states, never the subscriber's address.
type Escalation struct {
	ReminderID, ShipmentID, UpdateID, SubscriberID string
	Channel, State                                 string
	// Reason is the escalation's reason (approval_timeout,
	// delivery_failed, undeliverable, delivery_deferred); Detail, when set,
	// is what the provider said.
	Reason, Detail string
	DueAt          time.Time
	// Approve and Reject are the decision links of an overdue approval,
	// valid until LinksExpire; empty when links are not configured.
	Approve, Reject string
	LinksExpire     time.Time
}

// Kinds of letter, each a template in every language.
const (
	kindReminder     = "reminder"
	kindCancellation = "cancellation"
	kindDigest       = "digest"
	kindEscalation   = "escalation"
)

// translated are the kinds every language of Languages writes (a test
// holds each to it); the escalation is the operator's, in English only
// (Escalate).
var translated = []string{kindReminder, kindCancellation, kindDigest}

type templates struct {
	html *htmltemplate.Template
	text *texttemplate.Template
}

// sets holds each language's templates by kind, parsed once at start: a
// template that does not parse fails every test, not a send.
var sets = func() map[language.Tag]map[string]templates {
	out := map[language.Tag]map[string]templates{}
	for _, lang := range Languages {
		out[lang] = map[string]templates{}
		for _, kind := range []string{kindReminder, kindCancellation, kindDigest, kindEscalation} {
			dir := "templates/" + lang.String() + "/"
			if _, err := fs.Stat(files, dir+kind+".html"); err != nil {
				continue // written in English only
			}
			htmlFiles, textFiles := []string{"templates/layout.html", dir + kind + ".html"}, []string{dir + kind + ".txt"}
			// A .words file holds what both parts say in the same words.
			if _, err := fs.Stat(files, dir+kind+".words"); err == nil {
				htmlFiles, textFiles = append(htmlFiles, dir+kind+".words"), append(textFiles, dir+kind+".words")
			}
			out[lang][kind] = templates{
				html: htmltemplate.Must(htmltemplate.New("layout.html").Funcs(htmltemplate.FuncMap{"pair": pair}).ParseFS(files, htmlFiles...)),
				text: texttemplate.Must(texttemplate.New(kind+".txt").ParseFS(files, textFiles...)),
			}
		}
	}
	return out
}()

// view is what a template reads: the facts, and the times as the reader's
// clock states them.
type view struct {
	// S is the letter's shipment; a digest's carries only the reader's
	// Name, its shipments being Items.
	S Shipment
	E Escalation
	// Lang is the letter's language, for the HTML's lang attribute.
	Lang                     string
	Due, Window, LinksExpire string
	DueUTC, LinksExpireUTC   string
	// Zone names the zone the times are in ("Europe/Berlin").
	Zone string
	// Paragraphs is the tracker's text, by paragraph and line.
	Paragraphs [][]string
	// Items are a digest's reminders, each viewed as its own letter
	// would be, in the order given.
	Items []view
}

// Reminder is a reminder's letter in the subscriber's language and zone.
func Reminder(s Shipment, a Audience) (Letter, error) {
	return render(kindReminder, a, viewOf(s, NewClock(a)))
}

// Cancellation tells a subscriber already reminded that the shipment was
// cancelled and that nothing more will come of the message.
func Cancellation(s Shipment, a Audience) (Letter, error) {
	return render(kindCancellation, a, viewOf(s, NewClock(a)))
}

// errEmptyDigest refuses a digest of nothing: a letter that lists no
// reminder has nothing to say, and sending one is the caller's bug.
var errEmptyDigest = errors.New("error writing the digest letter: it lists no reminders")

// Digest is one letter for several reminders to one inbox: each
// shipment with its own subject, text and times, in the reader's
// language and zone. Items keep the order given.
//
// Each item's Name is not read: name greets the reader ("" greets no one
// by name), once for the letter. One item takes that item's subject, so a
// digest of one reads like its reminder; none is an error.
func Digest(name string, items []Shipment, a Audience) (Letter, error) {
	if len(items) == 0 {
		return Letter{}, errEmptyDigest
	}
	c := NewClock(a)
	v := view{S: Shipment{Name: name}, Zone: c.ZoneLabel()}
	for _, s := range items {
		v.Items = append(v.Items, viewOf(s, c))
	}
	return render(kindDigest, a, v)
}

// Escalate is the escalation contact's letter: in English, times in UTC,
// as an operator reads the trail.
func Escalate(e Escalation) (Letter, error) {
	c := Clock{Zone: time.UTC, Lang: language.English}
	v := view{E: e, Due: c.Text(e.DueAt), DueUTC: UTC(e.DueAt), Zone: "UTC"}
	if !e.LinksExpire.IsZero() {
		v.LinksExpire, v.LinksExpireUTC = c.Text(e.LinksExpire), UTC(e.LinksExpire)
	}
	return render(kindEscalation, Audience{}, v)
}

func viewOf(s Shipment, c Clock) view {
	v := view{S: s, Due: c.Text(s.DueAt), DueUTC: UTC(s.DueAt), Zone: c.ZoneLabel()}
	if !s.WindowStart.IsZero() {
		v.Window = c.Text(s.WindowStart)
	}
	for _, p := range strings.Split(strings.ReplaceAll(s.Text, "\r\n", "\n"), "\n\n") {
		if strings.TrimSpace(p) != "" {
			v.Paragraphs = append(v.Paragraphs, strings.Split(strings.Trim(p, "\n"), "\n"))
		}
	}
	return v
}

func render(kind string, a Audience, v view) (Letter, error) {
	lang := Language(a.Locale)
	t, ok := sets[lang][kind]
	if !ok {
		lang, t = language.English, sets[language.English][kind]
	}
	v.Lang = lang.String()
	var subject, text, html bytes.Buffer
	if err := t.text.ExecuteTemplate(&subject, "subject", v); err != nil {
		return Letter{}, fmt.Errorf("error writing the %s letter's subject: %w", kind, err)
	}
	if err := t.text.ExecuteTemplate(&text, "text", v); err != nil {
		return Letter{}, fmt.Errorf("error writing the %s letter's text: %w", kind, err)
	}
	l := Letter{Subject: oneLine(subject.String()), Text: text.String()}
	if err := t.html.Execute(&html, struct {
		view
		Subject string
	}{v, l.Subject}); err != nil {
		return Letter{}, fmt.Errorf("error writing the %s letter's HTML: %w", kind, err)
	}
	l.HTML = html.String()
	return l, nil
}

// pair hands a fact's label and value to the layout's "fact" row.
func pair(label, value string) [2]string { return [2]string{label, value} }

// oneLine is a subject as SendGrid takes it: one line, at most
// reminder.MaxSubjectRunes.
func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ")
	if r := []rune(s); len(r) > reminder.MaxSubjectRunes {
		s = string(r[:reminder.MaxSubjectRunes])
	}
	return s
}
