package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
)

// `shipnotify api-key` prints a key and its line; `shipnotify serve` with
// that line serves the API on SHIPNOTIFY_API_ADDR (the key schedules an
// update) and its metrics and probes on SHIPNOTIFY_METRICS_ADDR, not on the
// API's listener; it stops cleanly on its context's end. The key is never
// in the logs.
func TestServe(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	c := stackCLI(s)
	code, out, errOut := c.run(t, "", "api-key", "--name", "tracker-eu", "--scopes", "schedule,read")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	key, line := lines[0], lines[1]
	require.True(t, strings.HasPrefix(line, "tracker-eu schedule,read "))
	require.NotContains(t, line, key)

	apiAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	opsAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	c.env["SHIPNOTIFY_API_KEYS"] = line
	c.env["SHIPNOTIFY_API_ADDR"] = apiAddr
	c.env["SHIPNOTIFY_METRICS_ADDR"] = opsAddr
	// With a link key and a session key, the approval console is served
	// beside the API.
	c.env["SHIPNOTIFY_LINK_KEY"] = "c2VydmUtdGVzdC1saW5rLWtleS1zZXJ2ZS10ZXN0LWxpbmsta2V5"
	c.env["SHIPNOTIFY_SESSION_KEY"] = "c2VydmUtdGVzdC1zZXNzaW9uLWtleS1zZXJ2ZS10ZXN0LXNlc3Npb24ta2V5"
	logs := &testenv.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		done <- run(ctx, []string{"serve"}, cli.Env{Lookup: lookup, Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: logs})
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool {
		code, _ := get("http://" + apiAddr + "/v1/openapi.json")
		return code == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "serve never answered; its log:\n%s", logs)
	code, body := get("http://" + opsAddr + "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	code, body = get("http://" + apiAddr + "/console/login")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "<form", "the console's login page")

	u := testenv.ValidUpdate(time.Now())
	shipment := testenv.ID(t, "SHP")
	u["shipment_id"] = shipment
	u["subscribers"] = u["subscribers"].([]any)[:2]
	req, err := http.NewRequest("POST", "http://"+apiAddr+"/v1/updates", strings.NewReader(updateJSON(t, u)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	t.Cleanup(func() {
		for _, sub := range []string{"shipper-ops", "consignee-inbox"} {
			_ = s.Temporal.TerminateWorkflow(context.Background(), "reminder/"+shipment+"/window-1/"+sub, "", "test over")
		}
	})
	code, _ = get("http://" + apiAddr + "/v1/reminders")
	require.Equal(t, http.StatusUnauthorized, code)

	// serve's listener answers as the API's contract says (issue 35: its
	// outer mux redirected paths not in their clean form, and a parameter
	// no route takes scheduled for real).
	send := func(method, path, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+apiAddr+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	dry := testenv.ValidUpdate(time.Now())
	dry["shipment_id"] = testenv.ID(t, "SHP-dry")
	resp, body = send("POST", "/v1/updates?dry_run=1", updateJSON(t, dry))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, `"field":"dry_run"`)
	for _, p := range []string{"//v1/shipments/X/cancel", "/v1/shipments/S/updates/./w1/reschedule", "/v1/nowhere"} {
		resp, body = send("POST", p, "{}")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", p, body)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), p)
		require.Empty(t, resp.Header.Get("Location"), p)
	}
	// Nor does it redirect the console's or the unsubscribes' path
	// without its '/' to their tree (issue 38).
	for _, c := range []struct{ method, path string }{{"GET", "/console"}, {"POST", "/unsubscribe"}} {
		resp, body = send(c.method, c.path, "")
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), c.path)
		require.Empty(t, resp.Header.Get("Location"), c.path)
	}
	resp, body = send("GET", "/v1/reminders?shipment=", "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, `"field":"shipment"`)

	// serve takes the one-click unsubscribes a worker's List-Unsubscribe
	// headers point to, checked with the link key.
	linkKeys, err := links.ParseKeys(c.env["SHIPNOTIFY_LINK_KEY"])
	require.NoError(t, err)
	resp, err = http.PostForm("http://"+apiAddr+links.UnsubscribePath+linkKeys.UnsubscribeToken(shipment+"/window-1/shipper-ops", time.Now()),
		url.Values{"List-Unsubscribe": {"One-Click"}})
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	suppressed, err := s.Mirror.Suppressions(context.Background(), mirror.SuppressionFilter{AnyTenant: true})
	require.NoError(t, err)
	require.Len(t, suppressed, 1)
	require.Equal(t, "one_click", suppressed[0].Reason)
	// The tracker reads its tenant's suppressions through the API.
	resp, body = send("GET", "/v1/suppressions", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"address_sha256":"`+suppressed[0].AddressSHA256+`"`)

	code, body = get("http://" + opsAddr + "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `shipnotify_api_requests_total{route="POST /v1/updates",status="201"} 1`)
	require.Contains(t, body, `shipnotify_api_requests_total{route="GET /v1/reminders",status="401"} 1`)
	require.Contains(t, body, `shipnotify_api_requests_total{route="unmatched",status="404"} 5`)
	require.NotContains(t, body, `route="/v1/"`)
	code, _ = get("http://" + apiAddr + "/metrics")
	require.Equal(t, http.StatusNotFound, code, "metrics stay on the ops address")

	cancel()
	require.NoError(t, <-done)
	stopped = true
	require.NotContains(t, logs.String(), key)
	require.Contains(t, logs.String(), `"msg":"API stopped"`)
}

// `shipnotify api-key` makes only strong keys (snk_ and 256 bits), with
// --tenant and --expires written on its line, which parses back, for the
// API and the console alike, as the same key.
func TestAPIKeyWritesItsAttributes(t *testing.T) {
	t.Parallel()
	c := cmdline{env: map[string]string{"TEMPORAL_CONFIG_FILE": "/nonexistent"}}
	code, out, errOut := c.run(t, "", "api-key", "--name", "alice", "--scopes", "approve,admin",
		"--tenant", "acme-eu", "--expires", "2099-01-15T08:00:00+01:00")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	key, line := lines[0], lines[1]
	require.True(t, api.IsGeneratedKey(key), key)
	require.True(t, strings.HasSuffix(line, " tenant=acme-eu expires=2099-01-15T07:00:00Z"), line)
	keys, err := api.ParseKeys(strings.NewReader(line))
	require.NoError(t, err)
	require.Equal(t, api.HashKey(key), keys[0].Hash)
	require.Equal(t, "acme-eu", keys[0].Tenant.Name())
	require.Equal(t, time.Date(2099, 1, 15, 7, 0, 0, 0, time.UTC), keys[0].Expires)
	approvers, err := console.ParseApprovers(strings.NewReader(line))
	require.NoError(t, err)
	require.Len(t, approvers, 1)
	require.Equal(t, "acme-eu", approvers[0].Tenant.Name())
	require.Equal(t, keys[0].Expires, approvers[0].Expires)
}

// The real binary's serve re-reads its API keys file and its approvers
// file on SIGHUP, and when they change: a key removed is refused and an
// approver removed is logged out, without a restart; keys and approvers
// added work. A file that does not parse, or holds no API key, is refused
// whole: the log names the file and the entry, never a hash, and the old
// keys stay in force.
func TestServeReloadsKeyFilesOnSIGHUP(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	dir := t.TempDir()
	keysFile, approversFile := filepath.Join(dir, "api-keys"), filepath.Join(dir, "approvers")
	newKey := func(name string, scope api.Scope) (string, string) {
		secret, k, err := api.NewKey(name, []api.Scope{scope})
		require.NoError(t, err)
		return secret, k.Line() + "\n"
	}
	trackerA, lineA := newKey("tracker-a", api.ScopeRead)
	trackerB, lineB := newKey("tracker-b", api.ScopeRead)
	alice, aliceLine := newKey("alice", api.ScopeApprove)
	bob, bobLine := newKey("bobby", api.ScopeApprove)
	// write replaces a file; keepTime keeps its size-and-time look, so
	// that only SIGHUP can tell the change.
	write := func(path, text string, keepTime bool) {
		t.Helper()
		fi, err := os.Stat(path)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		if keepTime {
			require.NoError(t, err)
			require.Equal(t, fi.Size(), int64(len(text)), "the same size")
			require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
		}
	}
	require.NoError(t, os.WriteFile(keysFile, []byte(lineA), 0o600))
	require.NoError(t, os.WriteFile(approversFile, []byte(aliceLine), 0o600))

	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	serve := testenv.StartProcess(t, s.Env("SHIPNOTIFY_API_ADDR="+addr, "SHIPNOTIFY_API_KEYS_FILE="+keysFile,
		"SHIPNOTIFY_CONSOLE_KEYS_FILE="+approversFile, "SHIPNOTIFY_LINK_KEY=c2VydmUtdGVzdC1saW5rLWtleS1zZXJ2ZS10ZXN0LWxpbmsta2V5",
		"SHIPNOTIFY_SESSION_KEY=c2VydmUtdGVzdC1zZXNzaW9uLWtleS1zZXJ2ZS10ZXN0LXNlc3Npb24ta2V5"),
		testenv.Binary(t), "serve")
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var lastRead string // what the last read came to, for a failure's message
	read := func(key string) int {
		req, err := http.NewRequest("GET", "http://"+addr+"/v1/reminders", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			lastRead = err.Error()
			return 0
		}
		lastRead = resp.Status
		resp.Body.Close()
		return resp.StatusCode
	}
	// login returns the status of a console login with key, and the
	// session cookie it set.
	login := func(key string) (int, *http.Cookie) {
		resp, err := client.PostForm("http://"+addr+"/console/login", url.Values{"key": {key}})
		require.NoError(t, err)
		resp.Body.Close()
		if len(resp.Cookies()) == 0 {
			return resp.StatusCode, nil
		}
		return resp.StatusCode, resp.Cookies()[0]
	}
	// list is the status of the console's list for a session cookie:
	// 200, or 303 to the login page once the session has ended.
	list := func(ck *http.Cookie) int {
		req, err := http.NewRequest("GET", "http://"+addr+"/console/", nil)
		require.NoError(t, err)
		req.AddCookie(ck)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if !assert.Eventually(t, func() bool { return read(trackerA) == http.StatusOK }, time.Minute, 50*time.Millisecond) {
		t.Fatalf("serve never answered 200 (last: %s); its log:\n%s", lastRead, serve.Log())
	}
	require.Equal(t, http.StatusUnauthorized, read(trackerB))
	code, aliceSession := login(alice)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, http.StatusOK, list(aliceSession))
	code, _ = login(bob)
	require.Equal(t, http.StatusUnauthorized, code)

	// tracker-a and alice out, tracker-b and bobby in: on SIGHUP alone.
	write(keysFile, lineB, true)
	write(approversFile, bobLine, true)
	serve.Signal(syscall.SIGHUP)
	require.Eventually(t, func() bool { return read(trackerB) == http.StatusOK }, 30*time.Second, 20*time.Millisecond,
		"tracker-b is accepted; serve's log:\n%s", serve.Log())
	// A refused key is 401, or 429 once this address has sent too many
	// keys that are not valid (the polls for a key not yet in force).
	refused := []int{http.StatusUnauthorized, http.StatusTooManyRequests}
	require.Contains(t, refused, read(trackerA), "tracker-a is refused")
	require.Eventually(t, func() bool { return list(aliceSession) == http.StatusSeeOther }, 30*time.Second, 20*time.Millisecond,
		"alice's session ends")
	code, _ = login(alice)
	require.Equal(t, http.StatusUnauthorized, code, "alice cannot log in")
	code, bobSession := login(bob)
	require.Equal(t, http.StatusSeeOther, code, "bobby can")
	require.True(t, serve.Alive(), "SIGHUP does not stop serve")

	// Broken files, and a keys file with no key: refused, the old sets stay.
	bad := "tracker-b read " + strings.Repeat("ab", 32) + "\ntracker-c read " + strings.Repeat("cd", 32) + " tenant=a/b\n"
	write(keysFile, bad, false)
	write(approversFile, "alice approve "+strings.Repeat("ef", 32)+" expires=soon\n", false)
	serve.Signal(syscall.SIGHUP)
	require.Eventually(t, func() bool {
		return strings.Contains(serve.Log(), "key entry 2: key tracker-c: attribute tenant") &&
			strings.Contains(serve.Log(), "line 1: key alice: attribute expires")
	}, 30*time.Second, 20*time.Millisecond, "the refusals are logged; serve's log:\n%s", serve.Log())
	require.Equal(t, http.StatusOK, read(trackerB), "the old keys stay in force")
	require.Equal(t, http.StatusOK, list(bobSession), "the old approvers too")
	for _, hash := range []string{"abab", "cdcd", "efef"} {
		require.NotContains(t, serve.Log(), hash)
	}
	require.Contains(t, serve.Log(), keysFile)
	require.Contains(t, serve.Log(), approversFile)
	write(keysFile, "# every key revoked\n", false)
	serve.Signal(syscall.SIGHUP)
	require.Eventually(t, func() bool { return strings.Contains(serve.Log(), "no keys; to refuse every request, stop serve") },
		30*time.Second, 20*time.Millisecond, "serve's log:\n%s", serve.Log())
	require.Equal(t, http.StatusOK, read(trackerB))

	// Without a signal, a change is seen by polling.
	write(keysFile, lineA, false)
	require.Eventually(t, func() bool { return read(trackerA) == http.StatusOK }, 30*time.Second, 50*time.Millisecond,
		"a changed file is read without SIGHUP; serve's log:\n%s", serve.Log())
	require.Contains(t, refused, read(trackerB))
	for _, secret := range []string{trackerA, trackerB, alice, bob} {
		require.NotContains(t, serve.Log(), secret)
	}
}
