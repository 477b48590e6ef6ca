// Package scripts_test runs the project's shell scripts as a user does, in a
// copy of the checkout's scripts, against the real servers they start.
package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// devScript is scripts/dev.sh copied into a fresh directory: its .dev/ state
// is the test's own, not the checkout's.
type devScript struct {
	t    *testing.T
	path string
}

func newDevScript(t *testing.T) devScript {
	t.Helper()
	// What `make test` provides; without it the script would install it.
	if os.Getenv("SHIPNOTIFY_DEV_TEMPORAL_BIN") == "" {
		testenv.Missing(t, "SHIPNOTIFY_DEV_TEMPORAL_BIN is not set; run the tests with `make test` (scripts/dev.sh install installs the Temporal CLI)")
	}
	if _, err := exec.LookPath("initdb"); err != nil && !hasDebianPostgres() {
		testenv.Missing(t, "PostgreSQL is not installed; scripts/dev.sh install installs it")
	}
	root := t.TempDir()
	src, err := os.ReadFile("dev.sh")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "scripts"), 0o755))
	path := filepath.Join(root, "scripts", "dev.sh")
	require.NoError(t, os.WriteFile(path, src, 0o755))
	d := devScript{t: t, path: path}
	t.Cleanup(func() {
		_, _ = d.exec(nil, "down")
		// As root the cluster lives under /tmp (the postgres user cannot
		// enter the test's directory): remove it with its port and log.
		if data, err := os.ReadFile(filepath.Join(root, ".dev", "pg.dir")); err == nil {
			dir := strings.TrimSpace(string(data))
			for _, p := range []string{dir, dir + ".port", dir + ".log"} {
				_ = os.RemoveAll(p)
			}
		}
	})
	return d
}

func hasDebianPostgres() bool {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	return len(m) > 0
}

// exec runs the script with the process's environment less anything that
// would point it elsewhere (the dev servers' variables, an outer dev.sh's
// env), plus env; it returns stdout.
func (d devScript) exec(env []string, args ...string) (string, error) {
	out, _, err := d.execErr(env, args...)
	return out, err
}

// execErr is exec, with what the script said on stderr.
func (d devScript) execErr(env []string, args ...string) (string, string, error) {
	var clean []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SHIPNOTIFY_") || strings.HasPrefix(name, "TEMPORAL_") ||
			strings.HasSuffix(name, "DATABASE_URL") {
			continue
		}
		clean = append(clean, kv)
	}
	cmd := exec.Command("bash", append([]string{d.path}, args...)...)
	cmd.Env = append(clean, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		d.t.Logf("dev.sh %s:\n%s", strings.Join(args, " "), stderr.String())
	}
	return string(out), stderr.String(), err
}

// start is exec of a command that starts the dev server, which picks
// its internal services' ports itself: another process may take one
// between its pick and its bind, and a new start picks again.
func (d devScript) start(env []string, args ...string) (string, error) {
	for attempt := 1; ; attempt++ {
		out, stderr, err := d.execErr(env, args...)
		if err == nil || attempt == 3 || !strings.Contains(stderr, "address already in use") {
			return out, err
		}
	}
}

// printEnv prints, under `run`, what the test looks at.
const printEnv = `for k in TEMPORAL_ADDRESS SHIPNOTIFY_DEV_UI_URL SHIPNOTIFY_DEV_CODEC_ADDR DATABASE_URL; do ` +
	`printf '%s=%s\n' "$k" "$(printenv "$k")"; done`

// envOf is `dev.sh env`'s output as a map.
func envOf(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(l, "=")
		require.True(t, ok, l)
		m[k] = v
	}
	return m
}

// Issue 35: ports moved with SHIPNOTIFY_DEV_*_PORT are remembered with the
// state, as PostgreSQL's is, so `env` and `run` after them find this
// checkout's servers, not another's on the defaults; an exported variable
// still wins.
func TestDevScriptRemembersPorts(t *testing.T) {
	t.Parallel()
	d := newDevScript(t)
	temporal, ui, pg, codec := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	ports := []string{
		"SHIPNOTIFY_DEV_TEMPORAL_PORT=" + strconv.Itoa(temporal),
		"SHIPNOTIFY_DEV_UI_PORT=" + strconv.Itoa(ui),
		"SHIPNOTIFY_DEV_PG_PORT=" + strconv.Itoa(pg),
		"SHIPNOTIFY_DEV_CODEC_PORT=" + strconv.Itoa(codec),
	}
	want := map[string]string{
		"TEMPORAL_ADDRESS":          "127.0.0.1:" + strconv.Itoa(temporal),
		"SHIPNOTIFY_DEV_UI_URL":     "http://localhost:" + strconv.Itoa(ui),
		"SHIPNOTIFY_DEV_CODEC_ADDR": "127.0.0.1:" + strconv.Itoa(codec),
		"DATABASE_URL":              "postgres://postgres@127.0.0.1:" + strconv.Itoa(pg) + "/shipnotify?sslmode=disable",
	}
	check := func(what string, got map[string]string) {
		t.Helper()
		for k, v := range want {
			require.Equal(t, v, got[k], "%s: %s", what, k)
		}
	}

	// Once with the ports: the servers start on them (run stops them after).
	out, err := d.start(ports, "run", "--", "sh", "-c", printEnv)
	require.NoError(t, err)
	check("run with the ports", envOf(t, out))

	// Then without: env prints them, and run starts the servers on them again.
	out, err = d.exec(nil, "env")
	require.NoError(t, err)
	check("env without the ports", envOf(t, out))
	out, err = d.start(nil, "run", "--", "sh", "-c", `echo "TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS"; `+
		`"$SHIPNOTIFY_DEV_TEMPORAL_BIN" operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null && echo SERVING=yes`)
	require.NoError(t, err)
	got := envOf(t, out)
	require.Equal(t, want["TEMPORAL_ADDRESS"], got["TEMPORAL_ADDRESS"], "run without the ports")
	require.Equal(t, "yes", got["SERVING"], "run without the ports: the server answers there")

	// An exported variable wins over the remembered port.
	moved := testenv.FreePort(t)
	out, err = d.exec([]string{"SHIPNOTIFY_DEV_TEMPORAL_PORT=" + strconv.Itoa(moved)}, "env")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:"+strconv.Itoa(moved), envOf(t, out)["TEMPORAL_ADDRESS"])
}
