package sink

import (
	"html/template"
	"net/http"
	"regexp"
	"slices"
)

// The mailbox page shows what the mail sink accepted, newest first, its
// links clickable, so a person (or a browser test) can follow a link from
// an email as they would in their inbox. Loopback only, like the sink.
var mailboxPage = template.Must(template.New("mailbox").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mail sink</title>
<style>body{font:14px/1.4 system-ui,sans-serif;margin:1em}article{border:1px solid #ccc;margin:.8em 0;padding:.6em}pre{white-space:pre-wrap;overflow-wrap:anywhere}</style>
</head><body><h1>Mail sink: {{len .}} message(s)</h1>
{{range .}}<article data-purpose="{{index .CustomArgs "purpose"}}" data-reminder-id="{{index .CustomArgs "reminder_id"}}">
<h2>{{.Subject}}</h2>
<p>To: {{range .To}}{{.}} {{end}}· {{.Received.UTC.Format "2006-01-02 15:04:05 UTC"}} · {{index .CustomArgs "purpose"}} of {{index .CustomArgs "reminder_id"}}</p>
<pre>{{range .Parts}}{{if .URL}}<a href="{{.URL}}">{{.URL}}</a>{{else}}{{.Text}}{{end}}{{end}}</pre>
</article>{{end}}
</body></html>`))

var urlPattern = regexp.MustCompile(`https?://[^\s<>"]+`)

type mailboxEntry struct {
	Mail
	Parts []mailboxPart
}

type mailboxPart struct{ Text, URL string }

func (s *MailSink) mailbox(w http.ResponseWriter, _ *http.Request) {
	mails := s.Mails()
	slices.Reverse(mails)
	entries := make([]mailboxEntry, len(mails))
	for i, m := range mails {
		entries[i].Mail = m
		rest := m.Text
		for _, loc := range urlPattern.FindAllStringIndex(m.Text, -1) {
			offset := len(m.Text) - len(rest)
			entries[i].Parts = append(entries[i].Parts, mailboxPart{Text: rest[:loc[0]-offset]}, mailboxPart{URL: m.Text[loc[0]:loc[1]]})
			rest = m.Text[loc[1]:]
		}
		entries[i].Parts = append(entries[i].Parts, mailboxPart{Text: rest})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = mailboxPage.Execute(w, entries)
}
