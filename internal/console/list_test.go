package console_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/reminder"
)

// tenantFixture is a console with a page of limit rows and an approver,
// erin, of a tenant no other test writes to, so counts are exact.
func tenantFixture(t *testing.T, limit int) (f *fixture, tenant string, erin *browser) {
	t.Helper()
	f, tenant, key := tenantSetup(t, limit)
	return f, tenant, f.login(t, key)
}

// tenantSetup is tenantFixture before erin logs in: her key.
func tenantSetup(t *testing.T, limit int) (f *fixture, tenant, key string) {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	tenant = "t-" + hex.EncodeToString(b)
	key = randomKey(t)
	f = setupWith(t, func(o *console.Options) {
		o.Limit = limit
		o.Approvers = append(o.Approvers, console.Approver{Name: "erin", KeyHash: sha256.Sum256([]byte(key)), Tenant: mustTenant(t, tenant)})
	})
	return f, tenant, key
}

// The list pages past its limit by due time, each row once, and counts
// what its filters match; the filters (state, due days, shipment) narrow
// it, and a bad one is a 400 that names its field.
func TestTheListPagesFiltersAndCounts(t *testing.T) {
	t.Parallel()
	f, tenant, erin := tenantFixture(t, 2)
	u, rs := f.scheduleFor(t, tenant, 5, reminder.Approval{})

	var seen []string
	page := erin.get("/console/")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "5 reminders match; this page shows 2, due first.")
	for n := 0; ; n++ {
		require.Less(t, n, 3, "three pages hold five rows")
		for _, row := range page.rows("reminders") {
			seen = append(seen, strings.Fields(row[1])[4]) // the subscriber of "shipment / update / subscriber …"
		}
		if !strings.Contains(page.Body, `rel="next"`) {
			break
		}
		page = erin.get(page.linkTo(t, "Next 2"))
		require.Equal(t, http.StatusOK, page.Status, page.Body)
		require.Equal(t, "/console/", page.linkTo(t, "First page"))
	}
	var want []string
	for _, s := range u.Subscribers {
		want = append(want, s.ID)
	}
	require.Equal(t, want, seen, "every row once, due first (the ids break the tie)")

	// Filters.
	for q, n := range map[string]int{
		"shipment=" + u.ShipmentID: 5,
		"shipment=SHP-none":        0,
		"state=scheduled":          0,
		"state=pending":            5,
		"state=any&due_from=" + day(rs[0].DueAt, 0) + "&due_to=" + day(rs[0].DueAt, 0): 5,
		"state=any&due_from=" + day(rs[0].DueAt, 1):                                    0,
		"state=any&due_to=" + day(rs[0].DueAt, -1):                                     0,
	} {
		page := erin.get("/console/?" + q)
		require.Equal(t, http.StatusOK, page.Status, q)
		require.Contains(t, page.Text(), strconv.Itoa(n)+" reminder", q)
		require.Len(t, page.rows("reminders"), min(n, 2), q)
	}
	for q, field := range map[string]string{
		"state=maybe":                           "State",
		"due_from=tomorrow":                     "Due from",
		"due_to=2026-13-01":                     "Due to",
		"due_from=2026-12-02&due_to=2026-12-01": "Due to",
		"shipment=" + url.QueryEscape("a b"):    "Shipment",
		"after_id=x&after_due=y":                "position",
	} {
		page := erin.get("/console/?" + q)
		require.Equal(t, http.StatusBadRequest, page.Status, q)
		require.Contains(t, page.Text(), field, q)
	}
}

// day is t's UTC day, moved by days, as the filter's date inputs write it.
func day(t time.Time, days int) string { return t.UTC().AddDate(0, 0, days).Format(time.DateOnly) }

// Approve all approves every reminder of an update awaiting approval, and
// says when each goes out; reject all asks first, for a reason, and then
// cancels every one. A reminder past its due time is marked overdue.
func TestApproveAllAndRejectAll(t *testing.T) {
	t.Parallel()
	f, tenant, erin := tenantFixture(t, 100)
	u1, rs1 := f.scheduleFor(t, tenant, 3, reminder.Approval{})
	u2, rs2 := f.scheduleFor(t, tenant, 2, reminder.Approval{})

	page := erin.get("/console/?shipment=" + u1.ShipmentID)
	require.NotContains(t, page.Text(), "overdue")
	f.clock.Advance(time.Minute)
	page = erin.get("/console/?shipment=" + u1.ShipmentID)
	require.Len(t, page.rows("reminders"), 3)
	for _, row := range page.rows("reminders") {
		require.True(t, strings.HasSuffix(row[0], " overdue"), "due in 2 s, seen a minute on: %q", row[0])
	}
	require.Contains(t, page.Text(), "Update "+u1.ShipmentID+" / "+u1.UpdateID+": 3 await approval")
	page = erin.submit(page.formFor(t, "Approve all 3"), "Approve all 3", nil, "same-origin")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "Approved: update "+u1.ShipmentID+" / "+u1.UpdateID)
	outcomes := page.rows("outcomes")
	require.Len(t, outcomes, 3)
	for i, row := range outcomes {
		require.Equal(t, rs1[i].ReminderID, row[0])
		require.Equal(t, "approved", row[1])
		require.Regexp(t, regexp.MustCompile(`^(it goes out now \(it was due at .+ UTC ?\)|it was sent at .+ UTC ?)\.$`), row[2])
	}
	for _, r := range rs1 {
		require.Equal(t, reminder.Sent, f.waitFor(t, r.WorkflowID).State)
	}

	// Reject all: a link to a confirmation, which wants a reason.
	page = erin.get("/console/?shipment=" + u2.ShipmentID)
	_, hasReject := page.formFor(t, "Approve all 2").Buttons["Reject all 2"]
	require.False(t, hasReject, "no reject button beside approve all")
	confirm := erin.get(page.linkTo(t, "Reject all 2…"))
	require.Equal(t, http.StatusOK, confirm.Status, confirm.Body)
	require.Contains(t, confirm.Text(), "Reject all 2 of update "+u2.ShipmentID+" / "+u2.UpdateID+"?")
	require.Equal(t, "/console/?shipment="+u2.ShipmentID, confirm.linkTo(t, "Back, rejecting nothing"))
	page = erin.submit(confirm.formFor(t, "Reason"), "Reject all 2", map[string]string{"reason": ""}, "same-origin")
	require.Equal(t, http.StatusUnprocessableEntity, page.Status)
	for _, r := range rs2 {
		require.Equal(t, []string{"scheduled"}, f.eventTypes(t, r.ReminderID), "nothing rejected without a reason")
	}
	page = erin.submit(page.formFor(t, "Reason"), "Reject all 2", map[string]string{"reason": "shipment recalled"}, "same-origin")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "Rejected: update "+u2.ShipmentID)
	for _, r := range rs2 {
		require.Equal(t, reminder.Cancelled, f.waitFor(t, r.WorkflowID).State)
		events, err := f.s.Mirror.Events(context.Background(), r.ReminderID)
		require.NoError(t, err)
		require.Equal(t, "shipment recalled", events[len(events)-1].Detail["reason"])
	}
	// Nothing of the update awaits any more: the list offers no group.
	page = erin.get("/console/?shipment=" + u2.ShipmentID)
	require.NotContains(t, page.Text(), "Whole updates")
}

// What an approver reads before deciding: who scheduled the reminder (the
// API key's name, kept by the trail's scheduled event), the whole text on
// its page, the delivery key shortened with the whole in reach, and the
// overview's counts by state and due day, drawn as SVG.
func TestTheReminderPageAndTheOverview(t *testing.T) {
	t.Parallel()
	f, tenant, erin := tenantFixture(t, 100)
	u := f.s.Update(t, time.Now().Add(48*time.Hour), reminder.Email, reminder.Email)
	u.Tenant, u.ScheduledBy, u.EscalationEmail = tenant, "tracker-eu", escalationContact
	u.Approval = reminder.Approval{Required: true, Timeout: time.Hour, ExpireAfter: 2 * time.Hour}
	u.Message.Text = strings.Repeat("Gate 4 is closed on Sundays. ", 10)
	results, err := f.s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range results {
			_ = f.s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})

	page := erin.get("/console/")
	rows := page.rows("reminders")
	require.Len(t, rows, 2)
	require.Contains(t, rows[0][1], "scheduled by tracker-eu")
	require.True(t, strings.HasSuffix(rows[0][2], "…"), "the list shows a preview: %q", rows[0][2])
	require.Less(t, len([]rune(rows[0][2])), len(u.Message.Subject)+160)

	page = erin.get("/console/reminder?id=" + url.QueryEscape(results[0].ReminderID))
	require.Equal(t, http.StatusOK, page.Status)
	text := page.Text()
	require.Contains(t, text, strings.TrimSpace(u.Message.Text), "the page shows the whole text")
	require.Contains(t, text, "by tracker-eu")
	require.Contains(t, text, "Delivery key "+results[0].DeliveryKey[:12]+"…")
	require.Contains(t, page.Body, `data-copy="`+results[0].DeliveryKey+`"`)
	require.Regexp(t, `Escalates \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d UTC Expires`, text)
	trail := page.rows("events")
	require.Equal(t, "scheduled", trail[0][1])
	require.Equal(t, "tracker-eu", trail[0][3], "the key column")

	page = erin.get("/console/overview")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Body, `<tr class="state-bar" data-state="awaiting_approval" data-n="2">`)
	dueDay := results[0].DueAt.UTC().Format(time.DateOnly)
	require.Contains(t, page.Body, `data-day="`+dueDay+`" data-n="2"`)
	require.Contains(t, page.Text(), "When the 2 yet to be sent go out")
	require.NotContains(t, page.Body, "<script>", "the chart needs no script of its own")
}
