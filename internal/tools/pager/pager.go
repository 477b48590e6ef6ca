// Package pager is a channel that exists to show the channel seam: a
// channel beyond email and webhook is one package like this one, plus a
// migration that adds its name to the mirror's CHECK constraint. It pages
// a number through a paging gateway's HTTP API. The tests register it
// (reminder.PlanOptions.Channels for its address check,
// activities.Activities.Senders for its sender) and hold it to the
// delivery-key and claim tests email passes; the product does not ship it.
package pager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/reminder"
)

// Channel is the channel's name.
const Channel reminder.Channel = "pager"

// Migration is what the channel's migration runs: the mirror takes its
// reminders once its name is in the channel CHECK constraint (migration
// 00011 already keeps their address in the address column).
const Migration = `
ALTER TABLE reminders DROP CONSTRAINT reminders_channel_check;
ALTER TABLE reminders ADD CONSTRAINT reminders_channel_check CHECK (channel IN ('email', 'webhook', 'pager'));`

var number = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// CheckAddress takes a number in E.164 form (+ and up to 15 digits).
func CheckAddress(address string) error {
	if !number.MatchString(address) {
		return errors.New("is not a number in E.164 form (+ and 7 to 15 digits)")
	}
	return nil
}

// Sender pages through the gateway at URL.
type Sender struct {
	URL    string
	Client *http.Client
}

// NewSender is a sender to the gateway at url that gives up on an answer
// after timeout.
func NewSender(url string, timeout time.Duration) *Sender {
	return &Sender{URL: url, Client: &http.Client{Timeout: timeout}}
}

// page is the gateway's request: the number, the text, and the delivery
// key, which the gateway drops a repeat by (also its Idempotency-Key).
type page struct {
	To   string `json:"to"`
	Text string `json:"text"`
	Key  string `json:"key"`
}

// Send pages the notice's subject to its address. A 2xx is taken, its id
// returned; 429 and 5xx are worth a retry (after Retry-After), any other
// answer is permanent; no answer after the request may have left is an
// unconfirmed send.
func (s *Sender) Send(ctx context.Context, n delivery.Notice) (string, error) {
	body, err := json.Marshal(page{To: n.Address, Text: n.Subject, Key: n.Key})
	if err != nil {
		return "", err
	}
	ctx, departure := delivery.Track(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return "", &delivery.Error{Channel: "paging gateway", Permanent: true, Detail: "gateway URL is not valid"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", n.Key)
	resp, err := s.Client.Do(req)
	if err != nil {
		return "", delivery.Unanswered("paging gateway", departure, "no answer")
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		var answer struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(b, &answer)
		return answer.ID, nil
	}
	retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
	return "", &delivery.Error{Channel: "paging gateway", Status: resp.StatusCode, Permanent: !retry,
		Detail: delivery.Excerpt(b), RetryAfter: delivery.RetryAfter(resp.Header.Get("Retry-After"), time.Now())}
}
