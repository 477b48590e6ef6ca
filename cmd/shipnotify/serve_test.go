package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/internal/testenv"
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
	// With a link key, the approval console is served beside the API.
	c.env["SHIPNOTIFY_LINK_KEY"] = "c2VydmUtdGVzdC1saW5rLWtleS1zZXJ2ZS10ZXN0LWxpbmsta2V5"
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

	code, body = get("http://" + opsAddr + "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `shipnotify_api_requests_total{route="POST /v1/updates",status="201"} 1`)
	require.Contains(t, body, `shipnotify_api_requests_total{route="GET /v1/reminders",status="401"} 1`)
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
	require.Equal(t, "acme-eu", keys[0].Tenant)
	require.Equal(t, time.Date(2099, 1, 15, 7, 0, 0, 0, time.UTC), keys[0].Expires)
	approvers, err := console.ParseApprovers(strings.NewReader(line))
	require.NoError(t, err)
	require.Len(t, approvers, 1)
	require.Equal(t, "acme-eu", approvers[0].Tenant)
	require.Equal(t, keys[0].Expires, approvers[0].Expires)
}
