package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// The fairness workload (issue 38): two tenants on one system, the
// product's own serve and worker processes. acme, the noisy one, posts
// thousands of reminders in large updates as fast as the API lets it and
// moves some of its windows at once; globex, the quiet one, keeps posting
// one reminder every few seconds and moving one now and then. What globex
// sees (the API's answer times and its reminders' lateness) is measured
// first alone, then beside acme, in one run, so the report is a ratio on
// the same machine at the same moment.

// The tenants, by role.
const (
	NoisyTenant = "acme"
	QuietTenant = "globex"
)

// FairnessOptions configure the fairness workload. The caller has made the
// mirror's schema; the benchmark starts everything else.
type FairnessOptions struct {
	// Bin is the product binary the workers and serve replicas run, in
	// Env (as HorizontalOptions.Env).
	Bin    string
	Env    []string
	Mirror *mirror.Store
	// Serves replicas behind a balancer and Workers worker processes.
	Serves, Workers int
	// Provider is how the mail sink answers.
	Provider sink.Profile
	// NoisyReminders are posted as updates of UpdateSize subscribers by
	// Posters posters at once, due spread over NoisySpread from NoisyLead
	// after the noisy phase begins; once half are accepted, NoisyMoves of
	// them have their window moved by MoveBy, all at once.
	NoisyReminders, UpdateSize, Posters int
	NoisyLead, NoisySpread              time.Duration
	NoisyMoves                          int
	MoveBy                              time.Duration
	// The quiet tenant posts one reminder due QuietLead later every
	// QuietEvery, and every QuietMoveEvery-th post also moves the update it
	// posted before by MoveBy.
	QuietEvery, QuietLead time.Duration
	QuietMoveEvery        int
	// Baseline is how long the quiet tenant runs alone first.
	Baseline time.Duration
	// DrainWithin bounds each wait for delivery: the noisy tenant's
	// reminders all sent, then both tenants' all delivered.
	DrainWithin time.Duration
	Progress    io.Writer
}

// Fairness runs the fairness workload and returns its report; an error
// is returned only when it could not run at all (what went wrong in the
// run is in the report's Errors).
func Fairness(ctx context.Context, o FairnessOptions) (FairnessReport, error) {
	rep := FairnessReport{At: time.Now().UTC(), CPUs: runtime.NumCPU()}
	runID := shortID()
	tenants := map[string]*tenantClient{}
	var lines []string
	for _, name := range []string{NoisyTenant, QuietTenant} {
		secret, line, err := tenantKey(name)
		if err != nil {
			return rep, err
		}
		lines = append(lines, line)
		tenants[name] = &tenantClient{name: name, key: secret, prefix: runPrefix(runID + "-" + name)}
	}
	h, err := startProduct(productOptions{Bin: o.Bin, Env: o.Env, Serves: o.Serves, Workers: o.Workers, KeyLines: lines})
	if err != nil {
		return rep, err
	}
	defer h.close()
	if err := h.fleet.resize(o.Workers); err != nil {
		return rep, err
	}
	p := o.Provider
	p.Origin = time.Now()
	h.mail.SetProfile(p)
	httpClient := &http.Client{Timeout: 3 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * o.Posters}}
	for _, c := range tenants {
		c.url, c.http = h.apiURL, httpClient
	}
	logf := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "fairness: "+format+"\n", args...)
		}
	}

	quiet := &quietLoad{c: tenants[QuietTenant], o: o}
	qctx, stopQuiet := context.WithCancel(ctx)
	quietDone := make(chan struct{})
	go func() { defer close(quietDone); quiet.run(qctx, ctx) }()
	defer func() { stopQuiet(); <-quietDone }()

	logf("the quiet tenant alone for %s", o.Baseline)
	select {
	case <-ctx.Done():
	case <-time.After(o.Baseline):
	}
	rep.NoisyStart = time.Now()
	logf("the noisy tenant posts %d reminders in updates of %d", o.NoisyReminders, o.UpdateSize)
	noisy := &noisyLoad{c: tenants[NoisyTenant], o: o, start: rep.NoisyStart}
	rep.Noisy = noisy.run(ctx)
	logf("the noisy tenant's %d reminders accepted in %s (answers %s, %d updates failed); waiting for them to be sent",
		rep.Noisy.Accepted, rep.Noisy.AcceptedIn.Round(time.Millisecond), statusCounts(rep.Noisy.Statuses), rep.Noisy.Failed)
	if err := waitSent(ctx, o.Mirror, tenants[NoisyTenant].prefix, o.DrainWithin); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	rep.NoisyDone = time.Now()
	stopQuiet()
	<-quietDone
	logf("the noisy tenant's reminders sent; waiting for both tenants' to be delivered")
	for _, name := range []string{NoisyTenant, QuietTenant} {
		if err := waitQuiet(ctx, o.Mirror, tenants[name].prefix, o.DrainWithin); err != nil {
			rep.Errors = append(rep.Errors, name+": "+err.Error())
		}
	}

	rep.Tenants = map[string]FairnessTenant{}
	for _, name := range []string{NoisyTenant, QuietTenant} {
		c := tenants[name]
		var t FairnessTenant
		var err error
		if t.Reminders, err = tenantReminders(ctx, o.Mirror, c.prefix); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
		snap, err := readSnapshot(ctx, o.Mirror, h.ids, c.prefix, h.mail, h.tracker, nil)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		} else {
			check := checkRun(snap)
			t.Check = &check
			for _, v := range check.Violations {
				rep.Errors = append(rep.Errors, name+": "+v)
			}
		}
		rep.Tenants[name] = t
	}
	rep.Quiet = quiet.samples()
	rep.Errors = append(rep.Errors, quiet.errors()...)
	rep.summarise()
	return rep, nil
}

// tenantKey makes a key for tenant with the scopes the workload uses, and
// its configuration line.
func tenantKey(tenant string) (secret, line string, err error) {
	secret, k, err := api.NewKey("bench-"+tenant, []api.Scope{api.ScopeSchedule, api.ScopeOperate, api.ScopeRead})
	if err != nil {
		return "", "", err
	}
	if k.Tenant, err = reminder.ParseTenant("tenant", tenant); err != nil {
		return "", "", err
	}
	return secret, k.Line(), nil
}

// quietLoad is the quiet tenant's steady work.
type quietLoad struct {
	c *tenantClient
	o FairnessOptions

	mu   sync.Mutex
	got  []QuietSample
	errs []error
}

// QuietSample is one of the quiet tenant's requests: a schedule or a move,
// when it was sent, how long until it was done (its retries included) and
// the statuses it met.
type QuietSample struct {
	Op       string        `json:"op"`
	At       time.Time     `json:"at"`
	Took     time.Duration `json:"took_ns"`
	Statuses []int         `json:"statuses"`
	Outcome  string        `json:"outcome,omitempty"`
}

// Quiet operations.
const (
	OpSchedule = "schedule"
	OpMove     = "move"
)

// run posts until ctx ends; each request runs to its end under work,
// so the last ones are measured as the others.
func (q *quietLoad) run(ctx, work context.Context) {
	tick := time.NewTicker(q.o.QuietEvery)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var prev *postedUpdate
	for seq := 0; ; seq++ {
		u := q.c.update(seq, 1, time.Now().Add(q.o.QuietLead))
		move := prev
		if q.o.QuietMoveEvery <= 0 || seq%q.o.QuietMoveEvery != q.o.QuietMoveEvery-1 {
			move = nil
		}
		wg.Go(func() {
			q.record(OpSchedule, q.c.schedule(work, u))
			if move != nil {
				<-move.done
			}
			if move != nil && move.ok {
				q.record(OpMove, q.c.move(work, move, q.o.MoveBy))
			}
		})
		prev = u
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (q *quietLoad) record(op string, r requestResult) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.got = append(q.got, QuietSample{Op: op, At: r.at, Took: r.took, Statuses: r.statuses, Outcome: r.outcome})
	if r.err != nil {
		q.errs = append(q.errs, fmt.Errorf("%s %s: %w", QuietTenant, op, r.err))
	}
}

func (q *quietLoad) samples() []QuietSample {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]QuietSample(nil), q.got...)
}

func (q *quietLoad) errors() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, err := range q.errs {
		out = append(out, err.Error())
	}
	return out
}

// noisyLoad is the noisy tenant's burst.
type noisyLoad struct {
	c     *tenantClient
	o     FairnessOptions
	start time.Time
}

// NoisyDue is when the noisy tenant's i-th of n updates is due: spread
// evenly over spread from lead after start, so its delivery overlaps the
// quiet tenant's work rather than landing in one instant.
func NoisyDue(start time.Time, lead, spread time.Duration, i, n int) time.Time {
	if n <= 1 {
		return start.Add(lead)
	}
	return start.Add(lead + time.Duration(float64(spread)*float64(i)/float64(n-1)))
}

// run posts every update with Posters in flight, moves NoisyMoves of them
// at once when half are accepted, and returns what it met.
func (n *noisyLoad) run(ctx context.Context) NoisyFigures {
	count := (n.o.NoisyReminders + n.o.UpdateSize - 1) / n.o.UpdateSize
	updates := make([]*postedUpdate, count)
	for i := range count {
		size := min(n.o.UpdateSize, n.o.NoisyReminders-i*n.o.UpdateSize)
		updates[i] = n.c.update(i, size, NoisyDue(n.start, n.o.NoisyLead, n.o.NoisySpread, i, count))
	}
	fig := NoisyFigures{Updates: count, Statuses: map[int]int{}, MoveOutcomes: map[string]int{}}
	var mu sync.Mutex
	var posts, moves []time.Duration
	var accepted []*postedUpdate
	var last time.Time
	var moving sync.WaitGroup
	moved := false
	next := make(chan *postedUpdate)
	var wg sync.WaitGroup
	for range n.o.Posters {
		wg.Go(func() {
			for u := range next {
				r := n.c.schedule(ctx, u)
				mu.Lock()
				for _, s := range r.statuses {
					fig.Statuses[s]++
				}
				if r.err != nil {
					fig.Failed++
					fig.Errors = append(fig.Errors, r.err.Error())
					mu.Unlock()
					continue
				}
				posts = append(posts, r.took)
				accepted = append(accepted, u)
				fig.Accepted += len(u.subscribers)
				last = r.at.Add(r.took)
				var batch []*postedUpdate
				if !moved && n.o.NoisyMoves > 0 && 2*len(accepted) >= count {
					moved = true
					// The latest due of those accepted: still to come,
					// so the move has reminders to move.
					batch = latestDue(accepted, n.o.NoisyMoves)
					fig.MovedAt = time.Now()
				}
				mu.Unlock()
				for _, m := range batch {
					moving.Go(func() {
						r := n.c.move(ctx, m, n.o.MoveBy)
						mu.Lock()
						defer mu.Unlock()
						moves = append(moves, r.took)
						fig.MoveOutcomes[r.outcome]++
						if r.err != nil {
							fig.Errors = append(fig.Errors, r.err.Error())
						}
					})
				}
			}
		})
	}
	for _, u := range updates {
		select {
		case next <- u:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	moving.Wait()
	if !last.IsZero() {
		fig.AcceptedIn = last.Sub(n.start)
		fig.Rate = float64(fig.Accepted) / fig.AcceptedIn.Seconds()
	}
	fig.Post = DurationsDrain(posts)
	fig.Moves = len(moves)
	fig.Move = DurationsDrain(moves)
	return fig
}

// latestDue is the k updates of us due last.
func latestDue(us []*postedUpdate, k int) []*postedUpdate {
	var out []*postedUpdate
	for range min(k, len(us)) {
		var best *postedUpdate
		for _, u := range us {
			if !containsUpdate(out, u) && (best == nil || u.window.After(best.window)) {
				best = u
			}
		}
		out = append(out, best)
	}
	return out
}

func containsUpdate(us []*postedUpdate, u *postedUpdate) bool {
	for _, x := range us {
		if x == u {
			return true
		}
	}
	return false
}

// waitSent waits, up to within, until every reminder of the prefix has
// been sent (or ended otherwise).
func waitSent(ctx context.Context, store *mirror.Store, prefix string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var waiting int
		err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM reminders
 WHERE starts_with(shipment_id, $1) AND sent_at IS NULL AND state IN ('scheduled', 'sending', 'awaiting_approval')`, prefix).Scan(&waiting)
		if err == nil && waiting == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("error reading what is left to send: %w", err)
			}
			return fmt.Errorf("after %s, %d reminder(s) of %s not sent", within, waiting, prefix)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ReminderTimes are one reminder's due and sent times in the mirror (Sent
// zero: never sent) and whether its workflow started.
type ReminderTimes struct {
	Due     time.Time `json:"due_at"`
	Sent    time.Time `json:"sent_at"`
	Started bool      `json:"started"`
}

// tenantReminders reads the due and sent times of the reminders of the
// prefix.
func tenantReminders(ctx context.Context, store *mirror.Store, prefix string) ([]ReminderTimes, error) {
	rows, err := store.Pool().Query(ctx, `SELECT due_at, sent_at, workflow_started_at IS NOT NULL FROM reminders
 WHERE starts_with(shipment_id, $1)`, prefix)
	if err != nil {
		return nil, fmt.Errorf("error reading the reminders' times: %w", err)
	}
	defer rows.Close()
	var out []ReminderTimes
	for rows.Next() {
		var r ReminderTimes
		var sent *time.Time
		if err := rows.Scan(&r.Due, &sent, &r.Started); err != nil {
			return nil, fmt.Errorf("error reading the reminders' times: %w", err)
		}
		if sent != nil {
			r.Sent = *sent
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading the reminders' times: %w", err)
	}
	return out, nil
}

// errGaveUp ends a request that kept failing.
var errGaveUp = errors.New("gave up")
