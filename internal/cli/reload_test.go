package cli_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
)

// keysIn is a Reloadable over an API keys file that remembers the names
// in force.
type keysIn struct {
	mu    sync.Mutex
	names []string
}

func (k *keysIn) load(path string) (int, error) {
	keys, err := config.ReadAPIKeys(path)
	if err != nil {
		return 0, err
	}
	var names []string
	for _, key := range keys {
		names = append(names, key.Name)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.names = names
	return len(names), nil
}

func (k *keysIn) now() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.names
}

func keyLine(t *testing.T, name string) string {
	t.Helper()
	_, k, err := api.NewKey(name, []api.Scope{api.ScopeRead})
	require.NoError(t, err)
	return k.Line() + "\n"
}

// A watched file is reloaded when it changes (no signal needed) and on
// SIGHUP (even a change its size and time do not show); a file that fails
// to parse, or is gone, is refused whole and logged by variable, path and
// entry, never a hash, and what was in force stays.
func TestFileWatchReloadsOnChangeAndSIGHUP(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "api-keys")
	write := func(text string) { require.NoError(t, os.WriteFile(path, []byte(text), 0o600)) }
	write(keyLine(t, "tracker-a"))
	keys := &keysIn{}
	logs := &testenv.SyncBuffer{}
	w := cli.NewFileWatch(slog.New(slog.NewJSONHandler(logs, nil)),
		[]cli.Reloadable{{Variable: "SHIPNOTIFY_API_KEYS_FILE", Path: path, Load: keys.load}})
	require.Equal(t, []string{"tracker-a"}, keys.now(), "loaded once at the start")
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, hup, 10*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	names := func(want ...string) func() bool {
		return func() bool { return strings.Join(keys.now(), " ") == strings.Join(want, " ") }
	}

	write(keyLine(t, "tracker-a") + keyLine(t, "tracker-b"))
	require.Eventually(t, names("tracker-a", "tracker-b"), 10*time.Second, 5*time.Millisecond, "a change is seen by polling")

	// The same size and modification time: only SIGHUP reloads it.
	fi, err := os.Stat(path)
	require.NoError(t, err)
	write(keyLine(t, "tracker-c") + keyLine(t, "tracker-d"))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	hup <- syscall.SIGHUP
	require.Eventually(t, names("tracker-c", "tracker-d"), 10*time.Second, 5*time.Millisecond, "SIGHUP reloads")

	bad := "tracker-e read " + strings.Repeat("ab", 32) + "\ntracker-f read " + strings.Repeat("cd", 32) + " expires=someday\n"
	write(bad)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "key entry 2: key tracker-f: attribute expires") },
		10*time.Second, 5*time.Millisecond, "the refusal is logged: %s", logs)
	require.Equal(t, []string{"tracker-c", "tracker-d"}, keys.now(), "a bad file changes nothing, not even its good entries")
	require.Contains(t, logs.String(), `"variable":"SHIPNOTIFY_API_KEYS_FILE"`)
	require.Contains(t, logs.String(), path)
	require.NotContains(t, logs.String(), "abab")
	require.NotContains(t, logs.String(), "cdcd")

	require.NoError(t, os.Remove(path))
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "no such file") },
		10*time.Second, 5*time.Millisecond, "a file gone is refused too: %s", logs)
	require.Equal(t, []string{"tracker-c", "tracker-d"}, keys.now())

	write(keyLine(t, "tracker-g"))
	require.Eventually(t, names("tracker-g"), 10*time.Second, 5*time.Millisecond, "a file back is read again")
}
