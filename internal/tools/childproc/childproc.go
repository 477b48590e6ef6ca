// Package childproc runs the product's processes as children of a harness
// (a test, the soak, a benchmark) that must kill them and start them again:
// each in a process group of its own, so SIGKILL takes what it started
// too, with the CPU of its exited runs kept, since a benchmark counts what
// a killed process used.
package childproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ErrNotRunning is returned when a signal is sent to a process that is not
// running.
var ErrNotRunning = errors.New("the process is not running")

// Process is a child process that can be started, killed and started
// again, with the same command, environment and output each time.
type Process struct {
	name string
	args []string
	env  []string
	out  io.Writer
	// Dir and Credential, when set before Start, are the working directory
	// and the user the process runs as.
	Dir        string
	Credential *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// spent is the CPU the runs that have exited used, as the kernel
	// reported when each was waited for.
	spent time.Duration
}

// New returns the process name with args, run with exactly env, its
// stdout and stderr written to out (nil: discarded). It is not started.
func New(env []string, out io.Writer, name string, args ...string) *Process {
	if out == nil {
		out = io.Discard
	}
	return &Process{name: name, args: args, env: env, out: out}
}

// Start starts the process (again, once it has exited).
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !closed(p.done) {
		return fmt.Errorf("error starting %s: it is running", p.name)
	}
	cmd := exec.Command(p.name, p.args...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = p.env, p.Dir, p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.Credential}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("error starting %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		_ = cmd.Wait()
		p.mu.Lock()
		if st := cmd.ProcessState; st != nil {
			p.spent += st.UserTime() + st.SystemTime()
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Kill sends SIGKILL to the process group and waits for the process to
// die; it does nothing when the process is not running.
func (p *Process) Kill() {
	cmd, done := p.current()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM, as a deploy does, and waits up to within for the
// process to exit; then it is killed, and Stop says so.
func (p *Process) Stop(within time.Duration) error {
	cmd, done := p.current()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(within):
		p.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, within)
	}
}

// Pause stops the process group with SIGSTOP, as a long GC pause or a
// frozen node would: its connections stay open, and nothing it holds is
// let go or answered until Resume. SIGKILL still ends it.
func (p *Process) Pause() error { return p.signalGroup(syscall.SIGSTOP) }

// Resume lets a paused process group run again (SIGCONT).
func (p *Process) Resume() error { return p.signalGroup(syscall.SIGCONT) }

func (p *Process) signalGroup(sig syscall.Signal) error {
	cmd, _ := p.current()
	if cmd == nil {
		return fmt.Errorf("error signalling %s: %w", p.name, ErrNotRunning)
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("error signalling %s: %w", p.name, err)
	}
	return nil
}

// SetEnv replaces the environment the next Start runs the process with, as
// a deploy that changes a setting does; a running process keeps its own.
func (p *Process) SetEnv(env []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.env = env
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error {
	cmd, _ := p.current()
	if cmd == nil {
		return fmt.Errorf("error signalling %s: %w", p.name, ErrNotRunning)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("error signalling %s: %w", p.name, err)
	}
	return nil
}

// Alive reports whether the process runs: started, and not yet exited.
func (p *Process) Alive() bool {
	cmd, _ := p.current()
	return cmd != nil
}

// Pid is the running process's id, 0 when it is not running.
func (p *Process) Pid() int {
	cmd, _ := p.current()
	if cmd == nil {
		return 0
	}
	return cmd.Process.Pid
}

// Exited is closed once the current run has exited (nil before the first
// Start).
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Spent is the CPU time of the runs that have exited, however they ended
// (a SIGKILLed run's included).
func (p *Process) Spent() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spent
}

// current is the running command and its done channel; nil when none runs.
func (p *Process) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil || closed(p.done) {
		return nil, nil
	}
	return p.cmd, p.done
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
