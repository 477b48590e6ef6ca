package testenv

import (
	"bytes"
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/worker"
)

// MailAPIKey is the key the test mail sink accepts.
const MailAPIKey = "SG.test-key"

// Stack is the whole product wired for one test: a private schema, the dev
// server, local stand-ins for SendGrid and a webhook receiver, a worker on a
// private task queue and a starter.
type Stack struct {
	DB              DB
	TemporalAddress string
	Mirror          *mirror.Store
	Temporal        client.Client
	TaskQueue       string
	Mail            *sink.MailSink
	Hooks           *sink.WebhookSink
	HookSecret      string
	Activities      *activities.Activities
	Starter         *starter.Starter
	Worker          sdkworker.Worker
	// Logs holds everything the worker and clients logged (JSON lines).
	Logs *SyncBuffer
	// EvidenceWait is how long the stack's workers, in process or not,
	// wait for the provider's evidence of a maybe-sent email.
	EvidenceWait time.Duration

	versions map[string]workflow.Version
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StackOptions point a stack at private servers, or leave out its worker.
type StackOptions struct {
	// TemporalAddress is the server; empty means the shared dev server.
	TemporalAddress string
	// DatabaseURL is the database holding the test's schema; empty means
	// TEST_DATABASE_URL.
	DatabaseURL string
	// NoWorker leaves the worker out (a test runs its own, as a process).
	NoWorker bool
	// RuntimeRole runs the product (starter, worker, commands under test)
	// as a member of shipnotify_runtime, as production does; DB.Pool stays
	// the owner's, for the test's own SQL.
	RuntimeRole bool
	// Versions pins the version the stack's worker records for these
	// change ids, and the stack's starter starts reminders unleveled, as
	// the releases before workflow levels did, so a test walks the path
	// reminders of an earlier release took.
	Versions map[string]workflow.Version
	// DelayedStart starts the stack's reminders that need no approval with
	// a start delay to their due time, as SHIPNOTIFY_DELAYED_START=true
	// does; by default they start at once to sleep on a timer, as the
	// product's default does.
	DelayedStart bool
	// Events has the mail sink post SendGrid's signed Event Webhook events
	// to serve's own handler (and runs its escalator), so a send whose
	// outcome was unknown is settled by the provider's evidence; the
	// stack's workers then wait EventsEvidenceWait for it. Without it they
	// wait for none (no event would come).
	Events bool
	// Bounce are the addresses whose mail the sink reports bounced (with
	// Events).
	Bounce []string
	// Metrics is what the stack's workers record (the delivery SLO of a
	// send the provider's event reached first, among others); nil records
	// nothing.
	Metrics *metrics.Metrics
}

// EventsEvidenceWait is how long a stack's workers wait for the provider's
// event for a maybe-sent key when the stack has the Event Webhook: the mail
// sink posts its events within a tenth of a second.
const EventsEvidenceWait = 20 * time.Second

// NewStack builds and starts a Stack; everything stops when the test ends.
func NewStack(t testing.TB) *Stack {
	t.Helper()
	return NewStackWith(t, StackOptions{})
}

// NewStackWith is NewStack with options.
func NewStackWith(t testing.TB, o StackOptions) *Stack {
	t.Helper()
	if o.TemporalAddress == "" {
		o.TemporalAddress = TemporalAddress(t)
	}
	if o.DatabaseURL == "" {
		o.DatabaseURL = need(t, "TEST_DATABASE_URL")
	}
	logs := &SyncBuffer{}
	var err error
	s := &Stack{
		DB: PostgresAt(t, o.DatabaseURL), TemporalAddress: o.TemporalAddress,
		Temporal: TemporalAt(t, o.TemporalAddress, logs), TaskQueue: TaskQueue(t),
		HookSecret: webhook.NewSecret(), Logs: logs,
	}
	pool := s.DB.Pool
	if o.RuntimeRole {
		s.DB.RuntimeURL = RuntimeRole(t, s.DB)
		if pool, err = pgxpool.New(context.Background(), s.DB.RuntimeURL); err != nil {
			t.Fatalf("connecting as the runtime role: %v", err)
		}
		t.Cleanup(pool.Close)
	}
	s.Mirror = mirror.New(pool).SealSecretsWith(Codec(t))
	if s.Mail, err = sink.StartMail("", MailAPIKey); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Mail.Close() })
	if s.Hooks, err = sink.StartWebhook("", s.HookSecret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Hooks.Close() })
	s.Activities = &activities.Activities{
		Mirror: s.Mirror,
		Email: email.NewSender(email.Options{
			APIKey: MailAPIKey, BaseURL: s.Mail.URL(), FromEmail: "reminders@shipnotify.example",
		}),
		Webhook: webhook.NewSender(webhook.Options{Guard: webhook.Guard{AllowLoopback: true}}),
		Metrics: o.Metrics,
	}
	if o.Events {
		s.EvidenceWait = EventsEvidenceWait
		s.startEventWebhook(t, o.Bounce)
	}
	s.Activities.EvidenceWait = s.EvidenceWait
	s.Starter = &starter.Starter{
		Temporal: s.Temporal, Mirror: s.Mirror, TaskQueue: s.TaskQueue,
		Webhooks: webhook.Guard{AllowLoopback: true}, Now: time.Now, Unleveled: len(o.Versions) > 0,
		// Reminders of the releases before levels never had a start delay.
		DelayedStart: o.DelayedStart && len(o.Versions) == 0,
	}
	s.versions = o.Versions
	if !o.NoWorker {
		s.StartWorker(t)
	}
	return s
}

// StartWorker starts a worker on the stack's task queue, stopped at cleanup
// (or earlier by StopWorker).
func (s *Stack) StartWorker(t testing.TB) {
	t.Helper()
	s.Worker = worker.New(s.Temporal, s.TaskQueue, s.Activities, worker.Options{Versions: s.versions})
	if err := s.Worker.Start(); err != nil {
		t.Fatalf("starting worker: %v", err)
	}
	w := s.Worker
	t.Cleanup(w.Stop)
}

// Update returns a valid update for this test with one subscriber per
// channel given ("email" or "webhook"), each due at due.
func (s *Stack) Update(t testing.TB, due time.Time, channels ...reminder.Channel) reminder.Update {
	u := reminder.Update{
		ShipmentID: ID(t, "SHP"),
		UpdateID:   "window-1",
		Kind:       "delivery_window",
		Message:    reminder.Message{Subject: "Delivery window opens soon", Text: "Your shipment's delivery window opens in 3 days."},
	}
	for i, ch := range channels {
		sub := reminder.Subscriber{ID: string(ch) + "-" + string(rune('a'+i)), Channel: ch, DueAt: due}
		switch ch {
		case reminder.Email:
			sub.Email = sub.ID + "@customer.example"
		case reminder.Webhook:
			sub.URL = s.Hooks.URL() + "/hooks/" + sub.ID
			sub.Secret = s.HookSecret
		}
		u.Subscribers = append(u.Subscribers, sub)
	}
	return u
}

// startEventWebhook serves the Event Webhook's handler and runs the
// escalator as serve does, and has the mail sink post its events there.
func (s *Stack) startEventWebhook(t testing.TB, bounce []string) {
	t.Helper()
	key, err := sink.NewEventKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sendgridevents.ParseVerificationKey(key.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	esc := sendgridevents.NewEscalator(s.Mirror, s.Temporal, s.TaskQueue)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go esc.Run(ctx)
	h, err := sendgridevents.NewHandler(sendgridevents.Options{Key: pub, Store: s.Mirror, DeferAfter: 4 * time.Hour, Escalate: esc.Nudge})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.Mail.EmitEvents(sink.EventOptions{URL: srv.URL, Key: key, Bounce: bounce})
}
