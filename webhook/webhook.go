// Package webhook delivers notifications to a customer's receiver as signed
// JSON POSTs in the Standard Webhooks scheme (webhook-id, webhook-timestamp,
// webhook-signature), signed with the official standard-webhooks library.
package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/delivery"
)

// Timeout bounds one delivery attempt, connection to last byte.
const Timeout = budget.WebhookCall

// maxResponseBytes is how much of a receiver's answer is read: enough for a
// short error excerpt, never a whole page.
const maxResponseBytes = 4 << 10

// Sender posts signed webhooks.
type Sender struct {
	client *http.Client
	now    func() time.Time
}

// Options configure a Sender.
type Options struct {
	// Guard decides which destinations may be reached; its zero value
	// allows public addresses on port 443 only.
	Guard Guard
	// Now is the clock for the signature timestamp.
	Now func() time.Time
	// Timeout bounds one attempt, connection to last byte (0 means Timeout).
	Timeout time.Duration
}

// NewSender returns a Sender whose every connection passes the guard and
// which never follows redirects: a 3xx is a failed delivery, not an
// invitation to post elsewhere.
func NewSender(o Options) *Sender {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout == 0 {
		o.Timeout = Timeout
	}
	return &Sender{
		client: &http.Client{
			Transport: o.Guard.Transport(),
			Timeout:   o.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		now: o.Now,
	}
}

// Timeout is the longest one Send takes: its attempt's bound, connection
// to last byte. A caller holding a lease while it sends (the status
// relay) starts a send only while its lease covers it.
func (s *Sender) Timeout() time.Duration { return s.client.Timeout }

// Message is one signed POST.
type Message struct {
	URL    string
	Secret string
	// ID is the delivery key: the webhook-id header and the Idempotency-Key,
	// the same on every retry so a receiver can drop duplicates.
	ID   string
	Body []byte
}

// Send signs and posts the message. It returns the receiver's request id
// header, if it sent one, as the provider message id.
func (s *Sender) Send(ctx context.Context, m Message) (string, error) {
	wh, err := standardwebhooks.NewWebhook(m.Secret)
	if err != nil {
		return "", failure(0, true, "webhook secret is not valid base64")
	}
	ts := s.now()
	sig, err := wh.Sign(m.ID, ts, m.Body)
	if err != nil {
		return "", fmt.Errorf("error signing webhook: %w", err)
	}
	ctx, departure := delivery.Track(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		return "", failure(0, true, "webhook URL is not valid")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "shipnotify-webhooks/1")
	req.Header.Set(standardwebhooks.HeaderWebhookID, m.ID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	req.Header.Set("Idempotency-Key", m.ID)

	resp, err := s.client.Do(req)
	if errors.Is(err, ErrForbiddenAddress) {
		// The name resolved somewhere the guard refuses (it may have
		// resolved elsewhere at schedule time). The reason is fixed: the
		// customer reads it, and the address is the operator's to know.
		e := failure(0, false, RefusedDestination)
		e.OperatorDetail = transportDetail(err)
		return "", e
	}
	if err != nil {
		// The transport's text names the host and our resolver: the
		// customer reads one of delivery's fixed reasons instead.
		reason, detail := delivery.Unreached(err)
		e := delivery.Unanswered("webhook receiver", departure, reason)
		e.OperatorDetail = detail
		return "", e
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.Header.Get("X-Request-Id"), nil
	}
	e := failure(resp.StatusCode, resp.StatusCode == http.StatusGone, delivery.Excerpt(body))
	e.RetryAfter = delivery.RetryAfter(resp.Header.Get("Retry-After"), s.now())
	return "", e
}

// RefusedDestination is the one reason a delivery the guard refused at
// connection time gives, whatever address the name resolved to.
const RefusedDestination = "forbidden webhook destination: the URL's host is not a public address"

func failure(status int, permanent bool, detail string) *delivery.Error {
	return &delivery.Error{Channel: "webhook receiver", Status: status, Permanent: permanent, Detail: detail}
}

// transportDetail describes a refused request for the operator's log
// without its URL, which is the customer's and may carry a token in its
// path or query.
func transportDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// NewSecret returns a fresh signing secret for a subscriber: "whsec_" and
// 32 random bytes in base64, as Standard Webhooks receivers expect.
func NewSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}
