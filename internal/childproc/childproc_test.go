package childproc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ownTicks reads a process's utime+stime from /proc (0 if it is gone).
func ownTicks(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// A killed process can be started again, and the CPU its killed run used
// is kept: a benchmark that kills a worker still counts what it spent.
func TestAKilledRunsCPUIsKeptAndTheProcessStartsAgain(t *testing.T) {
	t.Parallel()
	p := New(os.Environ(), nil, "sh", "-c", "while :; do :; done")
	require.NoError(t, p.Start())
	t.Cleanup(p.Kill)
	require.True(t, p.Alive())
	require.Error(t, p.Start(), "a running process is not started twice")
	pid := p.Pid()
	require.Eventually(t, func() bool { return ownTicks(pid) >= 5 }, 30*time.Second, 10*time.Millisecond, "the loop used CPU")

	p.Kill()
	require.False(t, p.Alive())
	require.Zero(t, p.Pid())
	require.GreaterOrEqual(t, p.Spent(), 50*time.Millisecond, "the killed run's CPU is kept")

	spent := p.Spent()
	require.NoError(t, p.Start(), "started again after the kill")
	require.NotEqual(t, pid, p.Pid())
	p.Kill()
	require.GreaterOrEqual(t, p.Spent(), spent, "runs add up")
}

// Stop asks with SIGTERM; a process that ignores it is killed once the
// wait is over, and Stop says so.
func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	t.Parallel()
	polite := New(os.Environ(), nil, "sleep", "60")
	require.NoError(t, polite.Start())
	t.Cleanup(polite.Kill)
	require.NoError(t, polite.Stop(30*time.Second))
	require.False(t, polite.Alive())

	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	stubborn := New(os.Environ(), nil, "sh", "-c", "trap '' TERM; touch "+ready+"; while :; do sleep 1; done")
	require.NoError(t, stubborn.Start())
	t.Cleanup(stubborn.Kill)
	require.Eventually(t, func() bool { _, err := os.Stat(ready); return err == nil }, 30*time.Second, 10*time.Millisecond)
	err := stubborn.Stop(200 * time.Millisecond)
	require.ErrorContains(t, err, "did not stop")
	require.False(t, stubborn.Alive())
	require.ErrorIs(t, stubborn.Signal(os.Interrupt), ErrNotRunning)
}
