package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// Three shipments' reminders to one inbox with a digest every minute go
// out as one message, and the console says so: before the send, each
// reminder's page says it goes out at the interval's boundary "in a
// digest every 1m" (and the list, beside its due time); after it, the
// page links "sent in a digest of 3" to the digest's page, which lists
// the three (shipment, subscriber, state, each linked to its page). The
// digest is its tenant's: another tenant's approver, a key of no digest
// and a malformed key all get the not-found page.
func TestTheConsoleShowsADigestAndItsMembers(t *testing.T) {
	t.Parallel()
	f, tenant, erin := tenantFixture(t, 100)
	const inbox = "ops@consignee.example"
	every := time.Minute
	// Far enough ahead that the pages are read before it goes out.
	boundary := reminder.DigestAt(time.Now().Add(30*time.Second), every)
	var results []starter.Result
	t.Cleanup(func() {
		for _, r := range results {
			_ = f.s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})
	for i := range 3 {
		u := f.s.Update(t, boundary.Add(-time.Second-time.Duration(i)*200*time.Millisecond), reminder.Email)
		u.Tenant = tenant
		u.ShipmentID = fmt.Sprintf("%s-%d", u.ShipmentID, i)
		u.Message.Subject = fmt.Sprintf("Shipment %d: dock 4 at 10:00", i)
		u.Subscribers[0].Email = inbox
		u.Digest = &every
		rs, err := f.s.Starter.Schedule(context.Background(), u)
		require.NoError(t, err)
		require.True(t, boundary.Equal(rs[0].GoesOutAt), rs[0].GoesOutAt)
		results = append(results, rs...)
	}

	page := erin.get("/console/reminder?id=" + url.QueryEscape(results[0].ReminderID))
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "Goes out "+shown(boundary)+" Digest in a digest every 1m Shipment")
	require.NotContains(t, page.Text(), "a digest of", "not sealed yet")
	page = erin.get("/console/?state=pending")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Len(t, page.rows("reminders"), 3)
	for _, row := range page.rows("reminders") {
		require.Contains(t, row[0], "goes out "+shown(boundary)+" in a digest every 1m", row)
	}

	ctx, cancel := context.WithDeadline(context.Background(), boundary.Add(2*time.Minute))
	defer cancel()
	for _, r := range results {
		require.NoError(t, f.s.Temporal.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, nil), r.ReminderID)
	}

	page = erin.get("/console/reminder?id=" + url.QueryEscape(results[1].ReminderID))
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "Digest in a digest every 1m; sent in a digest of 3")
	href := page.linkTo(t, "sent in a digest of 3")
	key, ok := strings.CutPrefix(href, "/console/digests/")
	require.True(t, ok, href)
	require.True(t, reminder.IsDigestKey(key), key)

	page = erin.get(href)
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "One email message to o…@consignee.example, holding 3 reminders gathered every 1m.")
	require.Contains(t, page.Text(), "Goes out "+shown(boundary))
	var shipments, want []string
	for _, row := range page.rows("digest-members") {
		require.Len(t, row, 6, row)
		require.Equal(t, "email-a", row[2], "its subscriber")
		require.Equal(t, string(reminder.Sent), row[3], "its state")
		shipments = append(shipments, row[1])
	}
	for i, r := range results {
		want = append(want, strings.Split(r.ReminderID, "/")[1]) // tenant/shipment/update/subscriber
		require.Contains(t, page.Text(), fmt.Sprintf("Shipment %d: dock 4 at 10:00", i))
		member := erin.get(page.linkTo(t, "Audit trail of "+r.ReminderID))
		require.Equal(t, http.StatusOK, member.Status, member.Body)
		require.Contains(t, member.Text(), "Reminder "+r.ReminderID+" State sent")
	}
	slices.Reverse(want) // the last scheduled is due first
	require.Equal(t, want, shipments, "the three shipments, and only they, due first")

	// Another tenant's approver, under the very same key, finds nothing.
	alice := f.login(t, f.alice)
	page = alice.get(href)
	require.Equal(t, http.StatusNotFound, page.Status, page.Body)
	require.NotContains(t, page.Body, results[0].ReminderID)
	for _, path := range []string{"/console/digests/" + reminder.DigestKey([]string{"no member"}), "/console/digests/digest_xyz",
		"/console/digests/" + strings.ToUpper(key), "/console/digests/"} {
		page = erin.get(path)
		require.Equal(t, http.StatusNotFound, page.Status, path)
		require.Contains(t, page.Text(), "Not found", path)
	}
	require.NotContains(t, f.logs.String(), `"level":"ERROR"`)
}
