package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/internal/tools/childproc"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the shipnotify command once per test binary and returns its
// path. SHIPNOTIFY_TEST_BINARY names another build to run instead, so the
// tests that drive the product from outside can be run against an earlier
// release (to see them fail where it had the bug they guard against).
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("SHIPNOTIFY_TEST_BINARY"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shipnotify-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "shipnotify")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/shipnotify/shipnotify/cmd/shipnotify").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Process is a child process a test can kill and restart (a
// childproc.Process whose failures fail the test, its output kept in Log).
type Process struct {
	t    testing.TB
	name string
	proc *childproc.Process
	log  *SyncBuffer
}

// StartProcess starts name with args and exactly env; its output is kept
// in Log. It is killed when the test ends.
func StartProcess(t testing.TB, env []string, name string, args ...string) *Process {
	t.Helper()
	log := &SyncBuffer{}
	p := &Process{t: t, name: name, proc: childproc.New(env, log, name, args...), log: log}
	p.Start()
	t.Cleanup(p.Kill)
	return p
}

// Start (re)starts the process.
func (p *Process) Start() {
	p.t.Helper()
	if err := p.proc.Start(); err != nil {
		p.t.Fatalf("starting %s: %v", p.name, err)
	}
}

// Kill sends SIGKILL to the process group and waits for the process to die.
func (p *Process) Kill() { p.proc.Kill() }

// Stop sends SIGTERM, as a deploy does, and waits for the process to exit
// (at most a minute; then it is killed and the test fails).
func (p *Process) Stop() {
	p.t.Helper()
	if err := p.proc.Stop(time.Minute); err != nil {
		p.t.Fatalf("%v:\n%s", err, p.Log())
	}
}

// Signal sends sig to the process (SIGHUP, to make serve re-read its key
// files).
func (p *Process) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.proc.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// Pause freezes the process (SIGSTOP to its group) until Resume: a long
// GC pause, a frozen node. It is still alive, holding what it held. It
// fails (childproc.ErrNotRunning) when the process is not running; it
// does not fail the test, so another goroutine than the test's may call
// it.
func (p *Process) Pause() error { return p.proc.Pause() }

// Resume lets a paused process run again (SIGCONT).
func (p *Process) Resume() error { return p.proc.Resume() }

// SetEnv is the environment the next Start runs the process with.
func (p *Process) SetEnv(env []string) { p.proc.SetEnv(env) }

// Pid is the running process's id, 0 when it is not running.
func (p *Process) Pid() int { return p.proc.Pid() }

// Log is what the process printed.
func (p *Process) Log() string { return p.log.String() }

// Alive reports whether the process runs (it was started and has not
// exited).
func (p *Process) Alive() bool { return p.proc.Alive() }

// devPortBands are the ports scripts/dev.sh's servers take (its defaults
// 7233, 8233, 54329 and 8081, and the ports beside them that other
// worktrees on the machine are given): a private server must not take one
// while that dev server is down for a moment, or it could not start again.
// The kernel's ephemeral range holds the PostgreSQL band.
var devPortBands = [][2]int{{7200, 7399}, {8000, 8399}, {54300, 54499}}

func inDevBand(port int) bool {
	for _, b := range devPortBands {
		if port >= b[0] && port <= b[1] {
			return true
		}
	}
	return false
}

// FreePort returns a loopback port nothing listens on right now, outside
// the dev servers' bands.
func FreePort(t testing.TB) int {
	t.Helper()
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ln) // held until we return: not handed out again
		if port := ln.Addr().(*net.TCPAddr).Port; !inDevBand(port) {
			return port
		}
	}
}

// DevServer is a private Temporal dev server, file-backed, that a test may
// kill and restart without disturbing the shared one.
type DevServer struct {
	*Process
	Address string
}

// StartDevServer starts a private dev server (the CLI from
// SHIPNOTIFY_DEV_TEMPORAL_BIN) with our search attributes, and waits for it.
// dynamicConfig are KEY=VALUE settings (values JSON) for the server.
func StartDevServer(t testing.TB, dynamicConfig ...string) *DevServer {
	t.Helper()
	bin := need(t, "SHIPNOTIFY_DEV_TEMPORAL_BIN")
	// The dev server picks its internal services' ports itself, and
	// another process may bind one between its pick and its bind: it then
	// exits before it answers, and a new start picks again.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		s := startDevServer(t, bin, dynamicConfig)
		err := s.waitHealthy()
		if err == nil {
			return s
		}
		if attempt == attempts || !strings.Contains(s.Log(), "address already in use") {
			t.Fatalf("%v:\n%s", err, s.Log())
		}
		t.Logf("dev server lost a port to another process; starting it again (%d of %d)", attempt+1, attempts)
		s.Kill()
	}
}

func startDevServer(t testing.TB, bin string, dynamicConfig []string) *DevServer {
	t.Helper()
	port := FreePort(t)
	db := filepath.Join(t.TempDir(), "temporal.db")
	args := []string{"server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(port),
		"--http-port", strconv.Itoa(FreePort(t)), "--metrics-port", strconv.Itoa(FreePort(t)),
		"--db-filename", db, "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal",
		"--log-level", "error"}
	for _, sa := range []string{"ShipmentId=Keyword", "UpdateId=Keyword", "ReminderState=Keyword", "DueAt=Datetime"} {
		args = append(args, "--search-attribute", sa)
	}
	// As scripts/dev.sh starts the shared one.
	args = append(args, "--dynamic-config-value", "system.enableActivityEagerExecution=true",
		"--dynamic-config-value", "matching.enableFairness=true")
	for _, kv := range dynamicConfig {
		args = append(args, "--dynamic-config-value", kv)
	}
	return &DevServer{Process: StartProcess(t, os.Environ(), bin, args...), Address: fmt.Sprintf("127.0.0.1:%d", port)}
}

// WaitHealthy waits until the server answers.
func (s *DevServer) WaitHealthy(t testing.TB) {
	t.Helper()
	if err := s.waitHealthy(); err != nil {
		t.Fatalf("%v:\n%s", err, s.Log())
	}
}

// waitHealthy waits until the server answers, at most a minute; an error
// says it exited or did not answer.
func (s *DevServer) waitHealthy() error {
	bin := os.Getenv("SHIPNOTIFY_DEV_TEMPORAL_BIN")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if exec.Command(bin, "operator", "cluster", "health", "--address", s.Address).Run() == nil {
			return nil
		}
		select {
		case <-s.proc.Exited():
			return errors.New("dev server exited")
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("dev server not healthy in 60 s")
		}
	}
}

// Cluster is a private PostgreSQL cluster a test may stop and start.
type Cluster struct {
	t    testing.TB
	bin  string
	data string
	port int
	uid  *syscall.Credential
	URL  string
	// frozen are the processes Freeze stopped.
	mu     sync.Mutex
	frozen []int
}

// StartCluster initialises and starts a private cluster (as the postgres
// user when running as root; PostgreSQL refuses root).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	need(t, "TEST_DATABASE_URL") // same prerequisites as the shared one
	bin, err := pgBinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "shipnotify-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	pg := &Cluster{t: t, bin: bin, data: filepath.Join(root, "data"), port: FreePort(t)}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(pg.data, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(pg.data, uid, gid); err != nil {
			t.Fatal(err)
		}
		pg.uid = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	pg.run("initdb", "-D", pg.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")
	pg.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	pg.Start()
	t.Cleanup(pg.Stop)
	return pg
}

// clusterMaxConnections sizes a private cluster for what tests start on
// it at the binary's defaults, as the chart's connection budget does for a
// release: two workers, two serve replicas, and room for the CLI calls and
// the test's own pools beside them. PostgreSQL's own 100 is less than one
// worker's pool: a soak whose worker grew its pool in a stall left no
// connection for reconcile.
var clusterMaxConnections = 2*cli.WorkerPoolSize(config.DefaultWorkerMaxActivities) + 2*cli.ServePoolSize + 100

// Start starts the cluster and waits until it accepts connections.
func (pg *Cluster) Start() {
	pg.t.Helper()
	pg.run("pg_ctl", "-D", pg.data, "-w", "-t", "60", "-l", filepath.Join(pg.data, "server.log"),
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories='' -c max_connections=%d",
			pg.port, clusterMaxConnections), "start")
}

// Freeze stops every process of the cluster with SIGSTOP, the postmaster
// first so it forks no new backend: a frozen node, whose connections stay
// open and answer nothing until Thaw.
// It fails when the cluster is not running; it does not fail the test, so
// another goroutine than the test's may call it (never beside Start, Stop
// or Crash).
func (pg *Cluster) Freeze() error {
	pm, err := pg.postmaster()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pm, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("error freezing PostgreSQL: %w", err)
	}
	frozen := append([]int{pm}, childrenOf(pm)...)
	for _, pid := range frozen[1:] {
		_ = syscall.Kill(pid, syscall.SIGSTOP) // one may have exited meanwhile
	}
	pg.mu.Lock()
	pg.frozen = frozen
	pg.mu.Unlock()
	return nil
}

// Thaw lets a frozen cluster run again (SIGCONT), its backends first.
func (pg *Cluster) Thaw() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	for i := len(pg.frozen) - 1; i >= 0; i-- {
		_ = syscall.Kill(pg.frozen[i], syscall.SIGCONT)
	}
	pg.frozen = nil
}

// postmaster reads the running postmaster's pid from its pid file.
func (pg *Cluster) postmaster() (int, error) {
	b, err := os.ReadFile(filepath.Join(pg.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("error reading the postmaster's pid: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("error reading the postmaster's pid: %w", err)
	}
	return pid, nil
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis: state, ppid.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// Stop stops the cluster (fast shutdown: connections are cut).
func (pg *Cluster) Stop() {
	pg.t.Helper()
	pg.Thaw()
	cmd := pg.command("pg_ctl", "-D", pg.data, "-m", "fast", "-w", "status")
	if cmd.Run() != nil {
		return // not running
	}
	pg.run("pg_ctl", "-D", pg.data, "-m", "fast", "-w", "stop")
}

// Crash stops the cluster as a power cut would (immediate shutdown: no
// checkpoint, crash recovery at the next start).
func (pg *Cluster) Crash() {
	pg.t.Helper()
	pg.Thaw()
	pg.run("pg_ctl", "-D", pg.data, "-m", "immediate", "-w", "stop")
}

// Pool connects to the cluster's postgres database.
func (pg *Cluster) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func (pg *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(pg.bin, name), args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.uid}
	return cmd
}

func (pg *Cluster) run(name string, args ...string) {
	pg.t.Helper()
	if out, err := pg.command(name, args...).CombinedOutput(); err != nil {
		pg.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func pgBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL's initdb not found (scripts/dev.sh install)")
}

// Env is the environment a shipnotify process of this stack runs with.
func (s *Stack) Env(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"TEMPORAL_ADDRESS=" + s.TemporalAddress,
		"TEMPORAL_NAMESPACE=default",
		"TEMPORAL_CONFIG_FILE=/nonexistent",
		"DATABASE_URL=" + s.DB.ProductURL(),
		"SHIPNOTIFY_TASK_QUEUE=" + s.TaskQueue,
		// Processes start reminders as the stack's starter does.
		"SHIPNOTIFY_DELAYED_START=" + strconv.FormatBool(s.Starter.DelayedStart),
		"SENDGRID_API_KEY=" + MailAPIKey,
		"SENDGRID_BASE_URL=" + s.Mail.URL(),
		"SHIPNOTIFY_CODEC_KEYS=" + CodecKeys,
		"SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK=true",
		// Several workers run at once; each serves its metrics on a free port.
		"SHIPNOTIFY_METRICS_ADDR=127.0.0.1:0",
		"SHIPNOTIFY_UNCONFIRMED_SEND_WAIT=" + s.EvidenceWait.String(),
	}
	return append(env, extra...)
}

// IDKeys are the keys the product's processes started with env seal the
// ids tenants see with (SHIPNOTIFY_ID_KEY, the last one set, else the
// development key), so a tool can match what a tracker received to the
// outbox row it came from.
func IDKeys(env []string) (*opaque.Keys, error) {
	raw := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SHIPNOTIFY_ID_KEY="); ok {
			raw = v
		}
	}
	if raw == "" {
		return opaque.Development(), nil
	}
	k, err := opaque.ParseKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("SHIPNOTIFY_ID_KEY: %w", err)
	}
	return k, nil
}
