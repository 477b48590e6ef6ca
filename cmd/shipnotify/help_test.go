package main

import (
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// Issue 35: every usage line names every flag its command takes (--help's
// first lines are what a user reads), and a command of subcommands says
// where their flags are instead of "It takes no flags".
func TestEveryUsageLineNamesItsFlags(t *testing.T) {
	t.Parallel()
	c := cmdline{env: map[string]string{}}
	invocations := [][]string{{"outbox", "list"}, {"outbox", "retry"}, {"suppressions", "list"}, {"suppressions", "remove"}}
	for _, name := range shipnotify.Commands() {
		// capacity names its measured figures' flags together ("[a
		// measured figure's flag]").
		if name != "capacity" {
			invocations = append(invocations, []string{name})
		}
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	for _, inv := range invocations {
		code, stdout, stderr := c.run(t, "", append(inv, "--help")...)
		what := strings.Join(inv, " ")
		require.Equal(t, 0, code, "%s: %s", what, stderr)
		usage, _, _ := strings.Cut(stdout, "\n\n")
		require.True(t, strings.HasPrefix(usage, "Usage: shipnotify "+what), "%s: %s", what, stdout)
		for _, m := range flagLine.FindAllStringSubmatch(stdout, -1) {
			name := m[1]
			// A one-letter flag is written -f.
			want := "--" + name
			if len(name) == 1 {
				want = "-" + name
			}
			require.Regexp(t, regexp.QuoteMeta(want)+`\b`, usage, "%s --help: the usage line leaves out %s", what, want)
		}
	}
	for _, group := range []struct{ name, first, second string }{{"outbox", "list", "retry"}, {"suppressions", "list", "remove"}} {
		code, stdout, stderr := c.run(t, "", group.name, "--help")
		require.Equal(t, 0, code, stderr)
		require.NotContains(t, stdout, "takes no flags", group.name)
		require.Contains(t, stdout, "Each subcommand takes its own flags: shipnotify "+group.name+" "+group.first+" --help, shipnotify "+
			group.name+" "+group.second+" --help.", group.name)
	}
}

// Issue 35: codec-server's defaults follow the dev environment
// (scripts/dev.sh env), as the demo's do: it listens where the Web UI was
// pointed and lets that Web UI's origin in.
func TestCodecServerFollowsTheDevEnvironment(t *testing.T) {
	t.Parallel()
	port := testenv.FreePort(t)
	ui := "http://localhost:" + strconv.Itoa(testenv.FreePort(t))
	env := map[string]string{
		"SHIPNOTIFY_CODEC_KEYS":     testenv.CodecKeys,
		"SHIPNOTIFY_DEV_CODEC_ADDR": "127.0.0.1:" + strconv.Itoa(port),
		"SHIPNOTIFY_DEV_UI_URL":     ui,
	}
	code, stdout, stderr := cmdline{env: env}.run(t, "", "codec-server", "--help")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `(default "`+ui+`")`)
	_, stdout, _ = cmdline{env: map[string]string{}}.run(t, "", "codec-server", "--help")
	require.Contains(t, stdout, `(default "http://localhost:8233")`, "without it, the dev server's default Web UI")

	startCommandWith(t, env, "codec-server", "--insecure-loopback")
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			_ = conn.Close()
			break
		}
		require.True(t, time.Now().Before(deadline), "codec-server not listening on %s in 30 s: %v", addr, err)
		<-time.After(50 * time.Millisecond)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodOptions, "http://"+addr+"/decode", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", ui)
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, ui, resp.Header.Get("Access-Control-Allow-Origin"))
}
