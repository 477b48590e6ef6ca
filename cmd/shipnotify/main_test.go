package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/capacity"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// cmdline runs shipnotify in-process with exactly the given environment.
type cmdline struct {
	env map[string]string
}

func (c cmdline) run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return shipnotify.RunCaptured(ctx, c.env, stdin, args...)
}

func stackCLI(s *testenv.Stack) cmdline {
	return cmdline{env: map[string]string{
		"TEMPORAL_ADDRESS":                  os.Getenv("TEMPORAL_ADDRESS"),
		"DATABASE_URL":                      s.DB.URL,
		"SHIPNOTIFY_TASK_QUEUE":             s.TaskQueue,
		"SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK": "true",
		"SENDGRID_API_KEY":                  testenv.MailAPIKey,
		"TEMPORAL_CONFIG_FILE":              "/nonexistent",
		"SHIPNOTIFY_CODEC_KEYS":             testenv.CodecKeys,
	}}
}

func updateJSON(t *testing.T, u map[string]any) string {
	t.Helper()
	b, err := json.Marshal(u)
	require.NoError(t, err)
	return string(b)
}

func TestScheduleListShow(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	c := stackCLI(s)
	now := time.Now()
	u := testenv.ValidUpdate(now)
	shipment := testenv.ID(t, "SHP")
	u["shipment_id"] = shipment
	subs := u["subscribers"].([]any)
	// Due in a second, to the stack's sinks.
	for _, sub := range subs {
		m := sub.(map[string]any)
		delete(m, "remind_before")
		m["due_at"] = now.Add(time.Second).UTC().Format(time.RFC3339Nano)
	}
	hook := subs[2].(map[string]any)
	hook["url"], hook["secret"] = s.Hooks.URL()+"/in", s.HookSecret
	file := filepath.Join(t.TempDir(), "update.json")
	require.NoError(t, os.WriteFile(file, []byte(updateJSON(t, u)), 0o600))

	code, stdout, stderr := c.run(t, "", "schedule", "-f", file)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 3)
	var results []starter.Result
	for _, l := range lines {
		var r starter.Result
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		require.Equal(t, starter.Scheduled, r.Status)
		require.Len(t, r.DeliveryKey, 64)
		results = append(results, r)
	}

	ctx := context.Background()
	for _, r := range results {
		var res workflows.ReminderResult
		require.NoError(t, s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &res))
		require.Equal(t, reminder.Sent, res.State)
	}
	require.Len(t, s.Mail.Mails(), 2)
	require.Len(t, s.Hooks.Hooks(), 1)

	// The same file from Stdin: nothing new.
	code, stdout, stderr = c.run(t, updateJSON(t, u), "schedule")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 3, strings.Count(stdout, `"status":"already_scheduled"`), stdout)

	// The provider reports the first email delivered, then bounced a
	// minute later by its clock: it ends undeliverable, its last outcome
	// the bounce. The webhook was delivered by its receiver's 2xx.
	delivered := time.Now().UTC().Truncate(time.Second)
	_, err := s.Mirror.ApplyProviderEvents(ctx, []mirror.ProviderEvent{
		{ID: "sg-1", DeliveryKey: results[0].DeliveryKey, Outcome: reminder.OutcomeDelivered, At: delivered},
		{ID: "sg-2", DeliveryKey: results[0].DeliveryKey, Outcome: reminder.OutcomeBounce, At: delivered.Add(time.Minute), Reason: "550 5.1.1"},
	}, time.Hour)
	require.NoError(t, err)

	code, stdout, _ = c.run(t, "", "list", "--shipment", shipment)
	require.Equal(t, 0, code)
	listed := map[string][]string{} // reminder id: channel, due, goes out, state, outcome, key
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] {
		f := strings.Fields(l)
		require.Len(t, f, 7, l)
		listed[f[0]] = f[1:]
	}
	require.Equal(t, []string{"email", "undeliverable", "bounce"}, []string{listed[results[0].ReminderID][0], listed[results[0].ReminderID][3], listed[results[0].ReminderID][4]}, stdout)
	require.Equal(t, []string{"sent", "-"}, listed[results[1].ReminderID][3:5], stdout)
	require.Equal(t, []string{"delivered", "-"}, listed[results[2].ReminderID][3:5], "a webhook has no provider outcome: %s", stdout)
	require.Contains(t, stdout, "OUTCOME")
	require.Equal(t, listed[results[0].ReminderID][1], listed[results[0].ReminderID][2], "no send window: it goes out when due")

	// A limit that cuts the list says so, and prints the next page's
	// command; that page ends the list, and says nothing more.
	code, stdout, stderr = c.run(t, "", "list", "--shipment", shipment, "--limit", "2")
	require.Equal(t, 0, code, stderr)
	first := strings.Split(strings.TrimSpace(stdout), "\n")[1:]
	require.Len(t, first, 2, stdout)
	next := regexp.MustCompile(`more than 2 reminders match; the next page: shipnotify (list --shipment \S+ --limit 2 --after \S+)\n`).FindStringSubmatch(stderr)
	require.NotNil(t, next, stderr)
	code, stdout, stderr = c.run(t, "", strings.Fields(next[1])...)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr, "the last page")
	rest := strings.Split(strings.TrimSpace(stdout), "\n")[1:]
	require.Len(t, rest, 1, stdout)
	seen := map[string]bool{}
	for _, l := range append(first, rest...) {
		seen[strings.Fields(l)[0]] = true
	}
	require.Equal(t, len(listed), len(seen), "the two pages are the list, each reminder once")
	// One reminder is one (issue 35).
	code, _, stderr = c.run(t, "", "list", "--shipment", shipment, "--limit", "1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "shipnotify: more than 1 reminder matches; the next page: ")
	code, _, stderr = c.run(t, "", "list", "--after", "not an id")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--after: not a reminder id")

	// "What reminders do we owe next Tuesday?": due between two times.
	code, stdout, _ = c.run(t, "", "list", "--json", "--due-from", now.Add(-time.Minute).Format(time.RFC3339), "--due-to", now.Add(time.Minute).Format(time.RFC3339))
	require.Equal(t, 0, code)
	require.Equal(t, 3, strings.Count(stdout, `"reminder_id":"`+shipment), stdout)
	require.Equal(t, 1, strings.Count(stdout, `"provider_outcome":"bounce"`), stdout)
	require.Equal(t, 2, strings.Count(stdout, `"delivered_at":"`), "the email the provider delivered, and the webhook: %s", stdout)
	code, stdout, _ = c.run(t, "", "list", "--json", "--due-from", now.Add(time.Hour).Format(time.RFC3339))
	require.Equal(t, 0, code)
	require.Empty(t, stdout)

	code, stdout, stderr = c.run(t, "", "show", results[2].ReminderID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, results[2].DeliveryKey)
	require.Contains(t, stdout, "Completed")
	require.Contains(t, stdout, "scheduled")
	require.Contains(t, stdout, "sent")
	require.NotContains(t, stdout, s.Hooks.URL(), "show prints no URL")
	require.Regexp(t, `Provider outcome +none reported\n`, stdout)
	require.Regexp(t, `Delivered +\d{4}-`, stdout)

	code, stdout, stderr = c.run(t, "", "show", results[0].ReminderID)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `State +undeliverable\n`, stdout)
	require.Regexp(t, `Provider outcome +bounce at `+regexp.QuoteMeta(delivered.Add(time.Minute).Format(time.RFC3339))+`\n`, stdout)
	require.Regexp(t, `Delivered +`+regexp.QuoteMeta(delivered.Format(time.RFC3339))+`\n`, stdout)
	require.Regexp(t, `provider_delivered +provider reported delivered at `+regexp.QuoteMeta(delivered.Format(time.RFC3339))+`; now delivered; event sg-1, delivery `+results[0].DeliveryKey+`\n`, stdout)
	require.Regexp(t, `provider_bounce +provider reported bounce at \S+ \(550 5\.1\.1\); now undeliverable; event sg-2`, stdout)
	// Every time one way (issue 35): the scheduled event's due_at, which
	// PostgreSQL wrote, too.
	require.NotContains(t, stdout, "+00:00")
	require.Regexp(t, `scheduled +\{"delivery_key":"[0-9a-f]+","due_at":"[0-9T:.-]+Z"`, stdout)

	code, _, stderr = c.run(t, "", "show", shipment+"/nope/nope")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no reminder")
	require.Contains(t, stderr, "shipnotify list --shipment "+shipment+" names its shipment's")
}

// Every malformed update is refused with a one-line error naming the field,
// exit status 2, and nothing written to PostgreSQL or Temporal.
func TestScheduleBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	tc := testenv.Temporal(t)
	queue := testenv.TaskQueue(t)
	c := cmdline{env: map[string]string{
		"TEMPORAL_ADDRESS":      testenv.TemporalAddress(t),
		"DATABASE_URL":          db.URL,
		"SHIPNOTIFY_TASK_QUEUE": queue,
		"TEMPORAL_CONFIG_FILE":  "/nonexistent",
		"SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys,
	}}
	ctx := context.Background()
	cases := testenv.BadUpdates(time.Now())
	require.GreaterOrEqual(t, len(cases), 25)
	for _, tc2 := range cases {
		code, stdout, stderr := c.run(t, tc2.Doc, "schedule")
		require.Equal(t, 2, code, "%s: %s", tc2.Name, stderr)
		require.Empty(t, stdout, tc2.Name)
		require.Contains(t, stderr, tc2.Field, tc2.Name)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%s: one line: %q", tc2.Name, stderr)
	}
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM updates) + (SELECT count(*) FROM reminders) + (SELECT count(*) FROM reminder_events)`).Scan(&n))
	require.Zero(t, n, "nothing written to the mirror")

	// Nothing written to Temporal: the namespace holds no workflow on the
	// CLI's task queue but the probe started now. Visibility is eventually
	// consistent, so wait until it shows the probe (proving the query sees
	// this queue); anything the CLI started came before it.
	probe := testenv.ID(t, "probe")
	_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: probe, TaskQueue: queue}, "VisibilityProbe")
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), probe, "", "test over") })
	query := fmt.Sprintf("TaskQueue = '%s'", queue)
	var ids []string
	require.Eventually(t, func() bool {
		ids = nil
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		require.NoError(t, err)
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		return slices.Contains(ids, probe)
	}, 30*time.Second, 100*time.Millisecond, "visibility never showed the probe")
	require.Equal(t, []string{probe}, ids, "no workflow started for a refused update")
}

func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	c := cmdline{env: map[string]string{}}
	code, stdout, _ := c.run(t, "", "--help")
	require.Equal(t, 0, code)
	// The command list is one column, however long a name.
	summaries := regexp.MustCompile(`(?m)^  (\S+)( +)\S`).FindAllStringSubmatchIndex(stdout, -1)
	require.Len(t, summaries, len(shipnotify.Commands()), stdout)
	column := summaries[0][5] - summaries[0][0]
	flagLine := regexp.MustCompile(`(?m)^  -\S+ (\S+)$`)
	for i, name := range shipnotify.Commands() {
		require.Contains(t, stdout, name)
		require.Equal(t, column, summaries[i][5]-summaries[i][0], "%s's summary in the column: %s", name, stdout)
		code, out, errOut := c.run(t, "", name, "--help")
		require.Equal(t, 0, code, name)
		require.Contains(t, out, "Usage: shipnotify "+name, name)
		require.Empty(t, errOut, name)
		// help NAME is NAME --help.
		_, viaHelp, _ := c.run(t, "", "help", name)
		require.Equal(t, out, viaHelp, name)
		// A flag's value is named by its type, never by a word its
		// usage happened to quote; a command without flags says so, and
		// one made of subcommands where their flags are.
		for _, m := range flagLine.FindAllStringSubmatch(out, -1) {
			require.Contains(t, []string{"string", "int", "duration", "float", "uint", "value"}, m[1], "%s: %s", name, m[0])
		}
		if !strings.Contains(out, "\n  -") && !strings.Contains(out, "Each subcommand takes its own flags: ") {
			require.Contains(t, out, "It takes no flags.", name)
			require.NotContains(t, out, "Flags:", name)
		}
	}
	code, _, stderr := c.run(t, "", "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "unknown command")
}

func TestInvalidConfigurationNamesTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"DATABASE_URL": "mysql://x"}, []string{"list"}, "DATABASE_URL"},
		{map[string]string{"SENDGRID_BASE_URL": "not a url"}, []string{"list"}, "SENDGRID_BASE_URL"},
		{map[string]string{"SHIPNOTIFY_FROM_EMAIL": "Ops <x@y.example>"}, []string{"list"}, "SHIPNOTIFY_FROM_EMAIL"},
		{map[string]string{"SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK": "perhaps"}, []string{"list"}, "SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK"},
		{map[string]string{"SHIPNOTIFY_LOG_LEVEL": "loud"}, []string{"list"}, "SHIPNOTIFY_LOG_LEVEL"},
		{map[string]string{}, []string{"worker"}, "SENDGRID_API_KEY"},
		{map[string]string{}, []string{"list", "--state", "lost"}, "--state"},
		{map[string]string{}, []string{"list", "--due-from", "tuesday"}, "--due-from"},
		{map[string]string{"SHIPNOTIFY_CODEC_KEYS": "k1:c2hvcnQ="}, []string{"list"}, "SHIPNOTIFY_CODEC_KEYS"},
		{map[string]string{"SHIPNOTIFY_CODEC_KEYS_FILE": "/nonexistent/keys"}, []string{"list"}, "SHIPNOTIFY_CODEC_KEYS_FILE"},
		{map[string]string{"SHIPNOTIFY_CODEC": "maybe"}, []string{"list"}, "SHIPNOTIFY_CODEC"},
		{map[string]string{}, []string{"setup"}, "SHIPNOTIFY_CODEC_KEYS"},
		{map[string]string{}, []string{"codec-server"}, "SHIPNOTIFY_CODEC_KEYS"},
		{map[string]string{"SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys}, []string{"codec-server", "--listen", "0.0.0.0:0"}, "SHIPNOTIFY_CODEC_SERVER_TOKEN: required"},
		{map[string]string{"SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys}, []string{"codec-server", "--listen", ":0"}, "SHIPNOTIFY_CODEC_SERVER_TOKEN: required"},
		{map[string]string{"SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys}, []string{"codec-server", "--listen", "127.0.0.1:0"}, "pass --insecure-loopback"},
		{map[string]string{"SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys}, []string{"codec-server", "--insecure-loopback", "--listen", "0.0.0.0:0"}, "SHIPNOTIFY_CODEC_SERVER_TOKEN: required"},
		{map[string]string{"SHIPNOTIFY_CODEC_ALLOW_UNSEALED": "perhaps"}, []string{"list"}, "SHIPNOTIFY_CODEC_ALLOW_UNSEALED"},
		{map[string]string{"SHIPNOTIFY_API_ADDR": "8090"}, []string{"list"}, "SHIPNOTIFY_API_ADDR"},
		{map[string]string{"SHIPNOTIFY_API_RATE": "0"}, []string{"list"}, "SHIPNOTIFY_API_RATE"},
		{map[string]string{"SHIPNOTIFY_API_BURST": "-1"}, []string{"list"}, "SHIPNOTIFY_API_BURST"},
		{map[string]string{"SHIPNOTIFY_API_REQUEST_TIMEOUT": "30s"}, []string{"list"}, "SHIPNOTIFY_API_REQUEST_TIMEOUT"},
		{map[string]string{"SHIPNOTIFY_API_KEYS": "tracker schedule snk_aKeyNotItsHash"}, []string{"list"}, "SHIPNOTIFY_API_KEYS"},
		{map[string]string{"SHIPNOTIFY_API_KEYS_FILE": "/nonexistent/keys"}, []string{"list"}, "SHIPNOTIFY_API_KEYS_FILE"},
		{map[string]string{}, []string{"serve"}, "SHIPNOTIFY_API_KEYS"},
		{map[string]string{"SHIPNOTIFY_UNSUBSCRIBE": "maybe"}, []string{"list"}, "SHIPNOTIFY_UNSUBSCRIBE: want one-click, sendgrid or off"},
		{map[string]string{"SHIPNOTIFY_UNSUBSCRIBE": "one-click"}, []string{"worker"}, "SHIPNOTIFY_UNSUBSCRIBE: one-click needs SHIPNOTIFY_PUBLIC_URL"},
		{map[string]string{}, []string{"suppressions"}, "want a subcommand"},
		{map[string]string{}, []string{"suppressions", "forget"}, "unknown subcommand"},
		{map[string]string{}, []string{"suppressions", "remove"}, "--address: is required"},
		{map[string]string{}, []string{"suppressions", "remove", "--address", "Ops <ops@x.example>"}, "--address: is not a valid email address"},
		{map[string]string{}, []string{"api-key", "--name", "x", "--scopes", "send"}, "--scopes"},
		{map[string]string{}, []string{"api-key", "--name", "x", "--scopes", "read", "--tenant", "acme/eu"}, "--tenant: want letters"},
		{map[string]string{}, []string{"api-key", "--name", "x", "--scopes", "read", "--expires", "soon"}, "--expires: want an RFC 3339 time"},
		{map[string]string{}, []string{"api-key", "--name", "x", "--scopes", "read", "--expires", "2020-01-01"}, "--expires: 2020-01-01 has passed"},
	} {
		tc.env["TEMPORAL_CONFIG_FILE"] = "/nonexistent"
		code, _, stderr := cmdline{env: tc.env}.run(t, "", tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want)
	}
}

// The demo, as `make demo` runs it: every sample reminder arrives, and
// three shipments' reminders to one ops inbox arrive as one digest.
func TestDemoDeliversTheSample(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	c := cmdline{env: map[string]string{
		"TEMPORAL_ADDRESS":      testenv.TemporalAddress(t),
		"DATABASE_URL":          db.URL,
		"TEMPORAL_CONFIG_FILE":  "/nonexistent",
		"SHIPNOTIFY_CODEC_KEYS": testenv.CodecKeys,
	}}
	// The stand-ins on ports of our choosing (issue 35).
	mailPort, hookPort, trackerPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	code, stdout, stderr := c.run(t, "", "demo", "--exit-when-delivered", "--task-queue", testenv.TaskQueue(t),
		"--codec-server", "127.0.0.1:0", "--serve", "127.0.0.1:0", "--mail-sink", fmt.Sprintf("127.0.0.1:%d", mailPort),
		"--webhook-sink", fmt.Sprintf("127.0.0.1:%d", hookPort), "--tracker", fmt.Sprintf("127.0.0.1:%d", trackerPort))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, fmt.Sprintf("Stand-ins: mail sink http://127.0.0.1:%d, webhook receiver http://127.0.0.1:%d, tracker http://127.0.0.1:%d\n",
		mailPort, hookPort, trackerPort))
	require.Contains(t, stdout, fmt.Sprintf("mailbox (every mail as sent, its HTML rendered): http://127.0.0.1:%d/mailbox\n", mailPort))
	require.Equal(t, 6, strings.Count(stdout, "mail sink got"), "four reminders, one escalation and one digest: %s", stdout)
	require.Regexp(t, `mail sink got   a digest of 3 +"3 shipment reminders"  key digest_`, stdout)
	require.Equal(t, 1, strings.Count(stdout, "webhook got"), stdout)
	require.Contains(t, stdout, "bounce ×1")
	require.Equal(t, 7, strings.Count(stdout, " delivered\n"), "four of the sample, three of the digest: %s", stdout)
	require.Regexp(t, `consignee-old-inbox\s+undeliverable  bounced: the update's escalation contact was told, once`, stdout)
	require.Contains(t, stdout, "[shipnotify] Reminder SHP-1001")
	// The tracker hears back: each reminder scheduled and sent, four
	// delivered, one undeliverable and its escalation, every one signed.
	// The night desk's reminder too is scheduled, and waits; each of the
	// digest's three is sent and delivered on its own account.
	require.Equal(t, 9, strings.Count(stdout, "reminder.scheduled "), stdout)
	require.Equal(t, 8, strings.Count(stdout, "reminder.sent "), stdout)
	require.Equal(t, 7, strings.Count(stdout, "reminder.delivered "), stdout)
	require.Equal(t, 1, strings.Count(stdout, "reminder.undeliverable "), stdout)
	require.Equal(t, 1, strings.Count(stdout, "reminder.escalated "), stdout)
	require.Contains(t, stdout, "The tracker's endpoint got 26 status events")
	// The ops inbox's digest: said when scheduled, and how to look at it.
	require.Regexp(t, `And 3 shipments' reminders to one ops inbox, in a digest every 1m: one mail at \d\d:\d\d:00 lists them all:\n`+
		`  SHP-1003/window-\S+/ops-desk +due \S+\n  SHP-1004/`, stdout)
	require.Regexp(t, `\n  \S*shipnotify\S* list --digest-key digest_[0-9a-f]{64}   # the ops digest's members\n`, stdout)
	require.Regexp(t, `The ops digest's page: http://127\.0\.0\.1:\d+/console/digests/digest_[0-9a-f]{64}\n`, stdout)
	// One subscriber's send window holds its reminder, due at 03:00 in
	// Singapore, to the window's opening: the demo says so, shows how to
	// look at it, and cancels it when it stops, leaving none sleeping.
	require.Regexp(t, `And one a send window holds, due at night where its subscriber is:\n  SHP-1002/window-\S+/night-desk +`+
		`due (Mon|Tue|Wed|Thu|Fri|Sat|Sun) 03:00, goes out (Mon|Tue|Wed|Thu|Fri) 08:00 in the subscriber's window `+
		`\(mon,tue,wed,thu,fri 08:00-18:00 Asia/Singapore\)\n`, stdout)
	require.Regexp(t, `\n  \S*shipnotify\S* show SHP-1002/window-\S+/night-desk\n  \S*shipnotify\S* list --goes-out-from \S+Z --goes-out-to \S+Z`, stdout)
	require.Contains(t, stdout, "Cancelled 1 reminder waiting for the night desk's window, so the demo leaves none sleeping.\n")
	var state string
	require.NoError(t, db.Pool.QueryRow(t.Context(), `SELECT state FROM reminders WHERE shipment_id = 'SHP-1002'`).Scan(&state))
	require.Equal(t, "cancelled", state)
	require.Regexp(t, `curl -sS -H 'Authorization: Bearer snk_[^']+' 'http://127\.0\.0\.1:\d+/v1/reminders\?updated_since=0'`, stdout)
	require.Contains(t, stdout, "http://localhost:8233/namespaces/default/workflows?query=")
	require.Regexp(t, `Approval console: http://127\.0\.0\.1:\d+/console/ \(log in with the key snk_`, stdout)
	require.Regexp(t, `curl -sS -H 'Authorization: Bearer snk_[^']+' -H 'Content-Type: application/json' --data '\{.*"approval":\{"required":true,"timeout":"1m"\}.*\}' http://127\.0\.0\.1:\d+/v1/updates`, stdout)
	// The mailbox to see the mails in, and lines that work as printed.
	mailbox := regexp.MustCompile(`mailbox \(every mail as sent, its HTML rendered\): (http://127\.0\.0\.1:\d+/mailbox)\n`).FindStringSubmatch(stdout)
	require.NotNil(t, mailbox, stdout)
	require.Contains(t, stdout, "  eval \"$(scripts/dev.sh env | sed 's/^/export /')\"\n")
	require.Regexp(t, `\n  \S*shipnotify\S* list --shipment SHP-1001\n`, stdout)
}

// The branches from the command line: show's live status (in the start
// delay too), approve, reschedule (and its refusals), cancel.
func TestOperateFromTheCommandLine(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{DelayedStart: true})
	c := stackCLI(s)
	c.env["USER"] = "alice"
	ctx := context.Background()
	u := s.Update(t, time.Now().Add(time.Second), reminder.Email, reminder.Email)
	u.Subscribers[0].RequiresApproval = true
	u.Subscribers[1].DueAt = time.Now().Add(24 * time.Hour)
	u.EscalationEmail = "lead@shipper.example"
	results, err := s.Starter.Schedule(ctx, u)
	require.NoError(t, err)
	gated, later := results[0], results[1]

	code, stdout, stderr := c.run(t, "", "show", gated.ReminderID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Live")
	require.Contains(t, stdout, "awaiting_approval")
	require.Contains(t, stdout, "none yet")

	// A plain reminder in its start delay: no worker has run it, and show
	// says it waits for its due time instead of failing on the query.
	code, stdout, stderr = c.run(t, "", "show", later.ReminderID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Live (in its start delay, from what its start recorded):")
	require.Regexp(t, `  Waiting +due at \S+, waiting: the engine holds the workflow until `, stdout)
	code, stdout, stderr = c.run(t, "", "show", "--json", later.ReminderID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"WaitingUntil": "`)

	code, stdout, stderr = c.run(t, "", "approve", "--reminder", gated.ReminderID, "--reason", "checked")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"status":"approved"`)
	code, stdout, stderr = c.run(t, "", "reschedule", "--reminder", later.ReminderID, "--due-at", time.Now().Add(time.Second).Format(time.RFC3339Nano))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"status":"rescheduled"`)
	for _, r := range results {
		var res workflows.ReminderResult
		require.NoError(t, s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &res))
		require.Equal(t, reminder.Sent, res.State)
	}
	events, err := s.Mirror.Events(ctx, gated.ReminderID)
	require.NoError(t, err)
	require.Equal(t, "alice", events[1].Detail["by"], "--by defaults to the OS user")

	code, _, stderr = c.run(t, "", "reschedule", "--reminder", later.ReminderID, "--due-at", time.Now().Add(time.Hour).Format(time.RFC3339))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "refused")
	code, _, stderr = c.run(t, "", "reschedule", "--reminder", later.ReminderID, "--due-at", "next week")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--due-at")
	// Out of range is bad input (exit 2, nothing asked), as on schedule.
	code, _, stderr = c.run(t, "", "reschedule", "--reminder", later.ReminderID, "--due-at", time.Now().AddDate(0, 0, 800).Format(time.RFC3339))
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--due-at: puts the due time more than 732 days ahead")
	code, _, stderr = c.run(t, "", "approve", "--shipment", u.ShipmentID)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--update")

	code, stdout, stderr = c.run(t, "", "cancel", "--shipment", u.ShipmentID, "--reason", "withdrawn")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 2, strings.Count(stdout, `"status":"compensated"`), stdout)
	code, _, stderr = c.run(t, "", "cancel", "--shipment", "SHP-unknown")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no reminders for shipment")
}

// `shipnotify config`, as text and JSON, prints no secret: not a codec key
// whose base64 starts with "//" (it parses as a URL), not a database
// password or password parameter.
func TestConfigCommandRedactsSecrets(t *testing.T) {
	t.Parallel()
	slashKey := "k1://" + strings.Repeat("A", 41) + "=" // 32 bytes whose base64 starts with //
	c := cmdline{env: map[string]string{
		"SENDGRID_API_KEY": "SG.topsecret", "DATABASE_URL": "postgres://u:pw123@db:5432/x?sslpassword=pw456",
		"SHIPNOTIFY_CODEC_KEYS": slashKey, "TEMPORAL_CONFIG_FILE": "/nonexistent",
		"SHIPNOTIFY_CODEC_SERVER_TOKEN": "tok-789",
	}}
	for _, args := range [][]string{{"config"}, {"config", "--json"}} {
		code, stdout, stderr := c.run(t, "", args...)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "SENDGRID_API_KEY")
		require.Contains(t, stdout, "postgres://u:xxxxx@db:5432/x?sslpassword=xxxxx")
		for _, secret := range []string{"topsecret", "pw123", "pw456", "tok-789", "AAAAAAAA"} {
			require.NotContains(t, stdout, secret, args)
		}
	}
	code, _, stderr := cmdline{env: map[string]string{"SHIPNOTIFY_LOG_LEVEL": "loud"}}.run(t, "", "config")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "SHIPNOTIFY_LOG_LEVEL")
}

// The seed article's worked example, through the command.
func TestCapacityCommand(t *testing.T) {
	t.Parallel()
	c := cmdline{env: map[string]string{}}
	code, stdout, stderr := c.run(t, "", "capacity", "--updates-per-day", "40000", "--subscribers-per-update", "3",
		"--peak-factor", "10", "--drain-rate", "33.33", "--outage", "6h", "--bench-results", "/nonexistent")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{"120,000", "1.39/s", "13.9/s", "30,000 deliveries", "15m0s"} {
		require.Contains(t, stdout, want)
	}
	require.Contains(t, stdout, "4 (built in, as --fleet uses (no /nonexistent)", "no benchmark: the built-in actions")
	// Without --drain-rate: the last benchmark's catch-up rate (the median
	// of the compared runs; warm-ups and left-out runs do not count), and
	// the actions it counted in the full path's history.
	report := filepath.Join(t.TempDir(), "bench.json")
	require.NoError(t, os.WriteFile(report, []byte(`{"results":[
		{"workload":"catchup","kind":"full","round":0,"drain_rate":5},
		{"workload":"catchup","kind":"full","round":1,"drain_rate":40},
		{"workload":"catchup","kind":"full","round":2,"drain_rate":50},
		{"workload":"catchup","kind":"full","round":3,"drain_rate":60},
		{"workload":"catchup","kind":"full","round":4,"drain_rate":1,"invalid":"partly drained"},
		{"workload":"burst","kind":"full","round":1,"actions":{"total":3}},
		{"workload":"burst","kind":"naive","round":1,"actions":{"total":9}}]}`), 0o600))
	code, stdout, stderr = c.run(t, "", "capacity", "--updates-per-day", "40000", "--subscribers-per-update", "3", "--bench-results", report)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "50.0/s")
	require.Contains(t, stdout, "10m0s", "30,000 at 50/s")
	require.Contains(t, stdout, "360,000\n", "120,000 deliveries a day at 3 actions each")
	require.Contains(t, stdout, "10,800,000 (30 days)")
	require.NotContains(t, stdout, "cost", "no price given, no cost line")
	// A price of your own, and actions given: a cost line.
	code, stdout, stderr = c.run(t, "", "capacity", "--updates-per-day", "40000", "--subscribers-per-update", "3",
		"--drain-rate", "50", "--actions-per-reminder", "4", "--price-per-million-actions", "25", "--bench-results", report)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "14,400,000 (30 days)")
	require.Regexp(t, `actions cost per month +360\.00 \(at 25 per million actions\)`, stdout)
}

// Plain capacity answers out of the box: with no benchmark report (no
// out/bench.json, which a two-hour make bench writes) it takes the measured
// figures built into the binary, the ones --fleet uses, and prints what
// --fleet answers on the same inputs with the reason the two differ.
func TestCapacityWithoutBenchFile(t *testing.T) {
	t.Parallel()
	require.NoFileExists(t, "out/bench.json", "the test runs where no benchmark report is")
	c := cmdline{env: map[string]string{}}
	code, stdout, stderr := c.run(t, "", "capacity", "--updates-per-day", "40000", "--subscribers-per-update", "3")
	require.Equal(t, 0, code, stderr)
	f := capacity.DefaultFigures
	require.Regexp(t, `drain rate +`+regexp.QuoteMeta(fmt.Sprintf("%.1f/s (built in, as --fleet uses (no out/bench.json): %s)", f.MeasuredRate.Value, f.MeasuredRate.Source)), stdout)
	require.Regexp(t, `Temporal actions per reminder +`+regexp.QuoteMeta(fmt.Sprintf("%g (built in", f.ActionsPerReminder.Value)), stdout)
	require.Contains(t, stdout, "20m35s", "30,000 at the built-in 24.3/s")

	// --fleet on the same inputs: its outage drain is the one plain
	// capacity reports for it, with the reason they differ.
	code, fleet, stderr := c.run(t, "", "capacity", "--fleet", "--updates-per-day", "40000", "--subscribers-per-update", "3")
	require.Equal(t, 0, code, stderr)
	drain := regexp.MustCompile(`outage drain +(\S+)`).FindStringSubmatch(fleet)
	require.NotNil(t, drain, fleet)
	require.Regexp(t, `catch-up with --fleet +`+regexp.QuoteMeta(drain[1]+" (it sizes a fleet for 13.9/s, the peak or this backlog cleared within 1h0m0s"), stdout)
}

// The fleet model prints the seed's own load, then every measured input
// with the report it comes from, then the fleet; a flag of the other mode,
// or a figure that is not a number, is refused before anything prints.
func TestCapacityFleetCommand(t *testing.T) {
	t.Parallel()
	c := cmdline{env: map[string]string{}}
	code, stdout, stderr := c.run(t, "", "capacity", "--fleet", "--updates-per-day", "40000", "--subscribers-per-update", "3")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{"120,000", "1.4/s", "13.9/s", "30,000 cleared within 1h0m0s", "docs/bench-engine-2026-12-02-send-safety.json",
		"history shards", "workers", "mirror connections", "within the measured"} {
		require.Contains(t, stdout, want)
	}
	require.NotContains(t, stdout, "extrapolated", "the seed's peak is within the measured rate")
	require.Regexp(t, fmt.Sprintf(`workers +2, %d slots each`, config.DefaultWorkerMaxActivities), stdout,
		"a worker's slots are the binary's default, SHIPNOTIFY_WORKER_MAX_ACTIVITIES")

	// A thousand times the seed: 120 M a day, extrapolated, with a price and a provider's limit.
	code, stdout, stderr = c.run(t, "", "capacity", "--fleet", "--updates-per-day", "40000000", "--subscribers-per-update", "3",
		"--price-per-million-actions", "25", "--provider-rate", "20000", "--engine-cpu-ms", "10")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{"120,000,000", "1,389/s", "13,889/s", "14,400,000,000", "360,000", "extrapolated",
		"engine-cpu-ms", "outage drain under the provider's limit"} {
		require.Contains(t, stdout, want)
	}
	require.Regexp(t, `Temporal server \(frontend, history, matching\) +139 cores`, stdout, "13,889/s x 10 ms")

	for _, bad := range [][]string{
		{"--fleet", "--drain-rate", "50"},
		{"--retention", "30d"},
		{"--engine-cpu-ms", "5"},
		{"--fleet", "--engine-cpu-ms", "fast"},
		{"--fleet", "--retention", "soon"},
		{"--fleet", "--catch-up-window", "0s"},
	} {
		args := append([]string{"capacity", "--updates-per-day", "40000", "--subscribers-per-update", "3", "--bench-results", "/nonexistent"}, bad...)
		if bad[0] == "--fleet" {
			args = append([]string{"capacity", "--updates-per-day", "40000", "--subscribers-per-update", "3"}, bad...)
		}
		code, stdout, stderr := c.run(t, "", args...)
		require.Equal(t, 2, code, "%v: %s", bad, stdout)
		require.Empty(t, stdout, "%v prints nothing", bad)
		require.Contains(t, stderr, strings.TrimLeft(bad[len(bad)-2], "-"), "the error names the flag")
	}
}

func TestExportCommand(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	c := stackCLI(s)
	u := s.Update(t, time.Now().Add(time.Hour), reminder.Email, reminder.Webhook)
	results, err := s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range results {
			_ = s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})
	code, stdout, stderr := c.run(t, "", "export", "--state", "pending")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, 2, strings.Count(stdout, "\n"))
	require.Contains(t, stdout, results[0].DeliveryKey)
	require.NotContains(t, stdout, u.Subscribers[0].Email, "the export holds ids, not addresses")
	code, stdout, stderr = c.run(t, "", "export", "--format", "csv")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 3)
	require.True(t, strings.HasPrefix(lines[0], "reminder_id,shipment_id"))
	require.Equal(t, strings.Join(mirror.ExportColumns(), ","), lines[0])
	require.Contains(t, lines[0], ",provider_outcome,provider_outcome_at,delivered_at,tenant,")
	code, _, stderr = c.run(t, "", "export", "--format", "xml")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--format")

	// Issue 35: list's --update and due window filter the export too.
	later := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	u2 := s.Update(t, later, reminder.Email)
	u2.ShipmentID, u2.UpdateID = u.ShipmentID, "window-2"
	results2, err := s.Starter.Schedule(context.Background(), u2)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range results2 {
			_ = s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})
	exported := func(args ...string) []string {
		t.Helper()
		code, stdout, stderr := c.run(t, "", append([]string{"export"}, args...)...)
		require.Equal(t, 0, code, stderr)
		var keys []string
		for l := range strings.SplitSeq(strings.TrimSpace(stdout), "\n") {
			var r struct {
				DeliveryKey string `json:"delivery_key"`
			}
			require.NoError(t, json.Unmarshal([]byte(l), &r), l)
			keys = append(keys, r.DeliveryKey)
		}
		return keys
	}
	first := []string{results[0].DeliveryKey, results[1].DeliveryKey}
	require.ElementsMatch(t, first, exported("--update", "window-1"))
	require.Equal(t, []string{results2[0].DeliveryKey}, exported("--update", "window-2"))
	cut := later.Add(-time.Minute).Format(time.RFC3339)
	require.Equal(t, []string{results2[0].DeliveryKey}, exported("--due-from", cut))
	require.ElementsMatch(t, first, exported("--due-to", cut))
	code, _, stderr = c.run(t, "", "export", "--due-from", cut, "--due-to", cut)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--due-to must be after --due-from")
}

// A command run on a database nobody migrated says what to do, not
// PostgreSQL's "relation does not exist".
func TestAnUnmigratedMirrorSaysRunMigrate(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	bare := db.Schema + "_bare"
	_, err := db.Pool.Exec(context.Background(), "CREATE SCHEMA "+bare)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.Pool.Exec(context.Background(), "DROP SCHEMA "+bare+" CASCADE") })
	c := cmdline{env: map[string]string{
		"DATABASE_URL":         strings.Replace(db.URL, "search_path="+db.Schema, "search_path="+bare, 1),
		"TEMPORAL_CONFIG_FILE": "/nonexistent",
	}}
	code, _, stderr := c.run(t, "", "list")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "the mirror's schema is missing or out of date here: run shipnotify migrate")
	require.NotContains(t, stderr, "SQLSTATE")
}

// version names the module, the commit, Go and the Temporal SDK.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := cmdline{env: map[string]string{}}.run(t, "", "version")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^shipnotify +\S+\ncommit +\S+.*\ncommitted +\S+\ngo +go1\.\d+.*\ntemporal sdk +v1\.\d+\.\d+`, stdout)
}

// The bash completion, run by bash against the binary: a command from
// its first letters, a command's flags from its own --help.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	code, script, stderr := cmdline{env: map[string]string{}}.run(t, "", "completion", "bash")
	require.Equal(t, 0, code, stderr)
	bin := testenv.Binary(t)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(bin, filepath.Join(dir, "shipnotify")))
	complete := func(words ...string) []string {
		t.Helper()
		cmd := exec.Command("bash", "--norc", "-c", `eval "$SCRIPT"; COMP_WORDS=($WORDS); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _shipnotify; printf '%s\n' "${COMPREPLY[@]}"`)
		cmd.Env = append(os.Environ(), "SCRIPT="+script, "WORDS="+strings.Join(words, " "), "PATH="+dir+":"+os.Getenv("PATH"))
		out, err := cmd.Output()
		require.NoError(t, err)
		return strings.Fields(string(out))
	}
	require.Equal(t, []string{"schedule"}, complete("shipnotify", "sch"))
	require.Equal(t, []string{"reconcile", "reject", "reschedule", "reseal-secrets"}, complete("shipnotify", "re"))
	require.Equal(t, []string{"--shipment", "--state"}, complete("shipnotify", "list", "--s"))
	code, _, stderr = cmdline{env: map[string]string{}}.run(t, "", "completion", "fish")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "bash or zsh")
}

// The demo takes the dev environment's ports (scripts/dev.sh env): the
// codec server the Web UI was told of, and the Web UI's own link.
func TestDemoHonoursTheDevPorts(t *testing.T) {
	t.Parallel()
	c := cmdline{env: map[string]string{"SHIPNOTIFY_DEV_CODEC_ADDR": "127.0.0.1:9181", "SHIPNOTIFY_DEV_UI_URL": "http://localhost:9233"}}
	code, stdout, stderr := c.run(t, "", "demo", "--help")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `(default "127.0.0.1:9181")`)
	require.Contains(t, stdout, `(default "http://localhost:9233")`)
	_, stdout, _ = cmdline{env: map[string]string{}}.run(t, "", "demo", "--help")
	require.Contains(t, stdout, `(default "127.0.0.1:8081")`, "without them, dev.sh's own defaults")
}
