package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	outcomes "github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/mirror"
)

// EventsRun is one run: its batches posted, Concurrency at a time.
type EventsRun struct {
	Mix         string `json:"mix"`
	Concurrency int    `json:"concurrency"`
	// Round 0 is the warm-up, left out of the summaries.
	Round   int `json:"round"`
	Batches int `json:"batches"`
	Events  int `json:"events"`
	// Applied and Duplicate add up the 200s' summaries.
	Applied   int `json:"applied"`
	Duplicate int `json:"duplicate"`
	// Seconds is from the first post to the last answer read, and
	// EventsPerSecond the events the run carried over it (every one of
	// them applied, or for the replay found a duplicate, or the run failed).
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
	// Batch is a post's time, request to answer read; Apply the part of it
	// in the store's ApplyProviderEvents (its transaction).
	Batch    Latency  `json:"batch"`
	Apply    Latency  `json:"apply"`
	Non200   int      `json:"non_200"`
	Failures []string `json:"failures,omitempty"`

	batchTook, applyTook []time.Duration
}

// eventsPoster posts a run's batches.
type eventsPoster struct {
	url    string
	key    *sink.EventKey
	client *http.Client
}

// measure runs the plan's steps in order, each over its batches, into res;
// o.Profile, when set, profiles every step but the warm-up.
func (p *eventsPoster) measure(ctx context.Context, plan eventsPlan, built [][]eventsBatch, srv *eventsServer,
	o EventsOptions, res *EventsResult, logf func(string, ...any)) error {
	for i, st := range plan.steps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if i == 1 && o.Profile != nil {
			if err := pprof.StartCPUProfile(o.Profile); err != nil {
				return fmt.Errorf("error starting the CPU profile: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		srv.tracer.use(st.key())
		run, err := p.run(ctx, st, built[i], srv.apply)
		if err != nil {
			return err
		}
		res.Measured = append(res.Measured, run)
		res.Failures = append(res.Failures, run.Failures...)
		logf("%s c=%d round %d: %d events in %.2fs: %.0f events/s; batch p50 %s, p99 %s",
			st.mix, st.concurrency, st.round, run.Events, run.Seconds, run.EventsPerSecond, millis(run.Batch.P50), millis(run.Batch.P99))
	}
	return nil
}

// run signs the batches (before the clock starts: signing is SendGrid's
// work), then posts them st.concurrency at a time and checks every answer:
// a 200 whose summary counts exactly the batch's events as applied (as
// duplicates, for a replay).
func (p *eventsPoster) run(ctx context.Context, st eventsStep, batches []eventsBatch, apply *timedApplier) (EventsRun, error) {
	run := EventsRun{Mix: st.mix, Concurrency: st.concurrency, Round: st.round, Batches: len(batches)}
	reqs := make([]*http.Request, len(batches))
	now := time.Now()
	for i, b := range batches {
		var err error
		if reqs[i], err = sink.SignedRequest(ctx, p.url, p.key, b.body, now); err != nil {
			return run, err
		}
		run.Events += b.events
	}
	type answer struct {
		status int
		sum    outcomes.Summary
		err    error
	}
	answers := make([]answer, len(batches))
	run.batchTook = make([]time.Duration, len(batches))
	apply.take()
	var next atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for range st.concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(reqs) {
					return
				}
				t := time.Now()
				a := &answers[i]
				a.status, a.sum, a.err = p.post(reqs[i])
				run.batchTook[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	run.Seconds = time.Since(begin).Seconds()
	run.applyTook = apply.take()
	run.EventsPerSecond = float64(run.Events) / run.Seconds
	run.Batch, run.Apply = latencyOf(run.batchTook), latencyOf(run.applyTook)

	fail := func(format string, args ...any) {
		run.Failures = append(run.Failures, fmt.Sprintf("%s c=%d round %d: ", st.mix, st.concurrency, st.round)+fmt.Sprintf(format, args...))
	}
	for i, a := range answers {
		want := outcomes.Summary{Applied: batches[i].events}
		if st.mix == MixReplay {
			want = outcomes.Summary{Duplicate: batches[i].events}
		}
		switch {
		case a.err != nil:
			run.Non200++
			fail("batch %d got no answer: %v", i, a.err)
		case a.status != http.StatusOK:
			run.Non200++
			fail("batch %d answered %d", i, a.status)
		case a.sum != want:
			fail("batch %d of %d events answered %+v", i, batches[i].events, a.sum)
		}
		run.Applied += a.sum.Applied
		run.Duplicate += a.sum.Duplicate
	}
	return run, nil
}

func (p *eventsPoster) post(req *http.Request) (int, outcomes.Summary, error) {
	var sum outcomes.Summary
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, sum, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, sum, fmt.Errorf("error reading the answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &sum); err != nil {
			return resp.StatusCode, sum, fmt.Errorf("error reading the summary: %w", err)
		}
	}
	return resp.StatusCode, sum, nil
}

// timedApplier is the product's store, each ApplyProviderEvents timed: the
// part of a batch's time its transaction takes.
type timedApplier struct {
	store *mirror.Store
	mu    sync.Mutex
	took  []time.Duration
}

func (a *timedApplier) ApplyProviderEvents(ctx context.Context, events []mirror.ProviderEvent, deferAfter time.Duration) (mirror.AppliedEvents, error) {
	t := time.Now()
	res, err := a.store.ApplyProviderEvents(ctx, events, deferAfter)
	d := time.Since(t)
	a.mu.Lock()
	a.took = append(a.took, d)
	a.mu.Unlock()
	return res, err
}

// take returns the times recorded since the last take.
func (a *timedApplier) take() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	took := a.took
	a.took = nil
	return took
}

// counter counts the handler's calls for the escalator, never blocking.
type counter struct{ atomic.Int64 }

func (c *counter) inc() { c.Add(1) }

// statementTracer times every statement of the handler's pool, by the
// statement's name and the step running: where a batch's transaction
// spends its time, round trips included.
type statementTracer struct {
	mu   sync.Mutex
	step string
	sums map[string]map[string]*statementSum
}

type statementSum struct {
	calls int
	took  time.Duration
}

type traceStart struct {
	step, name string
	at         time.Time
}

type traceKey struct{}

func newStatementTracer() *statementTracer {
	return &statementTracer{sums: map[string]map[string]*statementSum{}}
}

// use files the statements from now on under step.
func (t *statementTracer) use(step string) {
	t.mu.Lock()
	t.step = step
	t.mu.Unlock()
}

func (t *statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.mu.Lock()
	step := t.step
	t.mu.Unlock()
	return context.WithValue(ctx, traceKey{}, traceStart{step: step, name: statementName(d.SQL), at: time.Now()})
}

func (t *statementTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	s, ok := ctx.Value(traceKey{}).(traceStart)
	if !ok {
		return
	}
	took := time.Since(s.at)
	t.mu.Lock()
	defer t.mu.Unlock()
	byName := t.sums[s.step]
	if byName == nil {
		byName = map[string]*statementSum{}
		t.sums[s.step] = byName
	}
	sum := byName[s.name]
	if sum == nil {
		sum = &statementSum{}
		byName[s.name] = sum
	}
	sum.calls++
	sum.took += took
}

// totals returns the sums so far, by step and statement.
func (t *statementTracer) totals() map[string]map[string]statementSum {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[string]statementSum{}
	for step, byName := range t.sums {
		out[step] = map[string]statementSum{}
		for name, s := range byName {
			out[step][name] = *s
		}
	}
	return out
}

var (
	spaces    = regexp.MustCompile(`\s+`)
	fromTable = regexp.MustCompile(`(?i)\bFROM (\w+)`)
	verbTable = regexp.MustCompile(`(?i)^(INSERT INTO|UPDATE) (\w+)`)
)

// statementName is a statement's verb and table: "SELECT deliveries",
// "INSERT INTO provider_events", "begin".
func statementName(sql string) string {
	s := strings.TrimSpace(spaces.ReplaceAllString(sql, " "))
	if m := verbTable.FindStringSubmatch(s); m != nil {
		return strings.ToUpper(m[1]) + " " + m[2]
	}
	if strings.HasPrefix(strings.ToUpper(s), "SELECT") {
		name := "SELECT"
		if m := fromTable.FindStringSubmatch(s); m != nil {
			name += " " + m[1]
		}
		if strings.HasSuffix(strings.ToUpper(s), "FOR UPDATE") {
			name += " FOR UPDATE"
		}
		return name
	}
	return strings.ToLower(s)
}
