package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// testWriter sends a process's output to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestConsoleInABrowser serves the console (with the worker, the mail sink
// and its /mailbox page) and has ui-test/console.mjs drive headless
// Chromium through it, in Europe/Berlin: log in; page through the list
// (two rows a page); approve one reminder and reject another through its
// confirmation; approve a whole update; see the approved ones in the mail
// sink and the rejected one cancelled; follow an escalation email's
// approve link from the sink; follow a digest member's link to its
// digest's page; check every page with axe-core, and at
// 1280, 1024 and 390 px, with long data (the longest ids, a long subject,
// an unbroken word), that nothing scrolls sideways; and save screenshots of
// it all (docs/screenshots when SCREENSHOT_DIR says so). `make test-ui`
// runs it (it needs Chromium, playwright-core and axe-core); elsewhere it
// skips.
func TestConsoleInABrowser(t *testing.T) {
	script := os.Getenv("SHIPNOTIFY_BROWSER_TEST")
	if script == "" {
		t.Skip("make test-ui runs this: SHIPNOTIFY_BROWSER_TEST is the path of ui-test/console.mjs")
	}
	script, err := filepath.Abs(script)
	require.NoError(t, err)
	f, tenant, key := tenantSetup(t, 2)
	// A digest of three to one inbox, sent at the next minute's boundary
	// at least 30 s away: its member's page links to the digest's page.
	digestEvery := time.Minute
	boundary := reminder.DigestAt(time.Now().Add(30*time.Second), digestEvery)
	var digestRs []starter.Result
	for i := range 3 {
		d := f.s.Update(t, boundary.Add(-time.Second-time.Duration(i)*200*time.Millisecond), reminder.Email)
		d.Tenant, d.Digest = tenant, &digestEvery
		d.ShipmentID = fmt.Sprintf("%s-%d", d.ShipmentID, i)
		d.Subscribers[0].Email = "ops@consignee.example"
		rs, err := f.s.Starter.Schedule(context.Background(), d)
		require.NoError(t, err)
		digestRs = append(digestRs, rs...)
	}
	t.Cleanup(func() {
		for _, r := range digestRs {
			_ = f.s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})
	u, rs := f.scheduleFor(t, tenant, 2, reminder.Approval{})
	whole, wholeRs := f.scheduleFor(t, tenant, 3, reminder.Approval{})
	// The link is a capability of its own: the escalation goes to the
	// update's contact, whichever tenant it is.
	_, viaLink := f.scheduleFor(t, tenant, 1, reminder.Approval{Timeout: time.Second, ExpireAfter: time.Hour})
	require.Eventually(t, func() bool {
		return slices.Contains(f.eventTypes(t, viaLink[0].ReminderID), "escalation_sent")
	}, time.Minute, 100*time.Millisecond, "the escalation with the links is sent")
	// Long data, as a tracker may send it: ids of the longest, a long
	// subject, an unbroken word longer than a phone is wide, and line
	// breaks the reminder page keeps; due in 40 days, so the overview's
	// chart reaches that far.
	long := f.s.Update(t, time.Now().Add(40*24*time.Hour), reminder.Email, reminder.Email)
	long.Tenant, long.EscalationEmail = tenant, escalationContact
	long.Approval = reminder.Approval{Required: true}
	long.ShipmentID = "SHP-" + strings.Repeat("7", 60)
	long.UpdateID = "delivery-window-" + strings.Repeat("x", 48)
	for i := range long.Subscribers {
		long.Subscribers[i].ID = fmt.Sprintf("consignee-%d-", i) + strings.Repeat("k", 52)
		long.Subscribers[i].Email = "a-very-long-mailbox-name-for-the-consignee@" + strings.Repeat("sub.", 8) + "example"
	}
	long.Message = reminder.Message{
		Subject: "Your delivery window at Dock 14, Gate B of the Rotterdam Maasvlakte distribution centre opens on Thursday morning",
		Text:    "Dear consignee,\n\nthe tracking reference is " + strings.Repeat("ABCDEFGHIJ", 30) + ".\nPlease have it ready.",
	}
	longRs, err := f.s.Starter.Schedule(context.Background(), long)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range longRs {
			_ = f.s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})

	sentBy, cancelSent := context.WithDeadline(context.Background(), boundary.Add(2*time.Minute))
	defer cancelSent()
	for _, r := range digestRs {
		require.NoError(t, f.s.Temporal.GetWorkflow(sentBy, r.WorkflowID, "").Get(sentBy, nil), "the digest is sent: %s", r.ReminderID)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(),
		"CONSOLE_URL="+f.url,
		"MAILBOX_URL="+f.s.Mail.URL()+"/mailbox",
		"APPROVER_KEY="+key,
		"APPROVER=erin",
		"SHIPMENT_ID="+u.ShipmentID,
		"APPROVE_ID="+rs[0].ReminderID,
		"REJECT_ID="+rs[1].ReminderID,
		"WHOLE_SHIPMENT_ID="+whole.ShipmentID,
		"LINK_ID="+viaLink[0].ReminderID,
		"AWAITING=8",
		"LONG_SHIPMENT_ID="+long.ShipmentID,
		"LONG_ID="+longRs[0].ReminderID,
		"DIGEST_MEMBER_ID="+digestRs[0].ReminderID,
	)
	cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
	require.NoError(t, cmd.Run(), "ui-test/console.mjs")

	// What the browser saw, checked at the source.
	require.Equal(t, reminder.Sent, f.waitFor(t, rs[0].WorkflowID).State)
	require.Equal(t, reminder.Cancelled, f.waitFor(t, rs[1].WorkflowID).State)
	for _, r := range wholeRs {
		require.Equal(t, reminder.Sent, f.waitFor(t, r.WorkflowID).State)
	}
	require.Equal(t, reminder.Sent, f.waitFor(t, viaLink[0].WorkflowID).State)
	require.Equal(t, []string{"scheduled", "escalation_sent", "approved", "sent"}, f.eventTypes(t, viaLink[0].ReminderID))
	events, err := f.s.Mirror.Events(context.Background(), viaLink[0].ReminderID)
	require.NoError(t, err)
	require.Equal(t, console.LinkActor, events[2].Detail["by"])
	events, err = f.s.Mirror.Events(context.Background(), rs[1].ReminderID)
	require.NoError(t, err)
	require.Equal(t, "erin", events[1].Detail["by"])
	require.Equal(t, "wrong consignee", events[1].Detail["reason"])
}
