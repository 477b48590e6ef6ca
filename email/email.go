// Package email sends notifications through SendGrid's v3 mail API with the
// official sendgrid-go client, and sorts the provider's answers into
// delivered, retry later and permanent failure. It remembers whether
// SendGrid accepts our API key (see CredentialState).
package email

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sendgrid/rest"
	"github.com/sendgrid/sendgrid-go"
	"github.com/sendgrid/sendgrid-go/helpers/mail"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/delivery"
)

// DefaultBaseURL is SendGrid's own API.
const DefaultBaseURL = "https://api.sendgrid.com"

// DefaultTimeout bounds one API call, connection to last byte. The notify
// attempt gives the call at least this long on every path, so the client,
// not a shorter deadline, decides when SendGrid is too slow.
const DefaultTimeout = budget.EmailCall

// Sender sends mail through one SendGrid account.
type Sender struct {
	apiKey  string
	baseURL string
	from    *mail.Email
	client  *rest.Client
	now     func() time.Time
	// credentialsRetry is the wait after a 401 or 403.
	credentialsRetry time.Duration

	mu    sync.Mutex
	creds CredentialState
}

// Options configure a Sender.
type Options struct {
	APIKey string
	// BaseURL is the API's scheme and host; empty means SendGrid's own.
	BaseURL   string
	FromEmail string
	FromName  string
	// Timeout bounds one API call; 0 means DefaultTimeout.
	Timeout time.Duration
	// Now is the clock used to turn a rate-limit reset time into a wait,
	// and to date a refusal of our key.
	Now func() time.Time
	// CredentialsRetry is the wait after SendGrid refuses our key (401,
	// 403); 0 means DefaultCredentialsRetry.
	CredentialsRetry time.Duration
}

// NewSender returns a Sender. sendgrid-go's own rate-limit retry is not used:
// Temporal retries the activity, with the wait SendGrid asks for.
func NewSender(o Options) *Sender {
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CredentialsRetry == 0 {
		o.CredentialsRetry = DefaultCredentialsRetry
	}
	return &Sender{
		apiKey:  o.APIKey,
		baseURL: strings.TrimRight(o.BaseURL, "/"),
		from:    mail.NewEmail(o.FromName, o.FromEmail),
		client:  &rest.Client{HTTPClient: &http.Client{Timeout: o.Timeout}},
		now:     o.Now,

		credentialsRetry: o.CredentialsRetry,
	}
}

// Message is one email to one recipient: its text and HTML parts, or a
// SendGrid dynamic template and its data.
type Message struct {
	To string
	// ToName is the recipient's display name ("" for none).
	ToName  string
	Subject string
	Text    string
	// HTML, when set, is sent as the text/html part after the text.
	HTML string
	// TemplateID, when set, sends the mail with that dynamic template and
	// TemplateData as its dynamic_template_data; Text and HTML are not sent
	// (the template is the body).
	TemplateID   string
	TemplateData map[string]any
	// DeliveryKey travels in custom_args, so a bounce or event webhook can be
	// matched to the delivery, and a receiver can drop a duplicate.
	DeliveryKey string
	// Args are further custom_args (opaque ids only).
	Args map[string]string
	// Unsubscribe is how the recipient may opt out (zero: as the SendGrid
	// account's settings say).
	Unsubscribe Unsubscribe
}

// Unsubscribe is how a message lets its recipient opt out of further
// mail; at most one of its fields is set.
type Unsubscribe struct {
	// OneClick is an https link that takes RFC 8058's one-click POST: it is
	// sent as List-Unsubscribe with List-Unsubscribe-Post, and SendGrid's
	// own subscription tracking is turned off for the message, so the
	// recipient sees one way out, not two.
	OneClick string
	// SendGrid turns SendGrid's subscription tracking on for the message:
	// SendGrid adds its own unsubscribe link and List-Unsubscribe headers
	// and reports an unsubscribe to the Event Webhook.
	SendGrid bool
}

// set puts u on msg.
func (u Unsubscribe) set(msg *mail.SGMailV3) {
	switch {
	case u.OneClick != "":
		msg.SetHeader("List-Unsubscribe", "<"+u.OneClick+">")
		msg.SetHeader("List-Unsubscribe-Post", "List-Unsubscribe=One-Click")
		msg.SetTrackingSettings(&mail.TrackingSettings{SubscriptionTracking: mail.NewSubscriptionTrackingSetting().SetEnable(false)})
	case u.SendGrid:
		msg.SetTrackingSettings(&mail.TrackingSettings{SubscriptionTracking: mail.NewSubscriptionTrackingSetting().SetEnable(true)})
	}
}

// Send submits the message and returns SendGrid's message id (X-Message-Id).
// A non-2xx answer is a *delivery.Error; sendgrid-go itself returns a nil error for
// those. Every answer updates the credential state.
func (s *Sender) Send(ctx context.Context, m Message) (string, error) {
	msg := mail.NewV3Mail()
	msg.SetFrom(s.from)
	msg.Subject = m.Subject
	p := mail.NewPersonalization()
	p.AddTos(mail.NewEmail(m.ToName, m.To))
	if m.TemplateID != "" {
		msg.SetTemplateID(m.TemplateID)
		for k, v := range m.TemplateData {
			p.SetDynamicTemplateData(k, v)
		}
	} else {
		// SendGrid wants text/plain first, then text/html.
		msg.AddContent(mail.NewContent("text/plain", m.Text))
		if m.HTML != "" {
			msg.AddContent(mail.NewContent("text/html", m.HTML))
		}
	}
	msg.AddPersonalizations(p)
	msg.SetCustomArg("delivery_key", m.DeliveryKey)
	for k, v := range m.Args {
		msg.SetCustomArg(k, v)
	}
	m.Unsubscribe.set(msg)

	req := sendgrid.GetRequest(s.apiKey, "/v3/mail/send", s.baseURL)
	req.Method = rest.Post
	req.Body = mail.GetRequestBody(msg)
	ctx, departure := delivery.Track(ctx)
	resp, err := s.client.SendWithContext(ctx, req)
	if err != nil {
		// SendGrid takes a mail as soon as its body arrives: a call cut
		// after the connection may have sent it. Its reason is a fixed
		// one: the transport's text names our resolver, and it reaches
		// the reminder's trail and the tenant.
		reason, detail := delivery.Unreached(err)
		e := delivery.Unanswered("mail API", departure, reason)
		e.OperatorDetail = detail
		return "", e
	}
	s.noteAnswer(resp.StatusCode)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return header(resp.Headers, "X-Message-Id"), nil
	}
	return "", s.classify(resp)
}

func (s *Sender) classify(resp *rest.Response) error {
	e := &delivery.Error{Channel: "mail API", Status: resp.StatusCode, Detail: delivery.Excerpt([]byte(resp.Body))}
	switch {
	case refusesCredentials(resp.StatusCode):
		// Our key, not the message: retried until an operator fixes it,
		// within the activity's retry budget.
		e.Credentials, e.RetryAfter = true, s.credentialsRetry
	case resp.StatusCode == http.StatusTooManyRequests:
		e.RetryAfter = s.rateLimitWait(resp.Headers)
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode >= 500:
		e.RetryAfter = delivery.RetryAfter(header(resp.Headers, "Retry-After"), s.now())
	default:
		// 400 bad request, 413 too large: the same request will fail the
		// same way.
		e.Permanent = true
	}
	return e
}

// rateLimitWait reads SendGrid's X-RateLimit-Reset (a Unix time) and, failing
// that, a standard Retry-After. The wait is held to
// [delivery.MinRetryAfter, delivery.MaxRetryAfter]: a reset far in the
// future waits an hour, not until then; a negative one is ignored.
func (s *Sender) rateLimitWait(h map[string][]string) time.Duration {
	if v := header(h, "X-RateLimit-Reset"); v != "" {
		if sec, err := strconv.ParseInt(v, 10, 64); err == nil && sec >= 0 {
			now := s.now()
			switch ahead := sec - now.Unix(); {
			case ahead <= 0:
				return delivery.MinRetryAfter
			case ahead > int64(delivery.MaxRetryAfter/time.Second):
				return delivery.MaxRetryAfter
			}
			return delivery.ClampRetryAfter(time.Unix(sec, 0).Sub(now))
		}
	}
	return delivery.RetryAfter(header(h, "Retry-After"), s.now())
}

func header(h map[string][]string, name string) string {
	return http.Header(h).Get(name)
}
