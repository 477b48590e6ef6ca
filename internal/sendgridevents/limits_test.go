package sendgridevents_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/testenv"
	"github.com/shipnotify/shipnotify/mirror"
)

// The one route that faces the internet holds a bounded amount: a batch
// declared larger than the cap is refused before a byte is read, and past
// MaxInFlight batches a post is answered 503 with Retry-After (SendGrid
// retries it) without its body being read. The slot comes back when its
// batch is done.
func TestTheEventWebhookHoldsABoundedAmount(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	key, err := sink.NewEventKey()
	require.NoError(t, err)
	pub, err := sendgridevents.ParseVerificationKey(key.PublicKey())
	require.NoError(t, err)
	h, err := sendgridevents.NewHandler(sendgridevents.Options{Key: pub, Store: mirror.New(db.Pool), MaxInFlight: 1})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	require.LessOrEqual(t, sendgridevents.DefaultMaxBody, 1<<20, "near SendGrid's 768 KB, with margin")

	body, err := json.Marshal([]map[string]any{{"event": "processed", "sg_event_id": "e1", "timestamp": time.Now().Unix(), "delivery_key": strings.Repeat("a", 64)}})
	require.NoError(t, err)
	post := func(r io.Reader, length int64) *http.Response {
		req, err := sink.SignedRequest(context.Background(), srv.URL, key, body, time.Now())
		require.NoError(t, err)
		if r != nil {
			req.Body, req.ContentLength = io.NopCloser(r), length
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp
	}

	// A declared length past the cap: refused at once, nothing read.
	resp := post(strings.NewReader(strings.Repeat(" ", sendgridevents.DefaultMaxBody+1)), sendgridevents.DefaultMaxBody+1)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	// A batch whose body trickles in holds the one slot.
	slow, feed := io.Pipe()
	t.Cleanup(func() { _ = feed.Close() }) // before the server's close waits for it
	first := make(chan int, 1)
	go func() { first <- post(slow, int64(len(body))).StatusCode }()
	var busy *http.Response
	require.Eventually(t, func() bool {
		busy = post(nil, 0)
		return busy.StatusCode == http.StatusServiceUnavailable
	}, 10*time.Second, 10*time.Millisecond, "a post past the bound is turned away")
	require.Equal(t, "5", busy.Header.Get("Retry-After"), "with a wait SendGrid's retry honours")

	_, err = feed.Write(body)
	require.NoError(t, err)
	require.NoError(t, feed.Close())
	require.Equal(t, http.StatusOK, <-first, "the slow batch is taken")
	require.Equal(t, http.StatusOK, post(nil, 0).StatusCode, "and its slot comes back")
}
