package email_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
)

func TestAnswersAreClassified(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	reset := strconv.FormatInt(now.Add(90*time.Second).Unix(), 10)
	for _, tc := range []struct {
		answer      sink.Answer
		permanent   bool
		credentials bool
		retryAfter  time.Duration
	}{
		{sink.Answer{Status: 400}, true, false, 0},
		// Our key refused: an operator's fault, retried a minute apart.
		{sink.Answer{Status: 401}, false, true, email.DefaultCredentialsRetry},
		{sink.Answer{Status: 403}, false, true, email.DefaultCredentialsRetry},
		{sink.Answer{Status: 413}, true, false, 0},
		{sink.Answer{Status: 429, Headers: map[string]string{"X-RateLimit-Reset": reset}}, false, false, 90 * time.Second},
		{sink.Answer{Status: 429, Headers: map[string]string{"Retry-After": "12"}}, false, false, 12 * time.Second},
		// A reset already past retries in a second; one far in the future
		// (or past what a time.Time holds) waits an hour, not until then;
		// a negative one is ignored, like an overflowing Retry-After.
		{sink.Answer{Status: 429, Headers: map[string]string{"X-RateLimit-Reset": strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)}}, false, false, time.Second},
		{sink.Answer{Status: 429, Headers: map[string]string{"X-RateLimit-Reset": strconv.FormatInt(now.Add(72*time.Hour).Unix(), 10)}}, false, false, time.Hour},
		{sink.Answer{Status: 429, Headers: map[string]string{"X-RateLimit-Reset": "9223372036854775807"}}, false, false, time.Hour},
		{sink.Answer{Status: 429, Headers: map[string]string{"X-RateLimit-Reset": "-1", "Retry-After": "5"}}, false, false, 5 * time.Second},
		{sink.Answer{Status: 429, Headers: map[string]string{"Retry-After": "9223372037"}}, false, false, 0},
		{sink.Answer{Status: 503, Headers: map[string]string{"Retry-After": "18446744073"}}, false, false, 0},
		{sink.Answer{Status: 503, Headers: map[string]string{"Retry-After": "-30"}}, false, false, 0},
		{sink.Answer{Status: 503, Headers: map[string]string{"Retry-After": "604800"}}, false, false, time.Hour},
		{sink.Answer{Status: 500}, false, false, 0},
		{sink.Answer{Status: 503, Headers: map[string]string{"Retry-After": "3"}}, false, false, 3 * time.Second},
	} {
		t.Run(strconv.Itoa(tc.answer.Status), func(t *testing.T) {
			t.Parallel()
			s, err := sink.StartMail("", "SG.key")
			require.NoError(t, err)
			defer s.Close()
			s.Fail(tc.answer)
			sender := email.NewSender(email.Options{APIKey: "SG.key", BaseURL: s.URL(), FromEmail: "r@shipnotify.example", Now: func() time.Time { return now }})
			_, err = sender.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "s", Text: "t", DeliveryKey: "k"})
			var derr *delivery.Error
			require.True(t, errors.As(err, &derr), "got %v", err)
			require.Equal(t, tc.answer.Status, derr.Status)
			require.Equal(t, tc.permanent, derr.Permanent)
			require.Equal(t, tc.credentials, derr.Credentials)
			require.Equal(t, tc.retryAfter, derr.RetryAfter)
			require.Equal(t, tc.credentials, sender.Credentials().Refused)
		})
	}
}

// 202 is success: the provider's X-Message-Id comes back, the delivery key
// travels in custom_args, and a wrong API key is a retryable refusal of our
// credentials.
func TestSendThroughTheRealClient(t *testing.T) {
	t.Parallel()
	s, err := sink.StartMail("", "SG.key")
	require.NoError(t, err)
	defer s.Close()
	sender := email.NewSender(email.Options{APIKey: "SG.key", BaseURL: s.URL(), FromEmail: "r@shipnotify.example", FromName: "shipnotify"})
	id, err := sender.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "Window", Text: "Dock 4", DeliveryKey: "key-1", Args: map[string]string{"reminder_id": "S/U/a"}})
	require.NoError(t, err)
	mails := s.Mails()
	require.Len(t, mails, 1)
	require.Equal(t, mails[0].MessageID, id)
	require.Equal(t, "key-1", mails[0].CustomArgs["delivery_key"])
	require.Equal(t, "S/U/a", mails[0].CustomArgs["reminder_id"])
	require.Equal(t, "r@shipnotify.example", mails[0].From)

	wrongKey := email.NewSender(email.Options{APIKey: "SG.wrong", BaseURL: s.URL(), FromEmail: "r@shipnotify.example"})
	_, err = wrongKey.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "s", Text: "t"})
	var derr *delivery.Error
	require.True(t, errors.As(err, &derr))
	require.Equal(t, 401, derr.Status)
	require.False(t, derr.Permanent)
	require.True(t, derr.Credentials)
	require.Contains(t, derr.Error(), "credentials refused")
}

// A 401 or 403 marks the key refused from the first refusal on; the next
// accepted call clears it. Answers about the message or the provider's
// health (400, 429, 5xx) say nothing about the key either way.
func TestRefusedCredentialsAreRememberedUntilAccepted(t *testing.T) {
	t.Parallel()
	s, err := sink.StartMail("", "SG.key")
	require.NoError(t, err)
	defer s.Close()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	sender := email.NewSender(email.Options{APIKey: "SG.key", BaseURL: s.URL(), FromEmail: "r@shipnotify.example", Now: clock})
	send := func() error {
		_, err := sender.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "s", Text: "t", DeliveryKey: "k"})
		return err
	}
	require.Equal(t, email.CredentialState{}, sender.Credentials(), "nothing known before the first call")
	require.NoError(t, sender.Credentials().Err())

	first := now
	s.Fail(sink.Answer{Status: 401})
	require.Error(t, send())
	now = now.Add(time.Minute)
	s.Fail(sink.Answer{Status: 500}, sink.Answer{Status: 400}, sink.Answer{Status: 403})
	require.Error(t, send())
	require.Error(t, send())
	require.True(t, sender.Credentials().Refused, "500 and 400 leave a refused key refused")
	require.Error(t, send())
	got := sender.Credentials()
	require.Equal(t, email.CredentialState{Refused: true, Status: 403, Since: first, Refusals: 2}, got)
	require.EqualError(t, got.Err(), "sendgrid: refusing our API key (403 Forbidden) since 2026-11-30T09:00:00Z")

	require.NoError(t, send())
	require.Equal(t, email.CredentialState{Refusals: 2}, sender.Credentials(), "a 202 clears the refusal, the count stays")
	require.NoError(t, sender.Credentials().Err())

	s.Fail(sink.Answer{Status: 401})
	require.Error(t, send())
	require.Equal(t, now, sender.Credentials().Since, "a new refusal dates from itself")
}

// A call that got no answer says whether its request may have reached the
// mail API: an ambiguous outcome is a send, so only a call that never got a
// connection (refused, unresolvable) may say nothing went. SendGrid takes a
// mail as soon as its body arrives, and the sink, like it, keeps a mail
// whose caller gave up. Its reason is a fixed one: the reminder's trail
// and the tenant read it, and a transport error names the mail API's
// address and the resolver the worker asked.
func TestUnansweredCallsSayWhetherTheRequestMayHaveLeft(t *testing.T) {
	t.Parallel()
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		return "http://" + addr
	}
	slow, err := sink.StartMail("", "SG.key")
	require.NoError(t, err)
	t.Cleanup(func() { _ = slow.Close() })
	slow.SetLatency(2 * time.Second)
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.(*net.TCPConn).SetLinger(0) // a reset, not a clean close
			_ = conn.Close()
		}
	}))
	t.Cleanup(reset.Close)
	for _, tc := range []struct {
		name      string
		url       string
		maybeSent bool
		reason    string
	}{
		{"connection refused", closed(), false, delivery.ReasonRefused},
		{"unresolvable host", "http://mail-api.invalid", false, delivery.ReasonNotResolved},
		{"no answer within the client's timeout", slow.URL(), true, delivery.ReasonTimeout},
		{"connection reset after the body", reset.URL, true, delivery.ReasonReset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sender := email.NewSender(email.Options{APIKey: "SG.key", BaseURL: tc.url, FromEmail: "r@shipnotify.example",
				Timeout: 300 * time.Millisecond})
			_, err := sender.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "s", Text: "t", DeliveryKey: "k"})
			var derr *delivery.Error
			require.ErrorAs(t, err, &derr)
			require.Zero(t, derr.Status, "no answer")
			require.Equal(t, tc.maybeSent, derr.MaybeSent, "%v", err)
			require.False(t, derr.Permanent)
			require.Equal(t, tc.reason, derr.Detail)
			for _, leak := range []string{"127.0.0.1", "mail-api.invalid", "lookup", ":53"} {
				require.NotContains(t, derr.Error()+derr.OperatorDetail, leak)
			}
			if tc.url == slow.URL() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err = slow.Wait(ctx, func(m []sink.Mail) bool { return len(m) == 1 })
				require.NoError(t, err, "the mail API kept the mail its caller gave up on")
			}
		})
	}
}

// sendgrid-go's own template support carries a dynamic template and its
// data, and a letter's text and HTML parts go as SendGrid wants them (text
// first); the sink records each as sent, and its mailbox shows the HTML
// part under a policy that loads nothing remote.
func TestTemplatesAndHTMLPartsReachTheProvider(t *testing.T) {
	t.Parallel()
	s, err := sink.StartMail("", "SG.key")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	sender := email.NewSender(email.Options{APIKey: "SG.key", BaseURL: s.URL(), FromEmail: "r@shipnotify.example"})
	ctx := context.Background()

	_, err = sender.Send(ctx, email.Message{To: "ops@shipper.example", ToName: "Rita Ops", Subject: "s", Text: "plain words",
		HTML: "<p>plain words</p>", DeliveryKey: "k1"})
	require.NoError(t, err)
	_, err = sender.Send(ctx, email.Message{To: "ops@shipper.example", Subject: "s", Text: "unused", HTML: "<p>unused</p>",
		TemplateID: "d-0123456789abcdef0123456789abcdef", TemplateData: map[string]any{"due_at_text": "Tue 12 Jan, 08:00 CET", "n": 2},
		DeliveryKey: "k2"})
	require.NoError(t, err)

	mails := s.Mails()
	require.Len(t, mails, 2)
	require.Equal(t, "plain words", mails[0].Text)
	require.Equal(t, "<p>plain words</p>", mails[0].HTML)
	require.Empty(t, mails[0].TemplateID)
	require.Equal(t, "d-0123456789abcdef0123456789abcdef", mails[1].TemplateID)
	require.Equal(t, map[string]any{"due_at_text": "Tue 12 Jan, 08:00 CET", "n": float64(2)}, mails[1].TemplateData)
	require.Empty(t, mails[1].Text+mails[1].HTML, "a template is the body: no content of ours")

	page := get(t, s.URL()+"/mailbox")
	require.Contains(t, page.body, `<iframe class="html-part" title="HTML part of s" src="/mailbox/`+mails[0].MessageID+`/html" sandbox>`)
	require.Contains(t, page.body, "Dynamic template d-0123456789abcdef0123456789abcdef")
	require.Contains(t, page.body, "Tue 12 Jan, 08:00 CET")
	part := get(t, s.URL()+"/mailbox/"+mails[0].MessageID+"/html")
	require.Equal(t, "<p>plain words</p>", part.body)
	require.Contains(t, part.csp, "default-src 'none'")
}

type page struct{ body, csp string }

func get(t *testing.T, url string) page {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return page{string(b), resp.Header.Get("Content-Security-Policy")}
}

// A subscriber's mail says how to opt out as configured: RFC 8058's
// List-Unsubscribe and List-Unsubscribe-Post headers to the one-click link
// (SendGrid's own tracking off, so there is one way out), or SendGrid's
// subscription tracking; unset, neither, and the account's settings apply.
func TestMessagesCarryTheirWayToUnsubscribe(t *testing.T) {
	t.Parallel()
	s, err := sink.StartMail("", "SG.key")
	require.NoError(t, err)
	defer s.Close()
	sender := email.NewSender(email.Options{APIKey: "SG.key", BaseURL: s.URL(), FromEmail: "r@shipnotify.example"})
	const link = "https://shipnotify.example/unsubscribe/abc.def"
	for _, u := range []email.Unsubscribe{{OneClick: link}, {SendGrid: true}, {}} {
		_, err := sender.Send(context.Background(), email.Message{To: "ops@shipper.example", Subject: "s", Text: "t", DeliveryKey: "k", Unsubscribe: u})
		require.NoError(t, err)
	}
	mails := s.Mails()
	require.Len(t, mails, 3)
	off, on := false, true
	require.Equal(t, map[string]string{"List-Unsubscribe": "<" + link + ">", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}, mails[0].Headers)
	require.Equal(t, &off, mails[0].SubscriptionTracking)
	require.Empty(t, mails[1].Headers)
	require.Equal(t, &on, mails[1].SubscriptionTracking)
	require.Empty(t, mails[2].Headers)
	require.Nil(t, mails[2].SubscriptionTracking)
}
