package bench

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

// Kind is which path a run measures.
type Kind string

const (
	// Naive is the baseline "timer, then one regular no-op activity".
	Naive Kind = "naive"
	// Lean is the baseline "timer, then one no-op local activity".
	Lean Kind = "lean"
	// Full is the product (starter, mirror, ReminderWorkflow, notify) as it
	// runs by default: every reminder started at once to sleep on a timer.
	Full Kind = "full"
	// FullLocal is the product with the retired fast path: its worker
	// pins workflows.ChangeLocalFirstAttempt to 1, so the notify's first
	// attempt runs as a local activity in the timer's workflow task, as
	// reminders of the releases before it was retired did. It is measured
	// beside full to show what retiring it cost, and where its stalls
	// came from.
	FullLocal Kind = "full-local"
	// FullDelayed is the product with SHIPNOTIFY_DELAYED_START=true (the
	// starter's DelayedStart): a reminder's workflow starts with Temporal's start delay
	// up to its due time, so the engine dispatches its first workflow task
	// then instead of the workflow sleeping on a timer. Its own task queue
	// and worker, the product's worker as full's.
	FullDelayed Kind = "full-delayed"
	// API is the full path scheduled through the tracker API (POST
	// /v1/updates over real HTTP) instead of the starter called in process:
	// the same reminders and worker, plus the API's own cost.
	API Kind = "api"
	// Pruning is the full path's steady workload while `prune` runs beside
	// it: what retention does to delivery lag.
	Pruning Kind = "full+prune"
	// Paced and OwnBackoff are the outage workload's two full-path
	// workers, each on its own task queue and mirror schema under the same
	// rate cap: the product's retries, which follow the provider's outage,
	// and the per-reminder backoff they replaced
	// (activities.Activities.OwnBackoffOnly).
	Paced      Kind = "full-paced"
	OwnBackoff Kind = "full-own-backoff"
)

// Worker is the worker process a kind's reminders run on: the API
// schedules onto the full path.
func (k Kind) Worker() Kind {
	if k == API || k == Pruning {
		return Full
	}
	return k
}

// runsReminders reports whether kind runs the product's ReminderWorkflow
// (its sends are the mail sink's journal), not a baseline.
func (k Kind) runsReminders() bool { return k != Naive && k != Lean }

// Workers starts and stops the worker processes of each kind and reads
// what they used.
type Workers interface {
	// Start starts kind's worker and returns once its pollers run, with
	// that instant: a catch-up drain is timed from it, not from the
	// process's launch.
	Start(Kind) (time.Time, error)
	Stop(Kind)
	// RSS is the worker's resident memory in bytes (0 if not running).
	RSS(Kind) int64
	// CPU is the CPU seconds kind's worker processes have used so far,
	// stopped ones included.
	CPU(Kind) float64
}

// Runner runs workloads against one Temporal server and one mirror.
type Runner struct {
	Temporal  client.Client
	Namespace string
	// Starter schedules the full path on its task queue.
	Starter *starter.Starter
	Mirror  *mirror.Store
	// Mail is the local SendGrid the full path's worker sends to, and the
	// baselines' no-op too while a provider other than Instant is in use.
	Mail *sink.MailSink
	// Starters are the starters of kinds that schedule onto a mirror and
	// task queue of their own (the outage workload's); any other full-path
	// kind uses Starter.
	Starters map[Kind]*starter.Starter
	// Queues are the task queues of the naive, lean and full workers.
	Queues  map[Kind]string
	Workers Workers
	// RunID keeps this run's shipment ids apart from earlier runs'.
	RunID string
	// Fanout is reminders per scheduling batch: subscribers per update on
	// the full path, workflow starts launched together on the baselines.
	Fanout int
	// Concurrency is workflow starts in flight: Concurrency/Fanout batches
	// at once on every path.
	Concurrency int
	Progress    io.Writer
	// APIURL and APIKey reach a tracker API serving Starter, for the API
	// path; HTTP is the client that calls it.
	APIURL string
	APIKey string
	HTTP   *http.Client
	// ServerCPU and PostgresCPU read the CPU seconds the Temporal server
	// and PostgreSQL have used so far; nil where the bench cannot find
	// their processes (an engine given by address).
	ServerCPU   func() (float64, error)
	PostgresCPU func() (float64, error)
	// ServeCPU reads what the serve replicas have used so far, where a
	// workload runs them (the horizontal one); nil elsewhere.
	ServeCPU func() (float64, error)
	// IdleGap is how long every queue must stay empty before the next run.
	IdleGap time.Duration
	// MinSlack is the least time that may be left between the end of the
	// starts' work and the first due instant; a run with less is invalid,
	// since that work then spills into what it measures.
	MinSlack time.Duration

	seq atomic.Int64

	// provider is how the mail sink answers while runs measure (UseProvider).
	provider sink.Profile

	mu sync.Mutex
	// startRates is each kind's last measured start rate, for the lead of
	// its next run.
	startRates map[Kind]float64
	// restarts is each kind's last measured worker restart, for the lead
	// of its next cold burst.
	restarts map[Kind]time.Duration
	// unsettled, when set, says why the queues were not idle when the next
	// run began; that run is invalid.
	unsettled string
}

// Result is one run of one workload on one path.
type Result struct {
	Workload string `json:"workload"`
	Kind     Kind   `json:"kind"`
	// Provider is the mail sink's profile during the run (sink.Profile's
	// Name; "" in reports from before providers had profiles: instant).
	Provider string `json:"provider,omitempty"`
	// Round is 0 for the discarded warm-up, then 1, 2, ... for the
	// alternating rounds whose runs are compared pairwise.
	Round int `json:"round"`
	N     int `json:"n"`
	// ScheduleRate is reminders started per second.
	ScheduleRate float64 `json:"schedule_rate"`
	// Lead is how far after scheduling began the first reminder was due;
	// Slack is what was left of it when the starts' work was done: the
	// starts, and each reminder's first workflow task (a sample's).
	Lead  time.Duration `json:"lead_ns,omitempty"`
	Slack time.Duration `json:"slack_ns,omitempty"`
	// Rate is reminders due a second (steady).
	Rate float64 `json:"rate,omitempty"`
	// DrainRate is 0.8·N/(t90−t10) over the notify starts (burst, catchup).
	DrainRate float64 `json:"drain_rate,omitempty"`
	// Drain is time to drain: notify starts from the due instant (burst,
	// slow) or the worker's first poll (catchup); each reminder's lag
	// (steady).
	Drain *Drain `json:"time_to_drain,omitempty"`
	// Accepted is the same from the same reference, to when the provider
	// accepted each reminder's first mail (the sink's Received), where the
	// sink's journal is read: the full path, and the baselines while they
	// send. A slow provider shows here, not in Drain.
	Accepted *Drain `json:"time_to_accepted,omitempty"`
	// Lag is notify start minus due time.
	Lag       Lags `json:"lag"`
	Delivered int  `json:"delivered"`
	// Duplicates are reminders whose notify ran more than once (full: keys
	// the mail sink received twice; baselines: the no-op's count).
	Duplicates int `json:"duplicates"`
	Lost       int `json:"lost"`
	// WorkerRSS is the worker's resident memory at the end, in bytes.
	WorkerRSS int64 `json:"worker_rss_bytes"`
	// HistoryEvents, WorkflowTasks and Actions are one delivered
	// reminder's history length, workflow tasks and billable actions.
	HistoryEvents int      `json:"history_events,omitempty"`
	WorkflowTasks int      `json:"workflow_tasks,omitempty"`
	Actions       *Actions `json:"actions,omitempty"`
	// Cost is the same, averaged over the delivered reminders of the task
	// stats' sample: what a cold start's extra tasks cost shows here when
	// the one history above was spared them.
	Cost *ReminderCost `json:"cost_per_reminder,omitempty"`
	// Restart is how long the cold burst's worker restart took, between
	// the starts' work and the due instant; Slack is then what was left
	// after it.
	Restart time.Duration `json:"restart_ns,omitempty"`
	// Tasks is where a sample of the run's reminders waited for their
	// workflow and activity tasks, and how often one timed out or failed.
	Tasks *TaskStats `json:"tasks,omitempty"`
	// CPU is what each process used during the run, its settling included.
	CPU CPU `json:"cpu_seconds"`
	// Outage is the outage workload's own figures.
	Outage *OutageFigures `json:"outage,omitempty"`
	// QueryP99 is the mirror's due-between query p99 (hold only).
	QueryP99 time.Duration `json:"due_between_query_p99_ns,omitempty"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	// Invalid says why the run is left out of the comparisons ("" when it
	// is not).
	Invalid string `json:"invalid,omitempty"`
	Error   string `json:"error,omitempty"`
}

// CPU is CPU seconds by process; nil where it could not be measured.
type CPU struct {
	Server   *float64 `json:"server"`
	Worker   *float64 `json:"worker"`
	Postgres *float64 `json:"postgres"`
	// Serve is the serve replicas', where a workload runs them.
	Serve *float64 `json:"serve,omitempty"`
}

// UseProvider makes the mail sink answer as p from the next run on. Each
// run sets it again with its own origin (its due instant, or its worker's
// return), so every path meets the same 429 windows at the same point of
// its run, and the same latencies.
func (r *Runner) UseProvider(p sink.Profile) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.provider = p
}

// providerFor puts the provider in use on the sink, its 429 windows
// anchored at origin, and returns its name; Instant when none was chosen.
func (r *Runner) providerFor(origin time.Time) (name string, sends bool) {
	r.mu.Lock()
	p := r.provider
	r.mu.Unlock()
	if p.Name == "" {
		p = sink.Instant()
	}
	p.Origin = origin
	if r.Mail != nil {
		r.Mail.SetProfile(p)
	}
	return p.Name, !p.IsInstant()
}

func (r *Runner) logf(format string, args ...any) {
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, "bench: "+format+"\n", args...)
	}
}
