package sink

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
	"github.com/stretchr/testify/require"
)

// receivedPost is one post the test receiver got.
type receivedPost struct {
	Body      []byte
	Signature string
	Timestamp string
	// Events are the body's events as plain JSON, numbers kept as written.
	Events []map[string]any
	Status int
}

// eventReceiver is a customer's Event Webhook endpoint: it checks every
// post with sendgrid-go's own helpers, answers 403 when the signature does
// not verify, and records what verified.
type eventReceiver struct {
	*recorder[receivedPost]
	url      string
	rejected atomic.Int64
}

func startEventReceiver(t *testing.T, publicKey string) *eventReceiver {
	t.Helper()
	pub, err := eventwebhook.ConvertPublicKeyBase64ToECDSA(publicKey)
	require.NoError(t, err)
	r := &eventReceiver{recorder: newRecorder[receivedPost]()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, "could not read body", http.StatusBadRequest)
			return
		}
		sig := req.Header.Get(eventwebhook.VerificationHTTPHeader)
		ts := req.Header.Get(eventwebhook.TimestampHTTPHeader)
		ok, err := eventwebhook.VerifySignature(pub, body, sig, ts)
		if err != nil || !ok || req.Header.Get("Content-Type") != "application/json" {
			r.rejected.Add(1)
			http.Error(w, "signature does not verify", http.StatusForbidden)
			return
		}
		p := receivedPost{Body: body, Signature: sig, Timestamp: ts, Status: http.StatusOK}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&p.Events); err != nil {
			http.Error(w, "not a JSON array of events", http.StatusBadRequest)
			return
		}
		if a, ok := r.next(); ok {
			p.Status = a.Status
			r.add(p)
			writeAnswer(w, a)
			return
		}
		r.add(p)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/events"
	return r
}

// accepted is every post the receiver answered with a 2xx.
func accepted(posts []receivedPost) []receivedPost {
	var ok []receivedPost
	for _, p := range posts {
		if p.Status/100 == 2 {
			ok = append(ok, p)
		}
	}
	return ok
}

func newKey(t *testing.T) *EventKey {
	t.Helper()
	k, err := NewEventKey()
	require.NoError(t, err)
	return k
}

// A signature verifies with sendgrid-go's own helper and the key it reads;
// changing the payload or the timestamp, or verifying with another key,
// fails.
func TestEventKeyVerifiesWithSendGrid(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	pub, err := eventwebhook.ConvertPublicKeyBase64ToECDSA(k.PublicKey())
	require.NoError(t, err)

	payload := []byte(`[{"email":"a@b.example","event":"processed"}]`)
	sig := k.Sign("1700000000", payload)
	ok, err := eventwebhook.VerifySignature(pub, payload, sig, "1700000000")
	require.NoError(t, err)
	require.True(t, ok)

	tampered := bytes.Replace(payload, []byte("processed"), []byte("delivered"), 1)
	ok, err = eventwebhook.VerifySignature(pub, tampered, sig, "1700000000")
	require.NoError(t, err)
	require.False(t, ok, "a tampered body must not verify")

	ok, err = eventwebhook.VerifySignature(pub, payload, sig, "1700000001")
	require.NoError(t, err)
	require.False(t, ok, "another timestamp must not verify")

	other, err := eventwebhook.ConvertPublicKeyBase64ToECDSA(newKey(t).PublicKey())
	require.NoError(t, err)
	ok, err = eventwebhook.VerifySignature(other, payload, sig, "1700000000")
	require.NoError(t, err)
	require.False(t, ok, "another key must not verify")
}

// An event marshals as SendGrid sends it: an integer timestamp, smtp-id
// with its dash, custom args at the top level and no custom_args object,
// type-specific fields only when set; it reads back the same.
func TestEventMarshalsAsSendGridSendsIt(t *testing.T) {
	t.Parallel()
	e := Event{
		Email: "gone@d.example", Timestamp: 1700000000, Event: EventBounce,
		SGEventID: "ev1", SGMessageID: "m1.recvd-1.0", SMTPID: "<m1@ismtpd-sink>",
		Reason: "550 5.1.1 unknown user", Status: "5.1.1", Type: "bounce", BounceClassification: "Invalid Address",
		CustomArgs: map[string]string{"delivery_key": "k1", "reminder_id": "r1", "event": "not an event type"},
	}
	raw, err := json.Marshal(e)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"timestamp":1700000000`)

	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	require.Equal(t, map[string]any{
		"email": "gone@d.example", "timestamp": float64(1700000000), "event": "bounce",
		"sg_event_id": "ev1", "sg_message_id": "m1.recvd-1.0", "smtp-id": "<m1@ismtpd-sink>",
		"reason": "550 5.1.1 unknown user", "status": "5.1.1", "type": "bounce", "bounce_classification": "Invalid Address",
		"delivery_key": "k1", "reminder_id": "r1",
	}, fields, "custom args flattened; one named like a field does not shadow it")

	var back Event
	require.NoError(t, json.Unmarshal(raw, &back))
	want := e
	want.CustomArgs = map[string]string{"delivery_key": "k1", "reminder_id": "r1"}
	require.Equal(t, want, back)

	raw, err = json.Marshal(Event{Email: "a@b.example", Timestamp: 1, Event: EventDelivered, Response: "250 OK"})
	require.NoError(t, err)
	require.NotContains(t, string(raw), "reason")
	require.NotContains(t, string(raw), "attempt")
}

// PostEvents posts a signed JSON array a receiver verifies with sendgrid-go,
// timestamped now.
func TestPostEventsIsSigned(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	r := startEventReceiver(t, k.PublicKey())
	events := []Event{
		{Email: "a@b.example", Timestamp: 1700000000, Event: EventProcessed, SGEventID: "e1", SGMessageID: "m.0", SMTPID: "<m@x>",
			CustomArgs: map[string]string{"delivery_key": "k1"}},
		{Email: "a@b.example", Timestamp: 1700000001, Event: EventDeferred, SGEventID: "e2", SGMessageID: "m.0", SMTPID: "<m@x>",
			Response: "421 4.7.0 Try again later", Attempt: "1", CustomArgs: map[string]string{"delivery_key": "k1"}},
	}
	before := time.Now().Unix()
	status, err := PostEvents(t.Context(), r.url, k, events)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	posts := r.snapshot()
	require.Len(t, posts, 1)
	ts, err := strconv.ParseInt(posts[0].Timestamp, 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, ts, before)
	require.LessOrEqual(t, ts, time.Now().Unix())
	var back []Event
	require.NoError(t, json.Unmarshal(posts[0].Body, &back))
	require.Equal(t, events, back)
	require.Equal(t, "1", posts[0].Events[1]["attempt"], "attempt is a string, as SendGrid sends it")
}

// A request whose body, timestamp or signature was changed after signing is
// refused by a receiver that verifies; the untouched one is accepted.
func TestSignedRequestTampered(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	r := startEventReceiver(t, k.PublicKey())
	body := []byte(`[{"email":"a@b.example","timestamp":1700000000,"event":"bounce","delivery_key":"k1"}]`)
	do := func(tamper func(*http.Request)) int {
		t.Helper()
		req, err := SignedRequest(t.Context(), r.url, k, body, time.Now())
		require.NoError(t, err)
		tamper(req)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	require.Equal(t, http.StatusForbidden, do(func(req *http.Request) {
		tampered := bytes.Replace(body, []byte("bounce"), []byte("delivered"), 1)
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(tampered)), int64(len(tampered))
	}), "a changed body")
	require.Equal(t, http.StatusForbidden, do(func(req *http.Request) {
		req.Header.Set(eventwebhook.TimestampHTTPHeader, strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	}), "a changed timestamp")
	require.Equal(t, http.StatusForbidden, do(func(req *http.Request) {
		req.Header.Set(eventwebhook.VerificationHTTPHeader, newKey(t).Sign(req.Header.Get(eventwebhook.TimestampHTTPHeader), body))
	}), "another key's signature")
	require.Equal(t, int64(3), r.rejected.Load())

	require.Equal(t, http.StatusOK, do(func(*http.Request) {}))
	require.Len(t, r.snapshot(), 1)
}
