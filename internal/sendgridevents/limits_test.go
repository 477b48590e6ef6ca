package sendgridevents_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
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

	// A batch whose body trickles in holds the one slot: its headers and
	// half its body are on the wire, over a raw connection (an HTTP client
	// would hold the headers back until the body is written).
	signed, err := sink.SignedRequest(context.Background(), srv.URL, key, body, time.Now())
	require.NoError(t, err)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() }) // before the server's close waits for it
	var head strings.Builder
	fmt.Fprintf(&head, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n",
		srv.Listener.Addr(), len(body))
	for _, h := range []string{eventwebhook.TimestampHTTPHeader, eventwebhook.VerificationHTTPHeader} {
		fmt.Fprintf(&head, "%s: %s\r\n", h, signed.Header.Get(h))
	}
	head.WriteString("\r\n")
	_, err = conn.Write(append([]byte(head.String()), body[:len(body)/2]...))
	require.NoError(t, err)

	var busy *http.Response
	require.Eventually(t, func() bool {
		busy = post(nil, 0)
		return busy.StatusCode == http.StatusServiceUnavailable
	}, 30*time.Second, 10*time.Millisecond, "a post past the bound is turned away (the slow batch holds the slot once its handler runs)")
	require.Equal(t, "5", busy.Header.Get("Retry-After"), "with a wait SendGrid's retry honours")

	_, err = conn.Write(body[len(body)/2:])
	require.NoError(t, err)
	first, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	_ = first.Body.Close()
	require.Equal(t, http.StatusOK, first.StatusCode, "the slow batch is taken")
	require.Equal(t, http.StatusOK, post(nil, 0).StatusCode, "and its slot comes back")
}
