package sink

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A held message is in flight under its delivery key until released, then
// accepted; the two sets are read together.
func TestDeliveryKeysMoveFromInFlightToAccepted(t *testing.T) {
	t.Parallel()
	s, err := StartMail("", "SG.k")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	release := s.Hold()
	t.Cleanup(release)

	body := `{"from":{"email":"a@b.example"},"subject":"s","personalizations":[{"to":[{"email":"c@d.example"}]}],` +
		`"content":[{"type":"text/plain","value":"t"}],"custom_args":{"delivery_key":"k1"}}`
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v3/mail/send", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer SG.k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	require.Eventually(t, func() bool { return s.Held() == 1 }, 10*time.Second, 10*time.Millisecond)
	accepted, inFlight := s.DeliveryKeys()
	require.Empty(t, accepted)
	require.Equal(t, map[string]int{"k1": 1}, inFlight)
	require.Equal(t, 1, s.InFlight())

	release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = s.Wait(ctx, func(m []Mail) bool { return len(m) == 1 })
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, <-answered)
	accepted, inFlight = s.DeliveryKeys()
	require.Equal(t, map[string]int{"k1": 1}, accepted)
	require.Empty(t, inFlight)
	require.Zero(t, s.Held())
}

// The mailbox page shows accepted mail with its links clickable and its
// text escaped.
func TestMailboxShowsLinks(t *testing.T) {
	t.Parallel()
	s, err := StartMail("", "SG.k")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	body := `{"from":{"email":"a@b.example"},"subject":"Overdue","personalizations":[{"to":[{"email":"c@d.example"}]}],` +
		`"content":[{"type":"text/plain","value":"Approve: http://127.0.0.1:1/console/link/abc.def\n<b>x</b> done"}],"custom_args":{"purpose":"escalation"}}`
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v3/mail/send", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer SG.k")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	resp, err = http.Get(s.URL() + "/mailbox")
	require.NoError(t, err)
	defer resp.Body.Close()
	var page bytes.Buffer
	_, err = page.ReadFrom(resp.Body)
	require.NoError(t, err)
	require.Contains(t, page.String(), `Approve: <a href="http://127.0.0.1:1/console/link/abc.def">http://127.0.0.1:1/console/link/abc.def</a>`)
	require.Contains(t, page.String(), "&lt;b&gt;x&lt;/b&gt; done")
	require.Contains(t, page.String(), `data-purpose="escalation"`)
}

// The sink refuses what SendGrid refuses about a body: no content without
// a template, parts out of order, a template id of no known shape.
func TestTheSinkChecksContentAndTemplatesAsSendGridDoes(t *testing.T) {
	t.Parallel()
	s, err := StartMail("", "SG.k")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	head := `{"from":{"email":"a@b.example"},"personalizations":[{"to":[{"email":"c@d.example"}]}],`
	for body, want := range map[string]int{
		head + `"subject":"s","content":[{"type":"text/plain","value":"t"},{"type":"text/html","value":"<p>t</p>"}]}`: http.StatusAccepted,
		head + `"template_id":"d-0123456789abcdef0123456789abcdef"}`:                                                  http.StatusAccepted,
		head + `"subject":"s"}`: http.StatusBadRequest,
		head + `"subject":"s","content":[{"type":"text/html","value":"<p>t</p>"},{"type":"text/plain","value":"t"}]}`: http.StatusBadRequest,
		head + `"template_id":"welcome"}`: http.StatusBadRequest,
	} {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v3/mail/send", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer SG.k")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, body)
	}
	require.Len(t, s.Mails(), 2)
}

// A provider that takes the mail at once and answers late: the message is
// accepted, and its events queued, while the call still waits for its
// answer, which comes after the drawn 300–400 ms.
func TestALateAnswerComesAfterTheMailWasTaken(t *testing.T) {
	t.Parallel()
	s, err := StartMail("", "SG.k")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	s.SetProfile(Profile{Name: "late", Median: 300 * time.Millisecond, Spread: 100 * time.Millisecond, AcceptFirst: true})
	require.False(t, s.Profile().IsInstant())

	body := `{"from":{"email":"a@b.example"},"subject":"s","personalizations":[{"to":[{"email":"c@d.example"}]}],` +
		`"content":[{"type":"text/plain","value":"t"}],"custom_args":{"delivery_key":"k1"}}`
	type answer struct {
		status int
		took   time.Duration
	}
	answered := make(chan answer, 1)
	began := time.Now()
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v3/mail/send", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer SG.k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{}
			return
		}
		_ = resp.Body.Close()
		answered <- answer{resp.StatusCode, time.Since(began)}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mails, err := s.Wait(ctx, func(m []Mail) bool { return len(m) == 1 })
	require.NoError(t, err)
	select {
	case a := <-answered:
		t.Fatalf("answered (%d after %s) before the mail was seen taken", a.status, a.took)
	default:
	}
	require.Less(t, mails[0].Received.Sub(began), 300*time.Millisecond, "taken on arrival")
	a := <-answered
	require.Equal(t, http.StatusAccepted, a.status)
	require.GreaterOrEqual(t, a.took, 300*time.Millisecond)
	require.Less(t, a.took, 5*time.Second)
}
