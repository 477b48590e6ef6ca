package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/cli"
)

// The defaults are issue 24's run; what cannot be run is a usage error
// before anything connects.
func TestHorizontalFlags(t *testing.T) {
	t.Parallel()
	e := cli.Env{Lookup: func(string) (string, bool) { return "", false }, Stdout: io.Discard, Stderr: io.Discard}
	f, err := parseHorizontalFlags(e, nil)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3}, f.workers)
	require.Equal(t, 2, f.serves)
	require.Equal(t, 3000, f.n)
	require.Equal(t, []string{"burst", "catchup"}, f.workloads)
	require.True(t, f.kill)
	require.GreaterOrEqual(t, f.rounds, 2)

	for _, args := range [][]string{
		{"--workers", "1,0"}, {"--workers", "1,1"}, {"--workers", "two"}, {"--workloads", "steady"},
		{"--workloads", "burst,burst"}, {"--n", "0"}, {"--serves", "0"}, {"--rounds", "0"}, {"--kill-at", "1"},
		{"--kill-at", "0"}, {"--provider", "sendgrid"}, {"--restart-after", "-1s"},
	} {
		code, _, stderr := cmdline{env: map[string]string{}}.run(t, "", append([]string{"horizontal"}, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
}
