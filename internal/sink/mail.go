package sink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mail is one message the mail sink accepted.
type Mail struct {
	MessageID string
	From      string
	To        []string
	Subject   string
	Text      string
	// HTML is the text/html part ("" when none was sent).
	HTML string
	// TemplateID and TemplateData are the dynamic template the mail names
	// and its personalization's dynamic_template_data, as sent.
	TemplateID   string
	TemplateData map[string]any
	CustomArgs   map[string]string
	// Headers are the message's own headers (List-Unsubscribe, ...).
	Headers map[string]string
	// SubscriptionTracking is the message's tracking_settings
	// subscription_tracking.enable (nil: not set, the account's default).
	SubscriptionTracking *bool
	Received             time.Time
}

// MailSink is a local mail API speaking SendGrid's v3 /v3/mail/send: it
// checks the bearer key and the request body as SendGrid does, answers 202
// with an X-Message-Id, and records the message.
type MailSink struct {
	*recorder[Mail]
	srv    *server
	apiKey string
	// requests counts every call, accepted or not.
	requests atomic.Int64
	// OnMail, when set before traffic starts, sees each accepted message.
	OnMail func(Mail)

	refuseMu sync.Mutex
	refuse   map[string]int

	// model answers each call as the Profile set last says; nil answers
	// at once.
	model atomic.Pointer[answerModel]
	// inFlight counts, by delivery key, the calls being answered: checked
	// and not yet accepted. Guarded by the recorder's mutex, so it and the
	// accepted messages change together.
	inFlight map[string]int

	// events posts Event Webhook events once EmitEvents is called.
	events *emitter
}

// SetLatency makes every accepted message take d to answer; the message is
// recorded (accepted) even if the caller has gone by then, as a real
// provider would. It replaces the profile with that one latency.
func (s *MailSink) SetLatency(d time.Duration) {
	s.SetProfile(Profile{Name: "latency " + d.String(), Median: d})
}

// SetProfile makes every call from now on answered as p says: the latency
// of an accepted message (recorded even if its caller has gone, as with
// SetLatency), and the windows in which calls are refused with 429 or 503
// and nothing is accepted. Scripted answers (Fail) still come first.
func (s *MailSink) SetProfile(p Profile) { s.model.Store(newAnswerModel(p, time.Now())) }

// Profile is the profile set last (Instant when none was).
func (s *MailSink) Profile() Profile {
	if m := s.model.Load(); m != nil {
		return m.p
	}
	return Instant()
}

// Hold makes every message about to be accepted wait, unanswered (in
// flight), until release is called; then each is accepted, even if its
// caller has gone, as with SetLatency.
func (s *MailSink) Hold() (release func()) { return s.hold() }

// Held is how many calls wait at Hold's gate.
func (s *MailSink) Held() int { return s.waiting() }

// InFlight is how many calls are being answered right now.
func (s *MailSink) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.inFlight {
		n += c
	}
	return n
}

// DeliveryKeys returns, read together in one snapshot, how many messages
// the sink accepted under each delivery key (custom_args.delivery_key) and
// how many calls under each key it is answering right now, which it will
// accept whether or not their caller is still there.
func (s *MailSink) DeliveryKeys() (accepted, inFlight map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	accepted, inFlight = map[string]int{}, map[string]int{}
	for _, m := range s.items {
		accepted[m.CustomArgs["delivery_key"]]++
	}
	for k, n := range s.inFlight {
		inFlight[k] = n
	}
	return accepted, inFlight
}

// begin marks a call under key as being answered.
func (s *MailSink) begin(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight[key]++
	s.notify()
}

// accept records m and ends its call's time in flight, in one step.
func (s *MailSink) accept(m Mail, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight[key]--; s.inFlight[key] == 0 {
		delete(s.inFlight, key)
	}
	s.items = append(s.items, m)
	s.notify()
}

// Refuse makes every message to addr fail with status, as SendGrid does
// for an address it will not deliver to.
func (s *MailSink) Refuse(addr string, status int) {
	s.refuseMu.Lock()
	defer s.refuseMu.Unlock()
	if s.refuse == nil {
		s.refuse = map[string]int{}
	}
	s.refuse[addr] = status
}

func (s *MailSink) refused(to []string) int {
	s.refuseMu.Lock()
	defer s.refuseMu.Unlock()
	for _, a := range to {
		if st, ok := s.refuse[a]; ok {
			return st
		}
	}
	return 0
}

// StartMail starts a mail sink on addr ("" for a free loopback port) that
// accepts apiKey.
func StartMail(addr, apiKey string) (*MailSink, error) {
	s := &MailSink{recorder: newRecorder[Mail](), apiKey: apiKey, inFlight: map[string]int{}, events: newEmitter()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/mail/send", s.send)
	mux.HandleFunc("GET /mailbox", s.mailbox)
	mux.HandleFunc("GET /mailbox/{id}/html", s.mailboxHTML)
	srv, err := listen(addr, mux)
	if err != nil {
		return nil, fmt.Errorf("error starting mail sink: %w", err)
	}
	s.srv = srv
	return s, nil
}

// URL is the sink's base URL, for SENDGRID_BASE_URL.
func (s *MailSink) URL() string { return s.srv.url() }

// Close stops the sink and its event emitter; events not yet posted are
// dropped.
func (s *MailSink) Close() error {
	err := s.srv.close()
	s.events.stop()
	return err
}

// Mails returns every accepted message, in arrival order.
func (s *MailSink) Mails() []Mail { return s.snapshot() }

// Fail makes the next requests get these answers instead of a 202.
func (s *MailSink) Fail(answers ...Answer) { s.fail(answers...) }

// ClearFailures drops the answers Fail scripted and not yet given.
func (s *MailSink) ClearFailures() { s.clearFailures() }

// Wait blocks until cond holds over the accepted messages, or ctx ends. It
// looks again whenever a call starts being answered, stops at Hold's gate
// or is accepted, so cond may read InFlight and Held too.
func (s *MailSink) Wait(ctx context.Context, cond func([]Mail) bool) ([]Mail, error) {
	return s.wait(ctx, cond)
}

// The parts of SendGrid's v3 mail body the sink checks.
type sgAddress struct {
	Email string `json:"email"`
	Name  string `json:"name,omitempty"`
}

type sgBody struct {
	From             *sgAddress `json:"from"`
	Subject          string     `json:"subject"`
	TemplateID       string     `json:"template_id"`
	Personalizations []struct {
		To                  []sgAddress    `json:"to"`
		Subject             string         `json:"subject"`
		DynamicTemplateData map[string]any `json:"dynamic_template_data"`
	} `json:"personalizations"`
	Content []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"content"`
	CustomArgs       map[string]string `json:"custom_args"`
	Headers          map[string]string `json:"headers"`
	TrackingSettings *struct {
		SubscriptionTracking *struct {
			Enable *bool `json:"enable"`
		} `json:"subscription_tracking"`
	} `json:"tracking_settings"`
}

// Requests is how many calls reached the sink, accepted or not.
func (s *MailSink) Requests() int { return int(s.requests.Load()) }

func (s *MailSink) send(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		sgError(w, http.StatusUnauthorized, "", "The provided authorization grant is invalid, expired, or revoked")
		return
	}
	if a, ok := s.next(); ok {
		writeAnswer(w, a)
		return
	}
	var v verdict
	if m := s.model.Load(); m != nil {
		v = m.answer(time.Now())
	}
	if v.Status != 0 {
		for k, val := range v.Headers {
			w.Header().Set(k, val)
		}
		sgError(w, v.Status, "", http.StatusText(v.Status))
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 30<<20+1))
	if err != nil {
		sgError(w, http.StatusBadRequest, "", "could not read body")
		return
	}
	if len(raw) > 30<<20 {
		sgError(w, http.StatusRequestEntityTooLarge, "", "request body too large")
		return
	}
	var body sgBody
	if err := json.Unmarshal(raw, &body); err != nil {
		sgError(w, http.StatusBadRequest, "", "Bad Request")
		return
	}
	m, field, problem := body.check()
	if problem != "" {
		sgError(w, http.StatusBadRequest, field, problem)
		return
	}
	if status := s.refused(m.To); status != 0 {
		sgError(w, status, "personalizations.0.to", "The recipient is refused.")
		return
	}
	key := m.CustomArgs["delivery_key"]
	s.begin(key)
	if v.Delay > 0 && !v.AcceptFirst {
		<-time.After(v.Delay)
	}
	s.pass()
	m.MessageID = randomID()
	m.Received = time.Now()
	s.accept(m, key)
	s.events.queue(m)
	if s.OnMail != nil {
		s.OnMail(m)
	}
	if v.Delay > 0 && v.AcceptFirst {
		// Taken; the answer comes late, whether or not its caller waits.
		<-time.After(v.Delay)
	}
	w.Header().Set("X-Message-Id", m.MessageID)
	w.WriteHeader(http.StatusAccepted)
}

func (b sgBody) check() (Mail, string, string) {
	if b.From == nil || !validAddress(b.From.Email) {
		return Mail{}, "from.email", "The from email does not contain a valid address."
	}
	if len(b.Personalizations) == 0 {
		return Mail{}, "personalizations", "The personalizations field is required and must have at least one personalization."
	}
	m := Mail{From: b.From.Email, Subject: b.Subject, CustomArgs: b.CustomArgs, TemplateID: b.TemplateID, Headers: b.Headers}
	if t := b.TrackingSettings; t != nil && t.SubscriptionTracking != nil {
		m.SubscriptionTracking = t.SubscriptionTracking.Enable
	}
	for i, p := range b.Personalizations {
		if len(p.To) == 0 {
			return Mail{}, fmt.Sprintf("personalizations.%d.to", i), "The to array is required for all personalization objects."
		}
		for _, to := range p.To {
			if !validAddress(to.Email) {
				return Mail{}, fmt.Sprintf("personalizations.%d.to", i), "Does not contain a valid address."
			}
			m.To = append(m.To, to.Email)
		}
		if p.Subject != "" {
			m.Subject = p.Subject
		}
		if p.DynamicTemplateData != nil {
			m.TemplateData = p.DynamicTemplateData
		}
	}
	if m.TemplateID != "" && !dynamicTemplateID.MatchString(m.TemplateID) {
		return Mail{}, "template_id", "The template_id must be a valid template ID."
	}
	// A template brings its own subject and body.
	if m.TemplateID == "" && strings.TrimSpace(m.Subject) == "" {
		return Mail{}, "subject", "The subject is required."
	}
	if len(b.Content) == 0 && m.TemplateID == "" {
		return Mail{}, "content", "Unless a valid template_id is provided, the content parameter is required."
	}
	for i, c := range b.Content {
		if c.Type == "" || c.Value == "" {
			return Mail{}, "content", "The content value must be a string at least one character in length."
		}
		switch {
		case c.Type == "text/plain" && i == 0:
			m.Text = c.Value
		case c.Type == "text/html" && i <= 1:
			m.HTML = c.Value
		case c.Type == "text/plain", c.Type == "text/html":
			return Mail{}, fmt.Sprintf("content.%d.type", i), "If present, text/plain and text/html may only be provided in the order of plain first, then html."
		}
	}
	return m, "", ""
}

// dynamicTemplateID is the shape of a template's id: a dynamic template's,
// or a legacy template's UUID.
var dynamicTemplateID = regexp.MustCompile(`^(d-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)

func validAddress(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s
}

func sgError(w http.ResponseWriter, status int, field, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var f any
	if field != "" {
		f = field
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]any{{"message": msg, "field": f, "help": nil}},
	})
}

func randomID() string {
	b := make([]byte, 11)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
