package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
)

// The worker command's /readyz and /metrics follow SendGrid's word on our
// key: a 401 makes the worker unready, naming the cause, and raises the
// refused gauge; the next accepted mail makes it ready again.
func TestWorkerReadinessFollowsTheMailKey(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	c := stackCLI(s)
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	c.env["SENDGRID_BASE_URL"] = s.Mail.URL()
	c.env["SHIPNOTIFY_METRICS_ADDR"] = addr
	c.env["SHIPNOTIFY_METRICS_REFRESH"] = "1s"
	c.env["SHIPNOTIFY_OUTCOME_GRACE"] = "30m"
	logs := &testenv.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		done <- run(ctx, []string{"worker"}, cli.Env{Lookup: lookup, Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: logs})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// waitFor polls path until it answers code with a body containing want.
	waitFor := func(path string, code int, want string) {
		t.Helper()
		require.Eventually(t, func() bool {
			got, body := get(path)
			return got == code && strings.Contains(body, want)
		}, 30*time.Second, 50*time.Millisecond, "%s never answered %d with %q; worker log:\n%s", path, code, want, logs.String())
	}
	waitFor("/readyz", http.StatusOK, "ready")
	waitFor("/metrics", http.StatusOK, `shipnotify_provider_credentials_refused{provider="sendgrid"} 0`)

	// The first reminder's mail is refused for our key: the worker is
	// unready and says why. Its retry is a minute away.
	s.Mail.Fail(sink.Answer{Status: 401})
	refused, err := s.Starter.Schedule(context.Background(), s.Update(t, time.Now(), reminder.Email))
	require.NoError(t, err)
	t.Cleanup(func() {
		// Its retry would outlive the test's worker on the shared dev server.
		_ = s.Temporal.TerminateWorkflow(context.Background(), refused[0].WorkflowID, "", "test over")
	})
	waitFor("/readyz", http.StatusServiceUnavailable, "sendgrid: refusing our API key (401 Unauthorized) since ")
	waitFor("/metrics", http.StatusOK, `shipnotify_provider_credentials_refused{provider="sendgrid"} 1`)
	_, body := get("/metrics")
	require.Contains(t, body, `shipnotify_provider_credential_refusals_total{provider="sendgrid"} 1`)

	// The key works again: the next mail is accepted, and the worker is ready.
	_, err = s.Starter.Schedule(context.Background(), s.Update(t, time.Now(), reminder.Email))
	require.NoError(t, err)
	waitFor("/readyz", http.StatusOK, "ready")
	waitFor("/metrics", http.StatusOK, `shipnotify_provider_credentials_refused{provider="sendgrid"} 0`)
	require.Len(t, s.Mail.Mails(), 1)

	// That mail awaits SendGrid's outcome. Within SHIPNOTIFY_OUTCOME_GRACE
	// the unconfirmed gauge shows nothing; past it, the whole wait.
	waitFor("/metrics", http.StatusOK, `shipnotify_reminders{state="sent"} 1`)
	_, body = get("/metrics")
	require.Equal(t, "shipnotify_oldest_unconfirmed_seconds 0",
		regexp.MustCompile(`(?m)^shipnotify_oldest_unconfirmed_seconds .*$`).FindString(body), "within the grace")
	_, err = s.DB.Pool.Exec(context.Background(),
		`UPDATE reminders SET awaiting_outcome_since = now() - interval '45 minutes' WHERE awaiting_outcome_since IS NOT NULL`)
	require.NoError(t, err)
	waitFor("/metrics", http.StatusOK, "\nshipnotify_oldest_unconfirmed_seconds 27")
}

// The worker's escalations carry decision links exactly when the public
// URL and the link key are both configured.
func TestWorkerMakesDecisionLinksWhenConfigured(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) config.Config {
		env["TEMPORAL_CONFIG_FILE"] = "/nonexistent"
		cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		require.NoError(t, err)
		return cfg
	}
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	require.Nil(t, cli.NewActivities(load(map[string]string{}), nil).Links)
	require.Nil(t, cli.NewActivities(load(map[string]string{"SHIPNOTIFY_LINK_KEY": key}), nil).Links)
	acts := cli.NewActivities(load(map[string]string{"SHIPNOTIFY_LINK_KEY": key, "SHIPNOTIFY_PUBLIC_URL": "https://ops.example.com"}), nil)
	require.NotNil(t, acts.Links)
	approve, reject, _ := acts.Links.DecisionLinks("SHP-1/window-1/ops")
	require.True(t, strings.HasPrefix(approve, "https://ops.example.com/console/link/"), approve)
	require.NotEqual(t, approve, reject)
}

// The worker will not start holding the console's session key: with it
// (and the link key it has) whoever holds the worker could log in as any
// approver. It says so before connecting to anything.
func TestWorkerRefusesTheSessionKey(t *testing.T) {
	t.Parallel()
	c := cmdline{env: map[string]string{
		"TEMPORAL_CONFIG_FILE":   "/nonexistent",
		"SHIPNOTIFY_LINK_KEY":    "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"SHIPNOTIFY_SESSION_KEY": "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=",
		"DATABASE_URL":           "postgres://nobody@127.0.0.1:1/none",
	}}
	code, _, stderr := c.run(t, "", "worker")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "SHIPNOTIFY_SESSION_KEY")
	require.Contains(t, stderr, "only serve may hold it")
}
