package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

// The console needs the link key, a session key of its own, and a keys
// file that parses; an error names the variable.
func TestConsoleConfiguration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.keys"), filepath.Join(dir, "bad.keys")
	require.NoError(t, os.WriteFile(good, []byte("alice approve "+
		"2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b\n"), 0o600))
	require.NoError(t, os.WriteFile(bad, []byte("ops@shipper.example approve 00\n"), 0o600))
	load := func(env map[string]string) config.Config {
		env["TEMPORAL_CONFIG_FILE"] = "/nonexistent"
		cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		require.NoError(t, err)
		return cfg
	}
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	session := "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
	build := func(env map[string]string) error {
		_, err := newConsole(load(env), &starter.Starter{}, mirror.New(nil), slog.New(slog.DiscardHandler))
		return err
	}
	require.ErrorContains(t, build(map[string]string{}), "SHIPNOTIFY_LINK_KEY")
	require.ErrorContains(t, build(map[string]string{"SHIPNOTIFY_LINK_KEY": key}), "SHIPNOTIFY_SESSION_KEY")
	require.ErrorContains(t, build(map[string]string{"SHIPNOTIFY_SESSION_KEY": session}), "SHIPNOTIFY_LINK_KEY")
	both := func(env map[string]string) map[string]string {
		env["SHIPNOTIFY_LINK_KEY"], env["SHIPNOTIFY_SESSION_KEY"] = key, session
		return env
	}
	require.ErrorContains(t, build(both(map[string]string{"SHIPNOTIFY_CONSOLE_KEYS_FILE": bad})), "SHIPNOTIFY_CONSOLE_KEYS_FILE")
	require.ErrorContains(t, build(both(map[string]string{"SHIPNOTIFY_CONSOLE_KEYS_FILE": filepath.Join(dir, "none")})), "SHIPNOTIFY_CONSOLE_KEYS_FILE")
	require.NoError(t, build(both(map[string]string{"SHIPNOTIFY_CONSOLE_KEYS_FILE": good})))
	require.NoError(t, build(both(map[string]string{"SHIPNOTIFY_CONSOLE_KEYS_FILE": good,
		"SHIPNOTIFY_PUBLIC_URL": "https://ops.example.com"})))
}
