package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/webhook"
)

// runningCommand is a long-running command run in process, its output
// read line by line as it comes.
type runningCommand struct {
	lines chan string
	done  chan error
	stop  context.CancelFunc
}

func startCommand(t *testing.T, args ...string) *runningCommand {
	t.Helper()
	return startCommandWith(t, nil, args...)
}

// startCommandWith runs args with exactly env as the environment.
func startCommandWith(t *testing.T, env map[string]string, args ...string) *runningCommand {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	c := &runningCommand{lines: make(chan string, 100), done: make(chan error, 1), stop: cancel}
	go func() {
		err := shipnotify.Run(ctx, args, cli.Env{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			Stdin: strings.NewReader(""), Stdout: w, Stderr: io.Discard})
		_ = w.Close()
		c.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		cancel()
		for range c.lines { // drain, so the command's writes end
		}
	})
	return c
}

// waitLine returns the first line (from here on) matching re, and its
// submatches.
func (c *runningCommand) waitLine(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			require.True(t, ok, "the command ended before printing %q", re)
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %q in 30 s", re)
		}
	}
}

// Issue 35: the demo's stand-ins serve alone, on ports one sets, for a
// worker of one's own: the product's own mail and webhook clients reach
// them, and each arrival is printed.
func TestDevSinkServesTheStandInsAlone(t *testing.T) {
	t.Parallel()
	mailPort := testenv.FreePort(t)
	secret := webhook.NewSecret()
	c := startCommand(t, "dev-sink", "--mail", "127.0.0.1:"+strconv.Itoa(mailPort), "--webhook", "127.0.0.1:0",
		"--api-key", "SG.test", "--secret", secret)
	mailURL := c.waitLine(t, `^Mail sink: +(http://\S+) `)[1]
	require.Equal(t, "http://127.0.0.1:"+strconv.Itoa(mailPort), mailURL)
	c.waitLine(t, `for the worker: SENDGRID_BASE_URL=`+regexp.QuoteMeta(mailURL)+` SENDGRID_API_KEY=SG\.test$`)
	hookURL := c.waitLine(t, `^Webhook receiver: (http://127\.0\.0\.1:\d+)/ANY-PATH \(signatures checked with `+regexp.QuoteMeta(secret)+`\)`)[1]
	c.waitLine(t, `^Press Ctrl-C to stop\.$`)

	ctx := t.Context()
	sender := email.NewSender(email.Options{APIKey: "SG.test", BaseURL: mailURL, FromEmail: "reminders@shipnotify.example"})
	_, err := sender.Send(ctx, email.Message{To: "ops@shipper.example", Subject: "Due in 3 days", Text: "It is due.", DeliveryKey: strings.Repeat("ab", 32)})
	require.NoError(t, err)
	c.waitLine(t, `^✉  mail .* to ops@shipper\.example  "Due in 3 days"  key abababababab…$`)
	resp, err := http.Get(mailURL + "/mailbox")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	hooks := webhook.NewSender(webhook.Options{Guard: webhook.Guard{AllowLoopback: true}})
	body, err := json.Marshal(map[string]any{"type": "reminder.sent"})
	require.NoError(t, err)
	_, err = hooks.Send(ctx, webhook.Message{ID: "msg_1", URL: hookURL + "/shipnotify/status", Secret: secret, Body: body})
	require.NoError(t, err)
	c.waitLine(t, `^⚓ webhook .* /shipnotify/status  reminder\.sent  id msg_1…  signature verified$`)

	c.stop()
	select {
	case err := <-c.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("dev-sink did not stop on cancel")
	}
}

func TestDevSinkRefusesBadFlags(t *testing.T) {
	t.Parallel()
	c := cmdline{env: map[string]string{}}
	code, _, stderr := c.run(t, "", "dev-sink", "--mail", "", "--webhook", "")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "nothing to serve")
	code, _, stderr = c.run(t, "", "dev-sink", "--secret", "not base64!")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--secret")
	code, _, stderr = c.run(t, "", "dev-sink", "--mail", "0.0.0.0:8025")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--mail 0.0.0.0:8025: the stand-ins serve loopback only")
}
