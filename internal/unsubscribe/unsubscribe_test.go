package unsubscribe_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/internal/unsubscribe"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

func keys(t *testing.T) links.Keys {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	k, err := links.ParseKeys(base64.StdEncoding.EncodeToString(b))
	require.NoError(t, err)
	return k
}

// rig is the product (runtime role) whose worker sends one-click
// List-Unsubscribe headers, with serve's unsubscribe handler on a
// loopback server the links point to.
type rig struct {
	s    *testenv.Stack
	srv  *httptest.Server
	keys links.Keys
}

func newRig(t *testing.T) *rig {
	t.Helper()
	s := testenv.NewStackWith(t, testenv.StackOptions{RuntimeRole: true, NoWorker: true})
	k := keys(t)
	srv := httptest.NewServer(unsubscribe.New(k, s.Mirror, nil))
	t.Cleanup(srv.Close)
	base, err := url.Parse(srv.URL)
	require.NoError(t, err)
	signer := &links.Signer{Keys: k, BaseURL: base}
	s.Activities.Unsubscribe = func(id string) email.Unsubscribe { return email.Unsubscribe{OneClick: signer.UnsubscribeURL(id)} }
	s.StartWorker(t)
	return &rig{s: s, srv: srv, keys: k}
}

// link is the one-click link in the List-Unsubscribe header of the i-th
// mail the sink took.
func (r *rig) link(t *testing.T, i int) string {
	t.Helper()
	mails := r.s.Mail.Mails()
	require.Greater(t, len(mails), i)
	return strings.TrimSuffix(strings.TrimPrefix(mails[i].Headers["List-Unsubscribe"], "<"), ">")
}

func (r *rig) schedule(t *testing.T, addr string) (starter.Result, workflows.ReminderResult) {
	t.Helper()
	u := r.s.Update(t, time.Now(), reminder.Email)
	u.Subscribers[0].Email = addr
	res, err := r.s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out workflows.ReminderResult
	require.NoError(t, r.s.Temporal.GetWorkflow(ctx, res[0].WorkflowID, "").Get(ctx, &out))
	return res[0], out
}

func (r *rig) suppressed(t *testing.T, addr string) []mirror.Suppression {
	t.Helper()
	got, err := r.s.Mirror.Suppressions(context.Background(), mirror.SuppressionFilter{Address: addr})
	require.NoError(t, err)
	return got
}

func do(t *testing.T, method, target, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// A reminder email carries RFC 8058's headers; the one-click POST a
// mailbox provider makes to its link suppresses the address, so the next
// reminder to it ends suppressed and the sink gets nothing. Opening the
// link (GET, as scanners do), a tampered token or a POST without the
// one-click field suppresses nothing. Lifted, the next reminder is sent.
func TestTheOneClickLinkInTheHeadersSuppressesTheAddress(t *testing.T) {
	t.Parallel()
	const addr = "reader@customer.example"
	r := newRig(t)
	first, out := r.schedule(t, addr)
	require.Equal(t, reminder.Sent, out.State)
	mails := r.s.Mail.Mails()
	require.Len(t, mails, 1)
	m := mails[0]
	require.Equal(t, "List-Unsubscribe=One-Click", m.Headers["List-Unsubscribe-Post"])
	link := strings.TrimSuffix(strings.TrimPrefix(m.Headers["List-Unsubscribe"], "<"), ">")
	require.True(t, strings.HasPrefix(link, r.srv.URL+links.UnsubscribePath), "the header points to serve's link: %s", link)
	require.NotContains(t, link, addr, "the link names the reminder, never the address")
	require.NotContains(t, link, first.ReminderID, "nor its id in plain view")

	status, page := do(t, http.MethodGet, link, "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `name="List-Unsubscribe" value="One-Click"`)
	require.Empty(t, r.suppressed(t, addr), "opening the link unsubscribes no one")
	status, _ = do(t, http.MethodPost, link+"x", "List-Unsubscribe=One-Click")
	require.Equal(t, http.StatusNotFound, status, "a tampered token")
	status, _ = do(t, http.MethodPost, link, "something=else")
	require.Equal(t, http.StatusBadRequest, status, "a POST without the one-click field")
	require.Empty(t, r.suppressed(t, addr))

	// RFC 8058 allows either form encoding; this mailbox provider posts
	// multipart.
	var body strings.Builder
	mw := multipart.NewWriter(&body)
	require.NoError(t, mw.WriteField("List-Unsubscribe", "One-Click"))
	require.NoError(t, mw.Close())
	req, err := http.NewRequest(http.MethodPost, link, strings.NewReader(body.String()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := r.suppressed(t, addr)
	require.Len(t, got, 1)
	require.Equal(t, "one_click", got[0].Reason)
	require.Equal(t, first.ReminderID, got[0].ReminderID)

	next, out := r.schedule(t, addr)
	require.Equal(t, reminder.Suppressed, out.State)
	require.Len(t, r.s.Mail.Mails(), 1, "the sink got nothing more")
	row, err := r.s.Mirror.Get(context.Background(), next.ReminderID)
	require.NoError(t, err)
	require.Equal(t, reminder.Suppressed, row.State)

	require.NoError(t, r.s.Mirror.LiftSuppression(context.Background(), "", addr, "test"))
	_, out = r.schedule(t, addr)
	require.Equal(t, reminder.Sent, out.State)
	require.Len(t, r.s.Mail.Mails(), 2, "lifted, the next reminder is sent")
}

const oneClick = "List-Unsubscribe=One-Click"

// A lift outranks the one-click links made before it: replaying the first
// reminder's link after an operator lifted the suppression is answered
// 410, out of date, and writes nothing, on this serve or another (the lift
// is the mirror's), so the next reminder is sent. That reminder's own
// link, made after the lift, suppresses the address again.
func TestALiftOutranksTheUnsubscribeLinksMadeBeforeIt(t *testing.T) {
	t.Parallel()
	const addr = "replayed@customer.example"
	r := newRig(t)
	_, out := r.schedule(t, addr)
	require.Equal(t, reminder.Sent, out.State)
	old := r.link(t, 0)
	status, _ := do(t, http.MethodPost, old, oneClick)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, r.suppressed(t, addr), 1)

	require.NoError(t, r.s.Mirror.LiftSuppression(context.Background(), "", addr, "ops: asked to resubscribe"))
	status, page := do(t, http.MethodPost, old, oneClick)
	require.Equal(t, http.StatusGone, status, page)
	require.Contains(t, page, "out of date")
	other := httptest.NewServer(unsubscribe.New(r.keys, r.s.Mirror, nil)) // a second replica
	t.Cleanup(other.Close)
	status, _ = do(t, http.MethodPost, other.URL+strings.TrimPrefix(old, r.srv.URL), oneClick)
	require.Equal(t, http.StatusGone, status, "on another replica too")
	require.Empty(t, r.suppressed(t, addr), "the lift stands")

	_, out = r.schedule(t, addr)
	require.Equal(t, reminder.Sent, out.State, "so the next reminder is sent")
	status, _ = do(t, http.MethodPost, r.link(t, 1), oneClick)
	require.Equal(t, http.StatusOK, status, "its own link, made after the lift, works")
	got := r.suppressed(t, addr)
	require.Len(t, got, 1)
	require.Equal(t, "one_click", got[0].Reason)
}

// A link of the first format (the reminder's id alone, made before links
// carried their issue time) still works, so mail already in inboxes keeps
// its way out; it cannot say when it was made, so any lift outranks it.
func TestAnUnsubscribeLinkOfTheFirstFormatWorksUntilALift(t *testing.T) {
	t.Parallel()
	const addr = "longago@customer.example"
	r := newRig(t)
	res, _ := r.schedule(t, addr)
	first := r.srv.URL + links.UnsubscribePath + base64.RawURLEncoding.EncodeToString([]byte(res.ReminderID)) + "." +
		base64.RawURLEncoding.EncodeToString(r.keys.Sign("shipnotify unsubscribe\x00"+res.ReminderID))

	status, _ := do(t, http.MethodPost, first, oneClick)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, r.suppressed(t, addr), 1)
	require.NoError(t, r.s.Mirror.LiftSuppression(context.Background(), "", addr, "ops"))
	status, _ = do(t, http.MethodPost, first, oneClick)
	require.Equal(t, http.StatusGone, status)
	require.Empty(t, r.suppressed(t, addr), "the lift stands")
}

// A link ends links.UnsubscribeTTL (90 days) after it was made: opening or
// posting it then is answered 410, out of date, and suppresses nothing; a
// day younger, it still works.
func TestAnUnsubscribeLinkEndsAfterNinetyDays(t *testing.T) {
	t.Parallel()
	const addr = "oldmail@customer.example"
	r := newRig(t)
	res, _ := r.schedule(t, addr)
	at := func(issued time.Time) string {
		return r.srv.URL + links.UnsubscribePath + r.keys.UnsubscribeToken(res.ReminderID, issued)
	}
	expired := at(time.Now().Add(-links.UnsubscribeTTL - time.Minute))
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		status, page := do(t, method, expired, oneClick)
		require.Equal(t, http.StatusGone, status, method)
		require.Contains(t, page, "out of date", method)
	}
	require.Empty(t, r.suppressed(t, addr), "an expired link suppresses nothing")

	status, _ := do(t, http.MethodPost, at(time.Now().Add(-links.UnsubscribeTTL+24*time.Hour)), oneClick)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, r.suppressed(t, addr), 1)
}
