package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/time/rate"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/workflows"
)

// POST /v1/updates: 201 with one result per subscriber; the same update
// again 200 with the reminders as stored; other content under the same ids
// 409 naming what differs and writing nothing.
func TestScheduleUpdate(t *testing.T) {
	t.Parallel()
	e := setup(t)
	u := e.update(t)

	resp := e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	var first api.Results
	resp.decode(t, &first)
	require.Len(t, first.Results, 3)
	for i, r := range first.Results {
		sub := u["subscribers"].([]any)[i].(map[string]any)["id"].(string)
		require.Equal(t, reminder.ID("", u["shipment_id"].(string), "window-1", sub), r.ReminderID)
		require.Equal(t, starter.Scheduled, r.Status)
		require.Equal(t, reminder.Scheduled, r.State)
	}

	resp = e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	var again api.Results
	resp.decode(t, &again)
	for i, r := range again.Results {
		require.Equal(t, starter.AlreadyScheduled, r.Status)
		require.Equal(t, first.Results[i].DeliveryKey, r.DeliveryKey)
		require.True(t, first.Results[i].DueAt.Equal(r.DueAt))
	}

	before := e.mirrorCount(t)
	u["message"].(map[string]any)["text"] = "Dock 9, 13:00-17:00."
	u["subscribers"].([]any)[0].(map[string]any)["remind_before"] = "48h"
	resp = e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusConflict, resp.status, "%s", resp.body)
	p := resp.problem(t)
	require.Equal(t, api.TypeUpdateChanged, p.Type)
	require.Contains(t, p.Fields, "message.text")
	require.Contains(t, p.Fields, "subscribers[0].due_at")
	require.NotContains(t, p.Detail, "Dock 9", "a problem never repeats a value")
	require.Equal(t, before, e.mirrorCount(t), "a changed resubmission writes nothing")
}

// An update may name a dynamic template and its data, and a subscriber its
// name, time zone and locale: the document takes them (the contract test
// holds them to openapi.json), a resubmission with other ones is a change,
// and a bad zone is refused naming the field.
func TestScheduleUpdateWithTemplateZoneAndLocale(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	u := e.update(t)
	u["message"].(map[string]any)["template_id"] = testenv.TemplateID
	u["message"].(map[string]any)["template_data"] = map[string]any{"dock": "4"}
	sub := u["subscribers"].([]any)[0].(map[string]any)
	sub["name"], sub["time_zone"], sub["locale"] = "Rita Ops", "Europe/Berlin", "de-DE"
	resp := e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)

	sub["time_zone"] = "Europe/Vienna"
	u["message"].(map[string]any)["template_data"] = map[string]any{"dock": "5"}
	resp = e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusConflict, resp.status, "%s", resp.body)
	require.Equal(t, []string{"message.template_data", "subscribers[0].time_zone"}, resp.problem(t).Fields)

	u["update_id"] = "window-2"
	sub["time_zone"] = "Mars/Olympus_Mons"
	resp = e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%s", resp.body)
	require.Equal(t, "subscribers[0].time_zone", resp.problem(t).Field)
}

// A 422 lists every problem it found (errors), field and detail the
// first's; a JSON syntax error says where.
func TestA422ListsEveryProblem(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	u := testenv.ValidUpdate(time.Now())
	u["shipment_id"] = testenv.ID(t, "SHP")
	u["kind"] = "Not A Kind"
	subs := u["subscribers"].([]any)
	subs[0].(map[string]any)["email"] = "not-an-address"
	subs[2].(map[string]any)["url"] = "ftp://hooks.consignee.example/in"
	resp := e.send(t, request{method: "POST", path: "/v1/updates", key: "tracker", body: u, expect: violating})
	require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%s", resp.body)
	p := resp.problem(t)
	require.Equal(t, "kind", p.Field)
	require.Len(t, p.Errors, 3, "%s", resp.body)
	for i, field := range []string{"kind", "subscribers[0].email", "subscribers[2].url"} {
		require.Equal(t, field, p.Errors[i].Field)
		require.True(t, strings.HasPrefix(p.Errors[i].Detail, field+": "), p.Errors[i].Detail)
	}
	require.Contains(t, p.Detail, "and 2 more problems")
	require.NotContains(t, string(resp.body), "not-an-address", "no value repeated")

	resp = e.send(t, request{method: "POST", path: "/v1/updates", key: "tracker", body: "{\n\"kind\": x}", expect: malformed})
	require.Equal(t, http.StatusUnprocessableEntity, resp.status)
	require.Contains(t, resp.problem(t).Detail, "line 2, column 9")
	require.Zero(t, e.mirrorCount(t))
}

// Bodies: at most 1 MiB (413, with or without a Content-Length), JSON only
// (415); neither writes anything.
func TestUpdateBodyLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	doc := []byte(fmt.Sprintf(`{"shipment_id":"%s","update_id":"u","kind":"delivery_window","message":{"subject":"s","text":"%s"},"subscribers":[]}`,
		testenv.ID(t, "SHP"), strings.Repeat("x", api.MaxBodyBytes)))
	resp := e.send(t, request{method: "POST", path: "/v1/updates", key: "tracker", body: doc, expect: violating})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.status)
	require.Contains(t, resp.problem(t).Detail, "1048576 bytes")

	// Streamed (chunked): the limit holds while reading.
	resp = e.send(t, request{method: "POST", path: "/v1/updates", key: "tracker", expect: violating,
		body: io.MultiReader(bytes.NewReader(doc))})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.status)

	resp = e.send(t, request{method: "POST", path: "/v1/updates", key: "tracker", body: "shipment_id=SHP-1",
		contentType: "application/x-www-form-urlencoded", expect: violating})
	require.Equal(t, http.StatusUnsupportedMediaType, resp.status)
	require.Equal(t, "application/json", resp.header.Get("Accept-Post"))
	resp.problem(t)
	require.Zero(t, e.mirrorCount(t))
}

// Every malformed update the CLI refuses is refused over HTTP too: 422,
// naming the field, and nothing written to PostgreSQL or Temporal.
func TestBadUpdatesAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	cases := testenv.BadUpdates(time.Now())
	require.GreaterOrEqual(t, len(cases), 80)
	for _, tc := range cases {
		resp := e.send(t, request{method: "POST", path: "/v1/updates", key: "tracker", body: tc.Doc, expect: malformed})
		require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%s: %s", tc.Name, resp.body)
		p := resp.problem(t)
		require.Equal(t, api.TypeInvalidUpdate, p.Type, tc.Name)
		require.Contains(t, p.Detail, tc.Field, tc.Name)
		if p.Field != "" {
			require.True(t, strings.HasPrefix(p.Detail, p.Field+": "), "%s: field %q, detail %q", tc.Name, p.Field, p.Detail)
		}
	}
	require.Zero(t, e.mirrorCount(t), "nothing written to the mirror")
	e.requireNoWorkflowStarted(t)
}

// requireNoWorkflowStarted requires that nothing was written to Temporal:
// visibility shows no workflow on the stack's task queue but a probe
// started now (which proves the query sees it).
func (e *testEnv) requireNoWorkflowStarted(t *testing.T) {
	t.Helper()
	probe := testenv.ID(t, "probe")
	_, err := e.Temporal.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: probe, TaskQueue: e.TaskQueue}, "VisibilityProbe")
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Temporal.TerminateWorkflow(context.Background(), probe, "", "test over") })
	var ids []string
	require.Eventually(t, func() bool {
		ids = nil
		resp, err := e.Temporal.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("TaskQueue = '%s'", e.TaskQueue)})
		require.NoError(t, err)
		for _, x := range resp.GetExecutions() {
			ids = append(ids, x.GetExecution().GetWorkflowId())
		}
		return slices.Contains(ids, probe)
	}, 30*time.Second, 100*time.Millisecond, "visibility never showed the probe")
	require.Equal(t, []string{probe}, ids, "no workflow started for a refused update")
}

// countLookups has the starter's guard resolve every webhook host to a
// public address, counting the lookups.
func (e *testEnv) countLookups() *atomic.Int64 {
	var n atomic.Int64
	e.Starter.Webhooks.Resolver = webhook.ResolverFunc(func(context.Context, string) ([]netip.Addr, error) {
		n.Add(1)
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	})
	return &n
}

// hookUpdate is the test's update with one webhook subscriber per URL,
// besides its two email subscribers.
func (e *testEnv) hookUpdate(t *testing.T, urls ...string) map[string]any {
	u := e.update(t)
	subs := u["subscribers"].([]any)
	hook := subs[2].(map[string]any)
	subs = subs[:2]
	for i, url := range urls {
		subs = append(subs, map[string]any{"id": fmt.Sprintf("hook-%d", i), "channel": "webhook", "url": url,
			"secret": hook["secret"], "due_at": hook["due_at"]})
	}
	u["subscribers"] = subs
	return u
}

// Webhook hosts are looked up only for an update that will be written,
// each host once: an identical resubmission and a changed one (409) look
// nothing up, since the stored URLs were checked when first written.
func TestScheduleLooksUpOnlyWhatItWrites(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	lookups := e.countLookups()
	u := e.hookUpdate(t, "https://a.tracker.example/in/1", "https://b.tracker.example/in", "https://A.tracker.example/in/2")

	resp := e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	require.Equal(t, int64(2), lookups.Load(), "two hosts, each looked up once")

	resp = e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	var again api.Results
	resp.decode(t, &again)
	require.Len(t, again.Results, 5)
	for _, r := range again.Results {
		require.Equal(t, starter.AlreadyScheduled, r.Status)
	}
	require.Equal(t, int64(2), lookups.Load(), "an identical resubmission looks nothing up")

	before := e.mirrorCount(t)
	u["message"].(map[string]any)["text"] = "Dock 9."
	resp = e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusConflict, resp.status, "%s", resp.body)
	require.Equal(t, api.TypeUpdateChanged, resp.problem(t).Type)
	require.Equal(t, int64(2), lookups.Load(), "a changed resubmission looks nothing up")
	require.Equal(t, before, e.mirrorCount(t))
}

// An update is charged its reminders and its webhook host lookups, to its
// key's reminder bucket and to its tenant's, before anything is looked up
// or written: one request cannot buy 500 workflows. A bucket that cannot
// pay now is 429 with Retry-After, nothing looked up, nothing written; the
// tenant's bucket is shared by every key acting for it (here an admin key
// whose own bucket is full), and another tenant's is its own.
func TestAnUpdateIsChargedItsRemindersToItsKeyAndItsTenant(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker, func(_ *testenv.StackOptions, o *api.Options) {
		o.ReminderRate, o.ReminderBurst = rate.Every(time.Hour), 12
	})
	lookups := e.countLookups()
	hosts := func(n int) []string {
		var urls []string
		for i := range n {
			urls = append(urls, fmt.Sprintf("https://h%d.tracker.example/in", i))
		}
		return urls
	}

	// Two email subscribers and five webhooks on five hosts: 7 + 5 = 12.
	resp := e.do(t, "POST", "/v1/updates", "tracker", e.hookUpdate(t, hosts(5)...))
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	require.Equal(t, int64(5), lookups.Load())

	before := e.mirrorCount(t)
	resp = e.do(t, "POST", "/v1/updates", "tracker", e.hookUpdate(t, hosts(5)...))
	require.Equal(t, http.StatusTooManyRequests, resp.status, "%s", resp.body)
	require.Contains(t, resp.problem(t).Detail, "the API key tracker is over its reminder rate for the 7 reminders and 5 webhook host lookups")
	retry, err := strconv.Atoi(resp.header.Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 12*3600, retry, 5, "until the bucket holds the twelve again")

	// Another key of the same tenant pays from the same tenant bucket.
	resp = e.do(t, "POST", "/v1/updates?tenant=default", "admin", e.hookUpdate(t, hosts(5)...))
	require.Equal(t, http.StatusTooManyRequests, resp.status, "%s", resp.body)
	require.Contains(t, resp.problem(t).Detail, "the tenant default is over its reminder rate")
	require.Equal(t, int64(5), lookups.Load(), "no lookup for a refused update")
	require.Equal(t, before, e.mirrorCount(t), "nothing written")

	// Another tenant's bucket is its own.
	resp = e.do(t, "POST", "/v1/updates", "acme", e.hookUpdate(t, hosts(5)...))
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
}

// An update whose starts the namespace refuses for want of the search
// attributes is a 503 that says the operator runs `shipnotify setup`; what
// was written is kept, and the same update completes once it has run.
func TestANamespaceWithoutTheAttributesIsThe503OfSetup(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	ns, c := testenv.Namespace(t)
	// The API's starter, pointed at a namespace never set up.
	e.Starter.Temporal, e.Starter.Namespace = c, ns
	u := e.update(t)

	resp := e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusServiceUnavailable, resp.status, "%s", resp.body)
	p := resp.problem(t)
	require.Equal(t, api.TypeIncomplete, p.Type)
	require.Contains(t, p.Detail, "its operator runs `shipnotify setup`")
	require.Contains(t, p.Detail, "sending the same update again then completes it")
	require.Len(t, p.Results, 3)
	for _, r := range p.Results {
		require.Equal(t, starter.Unstarted, r.Status, "written, not started: never already_scheduled")
	}

	// What setup does, then the same update: every reminder starts.
	_, err := c.OperatorService().AddSearchAttributes(t.Context(), &operatorservice.AddSearchAttributesRequest{
		Namespace: ns, SearchAttributes: workflows.SearchAttributeTypes,
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return starter.ProbeSearchAttributes(t.Context(), c, ns, testenv.ID(t, "probe")) == nil
	}, 30*time.Second, 100*time.Millisecond)
	resp = e.do(t, "POST", "/v1/updates", "tracker", u)
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	var done api.Results
	resp.decode(t, &done)
	require.Len(t, done.Results, 3)
	for _, r := range done.Results {
		require.Equal(t, starter.Scheduled, r.Status, r.ReminderID)
	}
}
