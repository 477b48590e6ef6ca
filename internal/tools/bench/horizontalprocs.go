package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/shipnotify/shipnotify/internal/tools/childproc"
)

// The horizontal workload runs the product's own binary: N `shipnotify
// worker` processes, the thing it scales, and the `shipnotify serve`
// replicas, each a child process it can stop, SIGKILL and start again.

// Log lines the product prints at info (its default level) once a process
// does its job: the worker's pollers run, serve answers with its endpoints
// registered and its relay and escalator running.
const (
	workerReadyMsg = "worker started"
	serveReadyMsg  = "serving the API"
)

// procStartTimeout bounds how long a product process may take to say it
// is ready; procStopTimeout how long a SIGTERMed one may take to stop
// (the worker's own grace for sends in flight is inside it).
const (
	procStartTimeout = time.Minute
	procStopTimeout  = 2 * time.Minute
)

// logTail keeps a process's last lines for an error's evidence, and hands
// the time of the next line carrying a message to whoever waits for it.
type logTail struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	waits   map[string]chan time.Time
}

const logTailLines = 40

func newLogTail() *logTail { return &logTail{waits: map[string]chan time.Time{}} }

// expect arms a wait for the next line whose msg is msg.
func (l *logTail) expect(msg string) <-chan time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan time.Time, 1)
	l.waits[msg] = ch
	return ch
}

func (l *logTail) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		line, rest, ok := bytes.Cut(l.partial, []byte("\n"))
		if !ok {
			break
		}
		l.partial = rest
		l.lines = append(l.lines, string(line))
		if len(l.lines) > logTailLines {
			l.lines = l.lines[len(l.lines)-logTailLines:]
		}
		for msg, ch := range l.waits {
			if at, ok := logLineAt(line, msg); ok {
				ch <- at
				delete(l.waits, msg)
			}
		}
	}
	// A copy of what is left, so the buffer does not grow with the log.
	l.partial = append([]byte(nil), l.partial...)
	return len(b), nil
}

// logLineAt reports whether line is a JSON log record with message msg,
// and its time (now, if it has none that parses).
func logLineAt(line []byte, msg string) (time.Time, bool) {
	if !bytes.Contains(line, []byte(msg)) {
		return time.Time{}, false
	}
	var rec struct {
		Time time.Time `json:"time"`
		Msg  string    `json:"msg"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Msg != msg {
		return time.Time{}, false
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	return rec.Time, true
}

// String is the last lines.
func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// productProc is one product process: its command, its log and its own
// addresses (a serve replica's API and ops ports).
type productProc struct {
	name string
	proc *childproc.Process
	log  *logTail
	// readyMsg is the log message that says it is ready.
	readyMsg string
}

func newProductProc(name, bin, command, readyMsg string, env []string) *productProc {
	log := newLogTail()
	return &productProc{name: name, proc: childproc.New(env, log, bin, command), log: log, readyMsg: readyMsg}
}

// start starts the process and waits until it logs that it is ready,
// returning when it was.
func (p *productProc) start() (time.Time, error) {
	ready := p.log.expect(p.readyMsg)
	if err := p.proc.Start(); err != nil {
		return time.Time{}, err
	}
	select {
	case at := <-ready:
		return at, nil
	case <-p.proc.Exited():
		return time.Time{}, fmt.Errorf("error starting %s: it exited before it was ready:\n%s", p.name, p.log)
	case <-time.After(procStartTimeout):
		p.proc.Kill()
		return time.Time{}, fmt.Errorf("error starting %s: it did not log %q within %s:\n%s", p.name, p.readyMsg, procStartTimeout, p.log)
	}
}

// stop stops it as a deploy does.
func (p *productProc) stop() error {
	if err := p.proc.Stop(procStopTimeout); err != nil {
		return fmt.Errorf("error stopping %s: %w:\n%s", p.name, err, p.log)
	}
	return nil
}

// cpu is what it has used so far, its exited runs included.
func (p *productProc) cpu() float64 {
	total := p.proc.Spent().Seconds()
	if pid := p.proc.Pid(); pid != 0 {
		if _, s, err := ProcessCPU("/proc", pid); err == nil {
			total += s
		}
	}
	return total
}

// rss is its resident memory in bytes (0 when it is not running).
func (p *productProc) rss() int64 {
	pid := p.proc.Pid()
	if pid == 0 {
		return 0
	}
	return ProcessRSS(pid)
}

// procSet is a set of product processes of one command.
type procSet []*productProc

// startAll starts those of ps not running, together, and returns the
// earliest instant one was ready (zero when all were running).
func (ps procSet) startAll() (time.Time, error) {
	var mu sync.Mutex
	var first time.Time
	var errs []error
	var wg sync.WaitGroup
	for _, p := range ps {
		if p.proc.Alive() {
			continue
		}
		wg.Go(func() {
			at, err := p.start()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if first.IsZero() || at.Before(first) {
				first = at
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return time.Time{}, errs[0]
	}
	return first, nil
}

// stopAll stops those running, together.
func (ps procSet) stopAll() error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			if err := p.stop(); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// killAll SIGKILLs every one (the end of the benchmark, or a failure).
func (ps procSet) killAll() {
	for _, p := range ps {
		p.proc.Kill()
	}
}

func (ps procSet) cpu() float64 {
	total := 0.0
	for _, p := range ps {
		total += p.cpu()
	}
	return total
}

// workerFleet is the Workers of the horizontal workload: its size of the
// product's worker processes, all on the one task queue. Runner's Start
// and Stop start and stop every one of them (a catch-up's outage), and
// its CPU is theirs, every process that ever ran counted.
type workerFleet struct {
	all procSet

	mu   sync.Mutex
	size int
}

// resize makes exactly n workers run: those beyond n stopped, the first n
// started.
func (f *workerFleet) resize(n int) error {
	if n < 1 || n > len(f.all) {
		return fmt.Errorf("error resizing the workers: %d of %d", n, len(f.all))
	}
	f.mu.Lock()
	f.size = n
	f.mu.Unlock()
	if err := f.all[n:].stopAll(); err != nil {
		return err
	}
	_, err := f.all[:n].startAll()
	return err
}

func (f *workerFleet) running() procSet {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.all[:f.size]
}

// Start starts the fleet's workers and returns the first one's ready
// instant: a catch-up drains from when the first could poll.
func (f *workerFleet) Start(Kind) (time.Time, error) { return f.running().startAll() }

func (f *workerFleet) Stop(Kind) { _ = f.running().stopAll() }

// RSS is the fleet's resident memory, summed.
func (f *workerFleet) RSS(Kind) int64 {
	var total int64
	for _, p := range f.running() {
		total += p.rss()
	}
	return total
}

// CPU is every worker process's, stopped and killed runs included.
func (f *workerFleet) CPU(Kind) float64 { return f.all.cpu() }
