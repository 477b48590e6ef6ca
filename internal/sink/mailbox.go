package sink

import (
	"encoding/json"
	"html/template"
	"net/http"
	"regexp"
	"slices"
)

// The mailbox page shows what the mail sink accepted, newest first, its
// links clickable, so a person (or a browser test) can follow a link from
// an email as they would in their inbox. An HTML part is shown as a mail
// client would, in a frame of its own under a policy that loads nothing
// remote; a dynamic template is shown by its id and data (SendGrid, not
// the sink, renders it). Loopback only, like the sink.
var mailboxPage = template.Must(template.New("mailbox").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mail sink</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:14px/1.4 system-ui,sans-serif;margin:1em}article{border:1px solid #ccc;margin:.8em 0;padding:.6em}pre{white-space:pre-wrap;overflow-wrap:anywhere}
iframe{width:100%;max-width:640px;height:560px;border:1px solid #ccc;display:block;margin:.4em 0}h3{font-size:13px;margin:.6em 0 .2em;color:#555}</style>
</head><body><h1>Mail sink: {{len .}} message(s)</h1>
{{range .}}<article data-purpose="{{index .CustomArgs "purpose"}}" data-reminder-id="{{index .CustomArgs "reminder_id"}}" data-message-id="{{.MessageID}}">
<h2>{{.Subject}}</h2>
<p>To: {{range .To}}{{.}} {{end}}· {{.Received.UTC.Format "2006-01-02 15:04:05 UTC"}} · {{index .CustomArgs "purpose"}} of {{index .CustomArgs "reminder_id"}}</p>
{{if .HTML}}<h3>HTML part</h3>
<iframe class="html-part" title="HTML part of {{.Subject}}" src="/mailbox/{{.MessageID}}/html" sandbox></iframe>
{{end}}{{if .TemplateID}}<h3>Dynamic template {{.TemplateID}}</h3>
<pre class="template-data">{{.Data}}</pre>
{{end}}{{if .Text}}<h3>Text part</h3>
<pre>{{range .Parts}}{{if .URL}}<a href="{{.URL}}">{{.URL}}</a>{{else}}{{.Text}}{{end}}{{end}}</pre>
{{end}}</article>{{end}}
</body></html>`))

var urlPattern = regexp.MustCompile(`https?://[^\s<>"]+`)

type mailboxEntry struct {
	Mail
	Parts []mailboxPart
	// Data is the dynamic template data, indented.
	Data string
}

type mailboxPart struct{ Text, URL string }

func (s *MailSink) mailbox(w http.ResponseWriter, _ *http.Request) {
	mails := s.Mails()
	slices.Reverse(mails)
	entries := make([]mailboxEntry, len(mails))
	for i, m := range mails {
		entries[i].Mail = m
		if m.TemplateID != "" {
			b, _ := json.MarshalIndent(m.TemplateData, "", "  ")
			entries[i].Data = string(b)
		}
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

// mailboxHTML serves one message's HTML part as it was sent, under a
// policy that runs no script and loads nothing but inline styles and
// data: images: what an email may not rely on is not loaded here either.
func (s *MailSink) mailboxHTML(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, m := range s.Mails() {
		if m.MessageID == id && m.HTML != "" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:")
			_, _ = w.Write([]byte(m.HTML))
			return
		}
	}
	http.NotFound(w, r)
}
