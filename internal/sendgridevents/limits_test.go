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

	"github.com/shipnotify/shipnotify/internal/api"
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

// rawPost opens a connection to addr and writes a batch's request line and
// headers, declaring length bytes of body, and none of the body: an HTTP
// client would hold the headers back until the body is written.
func rawPost(t *testing.T, addr string, length int, headers map[string]string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() }) // before the server's close waits for it
	var head strings.Builder
	fmt.Fprintf(&head, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", addr, length)
	for k, v := range headers {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	head.WriteString("\r\n")
	_, err = conn.Write([]byte(head.String()))
	require.NoError(t, err)
	return conn
}

// signedHeaders are the signature headers of body signed with key at ts.
func signedHeaders(t *testing.T, key *sink.EventKey, body []byte, ts time.Time) map[string]string {
	t.Helper()
	req, err := sink.SignedRequest(context.Background(), "http://localhost/", key, body, ts)
	require.NoError(t, err)
	return map[string]string{
		eventwebhook.TimestampHTTPHeader:    req.Header.Get(eventwebhook.TimestampHTTPHeader),
		eventwebhook.VerificationHTTPHeader: req.Header.Get(eventwebhook.VerificationHTTPHeader),
	}
}

// A post whose signed timestamp is missing, unreadable or outside the
// tolerance is refused from its headers alone: the answer comes while not
// a byte of the body it declares has been sent, and the connection closes
// rather than wait for that body.
func TestABatchWithAStaleOrMissingTimestampIsRefusedBeforeItsBody(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	key, err := sink.NewEventKey()
	require.NoError(t, err)
	pub, err := sendgridevents.ParseVerificationKey(key.PublicKey())
	require.NoError(t, err)
	h, err := sendgridevents.NewHandler(sendgridevents.Options{Key: pub, Store: mirror.New(db.Pool)})
	require.NoError(t, err)
	srv := httptest.NewServer(h) // no read timeout: only the handler can refuse early
	t.Cleanup(srv.Close)

	body := []byte(`[]`)
	stale := signedHeaders(t, key, body, time.Now().Add(-10*time.Minute))
	ahead := signedHeaders(t, key, body, time.Now().Add(10*time.Minute))
	fresh := signedHeaders(t, key, body, time.Now())
	for _, c := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"stale", stale, http.StatusForbidden},
		{"ahead of our clock", ahead, http.StatusForbidden},
		{"unreadable", map[string]string{
			eventwebhook.TimestampHTTPHeader: "yesterday", eventwebhook.VerificationHTTPHeader: fresh[eventwebhook.VerificationHTTPHeader],
		}, http.StatusForbidden},
		{"missing", map[string]string{eventwebhook.VerificationHTTPHeader: fresh[eventwebhook.VerificationHTTPHeader]}, http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := rawPost(t, srv.Listener.Addr().String(), 1000, c.headers)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "answered without the body")
			_ = resp.Body.Close()
			require.Equal(t, c.status, resp.StatusCode)
			require.True(t, resp.Close, "and the connection closes rather than wait for the body")
		})
	}
}

// Eight posts that each declare a full batch and trickle it a byte a
// second take all eight slots, but only for the body's grace: each is cut
// off (408), and SendGrid's real batch, sent again after its 503s, is
// taken within grace + 2 s. The server is serve's, whose 30 s read
// timeout alone would let the trickles hold the slots for 30 s, and again
// on every reconnect.
func TestTrickledBatchesHoldTheSlotsOnlyForTheGrace(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	key, err := sink.NewEventKey()
	require.NoError(t, err)
	pub, err := sendgridevents.ParseVerificationKey(key.PublicKey())
	require.NoError(t, err)
	const grace = time.Second
	h, err := sendgridevents.NewHandler(sendgridevents.Options{Key: pub, Store: mirror.New(db.Pool), BodyGrace: grace})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(h)
	srv.Config = api.NewServer(h, 0)
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	body, err := json.Marshal([]map[string]any{{"event": "processed", "sg_event_id": "e1", "timestamp": time.Now().Unix(), "delivery_key": strings.Repeat("a", 64)}})
	require.NoError(t, err)
	post := func() int {
		req, err := sink.SignedRequest(context.Background(), srv.URL, key, body, time.Now())
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	// trickle opens a post declaring a full batch that sends its body a
	// byte a second; its answer comes on the channel (0: cut without one).
	trickle := func() chan int {
		conn := rawPost(t, addr, sendgridevents.DefaultMaxBody, signedHeaders(t, key, body, time.Now()))
		answer := make(chan int, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answer <- 0
				return
			}
			_ = resp.Body.Close()
			answer <- resp.StatusCode
		}()
		go func() { // a byte a second, until the connection is cut
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for ; ; <-tick.C {
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		return answer
	}
	answers := make([]chan int, sendgridevents.DefaultMaxInFlight)
	for i := range answers {
		answers[i] = trickle()
	}
	require.Eventually(t, func() bool {
		for i, a := range answers {
			select {
			case <-a: // turned away by a probe, or cut before the others came in: again
				answers[i] = trickle()
			default:
			}
		}
		return post() == http.StatusServiceUnavailable
	}, 10*time.Second, 10*time.Millisecond, "the trickles take every slot")
	held := time.Now()

	bound := grace + 2*time.Second
	require.Eventually(t, func() bool { return post() == http.StatusOK }, bound, 50*time.Millisecond,
		"the real batch is taken within %s of the slots filling", bound)
	late := time.NewTimer(time.Until(held.Add(bound)))
	defer late.Stop()
	for i, a := range answers {
		var status int
		select {
		case status = <-a: // an answer already come wins over the timer
		default:
			select {
			case status = <-a:
			case <-late.C:
				t.Fatalf("trickle %d still holds its slot %s after the slots filled", i, bound)
			}
		}
		require.Equal(t, http.StatusRequestTimeout, status, "trickle %d is cut off, answered 408", i)
	}
}
