package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // readers' zones, on an image without zoneinfo too
	"unicode/utf8"

	"github.com/shipnotify/shipnotify/reminder"
)

// How the pages show what they show: times in the reader's zone and
// locale, addresses masked, text cut to a preview, hashes shortened.

// utcLayout is a time to the second in UTC: a time's tooltip, for
// whoever needs the exact instant.
const utcLayout = "2006-01-02 15:04:05 UTC"

// zoneCookie holds the reader's time zone, an IANA name their browser
// reports (static/console.js sets it on every page, the login page
// included). It is a preference, not a credential.
const zoneCookie = "shipnotify_tz"

// timeStyle is how one reader sees times: in their zone (their browser's,
// UTC without the script), named as people say it (CET, EST), in their
// locale's order: month first and a 12-hour clock for American English,
// day first and a 24-hour clock for every other (the console speaks
// English only).
type timeStyle struct {
	loc *time.Location
	// Zone is the zone's IANA name ("UTC" when the browser named none).
	Zone string
	// FromBrowser: the zone is the one the reader's browser reported.
	FromBrowser bool
	us          bool
	now         time.Time
}

// zones caches the zones readers' browsers named, valid ones only (there
// are a few hundred).
var zones sync.Map

// loadZone is the zone an IANA name names, or false: never the server's
// Local, and only names made of what IANA names are made of.
func loadZone(name string) (*time.Location, bool) {
	if name == "" || len(name) > 64 || name == "Local" || strings.Contains(name, "..") || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/_+-") != "" {
		return nil, false
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), true
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, false
	}
	zones.Store(name, loc)
	return loc, true
}

// styleFor is the time style of r's reader: the zone from the cookie
// their browser set, the order from their Accept-Language.
func styleFor(r *http.Request, now time.Time) timeStyle {
	st := timeStyle{loc: time.UTC, Zone: "UTC", now: now}
	if ck, err := r.Cookie(zoneCookie); err == nil {
		if loc, ok := loadZone(ck.Value); ok {
			st.loc, st.Zone, st.FromBrowser = loc, ck.Value, true
		}
	}
	first, _, _ := strings.Cut(r.Header.Get("Accept-Language"), ",")
	first, _, _ = strings.Cut(first, ";")
	st.us = strings.EqualFold(strings.TrimSpace(first), "en-US")
	return st
}

// abbrev names t's zone as people say it (CET, CEST, EST, UTC), or by its
// offset (UTC-03) where the zone has no such name.
func (st timeStyle) abbrev(t time.Time) string {
	a := t.In(st.loc).Format("MST")
	if strings.HasPrefix(a, "+") || strings.HasPrefix(a, "-") {
		return "UTC" + a
	}
	return a
}

// Name is the zone as the pages name it now: "CET (Europe/Berlin)".
func (st timeStyle) Name() string {
	a := st.abbrev(st.now)
	if a == st.Zone {
		return a
	}
	return a + " (" + st.Zone + ")"
}

// nbsp keeps a date's or a clock's parts on one line.
func nbsp(s string) string { return strings.ReplaceAll(s, " ", "\u00a0") }

// Day is t's day in the reader's zone: "7 Feb 2027" (Feb 7, 2027).
func (st timeStyle) Day(t time.Time) string {
	if st.us {
		return t.In(st.loc).Format("Jan 2, 2006")
	}
	return t.In(st.loc).Format("2 Jan 2006")
}

// Short is t's day without its year: "7 Feb" (Feb 7).
func (st timeStyle) Short(t time.Time) string {
	if st.us {
		return t.In(st.loc).Format("Jan 2")
	}
	return t.In(st.loc).Format("2 Jan")
}

// Text is t as the pages write it: "7 Feb 2027, 09:00 CET" (Feb 7, 2027,
// 9:00 AM CET); the day and the clock each stay on one line.
func (st timeStyle) Text(t time.Time) string {
	day, clock := st.parts(t)
	return day + " " + clock
}

// parts are t's day (with its comma) and its clock with the zone, each
// joined by no-break spaces.
func (st timeStyle) parts(t time.Time) (day, clock string) {
	clock = t.In(st.loc).Format("15:04")
	if st.us {
		clock = t.In(st.loc).Format("3:04 PM")
	}
	return nbsp(st.Day(t)) + ",", nbsp(clock + " " + st.abbrev(t))
}

// when is a time as a <time> element: the reader's time, the instant for
// machines, and the instant in UTC to the second as its tooltip.
func (st timeStyle) when(t time.Time) template.HTML {
	u := t.UTC()
	day, clock := st.parts(t)
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s"><span>%s</span> <span>%s</span></time>`,
		u.Format(time.RFC3339Nano), u.Format(utcLayout), template.HTMLEscapeString(day), template.HTMLEscapeString(clock)))
}

// whenAny is when for a time or a time's pointer (nil shows nothing).
func (st timeStyle) whenAny(v any) template.HTML {
	switch t := v.(type) {
	case time.Time:
		return st.when(t)
	case *time.Time:
		if t != nil {
			return st.when(*t)
		}
	}
	return ""
}

// dayStart is the start of t's day in the reader's zone.
func (st timeStyle) dayStart(t time.Time) time.Time {
	y, m, d := t.In(st.loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, st.loc)
}

// maskRecipient shows enough of an address to recognise it and no more:
// an email's first character and its domain (o…@shipper.example), a
// webhook's scheme and host, another channel's last two characters.
func maskRecipient(ch reminder.Channel, addr string) string {
	if addr == "" {
		return ""
	}
	switch ch {
	case reminder.Email:
		local, domain, ok := strings.Cut(addr, "@")
		if !ok || local == "" {
			return "…"
		}
		r, _ := utf8.DecodeRuneInString(local)
		return string(r) + "…@" + domain
	case reminder.Webhook:
		u, err := url.Parse(addr)
		if err != nil || u.Host == "" {
			return "…"
		}
		return u.Scheme + "://" + u.Host + "/…"
	default:
		if utf8.RuneCountInString(addr) <= 4 {
			return "…"
		}
		runes := []rune(addr)
		return "…" + string(runes[len(runes)-2:])
	}
}

// previewRunes is how much of a message's text the list shows.
const previewRunes = 140

// preview is the start of s, on one line, cut at a word near n runes.
func preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)[:n]
	cut := string(runes)
	if i := strings.LastIndexByte(cut, ' '); i > n/2 {
		cut = cut[:i]
	}
	return cut + "…"
}

// lines is a message's text with its line breaks kept: each line
// escaped, a <br> between them.
func lines(s string) template.HTML {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		parts[i] = template.HTMLEscapeString(p)
	}
	return template.HTML(strings.Join(parts, "<br>\n"))
}

// isHash reports whether s is a 64-character hex hash (a delivery key).
func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// hash shows a 64-character hash by its first 12, the whole in its
// tooltip and for the script's copy button.
func hash(s string) template.HTML {
	short := s
	if len(s) > 12 {
		short = s[:12] + "…"
	}
	esc := template.HTMLEscapeString(s)
	return template.HTML(fmt.Sprintf(`<code class="hash" title="%s" data-copy="%s">%s</code>`, esc, esc, template.HTMLEscapeString(short)))
}
