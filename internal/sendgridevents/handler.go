// Package sendgridevents closes the delivery loop: it takes SendGrid's Event
// Webhook (what happened to a mail after SendGrid answered 202), records
// each event against its delivery key in the mirror, and starts the
// escalation a bounce, a drop or a long deferral owes.
package sendgridevents

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"

	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// Path is where serve takes the Event Webhook's batches: the URL to set in
// SendGrid's Mail Settings, under SHIPNOTIFY_PUBLIC_URL or a proxy.
const Path = "/providers/sendgrid/events"

// Defaults of Options.
const (
	// DefaultMaxBody bounds a batch: SendGrid posts at 768 KB at most; a
	// thousand events take about 400 KB. A body is read whole before its
	// signature can be checked, so this, times DefaultMaxInFlight, is what
	// unsigned posts can make serve hold.
	DefaultMaxBody = 1 << 20
	// DefaultMaxInFlight bounds the batches read and applied at once; one
	// past it is answered 503 with Retry-After, which SendGrid retries.
	DefaultMaxInFlight = 8
	// busyRetryAfter is the wait a busy answer asks for.
	busyRetryAfter = "5"
	// DefaultTolerance is how far a batch's signed timestamp may be from
	// our clock.
	DefaultTolerance = 5 * time.Minute
	// DefaultBodyGrace and DefaultMinBodyRate pace a batch's body: byte n
	// must have arrived BodyGrace + n/MinBodyRate after the handler began
	// reading, or the read is cut (408). SendGrid's 768 KB takes at most
	// 14 s at that pace, inside the server's 30 s read timeout, while a
	// body trickled a byte a second gives its slot back after 2 s.
	DefaultBodyGrace   = 2 * time.Second
	DefaultMinBodyRate = 64 << 10 // bytes per second
	// applyTimeout bounds the mirror's write of one batch; SendGrid waits
	// longer, and a batch past it is answered 503 and retried.
	applyTimeout = 10 * time.Second
	// An event's own timestamp may be this old (SendGrid retries a batch
	// for a day; a deferral is retried for three) or this far ahead.
	maxEventAge  = 30 * 24 * time.Hour
	maxEventLead = time.Hour
)

// Applier records a batch of events; *mirror.Store is one.
type Applier interface {
	ApplyProviderEvents(ctx context.Context, events []mirror.ProviderEvent, deferAfter time.Duration) (mirror.AppliedEvents, error)
}

// Options configure a Handler.
type Options struct {
	// Key verifies the batches' signatures (required).
	Key   *ecdsa.PublicKey
	Store Applier
	// Tolerance bounds the signed timestamp's distance from Now (0:
	// DefaultTolerance); MaxBody bounds a batch (0: DefaultMaxBody).
	Tolerance time.Duration
	MaxBody   int64
	// MaxInFlight bounds the batches taken at once (0: DefaultMaxInFlight).
	MaxInFlight int
	// BodyGrace and MinBodyRate (bytes per second) pace a batch's body
	// (0: DefaultBodyGrace, DefaultMinBodyRate), so a slow body cannot
	// hold a slot for long.
	BodyGrace   time.Duration
	MinBodyRate int64
	// DeferAfter is how long a deferral may stay undelivered before it
	// escalates.
	DeferAfter time.Duration
	// Escalate is called when a batch owed new escalations (nil: none);
	// it must not block (Escalator.Nudge).
	Escalate func()
	Metrics  *metrics.ProviderEvents
	Logger   *slog.Logger
	Now      func() time.Time
}

// Handler answers SendGrid's Event Webhook. It verifies a batch (size,
// signature, timestamp), checks every event, records the batch in one
// transaction and answers; the escalations it owes start beside it, so
// slow work never holds SendGrid's request (which it would retry).
type Handler struct {
	o Options
	// inFlight holds a slot for each batch being read or applied.
	inFlight chan struct{}
	// tooLarge is the refusal of a batch past MaxBody, naming the limit.
	tooLarge refusal
}

// NewHandler returns the Event Webhook's handler.
func NewHandler(o Options) (*Handler, error) {
	if o.Key == nil || o.Store == nil {
		return nil, errors.New("error making the event webhook's handler: a key and a store are required")
	}
	if o.Tolerance <= 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.BodyGrace <= 0 {
		o.BodyGrace = DefaultBodyGrace
	}
	if o.MinBodyRate <= 0 {
		o.MinBodyRate = DefaultMinBodyRate
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Handler{o: o, inFlight: make(chan struct{}, o.MaxInFlight),
		tooLarge: refusal{errTooLarge.status, errTooLarge.result, fmt.Sprintf("%s (%d bytes)", errTooLarge.detail, o.MaxBody)}}, nil
}

// Summary is a 200's body: what the batch's events came to.
type Summary struct {
	Applied   int `json:"applied"`
	Duplicate int `json:"duplicate"`
	Unknown   int `json:"unknown_key"`
	Ignored   int `json:"ignored"`
}

// Refusals, each with its status and the metrics' result label.
var (
	errUnsigned     = refusal{http.StatusUnauthorized, "unsigned", "the batch carries no signature or timestamp (" + eventwebhook.VerificationHTTPHeader + ", " + eventwebhook.TimestampHTTPHeader + ")"}
	errBadSignature = refusal{http.StatusForbidden, "bad_signature", "the signature does not verify with the configured key"}
	errStale        = refusal{http.StatusForbidden, "stale", "the signed timestamp is outside the tolerance"}
	errTooLarge     = refusal{http.StatusRequestEntityTooLarge, "too_large", "the batch is larger than the limit"}
	errSlow         = refusal{http.StatusRequestTimeout, "slow", "the batch arrived too slowly; send it again"}
	errNotJSON      = refusal{http.StatusBadRequest, "not_json", "the batch is not a JSON array of event objects"}
	errBusy         = refusal{http.StatusServiceUnavailable, "busy", "too many batches at once; send it again"}
)

type refusal struct {
	status int
	result string
	detail string
}

func (r refusal) Error() string { return r.detail }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeProblem(w, refusal{http.StatusMethodNotAllowed, "", "POST a batch of events"}, "")
		return
	}
	sum, field, err := h.take(w, r)
	var ref refusal
	switch {
	case errors.As(err, &ref):
		h.o.Metrics.Batch(ref.result)
		writeProblem(w, ref, field)
	case err != nil:
		h.o.Metrics.Batch("error")
		h.o.Logger.Error("error applying provider events", "error", err)
		w.Header().Set("Retry-After", "30")
		writeProblem(w, refusal{http.StatusServiceUnavailable, "", "the batch could not be recorded; send it again"}, "")
	default:
		h.o.Metrics.Batch("accepted")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sum)
	}
}

// take checks a batch and records it; field names an event's bad field.
// Whatever the headers alone can refuse is refused before a slot is taken
// or a byte of the body is read.
func (h *Handler) take(w http.ResponseWriter, r *http.Request) (Summary, string, error) {
	sig, ts := r.Header.Get(eventwebhook.VerificationHTTPHeader), r.Header.Get(eventwebhook.TimestampHTTPHeader)
	if sig == "" || ts == "" {
		dropUnread(w, r)
		return Summary{}, "", errUnsigned
	}
	// The signed timestamp travels in a header: a stale one is a replay
	// (or a stranger's post) whose body is not worth reading.
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		dropUnread(w, r)
		return Summary{}, "", errStale
	}
	if d := h.o.Now().Sub(time.Unix(secs, 0)); d > h.o.Tolerance || d < -h.o.Tolerance {
		dropUnread(w, r)
		return Summary{}, "", errStale
	}
	if r.ContentLength > h.o.MaxBody {
		dropUnread(w, r)
		return Summary{}, "", h.tooLarge // refused before a byte is read
	}
	select {
	case h.inFlight <- struct{}{}:
		defer func() { <-h.inFlight }()
	default:
		w.Header().Set("Retry-After", busyRetryAfter)
		dropUnread(w, r)
		return Summary{}, "", errBusy
	}
	body, err := io.ReadAll(h.paced(w, http.MaxBytesReader(w, r.Body, h.o.MaxBody)))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return Summary{}, "", h.tooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close") // the rest of it is not read
		return Summary{}, "", errSlow
	case err != nil:
		return Summary{}, "", refusal{http.StatusBadRequest, "not_json", "the batch could not be read"}
	}
	if ok, err := eventwebhook.VerifySignature(h.o.Key, body, sig, ts); err != nil || !ok {
		return Summary{}, "", errBadSignature
	}
	events, ignored, field, err := parseBatch(body, h.o.Now())
	if err != nil {
		return Summary{}, field, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), applyTimeout)
	defer cancel()
	res, err := h.o.Store.ApplyProviderEvents(ctx, events, h.o.DeferAfter)
	if err != nil {
		return Summary{}, "", err
	}
	h.count(res, ignored)
	if res.Escalations > 0 && h.o.Escalate != nil {
		h.o.Escalate()
	}
	return Summary{
		Applied: mirror.Count(res.Applied), Duplicate: mirror.Count(res.Duplicate),
		Unknown: mirror.Count(res.Unknown), Ignored: mirror.Count(ignored),
	}, "", nil
}

// paced returns body read at the handler's pace: before each read the
// connection's read deadline is set to when the next byte is due
// (BodyGrace + n/MinBodyRate after reading began), so a trickled body is
// cut when it falls behind, not after the server's whole read timeout,
// and its slot comes back. Where the connection has no deadlines (not a
// net/http server's), the body is read as it comes.
func (h *Handler) paced(w http.ResponseWriter, body io.Reader) io.Reader {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return body
	}
	return &pacedReader{r: body, rc: rc, start: time.Now(), grace: h.o.BodyGrace, rate: h.o.MinBodyRate}
}

type pacedReader struct {
	r     io.Reader
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64 // bytes per second
	n     int64 // bytes read so far
}

func (p *pacedReader) Read(b []byte) (int, error) {
	due := p.start.Add(p.grace + time.Duration(float64(p.n+1)/float64(p.rate)*float64(time.Second)))
	if err := p.rc.SetReadDeadline(due); err != nil {
		return 0, fmt.Errorf("error pacing the batch's body: %w", err)
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	return n, err
}

// dropUnread ends a refusal made before the body was read: the connection
// closes after the answer, and the server reads no more of the body (it
// would otherwise wait on up to 256 KiB of it, a trickle for as long as
// the server's read timeout, before answering).
func dropUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

func (h *Handler) count(res mirror.AppliedEvents, ignored map[reminder.ProviderOutcome]int) {
	for result, m := range map[string]map[reminder.ProviderOutcome]int{
		"applied": res.Applied, "duplicate": res.Duplicate, "unknown_key": res.Unknown, "ignored": ignored,
	} {
		for o, n := range m {
			h.o.Metrics.Events(string(o), result, n)
		}
	}
	for _, d := range res.Delivered {
		h.o.Metrics.Delivered(string(d.Channel), d.DeliveredAt.Sub(d.DueAt))
	}
}

// event is the part of a SendGrid event shipnotify reads. Custom args
// arrive at the top level: delivery_key is ours (email.Message).
type event struct {
	Event       string          `json:"event"`
	ID          string          `json:"sg_event_id"`
	MessageID   string          `json:"sg_message_id"`
	Timestamp   json.RawMessage `json:"timestamp"`
	DeliveryKey string          `json:"delivery_key"`
	// Reason codes; free text (reason, response) may quote the address,
	// so only codes are kept from it.
	Status               string `json:"status"`
	Reason               string `json:"reason"`
	Response             string `json:"response"`
	Type                 string `json:"type"`
	BounceClassification string `json:"bounce_classification"`
}

var (
	deliveryKeyPattern = regexp.MustCompile(`^(digest_)?[0-9a-f]{64}$`)
	eventIDPattern     = regexp.MustCompile(`^[A-Za-z0-9_=+/.:-]{1,128}$`)
	eventTypePattern   = regexp.MustCompile(`^[a-z_]{1,32}$`)
	// A message id as SendGrid's 202 gave it (X-Message-Id): the part of
	// sg_message_id before its first dot.
	messageIDPattern = regexp.MustCompile(`^[A-Za-z0-9_=+/-]{1,128}$`)
)

// messageID is the X-Message-Id an event's sg_message_id begins with ("" if
// it has none shipnotify can keep): with it an unconfirmed send is recorded
// under the id the provider would have answered.
func messageID(sg string) string {
	id, _, _ := strings.Cut(sg, ".")
	if !messageIDPattern.MatchString(id) {
		return ""
	}
	return id
}

// parseBatch checks every event of a batch and returns those kept, and the
// count of those of types shipnotify does not keep (open, click, group
// unsubscribes), by type. One bad event refuses the whole batch: the
// webhook is for shipnotify's own mail, so a missing key is a
// misconfiguration to see, not to skip.
func parseBatch(body []byte, now time.Time) ([]mirror.ProviderEvent, map[reminder.ProviderOutcome]int, string, error) {
	var raw []event
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, nil, "", errNotJSON // null is no batch either
	}
	events := make([]mirror.ProviderEvent, 0, len(raw))
	ignored := map[reminder.ProviderOutcome]int{}
	for i, e := range raw {
		field := func(name string) string { return fmt.Sprintf("[%d].%s", i, name) }
		o := reminder.ProviderOutcome(e.Event)
		if e.Event == "" {
			return nil, nil, field("event"), invalid("an event without its type")
		}
		if o.Rank() == 0 {
			if !eventTypePattern.MatchString(e.Event) {
				o = "other" // a metric label, kept to SendGrid's words
			}
			ignored[o]++
			continue
		}
		if e.DeliveryKey == "" {
			return nil, nil, field("delivery_key"), invalid("an event without a delivery key (custom_args.delivery_key): is this SendGrid account sending mail that shipnotify did not?")
		}
		if !deliveryKeyPattern.MatchString(e.DeliveryKey) {
			return nil, nil, field("delivery_key"), invalid("a delivery key is 64 lowercase hex digits, after digest_ for a digest")
		}
		if !eventIDPattern.MatchString(e.ID) {
			return nil, nil, field("sg_event_id"), invalid("an event without a usable id (sg_event_id)")
		}
		secs, err := strconv.ParseInt(string(e.Timestamp), 10, 64)
		if err != nil || secs < now.Add(-maxEventAge).Unix() || secs > now.Add(maxEventLead).Unix() {
			// A time far off would pin the last outcome (no later event
			// is newer) or fail the batch in PostgreSQL on every retry.
			return nil, nil, field("timestamp"), invalid("a timestamp is an integer of Unix seconds, within 30 days before now and an hour after")
		}
		events = append(events, mirror.ProviderEvent{
			ID: e.ID, DeliveryKey: e.DeliveryKey, Outcome: o, At: time.Unix(secs, 0).UTC(), Reason: reasonCode(e),
			MessageID: messageID(e.MessageID),
		})
	}
	return events, ignored, "", nil
}

func invalid(detail string) error {
	return refusal{http.StatusUnprocessableEntity, "invalid", detail}
}

var (
	smtpCode     = regexp.MustCompile(`^[245]\d\d\b`)
	enhancedCode = regexp.MustCompile(`\b[245]\.\d{1,3}\.\d{1,3}\b`)
	// A SendGrid vocabulary word (a drop reason, a bounce class): letters
	// and spaces, nothing an address could hide in.
	plainWords = regexp.MustCompile(`^[A-Za-z][A-Za-z ]{0,60}$`)
)

// reasonCode keeps the codes of an event's reason and never its free text:
// a bounce's SMTP status and class, a drop's reason, a deferral's SMTP
// reply codes.
func reasonCode(e event) string {
	var parts []string
	add := func(s string) {
		if s != "" {
			parts = append(parts, s)
		}
	}
	switch reminder.ProviderOutcome(e.Event) {
	case reminder.OutcomeBounce:
		if e.Type == "blocked" {
			add("blocked")
		}
		add(enhancedCode.FindString(e.Status))
		if plainWords.MatchString(e.BounceClassification) {
			add(e.BounceClassification)
		}
	case reminder.OutcomeDropped:
		if plainWords.MatchString(e.Reason) {
			add(e.Reason)
		}
	case reminder.OutcomeDeferred:
		add(smtpCode.FindString(e.Response))
		add(enhancedCode.FindString(e.Response))
	}
	return strings.Join(parts, " ")
}

// writeProblem answers an RFC 9457 problem, like the tracker API's.
func writeProblem(w http.ResponseWriter, r refusal, field string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(r.status)
	p := map[string]any{"type": "about:blank", "title": http.StatusText(r.status), "status": r.status, "detail": r.detail}
	if field != "" {
		p["field"] = field
	}
	_ = json.NewEncoder(w).Encode(p)
}
