package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
)

// noFollow is b's client without following redirects: the answer itself.
func (b *browser) noFollow() *http.Client {
	return &http.Client{Jar: b.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// postRaw posts fields as a same-origin form and returns the answer
// itself, unfollowed.
func (b *browser) postRaw(t *testing.T, path string, fields url.Values) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(fields.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", b.base)
	res, err := b.noFollow().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res
}

// flipFirst changes s's first character, so a signature always changes
// (its last ones may already be the replacement, one time in thousands).
func flipFirst(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

// A decision's POST is answered with a 303 to its result, so reloading
// the result shows it again and decides nothing again. The result's
// address is signed: changed, it shows nothing; it is for its tenant's
// approvers; after an hour it points to the audit trail.
func TestDecisionsRedirectToTheirResult(t *testing.T) {
	t.Parallel()
	f, tenant, erin := tenantFixture(t, 100)
	_, rs := f.scheduleFor(t, tenant, 2, reminder.Approval{})

	res := erin.postRaw(t, "/console/decide", url.Values{"reminder_id": {rs[0].ReminderID}, "decision": {"approve"}, "reason": {"checked"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	result := res.Header.Get("Location")
	require.True(t, strings.HasPrefix(result, "/console/decided?r="), result)
	trail := f.eventTypes(t, rs[0].ReminderID)
	require.Equal(t, []string{"scheduled", "approved"}, trail)
	for range 2 { // the redirect, then a reload
		page := erin.get(result)
		require.Equal(t, http.StatusOK, page.Status, page.Body)
		require.Contains(t, page.Text(), "Reminder "+rs[0].ReminderID+" is approved: it goes out")
	}
	require.Equal(t, trail, f.eventTypes(t, rs[0].ReminderID), "a reload decides nothing")

	// The same decision again reads as done, without "It it".
	res = erin.postRaw(t, "/console/decide", url.Values{"reminder_id": {rs[0].ReminderID}, "decision": {"approve"}})
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	page := erin.get(res.Header.Get("Location"))
	require.Contains(t, page.Text(), "Already approved")
	require.Regexp(t, `Nothing more was needed: it (goes out|was sent) `, page.Text())
	require.NotContains(t, page.Text(), "It it")

	// A changed address shows nothing; another tenant's approver, or no
	// session, sees nothing of it.
	enc, sig, _ := strings.Cut(strings.TrimPrefix(result, "/console/decided?r="), ".")
	require.Equal(t, http.StatusNotFound, erin.get("/console/decided?r="+enc+"."+flipFirst(sig)).Status)
	require.Equal(t, http.StatusNotFound, erin.get("/console/decided?r=x").Status)
	require.Equal(t, http.StatusNotFound, f.login(t, f.alice).get(result).Status)
	require.Equal(t, "/console/login", newBrowser(t, f.url).get(result).URL.Path)

	// An hour on, the result is gone; the trail keeps the decision.
	f.clock.Advance(time.Hour + time.Minute)
	page = erin.get(result)
	require.Equal(t, http.StatusGone, page.Status)
	require.Contains(t, page.Text(), "audit trail")
}

// What an approver reads: the reject confirmation of an update's only
// reminder says so, and lists to whom it would have gone and what it says;
// the reminder page keeps the message's line breaks; times and the
// filter's days are in the zone the browser named; the overview's due
// chart reaches the last pending reminder, however far off; and a wrong
// key at the login says whom to ask.
func TestWhatAnApproverReads(t *testing.T) {
	t.Parallel()
	f, tenant, erin := tenantFixture(t, 100)
	u := f.s.Update(t, time.Now().Add(60*24*time.Hour), reminder.Email)
	u.Tenant, u.EscalationEmail = tenant, escalationContact
	u.Approval = reminder.Approval{Required: true}
	u.Message = reminder.Message{Subject: "Dock 4 slot on Thursday", Text: "Dear consignee,\n\nGate 4 is closed.\nUse gate 5."}
	rs, err := f.s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.s.Temporal.TerminateWorkflow(context.Background(), rs[0].WorkflowID, "", "test over") })

	// Reject the update's only reminder: named as one, with its
	// subscriber and subject.
	page := erin.get("/console/?shipment=" + u.ShipmentID)
	require.Contains(t, page.Text(), "1 awaits approval")
	require.NotContains(t, page.Text(), "all 1")
	confirm := erin.get(page.linkTo(t, "Reject it…"))
	require.Equal(t, http.StatusOK, confirm.Status, confirm.Body)
	require.Contains(t, confirm.Text(), "Reject the only reminder of update "+u.ShipmentID+" / "+u.UpdateID+" awaiting approval?")
	require.NotContains(t, confirm.Text(), "all 1")
	require.Contains(t, confirm.Text(), "Subject: Dock 4 slot on Thursday")
	require.Contains(t, confirm.Text(), "It would have gone to: "+u.Subscribers[0].ID+" (email: e…@customer.example), due ")
	one := erin.get("/console/reject?reminder_id=" + url.QueryEscape(rs[0].ReminderID))
	require.Contains(t, one.Text(), "Subject: Dock 4 slot on Thursday")
	require.Contains(t, one.Text(), u.Subscribers[0].ID+" (email: e…@customer.example)")

	// The message's line breaks.
	page = erin.get("/console/reminder?id=" + url.QueryEscape(rs[0].ReminderID))
	require.Contains(t, page.Body, "Dear consignee,<br>\n<br>\nGate 4 is closed.<br>\nUse gate 5.")

	// In the zone the browser named (the console's script sets the
	// cookie), in the reader's order.
	base, err := url.Parse(f.url + "/console/")
	require.NoError(t, err)
	erin.client.Jar.SetCookies(base, []*http.Cookie{{Name: "shipnotify_tz", Value: "America/New_York"}})
	req, err := http.NewRequest(http.MethodGet, f.url+"/console/?shipment="+u.ShipmentID, nil)
	require.NoError(t, err)
	req.Header.Set("Accept-Language", "en-US,en;q=0.8")
	page = erin.do(req)
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	due := rs[0].DueAt.In(ny)
	require.Equal(t, due.Format("Jan 2, 2006, 3:04 PM MST"), page.rows("reminders")[0][0])
	require.Contains(t, page.Text(), "Due days are days in "+due.Format("MST")+" (America/New_York).")
	require.Contains(t, page.Text(), "Times are in "+time.Now().In(ny).Format("MST")+" (America/New_York), your browser's time zone")
	day := due.Format(time.DateOnly)
	for q, n := range map[string]string{"due_from=" + day + "&due_to=" + day: "1 reminder matches", "due_to=" + due.AddDate(0, 0, -1).Format(time.DateOnly): "0 reminders match"} {
		page = erin.get("/console/?state=any&shipment=" + u.ShipmentID + "&" + q)
		require.Contains(t, page.Text(), n, q)
	}

	// The trail's times too (the scheduled event's due_at).
	page = erin.get("/console/reminder?id=" + url.QueryEscape(rs[0].ReminderID))
	require.Contains(t, page.rows("events")[0][5], "due_at= "+due.Format("2 Jan 2006, 15:04 MST"))

	// The overview's due chart reaches the reminder due in 60 days.
	erin.client.Jar.SetCookies(base, []*http.Cookie{{Name: "shipnotify_tz", Value: "UTC"}})
	page = erin.get("/console/overview")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "When the 1 yet to be sent go out")
	require.Contains(t, page.Text(), "Per week")
	require.Contains(t, page.Body, `data-n="1"`, "the reminder due in 60 days is on the chart")
	require.NotContains(t, page.Text(), "goes out later")

	// A wrong key: ask the administrator.
	anon := newBrowser(t, f.url)
	login := anon.get("/console/login")
	page = anon.submit(login.formFor(t, "Approver key"), "Log in", map[string]string{"key": randomKey(t)}, "same-origin")
	require.Equal(t, http.StatusUnauthorized, page.Status)
	require.Contains(t, page.Text(), "Ask your administrator for a console key")
	page = anon.submit(login.formFor(t, "Approver key"), "Log in", map[string]string{"key": "hunter2"}, "same-origin")
	require.Contains(t, page.Text(), "Ask your administrator for a console key")
	require.NotContains(t, page.Text(), "random bits")
}
