package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipnotify/shipnotify/internal/api"
	outcomes "github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
)

// The mixes of events a run posts.
const (
	// MixDelivered is per reminder a processed and a delivered event.
	MixDelivered = "delivered"
	// MixBounce is MixDelivered with BounceShare of the reminders bounced
	// instead of delivered: each bounce writes the escalation outbox.
	MixBounce = "bounce"
	// MixReplay posts a delivered run's batches again: every event a
	// duplicate, as when SendGrid retries a batch it saw no 2xx for.
	MixReplay = "replay"
)

// TargetEventsPerSecond is issue 13's bar: signed batches of
// TargetBatchSize events ingested at least this fast, one batch at a time.
const (
	TargetEventsPerSecond = 2000
	TargetBatchSize       = 1000
)

// EventsOptions configure EventsLoad. Zero values take the defaults.
type EventsOptions struct {
	// BatchSize is the events a batch carries, two per reminder (default
	// TargetBatchSize, so 500 reminders a batch).
	BatchSize int
	// Batches is the batches one run posts (default 16), Runs the runs of
	// each mix and concurrency (default 5).
	Batches, Runs int
	// Concurrency is the batches in flight in the delivered mix's runs,
	// one set of runs each (default 1 and 4: SendGrid posts several at
	// once). The bounce and replay mixes run at the first.
	Concurrency []int
	// BounceShare is the share of the bounce mix's reminders that bounce
	// (default 0.1).
	BounceShare float64
	// PoolSize is the handler's connection pool, as serve sizes it
	// (default 16).
	PoolSize int32
	// DeferAfter is the handler's deferral escalation time (no event of
	// the benchmark is a deferral; default 4 h).
	DeferAfter time.Duration
	// Keep keeps the schema (events_<id>) for a look afterwards.
	Keep bool
	// Profile, when set, receives a Go CPU profile of the measured runs
	// (the handler, the store and the client: one process).
	Profile  io.Writer
	Progress io.Writer

	// beforeVerify, set by tests, runs after the last batch and before
	// the check of the mirror (to break what the check must catch).
	beforeVerify func(ctx context.Context, pool *pgxpool.Pool) error
	// signWith, set by tests, signs the batches with another key than the
	// handler's.
	signWith *sink.EventKey
}

func (o EventsOptions) withDefaults() EventsOptions {
	if o.BatchSize <= 0 {
		o.BatchSize = TargetBatchSize
	}
	if o.Batches <= 0 {
		o.Batches = 16
	}
	if o.Runs <= 0 {
		o.Runs = 5
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 4}
	}
	if o.BounceShare <= 0 {
		o.BounceShare = 0.1
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 16
	}
	if o.DeferAfter <= 0 {
		o.DeferAfter = 4 * time.Hour
	}
	return o
}

func (o EventsOptions) check() error {
	if o.BatchSize%2 != 0 {
		return fmt.Errorf("a batch carries two events a reminder: %d is odd", o.BatchSize)
	}
	if o.BounceShare > 1 {
		return fmt.Errorf("the bounce share is at most 1, not %g", o.BounceShare)
	}
	for _, c := range o.Concurrency {
		if c < 1 {
			return fmt.Errorf("a concurrency is at least 1, not %d", c)
		}
	}
	return nil
}

// EventsResult is what EventsLoad measured.
type EventsResult struct {
	Workload    string  `json:"workload"`
	Schema      string  `json:"schema"`
	BatchSize   int     `json:"batch_size"`
	Batches     int     `json:"batches_per_run"`
	Runs        int     `json:"runs"`
	Concurrency []int   `json:"concurrency"`
	BounceShare float64 `json:"bounce_share"`
	PoolSize    int32   `json:"pool_size"`
	// Seeded is the sent email reminders loaded (with their updates and
	// deliveries rows), one set per batch posted.
	Seeded      int     `json:"seeded_reminders"`
	SeedSeconds float64 `json:"seed_seconds"`
	// BodyBytes is the mean size of a batch's body.
	BodyBytes int `json:"body_bytes"`
	// Measured holds every run, the warm-up (round 0) included.
	Measured []EventsRun `json:"measured"`
	// Summaries are the runs of each mix and concurrency, warm-up left out.
	Summaries []EventsSummary `json:"summaries"`
	// Comparisons are per-round ratios of events/s between two runs of
	// one round (the bounce mix over the delivered, c=4 over c=1, the
	// replay over the delivered).
	Comparisons []EventsComparison `json:"comparisons"`
	// Target is issue 13's bar, judged by the median events/s of the
	// delivered mix one batch at a time; nil when the batches are not of
	// TargetBatchSize events.
	Target *Bar `json:"target,omitempty"`
	// Verified is what the check of the mirror after the runs found.
	Verified EventsCheck `json:"verified"`
	// Nudges is how often the handler called for the escalator (which the
	// benchmark does not run: it works beside the request, not in it).
	Nudges int64 `json:"escalator_nudges"`
	// Failures are what makes the run fail: a batch not answered 200 or
	// answered with other counts than it carried, a mirror that does not
	// hold exactly what was sent.
	Failures []string      `json:"failures,omitempty"`
	Elapsed  time.Duration `json:"elapsed_ns"`
}

// EventsLoad seeds a private schema (made by the product's migrations) with
// sent email reminders, serves the product's Event Webhook handler on a
// loopback HTTP server over the product's mirror store, and posts signed
// batches of events to it through a plain HTTP client: a warm-up, then
// o.Runs rounds of the delivered mix at each concurrency and of the bounce
// mix, each round's delivered batches replayed after it. It then checks
// that the mirror holds exactly what was posted. The schema is dropped at
// the end unless o.Keep.
func EventsLoad(ctx context.Context, dbURL string, o EventsOptions) (EventsResult, error) {
	o = o.withDefaults()
	res := EventsResult{Workload: "events", BatchSize: o.BatchSize, Batches: o.Batches, Runs: o.Runs,
		Concurrency: o.Concurrency, BounceShare: o.BounceShare, PoolSize: o.PoolSize}
	if err := o.check(); err != nil {
		return res, err
	}
	begin := time.Now()
	logf := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "bench: events: "+format+"\n", args...)
		}
	}
	s, err := newPrivateSchema(ctx, dbURL, "events")
	if err != nil {
		return res, err
	}
	defer s.Close(!o.Keep)
	res.Schema = s.Name

	plan := planEvents(o)
	t := time.Now()
	seeded := newEventsSeed(t, plan.reminders)
	if err := seeded.load(ctx, s.Pool); err != nil {
		return res, err
	}
	res.Seeded, res.SeedSeconds = plan.reminders, time.Since(t).Seconds()
	logf("seeded %d sent reminders in %.1fs for a warm-up and %d runs of %d batches of %d events", plan.reminders,
		res.SeedSeconds, len(plan.steps)-1, o.Batches, o.BatchSize)

	srv, err := startEventsServer(ctx, s.Pool, o)
	if err != nil {
		return res, err
	}
	defer srv.close()
	signer := srv.key
	if o.signWith != nil {
		signer = o.signWith
	}
	p := &eventsPoster{url: srv.url, key: signer, client: srv.client(plan.maxConcurrency())}
	built, led, err := seeded.build(plan, o)
	if err != nil {
		return res, err
	}
	res.BodyBytes = led.bodyBytes / max(led.batches, 1)
	logf("built %d batches of %d KB; posting", led.batches, res.BodyBytes>>10)
	if err := p.measure(ctx, plan, built, srv, o, &res, logf); err != nil {
		return res, err
	}
	res.Nudges = srv.nudges.Load()
	res.Summaries = summarizeEvents(res.Measured, srv.tracer.totals())
	res.Comparisons = compareEvents(res.Measured, o.Concurrency)
	res.Target = eventsTarget(res.Summaries, o)

	if o.beforeVerify != nil {
		if err := o.beforeVerify(ctx, s.Pool); err != nil {
			return res, err
		}
	}
	res.Verified, err = led.verify(ctx, s.Pool)
	if err != nil {
		return res, err
	}
	res.Failures = append(res.Failures, res.Verified.Problems...)
	res.Elapsed = time.Since(begin)
	return res, nil
}

// eventsServer is the product's Event Webhook behind a real HTTP server on
// loopback, over the mirror store on a pool of its own sized as serve's.
type eventsServer struct {
	url    string
	key    *sink.EventKey
	apply  *timedApplier
	tracer *statementTracer
	nudges *counter
	srv    *http.Server
	pool   *pgxpool.Pool
}

func startEventsServer(ctx context.Context, schemaPool *pgxpool.Pool, o EventsOptions) (*eventsServer, error) {
	key, err := sink.NewEventKey()
	if err != nil {
		return nil, err
	}
	pub, err := outcomes.ParseVerificationKey(key.PublicKey())
	if err != nil {
		return nil, fmt.Errorf("error reading the benchmark's verification key: %w", err)
	}
	s := &eventsServer{key: key, tracer: newStatementTracer(), nudges: &counter{}}
	cfg := schemaPool.Config()
	cfg.MaxConns = o.PoolSize
	cfg.ConnConfig.Tracer = s.tracer
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("error connecting the handler's pool: %w", err)
	}
	s.apply = &timedApplier{store: mirror.New(s.pool)}
	h, err := outcomes.NewHandler(outcomes.Options{
		Key: pub, Store: s.apply, DeferAfter: o.DeferAfter, Escalate: s.nudges.inc,
		Metrics: metrics.NewProviderEvents(prometheus.NewRegistry()), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		s.pool.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("error listening for the benchmark's event webhook: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(outcomes.Path, h)
	s.srv = api.NewServer(mux, 0)
	go func() { _ = s.srv.Serve(ln) }()
	s.url = "http://" + ln.Addr().String() + outcomes.Path
	return s, nil
}

// client keeps a connection for each batch in flight, as SendGrid's
// sender would.
func (s *eventsServer) client(inFlight int) *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: inFlight}}
}

func (s *eventsServer) close() {
	_ = s.srv.Close()
	s.pool.Close()
}
