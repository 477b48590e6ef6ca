package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// statLine is a /proc/<pid>/stat line with the given times (fields 14–17).
func statLine(pid, ppid int, comm string, utime, stime, cutime, cstime int) string {
	return fmt.Sprintf("%d (%s) S %d 1 1 0 -1 4194560 100 0 0 0 %d %d %d %d 20 0 1 0 100 1000 10",
		pid, comm, ppid, utime, stime, cutime, cstime)
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	s, err := parseStat(statLine(42, 7, "postgres: bench (idle) x", 100, 50, 30, 20))
	require.NoError(t, err, "a name with spaces and parentheses")
	require.Equal(t, procStat{pid: 42, ppid: 7, ticks: 200, own: 150}, s)
	for _, bad := range []string{"", "42 no name", "42 (x) S 7 1"} {
		_, err := parseStat(bad)
		require.Error(t, err, bad)
	}
}

// A process tree's CPU is its root's and every descendant's, each with
// the children it waited for; other processes are not in it.
func TestTreeCPU(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	write := func(pid int, line string) {
		dir := filepath.Join(proc, fmt.Sprint(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(line+"\n"), 0o644))
	}
	write(1, statLine(1, 0, "init", 5000, 5000, 0, 0))
	write(10, statLine(10, 1, "postgres", 100, 100, 250, 50)) // postmaster; exited backends in cutime/cstime
	write(11, statLine(11, 10, "postgres: walwriter", 10, 10, 0, 0))
	write(12, statLine(12, 10, "postgres: bench", 30, 20, 0, 0))
	write(13, statLine(13, 12, "child of a backend", 5, 5, 0, 0))
	write(20, statLine(20, 1, "temporal", 900, 100, 0, 0))
	got, err := TreeCPU(proc, 10)
	require.NoError(t, err)
	require.InDelta(t, 5.8, got, 1e-9, "(500 + 20 + 50 + 10) ticks at 100 a second")
	got, err = TreeCPU(proc, 20)
	require.NoError(t, err)
	require.InDelta(t, 10.0, got, 1e-9)
	_, err = TreeCPU(proc, 99)
	require.Error(t, err)
}

// On the real /proc: this process's CPU grows as it works (ticks are
// 10 ms, so it works until one is counted, within a deadline).
func TestTreeCPUOfThisProcess(t *testing.T) {
	t.Parallel()
	first, err := TreeCPU("/proc", os.Getpid())
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	sum := 0
	for {
		for i := range 1_000_000 {
			sum += i % 7
		}
		now, err := TreeCPU("/proc", os.Getpid())
		require.NoError(t, err)
		if now > first {
			return
		}
		require.True(t, time.Now().Before(deadline), "no CPU counted after 10 s of work (%d)", sum)
	}
}

func TestPIDFromFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// PostgreSQL's postmaster.pid: the pid, then the data directory and more.
	pm := filepath.Join(dir, "postmaster.pid")
	require.NoError(t, os.WriteFile(pm, []byte("4242\n/var/lib/pg\n1700000000\n54329\n"), 0o600))
	pid, err := PIDFromFile(pm)
	require.NoError(t, err)
	require.Equal(t, 4242, pid)
	bad := filepath.Join(dir, "pid")
	require.NoError(t, os.WriteFile(bad, []byte("not a pid\n"), 0o600))
	_, err = PIDFromFile(bad)
	require.Error(t, err)
}

// The machine's busy time leaves idle and iowait out.
func TestMachineCPU(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	stat := "cpu  1000 20 300 90000 500 7 8 5 40 0\ncpu0 500 10 150 45000 250 3 4 2 20 0\n"
	require.NoError(t, os.WriteFile(filepath.Join(proc, "stat"), []byte(stat), 0o644))
	got, err := MachineCPU(proc)
	require.NoError(t, err)
	require.InDelta(t, 13.4, got, 1e-9, "(1000 + 20 + 300 + 7 + 8 + 5) ticks")
	require.NoError(t, os.WriteFile(filepath.Join(proc, "stat"), []byte("intr 1 2 3\n"), 0o644))
	_, err = MachineCPU(proc)
	require.Error(t, err)
}
