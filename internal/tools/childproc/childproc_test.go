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

// procState reads a process's state letter from /proc ("T" when stopped).
func procState(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

// Pause freezes the process, and its children, until Resume; a paused
// process is still alive, and SIGKILL still ends it.
func TestPauseFreezesTheGroupUntilResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	child := filepath.Join(dir, "child")
	p := New(os.Environ(), nil, "sh", "-c", "sleep 60 & echo $! > "+child+"; wait")
	require.ErrorIs(t, p.Pause(), ErrNotRunning)
	require.NoError(t, p.Start())
	t.Cleanup(p.Kill)
	var kid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(child)
		kid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && kid > 0
	}, 30*time.Second, 10*time.Millisecond)

	require.NoError(t, p.Pause())
	for _, pid := range []int{p.Pid(), kid} {
		require.Eventually(t, func() bool { return procState(pid) == "T" }, 30*time.Second, 10*time.Millisecond, "pid %d stopped", pid)
	}
	require.True(t, p.Alive())
	require.NoError(t, p.Resume())
	for _, pid := range []int{p.Pid(), kid} {
		require.Eventually(t, func() bool { return procState(pid) == "S" }, 30*time.Second, 10*time.Millisecond, "pid %d runs again", pid)
	}
	require.NoError(t, p.Pause())
	p.Kill()
	require.False(t, p.Alive(), "a paused process is killed all the same")
}

// SetEnv is the environment of the next start, not of the running one.
func TestSetEnvTakesEffectAtTheNextStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "seen")
	p := New([]string{"SEEN=one"}, nil, "/bin/sh", "-c", "echo $SEEN >> "+file)
	require.NoError(t, p.Start())
	<-p.Exited()
	p.SetEnv([]string{"SEEN=two"})
	require.NoError(t, p.Start())
	<-p.Exited()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\n", string(b))
}
