package sink

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendgrid/rest"
	"github.com/sendgrid/sendgrid-go"
	sgmail "github.com/sendgrid/sendgrid-go/helpers/mail"
	"github.com/stretchr/testify/require"
)

const eventsAPIKey = "SG.events"

// startEmitting starts a mail sink posting events to a verifying receiver.
func startEmitting(t *testing.T, o EventOptions) (*MailSink, *eventReceiver) {
	t.Helper()
	k := newKey(t)
	r := startEventReceiver(t, k.PublicKey())
	s, err := StartMail("", eventsAPIKey)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	o.URL, o.Key = r.url, k
	o.FlushEvery = 10 * time.Millisecond
	s.EmitEvents(o)
	return s, r
}

// sendMail sends one message through sendgrid-go, as the email package
// does, and returns its answer's status and X-Message-Id.
func sendMail(t *testing.T, s *MailSink, to string, args map[string]string) (int, string) {
	t.Helper()
	m := sgmail.NewV3Mail()
	m.SetFrom(sgmail.NewEmail("shipnotify", "reminders@shipnotify.example"))
	m.Subject = "Your reminder"
	p := sgmail.NewPersonalization()
	p.AddTos(sgmail.NewEmail("", to))
	m.AddPersonalizations(p)
	m.AddContent(sgmail.NewContent("text/plain", "It is due."))
	for k, v := range args {
		m.SetCustomArg(k, v)
	}
	req := sendgrid.GetRequest(eventsAPIKey, "/v3/mail/send", s.URL())
	req.Method = rest.Post
	req.Body = sgmail.GetRequestBody(m)
	client := &rest.Client{HTTPClient: &http.Client{Timeout: 10 * time.Second}}
	resp, err := client.SendWithContext(t.Context(), req)
	require.NoError(t, err)
	return resp.StatusCode, http.Header(resp.Headers).Get("X-Message-Id")
}

// eventsOf is every event the receiver accepted for the message with this
// X-Message-Id, in order.
func eventsOf(posts []receivedPost, messageID string) []map[string]any {
	var out []map[string]any
	for _, p := range accepted(posts) {
		for _, e := range p.Events {
			if id, _ := e["sg_message_id"].(string); strings.HasPrefix(id, messageID+".") {
				out = append(out, e)
			}
		}
	}
	return out
}

func kinds(events []map[string]any) []string {
	var out []string
	for _, e := range events {
		k, _ := e["event"].(string)
		out = append(out, k)
	}
	return out
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The sink posts, for each message it accepted, the events SendGrid would,
// signed, with the custom args at the top level. Every message is followed
// by one to a plain address: events are posted in order, so once that
// one's have arrived, the first message's are complete and nothing is
// missing or extra.
func TestSinkEmitsSendGridEvents(t *testing.T) {
	t.Parallel()
	const (
		gone    = "gone@d.example"
		dropped = "suppressed@d.example"
		slow    = "slow@d.example"
		refused = "refused@d.example"
		plain   = "plain@d.example"
	)
	cases := []struct {
		name              string
		to                string
		deliverAfterDefer bool
		want              []string
		check             func(t *testing.T, e map[string]any)
	}{
		{name: "bounce", to: gone, want: []string{EventProcessed, EventBounce}, check: func(t *testing.T, e map[string]any) {
			if e["event"] == EventBounce {
				require.Equal(t, bounceReason, e["reason"])
				require.Equal(t, "5.1.1", e["status"])
				require.Equal(t, "bounce", e["type"])
				require.Equal(t, "Invalid Address", e["bounce_classification"])
			}
		}},
		{name: "drop comes without processed", to: dropped, want: []string{EventDropped}, check: func(t *testing.T, e map[string]any) {
			require.Equal(t, "Bounced Address", e["reason"])
		}},
		{name: "defer", to: slow, want: []string{EventProcessed, EventDeferred}},
		{name: "defer then deliver", to: slow, deliverAfterDefer: true, want: []string{EventProcessed, EventDeferred, EventDelivered}},
		{name: "deliver", to: plain, want: []string{EventProcessed, EventDelivered}},
		{name: "refused mail has no events", to: refused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, r := startEmitting(t, EventOptions{
				Bounce: []string{gone}, Drop: []string{dropped}, Defer: []string{slow},
				DeliverAfterDefer: c.deliverAfterDefer,
			})
			s.Refuse(refused, http.StatusForbidden)
			args := map[string]string{"delivery_key": "dk-" + c.name, "reminder_id": "r1"}
			status, id := sendMail(t, s, c.to, args)
			if c.to == refused {
				require.Equal(t, http.StatusForbidden, status)
			} else {
				require.Equal(t, http.StatusAccepted, status)
				require.NotEmpty(t, id)
			}
			status, marker := sendMail(t, s, plain, map[string]string{"delivery_key": "marker"})
			require.Equal(t, http.StatusAccepted, status)

			posts, err := r.wait(waitCtx(t), func(p []receivedPost) bool { return len(eventsOf(p, marker)) == 2 })
			require.NoError(t, err)
			var got []map[string]any
			if id != "" {
				got = eventsOf(posts, id)
			}
			require.Equal(t, c.want, kinds(got))

			var received int64
			for _, m := range s.Mails() {
				if m.MessageID == id {
					received = m.Received.Unix()
				}
			}
			for _, e := range got {
				require.Equal(t, c.to, e["email"])
				require.Equal(t, json.Number(strconv.FormatInt(received, 10)), e["timestamp"], "an integer of Unix seconds")
				require.Equal(t, "dk-"+c.name, e["delivery_key"], "custom args at the top level")
				require.Equal(t, "r1", e["reminder_id"])
				require.NotContains(t, e, "custom_args")
				require.NotEmpty(t, e["smtp-id"])
				switch e["event"] {
				case EventProcessed:
					require.NotContains(t, e, "reason")
					require.NotContains(t, e, "response")
				case EventDeferred:
					require.Equal(t, "1", e["attempt"], "a string, as SendGrid sends it")
					require.Equal(t, deferResponse, e["response"])
				case EventDelivered:
					require.Equal(t, "250 OK", e["response"])
				}
				if c.check != nil {
					c.check(t, e)
				}
			}

			seen := map[any]bool{}
			for _, p := range accepted(posts) {
				for _, e := range p.Events {
					require.False(t, seen[e["sg_event_id"]], "sg_event_id %v repeats", e["sg_event_id"])
					seen[e["sg_event_id"]] = true
				}
			}
			for _, b := range s.PostedEvents() {
				require.Equal(t, http.StatusOK, b.Status)
				require.NoError(t, b.Err)
			}
		})
	}
}

// A batch the receiver fails is posted again, byte for byte, until it is
// accepted.
func TestSinkRetriesAFailedBatch(t *testing.T) {
	t.Parallel()
	s, r := startEmitting(t, EventOptions{})
	r.fail(Answer{Status: http.StatusInternalServerError}, Answer{Status: http.StatusServiceUnavailable})
	_, id := sendMail(t, s, "plain@d.example", map[string]string{"delivery_key": "k1"})

	batches, err := s.WaitPosted(waitCtx(t), func(b []PostedBatch) bool { return len(b) == 3 })
	require.NoError(t, err)
	require.Equal(t, []int{500, 503, 200}, []int{batches[0].Status, batches[1].Status, batches[2].Status})
	for i, b := range batches {
		require.Equal(t, i+1, b.Attempt)
		require.Equal(t, batches[0].Body, b.Body)
		require.False(t, b.Replay)
	}
	require.Equal(t, []string{EventProcessed, EventDelivered}, kinds(eventsOf(r.snapshot(), id)))
	require.Len(t, r.snapshot(), 3, "the receiver saw every attempt")
}

// A batch the receiver keeps failing is given up after eventAttempts posts,
// and the next batch is posted as usual.
func TestSinkGivesUpAFailingBatch(t *testing.T) {
	t.Parallel()
	s, r := startEmitting(t, EventOptions{})
	for range eventAttempts {
		r.fail(Answer{Status: http.StatusInternalServerError})
	}
	_, lost := sendMail(t, s, "plain@d.example", map[string]string{"delivery_key": "k1"})
	_, err := s.WaitPosted(waitCtx(t), func(b []PostedBatch) bool { return len(b) == eventAttempts })
	require.NoError(t, err)

	_, id := sendMail(t, s, "plain@d.example", map[string]string{"delivery_key": "k2"})
	batches, err := s.WaitPosted(waitCtx(t), func(b []PostedBatch) bool { return len(b) == eventAttempts+1 })
	require.NoError(t, err)
	require.Equal(t, 1, batches[eventAttempts].Attempt)
	require.Equal(t, http.StatusOK, batches[eventAttempts].Status)
	posts := r.snapshot()
	require.Empty(t, eventsOf(posts, lost))
	require.Equal(t, []string{EventProcessed, EventDelivered}, kinds(eventsOf(posts, id)))
}

// Replay posts the last batch again, the same bytes under a fresh
// signature, and the receiver verifies both.
func TestSinkReplaysTheLastBatch(t *testing.T) {
	t.Parallel()
	s, r := startEmitting(t, EventOptions{})
	_, err := s.Replay(t.Context())
	require.Error(t, err, "nothing posted yet")

	sendMail(t, s, "plain@d.example", map[string]string{"delivery_key": "k1"})
	_, err = s.WaitPosted(waitCtx(t), func(b []PostedBatch) bool { return len(b) == 1 })
	require.NoError(t, err)
	status, err := s.Replay(t.Context())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	posts := r.snapshot()
	require.Len(t, posts, 2)
	require.Equal(t, posts[0].Body, posts[1].Body)
	require.NotEqual(t, posts[0].Signature, posts[1].Signature)
	batches := s.PostedEvents()
	require.Len(t, batches, 2)
	require.True(t, batches[1].Replay)
	require.Equal(t, batches[0].Events, batches[1].Events)
}

// OnPosted sees every post, failed ones too, with the events and answer.
func TestSinkOnPosted(t *testing.T) {
	t.Parallel()
	seen := make(chan int, 10)
	s, r := startEmitting(t, EventOptions{OnPosted: func(events []Event, status int, err error) {
		if err == nil && len(events) == 2 {
			seen <- status
		}
	}})
	r.fail(Answer{Status: http.StatusBadGateway})
	sendMail(t, s, "plain@d.example", nil)
	ctx := waitCtx(t)
	for _, want := range []int{http.StatusBadGateway, http.StatusOK} {
		select {
		case got := <-seen:
			require.Equal(t, want, got)
		case <-ctx.Done():
			t.Fatal("OnPosted was not called")
		}
	}
}

// Close stops the emitter even while a post hangs, without waiting for the
// client's timeout.
func TestSinkCloseStopsAHangingPost(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-req.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })

	s, err := StartMail("", eventsAPIKey)
	require.NoError(t, err)
	s.EmitEvents(EventOptions{URL: hang.URL, Key: newKey(t), FlushEvery: 10 * time.Millisecond})
	sendMail(t, s, "plain@d.example", nil)
	ctx := waitCtx(t)
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("no post arrived")
	}

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Well under eventClient's timeout: Close must cancel, not outwait.
	stopCtx, cancel := context.WithTimeout(t.Context(), eventClient.Timeout/2)
	defer cancel()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-stopCtx.Done():
		t.Fatal("Close waited for the hanging post")
	}
	batches := s.PostedEvents()
	require.Len(t, batches, 1)
	require.True(t, errors.Is(batches[0].Err, context.Canceled), "got %v", batches[0].Err)
}
