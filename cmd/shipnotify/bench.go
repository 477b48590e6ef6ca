package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"golang.org/x/time/rate"

	"github.com/shipnotify/shipnotify/api"
	"github.com/shipnotify/shipnotify/bench"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/migrations"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/worker"
)

func init() {
	register("bench", "measure the reminder path against a bare Temporal baseline (make bench)", runBench)
	register("bench-worker", "run the bare baseline's worker (started by bench)", runBenchWorker)
}

// BenchReport is what bench writes with --json and to --out.
type BenchReport struct {
	Machine string         `json:"machine"`
	At      time.Time      `json:"at"`
	Results []bench.Result `json:"results"`
	Ratios  []bench.Ratio  `json:"ratios"`
	// APIRatios compare scheduling through the tracker API with the
	// starter's, in the same run (--api).
	APIRatios []bench.APIRatio `json:"api_ratios,omitempty"`
	Options   map[string]any   `json:"options"`
	Errors    []string         `json:"errors,omitempty"`
}

func runBench(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "bench", "bench [--workloads steady,burst,catchup,hold] [--n N] [--rate R] [--duration D] [--hold-n N] [--json] [--out FILE]")
	workloads := fs.String("workloads", "steady,burst,catchup,hold", "which workloads to run, in order")
	n := fs.Int("n", 3000, "reminders in the burst and catchup workloads")
	rateFlag := fs.Float64("rate", 40, "steady workload: reminders due per second (80% of the bare ceiling of ~50/s)")
	duration := fs.Duration("duration", 60*time.Second, "steady workload: how long reminders keep coming due")
	holdN := fs.Int("hold-n", 100_000, "hold workload: pending reminders")
	fanout := fs.Int("fanout", 10, "subscribers per update on the full path")
	concurrency := fs.Int("concurrency", 80, "workflow starts in flight")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	out := fs.String("out", "", "also write the JSON report to this file (capacity reads it)")
	keep := fs.Bool("keep", false, "keep the benchmark's mirror schema")
	repeat := fs.Int("repeat", 2, "runs of each steady, burst and catchup workload per path, alternating which path goes first; ratios compare medians")
	viaAPI := fs.Bool("api", true, "burst workload: also schedule through the tracker API (POST /v1/updates to an in-process server over loopback HTTP) and compare its scheduling rate with the starter's")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *n < 1 || *rateFlag <= 0 || *duration <= 0 || *holdN < 1 || *fanout < 1 || *concurrency < 1 || *repeat < 1 {
		return usagef("--n, --rate, --duration, --hold-n, --fanout, --concurrency and --repeat must be positive")
	}
	for _, w := range strings.Split(*workloads, ",") {
		switch w {
		case "steady", "burst", "catchup", "hold":
		default:
			return usagef("--workloads: unknown workload %q", w)
		}
	}
	d, err := newDeps(e)
	if err != nil {
		return err
	}
	defer d.close()
	runID := randomHex(4)
	schema := "bench_" + runID
	dbURL, err := withSearchPath(d.cfg.DatabaseURL, schema)
	if err != nil {
		return usageError{fmt.Errorf("DATABASE_URL: %w", err)}
	}
	admin, err := d.mirror(ctx, 2)
	if err != nil {
		return err
	}
	if _, err := admin.Pool().Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("error creating the benchmark schema: %w", err)
	}
	if !*keep {
		defer func() { _, _ = admin.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") }()
	}
	d.cfg.DatabaseURL = dbURL
	st, err := d.starter(ctx)
	if err != nil {
		return err
	}
	if err := migrations.Up(ctx, st.Mirror.Pool(), d.logger); err != nil {
		return err
	}
	const apiKey = "SG.bench"
	mail, err := sink.StartMail("", apiKey)
	if err != nil {
		return err
	}
	defer mail.Close()

	st.TaskQueue = "bench-full-" + runID
	st.Concurrency = *fanout
	workers := &processWorkers{
		env: append(os.Environ(),
			"DATABASE_URL="+dbURL, "SENDGRID_API_KEY="+apiKey, "SENDGRID_BASE_URL="+mail.URL(),
			"SHIPNOTIFY_TASK_QUEUE="+st.TaskQueue, "SHIPNOTIFY_LOG_LEVEL=warn"),
		args: map[bench.Kind][]string{
			bench.Full: {"worker"},
			bench.Bare: {"bench-worker", "--task-queue", "bench-bare-" + runID},
		},
		procs: map[bench.Kind]*exec.Cmd{},
	}
	defer workers.stopAll()
	for _, k := range []bench.Kind{bench.Bare, bench.Full} {
		if err := workers.Start(k); err != nil {
			return err
		}
	}
	r := &bench.Runner{
		Temporal: st.Temporal, Namespace: d.cfg.Temporal.Namespace, Starter: st, Mirror: st.Mirror, Mail: mail,
		BareQueue: "bench-bare-" + runID, Workers: workers, RunID: runID,
		Fanout: *fanout, Concurrency: *concurrency, Progress: e.stderr,
	}
	if *viaAPI {
		stop, err := benchAPI(r, st, d)
		if err != nil {
			return err
		}
		defer stop()
	}
	report := BenchReport{Machine: machine(), At: time.Now().UTC(), Options: map[string]any{
		"workloads": *workloads, "n": *n, "rate": *rateFlag, "duration": duration.String(), "hold_n": *holdN,
		"fanout": *fanout, "concurrency": *concurrency, "repeat": *repeat, "api": *viaAPI,
	}}
	// Each repetition alternates which path runs first, so neither always
	// meets a colder or a busier server.
	paths := func(rep int) []bench.Kind {
		if rep%2 == 1 {
			return []bench.Kind{bench.Full, bench.Bare}
		}
		return []bench.Kind{bench.Bare, bench.Full}
	}
	run := func(res bench.Result, err error) {
		report.Results = append(report.Results, res)
		if err != nil {
			report.Errors = append(report.Errors, fmt.Sprintf("%s/%s: %v", res.Workload, res.Kind, err))
		}
		fmt.Fprintf(e.stderr, "bench: %s %s done: n=%d delivered=%d p99=%s drain=%.1f/s sched=%.0f/s in %s\n",
			res.Workload, res.Kind, res.N, res.Delivered, res.LagP99, res.DrainRate, res.ScheduleRate, res.Elapsed.Round(time.Second))
	}
	for _, w := range strings.Split(*workloads, ",") {
		if ctx.Err() != nil {
			break
		}
		switch w {
		case "steady":
			count := int(*rateFlag * duration.Seconds())
			for rep := range *repeat {
				for _, k := range paths(rep) {
					run(r.Steady(ctx, k, count, *rateFlag))
				}
			}
		case "burst":
			for rep := range *repeat {
				kinds := paths(rep)
				if *viaAPI {
					// Each path goes first once every three runs.
					kinds = []bench.Kind{bench.Bare, bench.Full, bench.API}
					kinds = append(kinds[rep%3:], kinds[:rep%3]...)
				}
				for _, k := range kinds {
					run(r.Burst(ctx, k, *n))
				}
			}
		case "catchup":
			for rep := range *repeat {
				for _, k := range paths(rep) {
					run(r.Catchup(ctx, k, *n))
				}
			}
		case "hold":
			run(r.Hold(ctx, *holdN, 1000))
		}
	}
	report.Ratios = bench.Ratios(report.Results)
	report.APIRatios = bench.APIRatios(report.Results)
	if *out != "" {
		if err := writeJSON(*out, report); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else if err := bench.WriteTable(e.stdout, report.Results); err != nil {
		return err
	}
	if len(report.Errors) > 0 {
		return fmt.Errorf("bench: %s", strings.Join(report.Errors, "; "))
	}
	return nil
}

// benchAPI serves the tracker API over the runner's starter on a loopback
// port, with a key of its own and no rate limit (the benchmark measures the
// API's cost, not its limit), and points the runner's API path at it.
func benchAPI(r *bench.Runner, st *starter.Starter, d *deps) (stop func(), err error) {
	key, k, err := api.NewKey("bench", []api.Scope{api.ScopeSchedule})
	if err != nil {
		return nil, err
	}
	h, err := api.New(api.Options{Starter: st, Keys: []api.Key{k}, Rate: rate.Inf, Logger: d.logger})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("error listening for the benchmark's API: %w", err)
	}
	srv := api.NewServer(h, 0)
	go func() { _ = srv.Serve(ln) }()
	r.APIURL, r.APIKey = "http://"+ln.Addr().String(), key
	// Keep a connection per request in flight, as a tracker's pool does.
	r.HTTP = &http.Client{Timeout: api.DefaultRequestTimeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: r.Concurrency,
	}}
	return func() { _ = srv.Close() }, nil
}

func runBenchWorker(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "bench-worker", "bench-worker --task-queue Q")
	queue := fs.String("task-queue", "", "the baseline's task queue")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *queue == "" {
		return usagef("--task-queue is required")
	}
	return withTemporal(ctx, e, func(d *deps, tc client.Client) error {
		worker.SetCacheSize(d.cfg.WorkerCacheSize) // as the real worker, for a fair comparison
		w := sdkworker.New(tc, *queue, sdkworker.Options{})
		bench.RegisterBare(w)
		if err := w.Start(); err != nil {
			return err
		}
		<-ctx.Done()
		w.Stop()
		return nil
	})
}

// processWorkers runs each kind's worker as a child process of this binary,
// so its memory can be read on its own.
type processWorkers struct {
	env   []string
	args  map[bench.Kind][]string
	mu    sync.Mutex
	procs map[bench.Kind]*exec.Cmd
}

func (p *processWorkers) Start(k bench.Kind) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, p.args[k]...)
	cmd.Env, cmd.Stderr = p.env, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("error starting the %s worker: %w", k, err)
	}
	p.mu.Lock()
	p.procs[k] = cmd
	p.mu.Unlock()
	return nil
}

func (p *processWorkers) Stop(k bench.Kind) {
	p.mu.Lock()
	cmd := p.procs[k]
	delete(p.procs, k)
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

func (p *processWorkers) stopAll() {
	for _, k := range []bench.Kind{bench.Bare, bench.Full} {
		p.Stop(k)
	}
}

// RSS reads VmRSS from /proc.
func (p *processWorkers) RSS(k bench.Kind) int64 {
	p.mu.Lock()
	cmd := p.procs[k]
	p.mu.Unlock()
	if cmd == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func withSearchPath(dbURL, schema string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func machine() string {
	host, _ := os.Hostname()
	cpus := 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cpus = strings.Count(string(b), "processor\t:")
	}
	return fmt.Sprintf("%s, %d CPUs", host, cpus)
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
