package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go runs on (the kernel scales to it whatever
// its own HZ).
const clockTicks = 100

// procStat is what CPU accounting needs from one /proc/<pid>/stat line.
type procStat struct {
	pid, ppid int
	// ticks is utime+stime+cutime+cstime: the process's own CPU and that
	// of the children it has waited for (a postmaster's exited backends);
	// own is utime+stime alone.
	ticks, own int64
}

// parseStat reads a /proc/<pid>/stat line. The command name is in
// parentheses and may hold spaces or parentheses itself, so the fields are
// counted from the last ')'.
func parseStat(line string) (procStat, error) {
	open, closing := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || closing < open {
		return procStat{}, errors.New("no command name")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return procStat{}, fmt.Errorf("error reading the pid: %w", err)
	}
	// After the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(line[closing+1:])
	if len(f) < 15 {
		return procStat{}, errors.New("too few fields")
	}
	s := procStat{pid: pid}
	if s.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("error reading the parent pid: %w", err)
	}
	for i, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("error reading the CPU times: %w", err)
		}
		s.ticks += n
		if i < 2 {
			s.own += n
		}
	}
	return s, nil
}

// TreeCPU is the CPU seconds the process root and its descendants have
// used so far, from /proc under procRoot ("/proc"). A descendant that
// exited and was waited for is in its parent's cutime/cstime.
func TreeCPU(procRoot string, root int) (float64, error) {
	dirs, err := filepath.Glob(filepath.Join(procRoot, "[0-9]*", "stat"))
	if err != nil {
		return 0, err
	}
	children := map[int][]procStat{}
	var top *procStat
	for _, path := range dirs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited while we looked
		}
		s, err := parseStat(string(b))
		if err != nil {
			return 0, fmt.Errorf("error reading %s: %w", path, err)
		}
		if s.pid == root {
			top = &s
		}
		children[s.ppid] = append(children[s.ppid], s)
	}
	if top == nil {
		return 0, fmt.Errorf("process %d is not running", root)
	}
	ticks := int64(0)
	queue := []procStat{*top}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		ticks += s.ticks
		queue = append(queue, children[s.pid]...)
	}
	return float64(ticks) / clockTicks, nil
}

// ProcessCPU is the CPU seconds one process has used so far: its own
// (utime+stime), and with the children it has waited for. It reads one
// file, so a sampler can afford it every second; a process with running
// children of its own wants TreeCPU. The benchmark's own process reads
// its own alone, since its children (the product's processes) are
// counted apart.
func ProcessCPU(procRoot string, pid int) (own, withChildren float64, err error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, fmt.Errorf("process %d is not running: %w", pid, err)
	}
	s, err := parseStat(string(b))
	if err != nil {
		return 0, 0, fmt.Errorf("error reading the CPU of process %d: %w", pid, err)
	}
	return float64(s.own) / clockTicks, float64(s.ticks) / clockTicks, nil
}

// PIDFromFile reads a pid file: its first line (a pid file written by
// scripts/dev.sh or engine.sh, or PostgreSQL's postmaster.pid).
func PIDFromFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("error reading a pid from %s: %w", path, err)
	}
	return pid, nil
}

// cpuMark is the CPU seconds each process had used at one instant; nil
// where it could not be read.
type cpuMark struct {
	server, worker, postgres, serve *float64
}

func (r *Runner) cpuNow(kind Kind) cpuMark {
	read := func(f func() (float64, error)) *float64 {
		if f == nil {
			return nil
		}
		s, err := f()
		if err != nil {
			r.logf("%v", err)
			return nil
		}
		return &s
	}
	w := r.Workers.CPU(kind.Worker())
	return cpuMark{server: read(r.ServerCPU), worker: &w, postgres: read(r.PostgresCPU), serve: read(r.ServeCPU)}
}

// since is the CPU used from before to m.
func (m cpuMark) since(before cpuMark) CPU {
	diff := func(a, b *float64) *float64 {
		if a == nil || b == nil {
			return nil
		}
		d := math.Round((*a-*b)*100) / 100 // ticks are hundredths
		return &d
	}
	return CPU{Server: diff(m.server, before.server), Worker: diff(m.worker, before.worker), Postgres: diff(m.postgres, before.postgres),
		Serve: diff(m.serve, before.serve)}
}

// ProcessRSS is a running process's resident memory in bytes (VmRSS), 0
// when it cannot be read.
func ProcessRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
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

// MachineCPU is the CPU seconds the whole machine has been busy since it
// booted, from the first line of /proc/stat under procRoot: user, nice,
// system, irq, softirq and steal (guest time is inside user), not idle or
// iowait. Beside the parts a benchmark measures it shows what else ran.
func MachineCPU(procRoot string) (float64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "stat"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(first)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("error reading %s: no cpu line", filepath.Join(procRoot, "stat"))
	}
	var busy int64
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("error reading the machine's CPU times: %w", err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return float64(busy) / clockTicks, nil
}
