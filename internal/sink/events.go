package sink

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
)

// The Event Webhook's event types, as SendGrid spells them in "event".
const (
	EventProcessed   = "processed"
	EventDeferred    = "deferred"
	EventDelivered   = "delivered"
	EventBounce      = "bounce"
	EventDropped     = "dropped"
	EventSpamReport  = "spamreport"
	EventUnsubscribe = "unsubscribe"
)

// EventKey is a test signing key for the Signed Event Webhook, so a receiver
// can be configured with its public half exactly as with SendGrid's.
type EventKey struct {
	priv *ecdsa.PrivateKey
}

// NewEventKey makes a fresh ECDSA P-256 key pair, the kind SendGrid signs
// with.
func NewEventKey() (*EventKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("error generating event webhook key: %w", err)
	}
	return &EventKey{priv: priv}, nil
}

// PublicKey is the verification key as SendGrid's settings page shows it
// (base64 of the PKIX DER public key), which
// eventwebhook.ConvertPublicKeyBase64ToECDSA reads.
func (k *EventKey) PublicKey() string {
	der, err := x509.MarshalPKIXPublicKey(&k.priv.PublicKey)
	if err != nil {
		// A P-256 key always marshals; anything else is a broken EventKey.
		panic(fmt.Sprintf("sink: error marshalling event webhook public key: %v", err))
	}
	return base64.StdEncoding.EncodeToString(der)
}

// Sign signs timestamp||payload as SendGrid does: base64 of the ASN.1 DER
// ECDSA signature over its SHA-256, what eventwebhook.VerifySignature checks.
func (k *EventKey) Sign(timestamp string, payload []byte) string {
	h := sha256.New()
	h.Write([]byte(timestamp))
	h.Write(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, k.priv, h.Sum(nil))
	if err != nil {
		// Only an invalid key fails, and NewEventKey makes none.
		panic(fmt.Sprintf("sink: error signing events: %v", err))
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// Event is one SendGrid Event Webhook event. It marshals as SendGrid sends
// it: the custom args flattened among the top-level fields.
type Event struct {
	Email string `json:"email"`
	// Timestamp is when the event happened, in Unix seconds.
	Timestamp int64  `json:"timestamp"`
	Event     string `json:"event"`
	SGEventID string `json:"sg_event_id"`
	// SGMessageID is the message's X-Message-Id followed by a dot and
	// SendGrid's per-recipient suffix, as SendGrid sends it.
	SGMessageID string `json:"sg_message_id"`
	SMTPID      string `json:"smtp-id"`

	// Reason is a bounce's SMTP answer or a drop's reason ("Bounced
	// Address").
	Reason string `json:"reason,omitempty"`
	// Status is the enhanced SMTP status of a bounce or drop ("5.1.1").
	Status string `json:"status,omitempty"`
	// Type is a bounce's kind: "bounce" or "blocked".
	Type                 string `json:"type,omitempty"`
	BounceClassification string `json:"bounce_classification,omitempty"`
	// Response is the receiving server's answer to a deferral or delivery.
	Response string `json:"response,omitempty"`
	// Attempt is a deferral's attempt number; SendGrid sends it as a string.
	Attempt string `json:"attempt,omitempty"`

	// CustomArgs are the message's custom_args. A key that names one of
	// the fields above is left out, so it cannot shadow the field.
	CustomArgs map[string]string `json:"-"`
}

// eventFields are the names Event's fields take on the wire; every other
// string field is a custom arg.
var eventFields = map[string]bool{
	"email": true, "timestamp": true, "event": true, "sg_event_id": true,
	"sg_message_id": true, "smtp-id": true, "reason": true, "status": true,
	"type": true, "bounce_classification": true, "response": true, "attempt": true,
}

// eventWire is Event without its methods, for the fields' own encoding.
type eventWire Event

// MarshalJSON writes the event with its custom args at the top level, as
// SendGrid does.
func (e Event) MarshalJSON() ([]byte, error) {
	known, err := json.Marshal(eventWire(e))
	if err != nil {
		return nil, fmt.Errorf("error encoding event: %w", err)
	}
	if len(e.CustomArgs) == 0 {
		return known, nil
	}
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(known, &fields); err != nil {
		return nil, fmt.Errorf("error encoding event: %w", err)
	}
	for k, v := range e.CustomArgs {
		if eventFields[k] {
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("error encoding event custom arg: %w", err)
		}
		fields[k] = raw
	}
	return json.Marshal(fields)
}

// UnmarshalJSON reads an event as MarshalJSON writes it: every string field
// that is not one of Event's becomes a custom arg.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w eventWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("error decoding event: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return fmt.Errorf("error decoding event: %w", err)
	}
	for k, raw := range fields {
		var v string
		if eventFields[k] || json.Unmarshal(raw, &v) != nil {
			continue
		}
		if w.CustomArgs == nil {
			w.CustomArgs = map[string]string{}
		}
		w.CustomArgs[k] = v
	}
	*e = Event(w)
	return nil
}

// eventClient posts events; a receiver that never answers must not hold the
// emitter forever.
var eventClient = &http.Client{Timeout: 10 * time.Second}

// PostEvents posts events to url as one signed batch, as SendGrid's Event
// Webhook does, timestamped now. Any HTTP answer is returned as its status
// with a nil error; err is for a request that got no answer.
func PostEvents(ctx context.Context, url string, key *EventKey, events []Event) (status int, err error) {
	body, err := encodeEvents(events)
	if err != nil {
		return 0, err
	}
	return postSigned(ctx, url, key, body)
}

func encodeEvents(events []Event) ([]byte, error) {
	if events == nil {
		// SendGrid always posts an array.
		events = []Event{}
	}
	body, err := json.Marshal(events)
	if err != nil {
		return nil, fmt.Errorf("error encoding events: %w", err)
	}
	return body, nil
}

// postSigned posts body with a fresh timestamp and signature.
func postSigned(ctx context.Context, url string, key *EventKey, body []byte) (int, error) {
	req, err := SignedRequest(ctx, url, key, body, time.Now())
	if err != nil {
		return 0, err
	}
	resp, err := eventClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("error posting events: %w", err)
	}
	defer resp.Body.Close()
	// Drain a little so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// SignedRequest builds the Event Webhook's POST of body, signed with key at
// timestamp, so a test can tamper with the body, signature or timestamp
// before sending it.
func SignedRequest(ctx context.Context, url string, key *EventKey, body []byte, timestamp time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("error building event webhook request: %w", err)
	}
	ts := strconv.FormatInt(timestamp.Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "SendGrid Event API")
	req.Header.Set(eventwebhook.TimestampHTTPHeader, ts)
	req.Header.Set(eventwebhook.VerificationHTTPHeader, key.Sign(ts, body))
	return req, nil
}
