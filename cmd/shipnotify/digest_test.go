package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// Three shipments' reminders to one ops inbox with "digest": "1m" go out
// together at the interval's boundary, and the CLI says so where a person
// looks: schedule tells each goes out at the boundary, in a digest (the
// JSON's goes_out_at is the boundary); show says "goes out with its
// address's other reminders in a digest every 1m" before the send and
// "sent in digest <key> with 2 others" after it; list --digest-key <key>
// lists exactly the three, and another digest's key none of them.
func TestTheCLIShowsADigestAndListsItsMembers(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t)
	c := stackCLI(s)
	const inbox = "ops@consignee.example"
	// Far enough ahead that all three are scheduled and shown before it.
	boundary := reminder.DigestAt(time.Now().Add(30*time.Second), time.Minute)
	shipment := testenv.ID(t, "SHP")
	var results []starter.Result
	t.Cleanup(func() {
		for _, r := range results {
			_ = s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})
	for i := range 3 {
		u := testenv.ValidUpdate(time.Now())
		u["shipment_id"] = fmt.Sprintf("%s-%d", shipment, i)
		u["digest"] = "1m"
		due := boundary.Add(-time.Second - time.Duration(i)*200*time.Millisecond)
		u["subscribers"] = []any{map[string]any{"id": "ops-desk", "channel": "email", "email": inbox, "due_at": due.Format(time.RFC3339Nano)}}
		code, stdout, stderr := c.run(t, updateJSON(t, u), "schedule")
		require.Equal(t, 0, code, stderr)
		var r starter.Result
		require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(stdout)), &r), stdout)
		results = append(results, r)
		require.True(t, r.DueAt.Equal(due), "the due time stays its own: %s", r.DueAt)
		require.True(t, r.GoesOutAt.Equal(boundary), "goes out at the digest's boundary %s, not %s", boundary, r.GoesOutAt)
		require.Contains(t, stderr, r.ReminderID+" goes out at "+boundary.UTC().Format(time.RFC3339)+
			", not at its due time: goes out with its address's other reminders in a digest every 1m")
	}

	code, stdout, stderr := c.run(t, "", "show", results[0].ReminderID)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^Goes out +`+regexp.QuoteMeta(boundary.UTC().Format(time.RFC3339))+`$`, stdout)
	require.Regexp(t, `(?m)^Digest +goes out with its address's other reminders in a digest every 1m$`, stdout)
	require.NotContains(t, stdout, "Send window", "a digest is not a send window")

	ctx, cancel := context.WithDeadline(context.Background(), boundary.Add(2*time.Minute))
	defer cancel()
	for _, r := range results {
		require.NoError(t, s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, nil), r.ReminderID)
	}

	code, stdout, stderr = c.run(t, "", "show", results[1].ReminderID)
	require.Equal(t, 0, code, stderr)
	m := regexp.MustCompile(`(?m)^Digest +sent in digest (\S+) with 2 others \(every 1m\)$`).FindStringSubmatch(stdout)
	require.NotNil(t, m, stdout)
	key := m[1]
	require.True(t, reminder.IsDigestKey(key), key)
	code, stdout, stderr = c.run(t, "", "show", "--json", results[2].ReminderID)
	require.Equal(t, 0, code, stderr)
	var shown struct {
		Digest struct {
			Every, Key string
			Members    int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &shown))
	require.Equal(t, "1m", shown.Digest.Every)
	require.Equal(t, key, shown.Digest.Key, "every member names the one digest")
	require.Equal(t, 3, shown.Digest.Members)

	code, stdout, stderr = c.run(t, "", "list", "--digest-key", key)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var listed, want []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		require.Equal(t, string(reminder.Sent), f[4], l)
		listed = append(listed, f[0])
	}
	for _, r := range results {
		want = append(want, r.ReminderID)
	}
	slices.Sort(listed)
	slices.Sort(want)
	require.Equal(t, want, listed, "the digest's members, and only they")

	code, stdout, stderr = c.run(t, "", "list", "--digest-key", reminder.DigestKey([]string{"another digest's member"}))
	require.Equal(t, 0, code, stderr)
	require.Len(t, strings.Split(strings.TrimSpace(stdout), "\n"), 1, "the header alone: %s", stdout)
}

// A --digest-key that is no digest's key is refused naming the flag, exit
// status 2, before anything is read.
func TestListRefusesAMalformedDigestKey(t *testing.T) {
	t.Parallel()
	key := reminder.DigestKey([]string{"a"})
	for _, bad := range []string{"digest_xyz", key[:len(key)-1], strings.TrimPrefix(key, reminder.DigestKeyPrefix), strings.ToUpper(key)} {
		// No database named: a flag accepted would fail on the config.
		code, stdout, stderr := cmdline{env: map[string]string{"TEMPORAL_CONFIG_FILE": "/nonexistent"}}.run(t, "", "list", "--digest-key", bad)
		require.Equal(t, 2, code, "%q: %s", bad, stderr)
		require.Contains(t, stderr, "--digest-key: not a digest's key", bad)
		require.Empty(t, stdout)
	}
}
