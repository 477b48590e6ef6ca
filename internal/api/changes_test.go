package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// feed reads one page of the change feed as key.
func (e *testEnv) feed(t *testing.T, key string, q url.Values) api.Page {
	t.Helper()
	resp := e.do(t, "GET", "/v1/reminders?"+q.Encode(), key, nil)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	var p api.Page
	resp.decode(t, &p)
	require.NotEmpty(t, p.NextCursor, "the feed always says where to go on from")
	return p
}

// drain follows the feed from cursor, a page of limit at a time, until
// want changes came (or a minute passed), and returns them and the cursor
// it stopped at.
func (e *testEnv) drain(t *testing.T, key, cursor string, limit, want int) ([]api.Reminder, string) {
	t.Helper()
	var got []api.Reminder
	deadline := time.Now().Add(time.Minute)
	for len(got) < want && time.Now().Before(deadline) {
		p := e.feed(t, key, url.Values{"updated_since": {cursor}, "limit": {fmt.Sprint(limit)}})
		got, cursor = append(got, p.Reminders...), p.NextCursor
		if len(p.Reminders) < limit {
			<-time.After(20 * time.Millisecond) // caught up: poll again in a while
		}
	}
	require.Equal(t, want, len(got), "the feed gave %d of %d changes in a minute", len(got), want)
	return got, cursor
}

// GET /v1/reminders?updated_since= sees every change once while 1,000
// changes land concurrently, each in a transaction of its own that
// commits in no particular order (an id taken early may commit late):
// page after page, every reminder comes once, in its new state, and no
// change is missed or repeated.
func TestTheChangeFeedSeesEveryChangeOnceWhileChangesLand(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	const n = 1000
	var ids []string
	for u := range 10 {
		ids = append(ids, testenv.ScheduleInMirror(t, e.Mirror, "", fmt.Sprintf("SHP-feed-%d", u), n/10)...)
	}
	scheduled, cursor := e.drain(t, "reader", api.ChangesFromStart, 100, n)
	for _, r := range scheduled {
		require.Equal(t, reminder.StatusScheduled, r.LastChange.Type)
	}

	var wg sync.WaitGroup
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for id := range work {
				tx, err := e.DB.Pool.Begin(context.Background())
				if !assertNoError(t, err) {
					continue
				}
				_, err = tx.Exec(context.Background(), `UPDATE reminders SET state = 'cancelled', updated_at = now() WHERE id = $1`, id)
				assertNoError(t, err)
				_, err = tx.Exec(context.Background(), `INSERT INTO reminder_events (reminder_id, type, detail) VALUES ($1, 'cancelled', '{"by": "feed test"}')`, id)
				assertNoError(t, err)
				// Commit at a random moment after the ids were taken.
				_, err = tx.Exec(context.Background(), `SELECT pg_sleep($1)`, rand.Float64()*0.03)
				assertNoError(t, err)
				assertNoError(t, tx.Commit(context.Background()))
			}
		})
	}
	go func() {
		for _, id := range ids {
			work <- id
		}
		close(work)
	}()
	got, _ := e.drain(t, "reader", cursor, 37, n)
	wg.Wait()
	seen := map[string]int{}
	for _, r := range got {
		seen[r.ID]++
		require.Equal(t, 1, seen[r.ID], "reminder %s came twice", r.ID)
		require.Equal(t, reminder.Cancelled, r.State, r.ID)
		require.Equal(t, reminder.StatusCancelled, r.LastChange.Type, r.ID)
		require.Equal(t, 2, r.LastChange.Sequence, r.ID)
	}
	require.Len(t, seen, n, "every change, once")
	p := e.feed(t, "reader", url.Values{"updated_since": {cursor}, "limit": {"1000"}})
	require.Len(t, p.Reminders, n, "and read again from where it was, the same thousand")
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// The feed keeps tenants apart as the list does: a key sees its own
// tenant's changes, an admin every tenant's, or one it names. It starts at
// 0 or now, takes limit and tenant beside its cursor and nothing else, and
// refuses a cursor it did not give.
func TestTheChangeFeedKeepsTenantsApartAndItsParameters(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	mine := testenv.ScheduleInMirror(t, e.Mirror, "", "SHP-feed-mine", 2)
	acme := testenv.ScheduleInMirror(t, e.Mirror, "acme", "SHP-feed-acme", 3)
	rows, _ := e.drain(t, "reader", api.ChangesFromStart, 10, 2)
	require.ElementsMatch(t, mine, ids(rows))
	rows, _ = e.drain(t, "acme", api.ChangesFromStart, 10, 3)
	require.ElementsMatch(t, acme, ids(rows))
	rows, _ = e.drain(t, "admin", api.ChangesFromStart, 10, 5)
	require.ElementsMatch(t, append(mine, acme...), ids(rows), "an admin without ?tenant= sees every tenant's")
	p := e.feed(t, "admin", url.Values{"updated_since": {"0"}, "tenant": {"acme"}, "limit": {"10"}})
	require.ElementsMatch(t, acme, ids(p.Reminders))

	now := e.feed(t, "acme", url.Values{"updated_since": {api.ChangesFromNow}})
	require.Empty(t, now.Reminders, "now: only what is to come")
	_, err := e.Mirror.Cancel(context.Background(), acme[1], "cancelled", nil)
	require.NoError(t, err)
	rows, _ = e.drain(t, "acme", now.NextCursor, 10, 1)
	require.Equal(t, acme[1], rows[0].ID)
	require.Equal(t, reminder.StatusCancelled, rows[0].LastChange.Type)

	for q, param := range map[string]string{
		"updated_since=0&state=sent":       "state",
		"updated_since=0&cursor=x":         "cursor",
		"updated_since=bogus":              "updated_since",
		"updated_since=eyJ4IjowLCJlIjoxfQ": "updated_since",
		"updated_since=0&limit=1001":       "limit",
	} {
		resp := e.send(t, request{method: "GET", path: "/v1/reminders?" + q, key: "reader", expect: malformed})
		require.Equal(t, http.StatusBadRequest, resp.status, q)
		require.Equal(t, param, resp.problem(t).Field, q)
	}
}

// readableNumbers are the numbers a tenant can read out of an id or a
// cursor: the id after evt_ as a decimal, and every number in what the
// cursor decodes to (base64url, then JSON). None, for sealed ones.
func readableNumbers(s string) []float64 {
	var out []float64
	if n, err := strconv.ParseInt(strings.TrimPrefix(s, "evt_"), 10, 64); err == nil {
		out = append(out, float64(n))
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var v any
	if err != nil || json.Unmarshal(b, &v) != nil {
		return out
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case float64:
			out = append(out, v)
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

// The event ids and feed cursors a tenant sees carry no count of another
// tenant's activity: between two of acme's changes globex writes seven,
// and acme's event ids (in its trail and the feed's last_change) and the
// cursors between its pages hold no number it can read, where the trail's
// own ids (4902, 4910) and the cursor's (transaction, event) would tell
// it seven came between. The feed still gives each of acme's changes
// once, in order, a page at a time, and its last_change id is the trail
// entry's.
func TestATenantsIdsAndCursorsCountNoOtherTenantsEvents(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	ctx := context.Background()
	first := testenv.ScheduleInMirror(t, e.Mirror, "acme", "SHP-ids-acme-1", 1)[0]
	testenv.ScheduleInMirror(t, e.Mirror, "globex", "SHP-ids-globex", 7)
	second := testenv.ScheduleInMirror(t, e.Mirror, "acme", "SHP-ids-acme-2", 1)[0]
	trail := func(id string) mirror.Event {
		events, err := e.Mirror.Events(ctx, id)
		require.NoError(t, err)
		require.Len(t, events, 1)
		return events[0]
	}
	require.Greater(t, trail(second).ID-trail(first).ID, int64(7), "globex's seven events are between acme's two in the trail")

	// A page a change; a page may come empty while another test's
	// transaction holds the feed's horizon back (it never skips past one).
	var pages []api.Page
	cursor := api.ChangesFromStart
	deadline := time.Now().Add(time.Minute)
	for len(pages) < 2 && time.Now().Before(deadline) {
		p := e.feed(t, "acme", url.Values{"updated_since": {cursor}, "limit": {"1"}})
		cursor = p.NextCursor
		if len(p.Reminders) == 0 {
			<-time.After(20 * time.Millisecond)
			continue
		}
		require.Len(t, p.Reminders, 1)
		pages = append(pages, p)
	}
	require.Len(t, pages, 2, "acme's two changes within a minute")
	require.Empty(t, e.feed(t, "acme", url.Values{"updated_since": {cursor}, "limit": {"1"}}).Reminders, "acme's two changes, and no more")
	require.Equal(t, []string{first, second}, []string{pages[0].Reminders[0].ID, pages[1].Reminders[0].ID}, "once each, in order")

	var seen []string
	for i, id := range []string{first, second} {
		// acme/shipment/update/subscriber
		part := strings.Split(id, "/")
		resp := e.do(t, "GET", "/v1/shipments/"+part[1]+"/updates/"+part[2]+"/reminders/"+part[3], "acme", nil)
		require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
		var view api.ReminderView
		resp.decode(t, &view)
		require.Len(t, view.Events, 1)
		require.Equal(t, view.Events[0].ID, pages[i].Reminders[0].LastChange.ID, "the feed's last_change is the trail entry")
		seen = append(seen, view.Events[0].ID, pages[i].NextCursor)
	}
	require.NotEqual(t, seen[0], seen[2], "two events, two ids")
	for _, s := range seen {
		require.Empty(t, readableNumbers(s), "acme reads a number out of %q, which counts every tenant's events", s)
	}
}
