package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shipnotify/shipnotify/reminder"
)

// How the pages show what they show: times a reader's browser can put in
// its zone, addresses masked, text cut to a preview, hashes shortened.

// utcLayout is a time as the pages print it before the browser's script
// (static/console.js) rewrites it in the reader's zone; the tooltip keeps
// it.
const utcLayout = "2006-01-02 15:04:05 UTC"

// when is a time as a <time> element: UTC text, the machine-readable
// instant for the script, and the UTC text again as its tooltip.
func when(t time.Time) template.HTML {
	u := t.UTC()
	text := u.Format(utcLayout)
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s">%s</time>`, u.Format(time.RFC3339Nano), text, text))
}

// whenAny is when for a time or a time's pointer (nil shows nothing).
func whenAny(v any) template.HTML {
	switch t := v.(type) {
	case time.Time:
		return when(t)
	case *time.Time:
		if t != nil {
			return when(*t)
		}
	}
	return ""
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
