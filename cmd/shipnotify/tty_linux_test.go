package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/cli"
)

// openPTY opens a pseudo-terminal: its controlling side, and the terminal
// a program reads from.
func openPTY(t *testing.T) (control, term *os.File) {
	t.Helper()
	control, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = control.Close() })
	var unlock int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, control.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock)))
	require.Zero(t, errno)
	var n uint32
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, control.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	require.Zero(t, errno)
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = term.Close() })
	return control, term
}

// Issue 35: schedule without -f, its stdin a terminal, says it is reading
// the update from it instead of waiting in silence; from a pipe or a file it
// says nothing.
func TestScheduleSaysItReadsATerminal(t *testing.T) {
	t.Parallel()
	control, term := openPTY(t)
	require.True(t, isTerminal(term))
	devNull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devNull.Close()
	require.False(t, isTerminal(devNull), "/dev/null is a character device, not a terminal")

	// What a user types: a line that is no update, then Ctrl-D.
	_, err = control.WriteString("{}\n\x04")
	require.NoError(t, err)
	var stdout, stderr strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = shipnotify.Run(ctx, []string{"schedule"}, cli.Env{Lookup: func(string) (string, bool) { return "", false },
		Stdin: term, Stdout: &stdout, Stderr: &stderr})
	require.Equal(t, 2, shipnotify.ExitCode(err, &stderr), stderr.String())
	require.Contains(t, stderr.String(), "shipnotify schedule: reading the update's JSON from the terminal; end it with Ctrl-D")

	code, _, errOut := cmdline{env: map[string]string{}}.run(t, "{}", "schedule")
	require.Equal(t, 2, code)
	require.NotContains(t, errOut, "from the terminal")
}
