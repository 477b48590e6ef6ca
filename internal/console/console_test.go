package console_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

const escalationContact = "lead@shipper.example"

// clock is a settable clock for the console (the worker keeps real time).
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// fixture is the whole product on the dev server and PostgreSQL, with the
// console served as `shipnotify serve` mounts it, and the worker making
// decision links that point at it.
type fixture struct {
	s     *testenv.Stack
	url   string
	clock *clock
	keys  links.Keys
	// keys of the approvers alice and bob, and of carol, who may only read;
	// dora approves for the tenant acme.
	alice, bob, carol, dora string
	logs                    *testenv.SyncBuffer
}

// randomKey is a key as `shipnotify api-key` makes one (the console
// refuses any weaker).
func randomKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return api.KeyPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func hashOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// shown is a time as a page shows it to a reader whose browser named no
// zone and whose language is not American English.
func shown(t time.Time) string { return t.UTC().Format("2 Jan 2006, 15:04 UTC") }

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the console's options changed by change.
func setupWith(t *testing.T, change func(*console.Options)) *fixture {
	t.Helper()
	f := &fixture{clock: &clock{}, alice: randomKey(t), bob: randomKey(t), carol: randomKey(t), dora: randomKey(t), logs: &testenv.SyncBuffer{}}
	f.s = testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	var err error
	f.keys, err = links.ParseKeys(base64.StdEncoding.EncodeToString([]byte(randomKey(t))))
	require.NoError(t, err)
	approvers, err := console.ParseApprovers(strings.NewReader(fmt.Sprintf(
		"# the API keys file's format\nalice approve,read %s\nbob approve %s\ncarol read %s\n",
		hashOf(f.alice), hashOf(f.bob), hashOf(f.carol))))
	require.NoError(t, err)
	approvers = append(approvers, console.Approver{Name: "dora", KeyHash: sha256.Sum256([]byte(f.dora)), Tenant: mustTenant(t, "acme")})

	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	f.url = "http://" + srv.Listener.Addr().String()
	base, err := url.Parse(f.url)
	require.NoError(t, err)
	// The worker's links; the console checks them on its own clock.
	f.s.Activities.Links = &links.Signer{Keys: f.keys, BaseURL: base, TTL: time.Hour}
	f.s.StartWorker(t)
	o := console.Options{
		Starter: f.s.Starter, Mirror: f.s.Mirror, Approvers: approvers,
		Links:       &links.Signer{Keys: f.keys, BaseURL: base, TTL: time.Hour, Now: f.clock.Now},
		SessionKeys: newKeys(t),
		Now:         f.clock.Now,
		Logger:      slog.New(slog.NewJSONHandler(f.logs, nil)),
	}
	if change != nil {
		change(&o)
	}
	mux.Handle(console.Path, console.New(o))
	srv.Start()
	t.Cleanup(srv.Close)
	return f
}

// schedule schedules an update of n email subscribers that needs approval.
func (f *fixture) schedule(t *testing.T, n int, approval reminder.Approval) (reminder.Update, []starter.Result) {
	t.Helper()
	return f.scheduleFor(t, "", n, approval)
}

// scheduleFor is schedule for a tenant.
func (f *fixture) scheduleFor(t *testing.T, tenant string, n int, approval reminder.Approval) (reminder.Update, []starter.Result) {
	t.Helper()
	channels := make([]reminder.Channel, n)
	for i := range channels {
		channels[i] = reminder.Email
	}
	u := f.s.Update(t, time.Now().Add(2*time.Second), channels...)
	u.Tenant = tenant
	u.Approval = approval
	u.Approval.Required = true
	u.EscalationEmail = escalationContact
	results, err := f.s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	require.Len(t, results, n)
	t.Cleanup(func() {
		for _, r := range results {
			_ = f.s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})
	return u, results
}

func (f *fixture) login(t *testing.T, key string) *browser {
	t.Helper()
	b := newBrowser(t, f.url)
	page := b.get("/console/")
	require.Equal(t, "/console/login", page.URL.Path, "without a session the console asks to log in")
	page = b.submit(page.formFor(t, "Approver key"), "Log in", map[string]string{"key": key}, "same-origin")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Equal(t, "/console/", page.URL.Path)
	return b
}

func (f *fixture) waitFor(t *testing.T, workflowID string) workflows.ReminderResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res workflows.ReminderResult
	require.NoError(t, f.s.Temporal.GetWorkflow(ctx, workflowID, "").Get(ctx, &res), workflowID)
	return res
}

func (f *fixture) eventTypes(t *testing.T, reminderID string) []string {
	t.Helper()
	events, err := f.s.Mirror.Events(context.Background(), reminderID)
	require.NoError(t, err)
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

func (f *fixture) state(t *testing.T, reminderID string) reminder.State {
	t.Helper()
	row, err := f.s.Mirror.Get(context.Background(), reminderID)
	require.NoError(t, err)
	return row.State
}

func mailsFor(s *testenv.Stack, reminderID string, purpose reminder.Purpose) []sink.Mail {
	var out []sink.Mail
	for _, m := range s.Mail.Mails() {
		if m.CustomArgs["reminder_id"] == reminderID && m.CustomArgs["purpose"] == string(purpose) {
			out = append(out, m)
		}
	}
	return out
}

// An approver logs in, sees what awaits approval, approves one reminder and
// a colleague rejects another through the pages' own forms; the approved
// one is delivered, the rejected one ends cancelled, and each audit trail
// says who and why. Without a session, or from another origin, nothing is
// written.
func TestConsoleApprovesAndRejects(t *testing.T) {
	t.Parallel()
	f := setup(t)
	u, rs := f.schedule(t, 3, reminder.Approval{})
	approved, rejected, untouched := rs[0], rs[1], rs[2]

	// Unauthenticated: the pages redirect to the login, a decision is
	// refused, and a wrong key or a key without the approve scope does
	// not log in.
	anon := newBrowser(t, f.url)
	page := anon.get("/console/reminder?id=" + url.QueryEscape(approved.ReminderID))
	require.Equal(t, "/console/login", page.URL.Path)
	page = anon.post("/console/decide", url.Values{"reminder_id": {approved.ReminderID}, "decision": {"approve"}}, "same-origin")
	require.Equal(t, http.StatusUnauthorized, page.Status)
	for _, key := range []string{randomKey(t), f.carol, ""} {
		login := anon.get("/console/login")
		page = anon.submit(login.formFor(t, "Approver key"), "Log in", map[string]string{"key": key}, "same-origin")
		require.Equal(t, http.StatusUnauthorized, page.Status)
		require.Contains(t, page.Text(), "not an approver's key")
	}
	// A forged session cookie is no session.
	forged := &http.Cookie{Name: "shipnotify_console", Value: base64.RawURLEncoding.EncodeToString([]byte("1|alice|9999999999|00")) + ".AAAA"}
	base, _ := url.Parse(f.url + "/console/")
	anon.client.Jar.SetCookies(base, []*http.Cookie{forged})
	page = anon.post("/console/decide", url.Values{"reminder_id": {approved.ReminderID}, "decision": {"approve"}}, "same-origin")
	require.Equal(t, http.StatusUnauthorized, page.Status)
	require.Equal(t, reminder.AwaitingApproval, f.state(t, approved.ReminderID))
	require.Equal(t, []string{"scheduled"}, f.eventTypes(t, approved.ReminderID), "refused requests write nothing")
	require.NotContains(t, f.logs.String(), f.carol, "keys are never logged")

	// The list shows every reminder awaiting approval, with its due time,
	// ids, how long it has waited, what it says, to whom (masked), and
	// when it escalates and expires.
	alice := f.login(t, f.alice)
	page = alice.get("/console/?shipment=" + u.ShipmentID)
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, page.Text(), "Logged in as alice")
	require.Contains(t, page.Text(), "3 reminders match")
	rows := page.rows("reminders")
	require.Len(t, rows, 3, page.Body)
	for i, r := range rs {
		due := shown(r.DueAt)
		require.Equal(t, due, rows[i][0], "not due yet: no overdue marker")
		require.Regexp(t, "^"+regexp.QuoteMeta(u.ShipmentID+" / "+u.UpdateID+" / "+u.Subscribers[i].ID)+` awaiting_approval, waiting \d+s$`, rows[i][1])
		require.Equal(t, u.Message.Subject+" "+u.Message.Text, rows[i][2])
		local, domain, _ := strings.Cut(u.Subscribers[i].Email, "@")
		require.Equal(t, "email: "+local[:1]+"…@"+domain, rows[i][3])
		require.Regexp(t, `^escalates \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d UTC expires \d{1,2} `, rows[i][4])
	}
	require.Equal(t, "nosniff", page.Header.Get("X-Content-Type-Options"))
	require.Contains(t, page.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Contains(t, page.Header.Get("Content-Security-Policy"), "script-src 'self';")
	require.NotContains(t, page.Body, u.Subscribers[0].Email, "the console shows masked addresses")

	// A cross-origin POST, with a valid session, is refused and writes
	// nothing: by Sec-Fetch-Site, and by an Origin that is not the host.
	f0 := page.formFor(t, untouched.ReminderID)
	csrf := alice.submit(f0, "Approve", map[string]string{"reason": "forged"}, "cross-site")
	require.Equal(t, http.StatusForbidden, csrf.Status)
	req, err := http.NewRequest(http.MethodPost, f.url+"/console/decide",
		strings.NewReader(url.Values{"reminder_id": {untouched.ReminderID}, "decision": {"reject"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, alice.do(req).Status)
	require.Equal(t, reminder.AwaitingApproval, f.state(t, untouched.ReminderID))
	require.Equal(t, []string{"scheduled"}, f.eventTypes(t, untouched.ReminderID))

	// Alice approves one with a reason.
	page = alice.submit(page.formFor(t, approved.ReminderID), "Approve", map[string]string{"reason": "customer confirmed"}, "same-origin")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "Approved")

	// Approving says when it goes out: its due time, written out.
	require.Contains(t, page.Text(), "it goes out at "+shown(approved.DueAt))

	// Bob logs in and rejects another from the reminder's own page. Reject
	// is a link to a confirmation that asks for a reason, never one click:
	// a reject posted without the confirmation, or without a reason,
	// changes nothing.
	bob := f.login(t, f.bob)
	page = bob.get("/console/reminder?id=" + url.QueryEscape(rejected.ReminderID))
	require.Equal(t, http.StatusOK, page.Status)
	_, hasReject := page.formFor(t, "Reason").Buttons["Reject"]
	require.False(t, hasReject, "no reject button beside approve")
	confirm := bob.get(page.linkTo(t, "Reject…"))
	require.Equal(t, http.StatusOK, confirm.Status, confirm.Body)
	require.Contains(t, confirm.Text(), "Reject this reminder?")
	unconfirmed := bob.post("/console/decide", url.Values{"reminder_id": {rejected.ReminderID}, "decision": {"reject"}, "reason": {"x"}}, "same-origin")
	require.Equal(t, http.StatusOK, unconfirmed.Status)
	require.Contains(t, unconfirmed.Text(), "Reject this reminder?", "an unconfirmed reject asks for the confirmation")
	page = bob.submit(confirm.formFor(t, "Reason"), "Reject reminder", map[string]string{"reason": ""}, "same-origin")
	require.Equal(t, http.StatusUnprocessableEntity, page.Status)
	require.Contains(t, page.Text(), "Say why it is rejected")
	require.Equal(t, []string{"scheduled"}, f.eventTypes(t, rejected.ReminderID), "neither wrote anything")
	page = bob.submit(page.formFor(t, "Reason"), "Reject reminder", map[string]string{"reason": "wrong consignee"}, "same-origin")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "Rejected")

	// The approved one is delivered; the rejected one ends cancelled.
	require.Equal(t, reminder.Sent, f.waitFor(t, approved.WorkflowID).State)
	require.Equal(t, reminder.Cancelled, f.waitFor(t, rejected.WorkflowID).State)
	require.Len(t, mailsFor(f.s, approved.ReminderID, reminder.PurposeReminder), 1)
	require.Empty(t, mailsFor(f.s, rejected.ReminderID, reminder.PurposeReminder))

	// The audit trails say who and why.
	trail := func(b *browser, id string) map[string][]string {
		page := b.get("/console/reminder?id=" + url.QueryEscape(id))
		require.Equal(t, http.StatusOK, page.Status)
		out := map[string][]string{}
		for _, row := range page.rows("events") {
			out[row[1]] = row[2:5] // by, key, reason
		}
		return out
	}
	require.Equal(t, []string{"alice", "alice", "customer confirmed"}, trail(bob, approved.ReminderID)["approved"])
	require.Contains(t, trail(bob, approved.ReminderID), "sent")
	require.Equal(t, []string{"bob", "bob", "wrong consignee"}, trail(alice, rejected.ReminderID)["rejected"])
	require.Equal(t, []string{"scheduled", "approved", "sent"}, f.eventTypes(t, approved.ReminderID))
	require.Equal(t, []string{"scheduled", "rejected"}, f.eventTypes(t, rejected.ReminderID))

	// What the provider reported of the approved one shows on its page.
	page = bob.get("/console/reminder?id=" + url.QueryEscape(approved.ReminderID))
	require.NotContains(t, page.Text(), "Provider outcome", "nothing reported yet")
	at := time.Now().UTC().Truncate(time.Second)
	_, err = f.s.Mirror.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{
		{ID: approved.ReminderID + "/delivered", DeliveryKey: approved.DeliveryKey, Outcome: reminder.OutcomeDelivered, At: at}}, time.Hour)
	require.NoError(t, err)
	page = bob.get("/console/reminder?id=" + url.QueryEscape(approved.ReminderID))
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, page.Text(), "State delivered")
	require.Contains(t, page.Text(), "Provider outcome delivered at "+shown(at))
	require.Contains(t, page.Text(), "Delivered "+shown(at))
	require.Contains(t, trail(bob, approved.ReminderID), "provider_delivered")

	// Only the untouched one is left; deciding a decided one changes nothing.
	page = alice.get("/console/?shipment=" + u.ShipmentID)
	rows = page.rows("reminders")
	require.Len(t, rows, 1)
	require.Contains(t, rows[0][1], " / "+u.Subscribers[2].ID+" ")
	// A reason is held to the one limit every interface has (the API's).
	require.Contains(t, page.Body, fmt.Sprintf(`name="reason" maxlength="%d"`, starter.MaxReasonRunes))
	page = alice.post("/console/decide", url.Values{"reminder_id": {untouched.ReminderID}, "decision": {"approve"},
		"reason": {strings.Repeat("é", starter.MaxReasonRunes+1)}}, "same-origin")
	require.Equal(t, http.StatusUnprocessableEntity, page.Status)
	require.Contains(t, page.Text(), fmt.Sprintf("at most %d", starter.MaxReasonRunes))
	require.Equal(t, []string{"scheduled"}, f.eventTypes(t, untouched.ReminderID))
	page = alice.post("/console/decide", url.Values{"reminder_id": {rejected.ReminderID}, "decision": {"approve"}}, "same-origin")
	require.Equal(t, http.StatusConflict, page.Status)
	require.Contains(t, page.Text(), "Not changed")
	require.Contains(t, page.Text(), "rejected already, by ")
	require.Equal(t, []string{"scheduled", "rejected"}, f.eventTypes(t, rejected.ReminderID))
	// The same decision again (a double submit, a retry) reads as done.
	before := f.eventTypes(t, approved.ReminderID)
	page = alice.post("/console/decide", url.Values{"reminder_id": {approved.ReminderID}, "decision": {"approve"}}, "same-origin")
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, page.Text(), "Already approved")
	require.Contains(t, page.Text(), "was approved before, by ")
	require.Equal(t, before, f.eventTypes(t, approved.ReminderID))

	// After logging out, the cookie is gone and so is the session.
	page = alice.get("/console/")
	page = alice.submit(page.formFor(t, "Log out"), "Log out", nil, "same-origin")
	require.Equal(t, "/console/login", page.URL.Path)
	require.Equal(t, "/console/login", alice.get("/console/").URL.Path)
}

// The trail page shows by and key in columns of their own: a by that
// imitates a key ("alice (key admin)", as an API caller may write it) shows
// as those words, and the key that acted as the key.
func TestTheTrailShowsTheKeyApartFromBy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, rs := f.schedule(t, 1, reminder.Approval{})
	outs, err := f.s.Starter.Decide(context.Background(), starter.Selection{ReminderID: rs[0].ReminderID}, true,
		starter.Actor{By: "alice (key admin)", Key: "tracker-eu", Reason: "checked"})
	require.NoError(t, err)
	require.Equal(t, starter.StatusApproved, outs[0].Status, outs[0].Error)

	page := f.login(t, f.alice).get("/console/reminder?id=" + url.QueryEscape(rs[0].ReminderID))
	require.Equal(t, http.StatusOK, page.Status)
	var approved []string
	for _, row := range page.rows("events") {
		if row[1] == "approved" {
			approved = row[2:]
		}
	}
	require.Equal(t, []string{"alice (key admin)", "tracker-eu", "checked", ""}, approved, page.Body)
}

var (
	approveLink = regexp.MustCompile(`Approve: (\S+)`)
	rejectLink  = regexp.MustCompile(`Reject: +(\S+)`)
)

// The escalation of an overdue approval carries signed links. Opening one
// decides nothing (a mail scanner may prefetch it); its confirmation page's
// button does, once. A used, tampered or expired link, or a POST from
// another site, changes nothing and says so.
func TestEscalationLinksDecideOnlyFromTheirConfirmationPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	u, rs := f.schedule(t, 3, reminder.Approval{Timeout: time.Second, ExpireAfter: time.Hour})
	viaLink, tampered, rejected := rs[0], rs[1], rs[2]

	// The escalation (after a second without a decision) carries the links;
	// wait until each is sent and recorded.
	require.Eventually(t, func() bool {
		for _, r := range rs {
			if !slices.Contains(f.eventTypes(t, r.ReminderID), "escalation_sent") {
				return false
			}
		}
		return true
	}, time.Minute, 100*time.Millisecond)
	linksOf := func(r starter.Result) (approve, reject string) {
		m := mailsFor(f.s, r.ReminderID, reminder.PurposeEscalation)[0]
		require.Equal(t, []string{escalationContact}, m.To)
		require.NotContains(t, m.Text, u.Subscribers[0].Email, "the escalation names ids, not addresses")
		a, r2 := approveLink.FindStringSubmatch(m.Text), rejectLink.FindStringSubmatch(m.Text)
		require.NotNil(t, a, m.Text)
		require.NotNil(t, r2, m.Text)
		require.True(t, strings.HasPrefix(a[1], f.url+links.Path), a[1])
		return a[1], r2[1]
	}
	approve, reject := linksOf(viaLink)

	// Opening the link (twice, as a scanner and then the person) shows the
	// confirmation page and decides nothing.
	person := newBrowser(t, f.url)
	for range 2 {
		page := person.get(approve)
		require.Equal(t, http.StatusOK, page.Status, page.Body)
		require.Contains(t, page.Text(), "Approve this reminder?")
		require.Contains(t, page.Text(), viaLink.ReminderID)
		require.Equal(t, "no-referrer", page.Header.Get("Referrer-Policy"))
	}
	require.Equal(t, reminder.AwaitingApproval, f.state(t, viaLink.ReminderID))
	require.Equal(t, []string{"scheduled", "escalation_sent"}, f.eventTypes(t, viaLink.ReminderID))

	// The confirmation page's button approves.
	confirm := person.get(approve)
	page := person.submit(confirm.formFor(t, "Reason"), "Approve reminder", map[string]string{"reason": "confirmed by phone"}, "same-origin")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "Approved")
	require.Equal(t, reminder.Sent, f.waitFor(t, viaLink.WorkflowID).State)
	require.Len(t, mailsFor(f.s, viaLink.ReminderID, reminder.PurposeReminder), 1)
	events, err := f.s.Mirror.Events(context.Background(), viaLink.ReminderID)
	require.NoError(t, err)
	require.Equal(t, "approved", events[2].Type)
	require.Equal(t, console.LinkActor, events[2].Detail["by"])
	require.Equal(t, "confirmed by phone", events[2].Detail["reason"])

	// Used: posting again, opening it again, or its reject twin, changes
	// nothing and says what was decided and when, not who or why: the
	// link's holder is the contact the scheduler named, and who decided
	// (an approver, by name) and their reason are for the console.
	trail := f.eventTypes(t, viaLink.ReminderID)
	page = person.submit(confirm.formFor(t, "Reason"), "Approve reminder", nil, "same-origin")
	require.Equal(t, http.StatusConflict, page.Status)
	require.Contains(t, page.Text(), "Nothing left to do")
	require.Contains(t, page.Text(), "It was approved at ")
	require.NotContains(t, page.Text(), "confirmed by phone")
	require.NotContains(t, page.Text(), console.LinkActor)
	for _, link := range []string{approve, reject} {
		require.Equal(t, http.StatusConflict, person.get(link).Status)
		require.Equal(t, http.StatusConflict, person.post(strings.TrimPrefix(link, f.url), nil, "same-origin").Status)
	}
	require.Equal(t, trail, f.eventTypes(t, viaLink.ReminderID))
	require.Len(t, mailsFor(f.s, viaLink.ReminderID, reminder.PurposeReminder), 1)

	// Tampered: one character changed, or another reminder's id spliced
	// in, is not valid, for a GET and a POST alike.
	approve2, _ := linksOf(tampered)
	token := strings.TrimPrefix(approve2, f.url+links.Path)
	enc, sig, _ := strings.Cut(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(enc)
	require.NoError(t, err)
	spliced := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), tampered.ReminderID, rejected.ReminderID, 1))) + "." + sig
	flipped := token[:len(token)-3] + map[bool]string{true: "A", false: "B"}[token[len(token)-3] != 'A'] + token[len(token)-2:]
	for _, bad := range []string{flipped, spliced, enc, "nonsense"} {
		page := person.get(links.Path + bad)
		require.Equal(t, http.StatusBadRequest, page.Status, bad)
		require.Contains(t, page.Text(), "This link is not valid")
		page = person.post(links.Path+bad, url.Values{"reason": {"x"}}, "same-origin")
		require.Equal(t, http.StatusBadRequest, page.Status, bad)
	}
	require.Equal(t, reminder.AwaitingApproval, f.state(t, tampered.ReminderID))
	require.Equal(t, reminder.AwaitingApproval, f.state(t, rejected.ReminderID))

	// Expired: the same real link, an hour and a minute later on the
	// console's clock, is refused and says until when it was valid.
	f.clock.Advance(time.Hour + time.Minute)
	page = person.get(approve2)
	require.Equal(t, http.StatusGone, page.Status)
	require.Contains(t, page.Text(), "This link has expired")
	require.Contains(t, page.Text(), tampered.ReminderID)
	page = person.post(links.Path+token, nil, "same-origin")
	require.Equal(t, http.StatusGone, page.Status)
	f.clock.Advance(-(time.Hour + time.Minute))
	require.Equal(t, reminder.AwaitingApproval, f.state(t, tampered.ReminderID))
	require.Equal(t, []string{"scheduled", "escalation_sent"}, f.eventTypes(t, tampered.ReminderID))

	// A POST to a link from another site is refused, even for a valid link.
	_, reject3 := linksOf(rejected)
	confirm = person.get(reject3)
	require.Equal(t, http.StatusOK, confirm.Status)
	require.Contains(t, confirm.Text(), "Reject this reminder?")
	page = person.submit(confirm.formFor(t, "Reason"), "Reject reminder", nil, "cross-site")
	require.Equal(t, http.StatusForbidden, page.Status)
	require.Equal(t, reminder.AwaitingApproval, f.state(t, rejected.ReminderID))
	require.Contains(t, f.logs.String(), "cross-origin request refused", "the refusal is logged")
	require.NotContains(t, f.logs.String(), strings.TrimPrefix(reject3, f.url+links.Path),
		"by its route: the link's token, a credential, stays out of the log")

	// From its own page, the reject link rejects: the reminder ends
	// cancelled, and nothing is sent.
	page = person.submit(confirm.formFor(t, "Reason"), "Reject reminder", nil, "same-origin")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Contains(t, page.Text(), "Rejected")
	require.Equal(t, reminder.Cancelled, f.waitFor(t, rejected.WorkflowID).State)
	require.Empty(t, mailsFor(f.s, rejected.ReminderID, reminder.PurposeReminder))
	require.Equal(t, []string{"scheduled", "escalation_sent", "rejected"}, f.eventTypes(t, rejected.ReminderID))
}

// A reminder id that is no id (a NUL, a missing part) names nothing: the
// page is a 404, PostgreSQL is never asked, and nothing is logged as an
// error. (A NUL reached PostgreSQL and came back as a 503 and an ERROR.)
func TestAReminderIDThatIsNoIDNamesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	alice := f.login(t, f.alice)
	for _, id := range []string{"S/U/x\x00", "S/U", "S/U/" + strings.Repeat("x", 65), ""} {
		page := alice.get("/console/reminder?id=" + url.QueryEscape(id))
		require.Equal(t, http.StatusNotFound, page.Status, "%q", id)
	}
	require.NotContains(t, f.logs.String(), `"level":"ERROR"`)
}

// An approver is bound to a tenant: the list shows that tenant's reminders
// only, and another tenant's reminder, under the same ids, is not found,
// whether read or decided; a decision on it writes nothing.
func TestApproversSeeAndDecideTheirTenantsOnly(t *testing.T) {
	t.Parallel()
	f := setup(t)
	u, theirs := f.scheduleFor(t, "", 2, reminder.Approval{})
	// acme's update under the very same ids.
	acmeUpdate := u
	acmeUpdate.Tenant = "acme"
	ours, err := f.s.Starter.Schedule(context.Background(), acmeUpdate)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, r := range ours {
			_ = f.s.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test over")
		}
	})
	require.NotEqual(t, theirs[0].ReminderID, ours[0].ReminderID)

	listed := func(b *browser) []string {
		t.Helper()
		page := b.get("/console/?shipment=" + u.ShipmentID)
		require.Equal(t, http.StatusOK, page.Status, page.Body)
		var subs []string
		for _, row := range page.rows("reminders") {
			subs = append(subs, row[3])
		}
		return subs
	}
	dora, alice := f.login(t, f.dora), f.login(t, f.alice)
	require.Len(t, listed(dora), 2)
	require.Len(t, listed(alice), 2)
	page := dora.get("/console/?shipment=" + u.ShipmentID)
	require.NotContains(t, page.Body, `data-reminder-id="`+theirs[0].ReminderID+`"`)
	require.Contains(t, page.Body, `data-reminder-id="`+ours[0].ReminderID+`"`)

	// The default tenant's reminder is nobody dora knows.
	page = dora.get("/console/reminder?id=" + url.QueryEscape(theirs[0].ReminderID))
	require.Equal(t, http.StatusNotFound, page.Status)
	page = dora.post("/console/decide", url.Values{"reminder_id": {theirs[0].ReminderID}, "decision": {"approve"}}, "same-origin")
	require.Equal(t, http.StatusNotFound, page.Status, page.Body)
	require.Equal(t, reminder.AwaitingApproval, f.state(t, theirs[0].ReminderID))
	require.Equal(t, []string{"scheduled"}, f.eventTypes(t, theirs[0].ReminderID), "a refused decision writes nothing")
	// Nor is acme's anybody alice knows.
	page = alice.get("/console/reminder?id=" + url.QueryEscape(ours[0].ReminderID))
	require.Equal(t, http.StatusNotFound, page.Status)

	// Dora decides acme's own.
	page = dora.get("/console/reminder?id=" + url.QueryEscape(ours[0].ReminderID))
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	page = dora.submit(page.formFor(t, "Reason"), "Approve", map[string]string{"reason": "acme confirmed"}, "same-origin")
	require.Equal(t, http.StatusOK, page.Status, page.Body)
	require.Equal(t, reminder.Scheduled, f.state(t, ours[0].ReminderID))
	require.Equal(t, reminder.AwaitingApproval, f.state(t, theirs[0].ReminderID))
}

// mustTenant is a tenant named as an approvers file would name it.
func mustTenant(t testing.TB, name string) reminder.Tenant {
	t.Helper()
	tenant, err := reminder.ParseTenant("tenant", name)
	require.NoError(t, err)
	return tenant
}
