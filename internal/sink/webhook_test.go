package sink

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/webhook"
)

// A receiver that answers late takes each request as it arrives; one that
// never answers holds it until the caller gives up, and took it all the
// same. Each receipt says when it was (to be) answered and who sent it. One
// that is down answers 503 and takes nothing.
func TestAReceiverThatAnswersLateTookTheRequestFirst(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	s, err := StartWebhook("", secret)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	s.Peer = func(remoteAddr string) string { return "peer of " + remoteAddr }
	delays := make(chan time.Duration, 2)
	delays <- 300 * time.Millisecond
	delays <- NeverAnswered
	s.AnswerAfter(func() time.Duration { return <-delays })

	signer, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	post := func(id string, timeout time.Duration) (int, time.Duration, error) {
		body := []byte(`{"id":"` + id + `"}`)
		now := time.Now()
		sig, err := signer.Sign(id, now, body)
		require.NoError(t, err)
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/status", bytes.NewReader(body))
		req.Header.Set(standardwebhooks.HeaderWebhookID, id)
		req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
		began := time.Now()
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return 0, time.Since(began), err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, time.Since(began), nil
	}

	status, took, err := post("evt_1", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, status)
	require.GreaterOrEqual(t, took, 300*time.Millisecond)

	_, _, err = post("evt_2", 500*time.Millisecond)
	require.Error(t, err, "never answered: the caller times out")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hooks, err := s.Wait(ctx, func(h []Hook) bool { return len(h) == 2 })
	require.NoError(t, err)
	require.Equal(t, "evt_1", hooks[0].ID)
	require.Equal(t, 300*time.Millisecond, hooks[0].AnswerIn)
	require.Equal(t, "evt_2", hooks[1].ID)
	require.Equal(t, NeverAnswered, hooks[1].AnswerIn, "taken, though never answered")
	require.Contains(t, hooks[0].Peer, "peer of 127.0.0.1:")

	s.SetDown(true)
	status, _, err = post("evt_down", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Len(t, s.Hooks(), 2, "a receiver that is down takes nothing")
	s.SetDown(false)

	s.AnswerAfter(nil)
	status, _, err = post("evt_3", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, status)
	require.Zero(t, s.Hooks()[2].AnswerIn, "answered at once again")
}
