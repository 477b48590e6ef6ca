package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
)

// digestEvery is the digest tests' interval: a minute, so a boundary is
// at most a minute and a half away.
const digestEvery = time.Minute

// inboxSubscriber is an email subscriber to inbox due at due, with more
// members.
func inboxSubscriber(id, inbox string, due time.Time, more map[string]any) map[string]any {
	s := map[string]any{"id": id, "channel": "email", "email": inbox, "due_at": due.Format(time.RFC3339)}
	for k, v := range more {
		s[k] = v
	}
	return s
}

// An update whose subscribers share one inbox, with a digest: the schedule
// answers goes_out_at at the interval's boundary for the two members and
// at the due time for the subscriber that turned the digest off; GET shows
// the interval as the update spelt it, and no digest_key until the digest
// goes out. Once it has, as one mail, GET shows the mail's key as each
// member's digest_key (and its trail's sent event says so), none for the
// one that went alone, and listing by that key returns exactly the
// members, to their tenant only.
func TestTheAPIShowsADigestAndListsItsMembers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	shipment := testenv.ID(t, "SHP")
	const inbox = "ops@consignee.example"
	// Far enough ahead that the update is scheduled before any is due.
	boundary := reminder.DigestAt(time.Now().Add(30*time.Second), digestEvery)
	alone := boundary.Add(-time.Second)
	u := windowUpdate(shipment,
		inboxSubscriber("desk-a", inbox, boundary.Add(-3*time.Second), nil),
		inboxSubscriber("desk-b", inbox, boundary.Add(-2*time.Second), nil),
		inboxSubscriber("desk-alone", inbox, alone, map[string]any{"digest": "off"}),
	)
	u["digest"] = "1m"

	resp := e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	var res api.Results
	resp.decode(t, &res)
	require.Len(t, res.Results, 3)
	for i, want := range []time.Time{boundary, boundary, alone} {
		r := res.Results[i]
		require.True(t, r.GoesOutAt.Equal(want), "%s goes out at %s, not %s", r.SubscriberID, want, r.GoesOutAt)
		require.False(t, r.DueAt.Equal(boundary), "%s keeps its own due time", r.SubscriberID)
	}

	path := "/v1/shipments/" + shipment + "/updates/cutoff/reminders/"
	get := func(sub string) api.ReminderView {
		t.Helper()
		resp := e.do(t, "GET", path+sub, "reader", nil)
		require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
		var view api.ReminderView
		resp.decode(t, &view)
		return view
	}
	before := get("desk-a").Reminder
	require.Equal(t, "1m", before.Digest, "the update's interval, as it spelt it")
	require.Empty(t, before.DigestKey, "no digest key before the digest goes out")
	require.True(t, before.GoesOutAt.Equal(boundary), "%s", before.GoesOutAt)
	require.Empty(t, get("desk-alone").Reminder.Digest, "off on the subscriber turns the update's digest off")

	// The digest goes out at the boundary: wait for the mirror to record
	// both members sent under its key.
	members := []string{shipment + "/cutoff/desk-a", shipment + "/cutoff/desk-b"}
	require.Eventually(t, func() bool {
		for _, id := range members {
			row, err := e.Mirror.Get(t.Context(), id)
			if err != nil || row.DigestKey == "" || row.SentAt == nil {
				return false
			}
		}
		return true
	}, time.Until(boundary.Add(2*time.Minute)), 250*time.Millisecond, "the digest was not recorded sent by its boundary's next minute")

	var key string
	for _, m := range e.Mail.Mails() {
		if len(m.To) == 1 && m.To[0] == inbox && m.CustomArgs["digest_size"] != "" {
			require.Empty(t, key, "one digest mail")
			require.Equal(t, "2", m.CustomArgs["digest_size"])
			key = m.CustomArgs["delivery_key"]
		}
	}
	require.True(t, strings.HasPrefix(key, reminder.DigestKeyPrefix), "the digest went out as one mail under its key: %q", key)

	for _, sub := range []string{"desk-a", "desk-b"} {
		view := get(sub)
		require.Equal(t, key, view.Reminder.DigestKey, "%s shows the key of the mail it went out in", sub)
		require.Equal(t, "1m", view.Reminder.Digest, sub)
		var sent *api.Event
		for i, ev := range view.Events {
			if ev.Type == "sent" {
				sent = &view.Events[i]
			}
		}
		require.NotNil(t, sent, "%s has a sent event", sub)
		require.Equal(t, key, sent.Detail["digest_key"], sub)
	}
	require.Empty(t, get("desk-alone").Reminder.DigestKey, "the one that went out alone is in no digest")

	listed, _ := e.walk(t, url.Values{"digest_key": {key}, "limit": {"1"}}, nil)
	require.Equal(t, []string{"desk-a", "desk-b"}, subscriberIDs(listed), "exactly the digest's members")
	for _, r := range listed {
		require.Equal(t, key, r.DigestKey)
	}

	resp = e.do(t, "GET", "/v1/reminders?digest_key="+key, "acme", nil)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	var other api.Page
	resp.decode(t, &other)
	require.Empty(t, other.Reminders, "another tenant's key lists nothing of this digest")
}

// A digest_key that is not a digest's key (digest_ and 64 lowercase hex
// digits) is a 400 naming digest_key, never an empty page that reads as
// "no members": a reminder's own delivery key included. The document
// refuses the same values. A well-formed key of no digest lists nothing,
// and the change feed does not take the filter.
func TestAMalformedDigestKeyIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, bad := range []string{
		hex,                                  // a reminder's own delivery key
		reminder.DigestKeyPrefix + hex[:63],  // one digit short
		reminder.DigestKeyPrefix + hex + "0", // one digit long
		reminder.DigestKeyPrefix + strings.ToUpper(hex),
		"DIGEST_" + hex,
		reminder.DigestKeyPrefix + "g" + hex[1:],
	} {
		resp := e.send(t, request{method: "GET", path: "/v1/reminders?" + url.Values{"digest_key": {bad}}.Encode(),
			key: "reader", expect: violating})
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", bad, resp.body)
		p := resp.problem(t)
		require.Equal(t, api.TypeInvalidParameter, p.Type, bad)
		require.Equal(t, "digest_key", p.Field, bad)
		require.NotContains(t, p.Detail, hex[:16], "a problem never repeats a value")
	}

	resp := e.do(t, "GET", "/v1/reminders?digest_key="+reminder.DigestKeyPrefix+hex, "reader", nil)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	var page api.Page
	resp.decode(t, &page)
	require.Empty(t, page.Reminders)

	resp = e.do(t, "GET", "/v1/reminders?updated_since=0&digest_key="+reminder.DigestKeyPrefix+hex, "reader", nil)
	require.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.body)
	require.Equal(t, "digest_key", resp.problem(t).Field)
}
