package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
	"github.com/shipnotify/shipnotify/starter"
)

// nightInSingapore is the first 03:00 in Singapore (UTC+8, no summer
// time) at least two hours after now, and 08:00 that day, when a window
// opening at 08:00 every day lets a reminder due then go out.
func nightInSingapore(now time.Time) (due, opens time.Time) {
	sgt := time.FixedZone("SGT", 8*3600)
	local := now.Add(2 * time.Hour).In(sgt)
	due = time.Date(local.Year(), local.Month(), local.Day(), 3, 0, 0, 0, sgt)
	if due.Before(local) {
		due = due.AddDate(0, 0, 1)
	}
	return due.UTC(), due.Add(5 * time.Hour).UTC()
}

// A reminder due at night in its subscriber's zone goes out when the
// subscriber's window opens, and the CLI says so where a person looks:
// schedule tells when it goes out (on stderr; the JSON on stdout carries
// goes_out_at), list shows GOES OUT beside DUE and counts by it with
// --goes-out-from/--goes-out-to ("what do we owe at 08:00?"), and show
// says "due Tue 03:00, goes out Tue 08:00 in the subscriber's window"
// with the window. A reminder without one is not mentioned, and goes out
// when due.
func TestTheCLIShowsWhenAReminderGoesOutInItsWindow(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	c := stackCLI(s)
	due, opens := nightInSingapore(time.Now())
	u := testenv.ValidUpdate(time.Now())
	shipment := testenv.ID(t, "SHP")
	u["shipment_id"] = shipment
	u["subscribers"] = []any{
		map[string]any{"id": "night-desk", "channel": "email", "email": "night@consignee.example", "due_at": due.Format(time.RFC3339),
			"time_zone": "Asia/Singapore", "send_window": map[string]any{"days": "mon-sun", "hours": "08:00-18:00"}},
		map[string]any{"id": "day-desk", "channel": "email", "email": "day@consignee.example", "due_at": due.Format(time.RFC3339)},
	}

	code, stdout, stderr := c.run(t, updateJSON(t, u), "schedule")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"goes_out_at":"`+opens.Format(time.RFC3339)+`"`, "in UTC, as due_at, though worked out in Singapore")
	results := map[string]starter.Result{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r starter.Result
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		results[r.SubscriberID] = r
	}
	t.Cleanup(func() {
		for _, r := range results {
			_ = s.Temporal.TerminateWorkflow(t.Context(), r.WorkflowID, "", "test over")
		}
	})
	night, day := results["night-desk"], results["day-desk"]
	require.True(t, night.DueAt.Equal(due), "the due time stays its own: %s", night.DueAt)
	require.True(t, night.GoesOutAt.Equal(opens), "goes out at the opening: %s", night.GoesOutAt)
	require.True(t, day.GoesOutAt.Equal(due))
	dayName := due.In(time.FixedZone("SGT", 8*3600)).Format("Mon")
	sentence := "due " + dayName + " 03:00, goes out " + dayName + " 08:00 in the subscriber's window (mon,tue,wed,thu,fri,sat,sun 08:00-18:00 Asia/Singapore)"
	require.Contains(t, stderr, night.ReminderID+" goes out at "+opens.Format(time.RFC3339)+", not at its due time: "+sentence)
	require.NotContains(t, stderr, day.ReminderID, "a reminder that goes out when due is not mentioned")

	code, stdout, stderr = c.run(t, "", "list", "--shipment", shipment)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Equal(t, []string{"REMINDER", "CHANNEL", "DUE", "GOES", "OUT", "STATE", "OUTCOME", "DELIVERY", "KEY"}, strings.Fields(lines[0]))
	goesOut := map[string][2]string{} // reminder id: due, goes out
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		require.Len(t, f, 7, l)
		goesOut[f[0]] = [2]string{f[2], f[3]}
	}
	require.Equal(t, [2]string{due.Format(time.RFC3339), opens.Format(time.RFC3339)}, goesOut[night.ReminderID], stdout)
	require.Equal(t, [2]string{due.Format(time.RFC3339), due.Format(time.RFC3339)}, goesOut[day.ReminderID], stdout)

	// What goes out around 03:00 is the reminder without a window; what
	// goes out at 08:00, the night desk's. Due around 03:00 are both.
	listed := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := c.run(t, "", append([]string{"list", "--shipment", shipment}, args...)...)
		require.Equal(t, 0, code, stderr)
		return stdout
	}
	out := listed("--goes-out-from", due.Add(-time.Minute).Format(time.RFC3339), "--goes-out-to", due.Add(time.Minute).Format(time.RFC3339))
	require.Contains(t, out, day.ReminderID)
	require.NotContains(t, out, night.ReminderID)
	out = listed("--goes-out-from", opens.Format(time.RFC3339), "--goes-out-to", opens.Add(time.Minute).Format(time.RFC3339))
	require.Contains(t, out, night.ReminderID)
	require.NotContains(t, out, day.ReminderID)
	out = listed("--goes-out-to", opens.Format(time.RFC3339))
	require.NotContains(t, out, night.ReminderID, "half-open: --goes-out-to is not included")
	out = listed("--due-from", due.Add(-time.Minute).Format(time.RFC3339), "--due-to", due.Add(time.Minute).Format(time.RFC3339))
	require.Contains(t, out, night.ReminderID)
	require.Contains(t, out, day.ReminderID)

	code, stdout, stderr = c.run(t, "", "show", night.ReminderID)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^Due +`+regexp.QuoteMeta(due.Format(time.RFC3339))+`$`, stdout)
	require.Regexp(t, `(?m)^Goes out +`+regexp.QuoteMeta(opens.Format(time.RFC3339))+`$`, stdout)
	require.Regexp(t, `(?m)^Send window +`+regexp.QuoteMeta(sentence)+`$`, stdout)
	code, stdout, stderr = c.run(t, "", "show", day.ReminderID)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stdout, "Goes out")
	require.NotContains(t, stdout, "Send window")
}

// --goes-out-from and --goes-out-to take what --due-from and --due-to
// take; a bad one, or a span that ends before it starts, is refused naming
// the flag, exit status 2, before anything is read or written.
func TestListRefusesABadGoesOutSpan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--goes-out-from", "tuesday"}, "--goes-out-from: not an RFC 3339 time or a YYYY-MM-DD date"},
		{[]string{"--goes-out-to", "08:00"}, "--goes-out-to: not an RFC 3339 time or a YYYY-MM-DD date"},
		{[]string{"--goes-out-from", "2027-01-13", "--goes-out-to", "2027-01-12"}, "--goes-out-to must be after --goes-out-from"},
		{[]string{"--goes-out-from", "2027-01-12T08:00:00Z", "--goes-out-to", "2027-01-12T08:00:00Z"}, "--goes-out-to must be after --goes-out-from"},
	} {
		// No database named: a flag accepted would fail on the config.
		code, stdout, stderr := cmdline{env: map[string]string{"TEMPORAL_CONFIG_FILE": "/nonexistent"}}.run(t, "", append([]string{"list"}, tc.args...)...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want, tc.args)
		require.Empty(t, stdout)
	}
}

// A send window the update gets wrong is refused naming its field, exit
// status 2, and nothing is written.
func TestScheduleRefusesABadSendWindow(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	c := stackCLI(s)
	u := testenv.ValidUpdate(time.Now())
	u["subscribers"] = u["subscribers"].([]any)[:1]
	u["send_window"] = map[string]any{"days": "mon-fri", "hours": "08:00-25:00", "time_zone": "Asia/Singapore"}
	code, stdout, stderr := c.run(t, updateJSON(t, u), "schedule")
	require.Equal(t, 2, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "send_window.hours")
	var n int
	require.NoError(t, s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM reminders`).Scan(&n))
	require.Zero(t, n, "nothing written")
}

// show prints when a windowed reminder goes out, and the running
// workflow's own account of it, and a reminder sent before its due time
// under window_policy previous says so.
func TestShowSaysWhenTheWindowLetsItGo(t *testing.T) {
	t.Parallel()
	sgt := time.FixedZone("SGT", 8*3600)
	due := time.Date(2026, 12, 8, 3, 0, 0, 0, sgt) // a Tuesday
	w := &reminder.SendWindow{Window: sendwindow.Window{Days: sendwindow.Weekdays, From: 8 * 60, To: 18 * 60},
		TimeZone: "Asia/Singapore", Policy: sendwindow.Previous}
	closed := time.Date(2026, 12, 7, 18, 0, 0, 0, sgt)
	out := showOutput{
		Reminder:  api.Reminder{ID: "S/u/a", Channel: reminder.Email, DueAt: due.UTC(), State: reminder.Scheduled},
		Workflow:  workflowStatus{Status: "RUNNING"},
		goesOutAt: closed.UTC(),
		window:    w,
	}
	var b bytes.Buffer
	require.NoError(t, printShow(cli.Env{Stdout: &b}, out))
	require.Regexp(t, `(?m)^Goes out +2026-12-07T10:00:00Z$`, b.String())
	require.Regexp(t, `(?m)^Send window +due Tue 03:00, goes out Mon 18:00 at the close of the subscriber's window before it `+
		`\(mon,tue,wed,thu,fri 08:00-18:00 Asia/Singapore\)$`, b.String())
}
