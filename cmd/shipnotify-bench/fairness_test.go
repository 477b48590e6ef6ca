package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/cli"
)

// The defaults are issue 38's run; what cannot be run is a usage error
// naming the flag, before anything connects.
func TestFairnessFlags(t *testing.T) {
	t.Parallel()
	e := cli.Env{Lookup: func(string) (string, bool) { return "", false }, Stdout: io.Discard, Stderr: io.Discard}
	f, err := parseFairnessFlags(e, nil)
	require.NoError(t, err)
	require.Equal(t, 20000, f.noisy)
	require.Equal(t, 500, f.updateSize)
	require.Equal(t, 8, f.posters)
	require.Equal(t, 8, f.noisyMoves)
	require.Equal(t, 2*time.Second, f.quietEvery)
	require.Equal(t, 15*time.Second, f.quietLead)
	require.Equal(t, 20*time.Second, f.noisyLead)
	require.Positive(t, f.baseline, "the quiet tenant alone is the measure")

	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--noisy-reminders", "0"}, "--noisy-reminders"}, {[]string{"--update-size", "501"}, "--update-size"},
		{[]string{"--update-size", "0"}, "--update-size"}, {[]string{"--posters", "0"}, "--posters"},
		{[]string{"--noisy-lead", "0s"}, "--noisy-lead"}, {[]string{"--noisy-spread", "-1s"}, "--noisy-spread"},
		{[]string{"--noisy-moves", "-1"}, "--noisy-moves"}, {[]string{"--move-by", "0s"}, "--move-by"},
		{[]string{"--quiet-every", "0s"}, "--quiet-every"}, {[]string{"--quiet-lead", "500ms"}, "--quiet-lead"},
		{[]string{"--quiet-move-every", "-1"}, "--quiet-move-every"}, {[]string{"--baseline", "0s"}, "--baseline"},
		{[]string{"--drain-within", "0s"}, "--drain-within"}, {[]string{"--serves", "0"}, "--serves"},
		{[]string{"--workers", "0"}, "--workers"}, {[]string{"--provider", "sendgrid"}, "--provider"},
	} {
		code, _, stderr := cmdline{env: map[string]string{}}.run(t, "", append([]string{"fairness"}, tc.args...)...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.flag, "%v", tc.args)
	}
}
