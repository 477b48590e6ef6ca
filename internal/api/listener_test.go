package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// These are answers `shipnotify serve` gave through its own listener that
// the API's handler alone never did (issue 35): the suite now serves what
// serve listens with (api.NewRoot), so they are checked where users meet
// them.

// A parameter a route does not take is refused, named, on every route: a
// dry run that scheduled, a "forced" cancel that cancelled and a verbose
// read all answered as if it were honoured. Nothing is written.
func TestEveryRouteRefusesAParameterItDoesNotTake(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	doc := e.update(t)
	shipment, update := doc["shipment_id"].(string), doc["update_id"].(string)
	resp := e.do(t, "POST", "/v1/updates", "tracker", doc)
	require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	var scheduled api.Results
	resp.decode(t, &scheduled)
	before := e.mirrorCount(t)

	unknown := func(rq request, name string) {
		t.Helper()
		rq.expect = violating
		resp := e.send(t, rq)
		require.Equal(t, http.StatusBadRequest, resp.status, "%s %s: %s", rq.method, rq.path, resp.body)
		p := resp.problem(t)
		require.Equal(t, api.TypeInvalidParameter, p.Type, rq.path)
		require.Equal(t, name, p.Field, rq.path)
		require.Contains(t, p.Detail, "unknown parameter", rq.path)
	}
	another := e.update(t)
	unknown(request{method: "POST", path: "/v1/updates?dry_run=1", key: "tracker", body: another}, "dry_run")
	unknown(request{method: "POST", path: "/v1/shipments/" + shipment + "/cancel?force=true", key: "operator", body: map[string]any{}}, "force")
	unknown(request{method: "GET", path: "/v1/shipments/" + shipment + "/updates/" + update + "/reminders/" +
		scheduled.Results[0].SubscriberID + "?verbose=1", key: "reader"}, "verbose")
	for _, r := range routes {
		unknown(request{method: r.method, path: r.path + "?dry_run=1", key: "admin", body: r.body}, "dry_run")
		// Beside a parameter it takes, too.
		unknown(request{method: r.method, path: r.path + "?tenant=acme&verbose=1", key: "admin", body: r.body}, "verbose")
	}
	require.Equal(t, before, e.mirrorCount(t), "nothing written")
	rows, err := e.Mirror.List(t.Context(), mirror.Filter{AnyTenant: true})
	require.NoError(t, err)
	require.Len(t, rows, len(scheduled.Results), "the dry run scheduled nothing")
	for _, r := range rows {
		require.Equal(t, reminder.Scheduled, r.State, "the forced cancel cancelled nothing: %s", r.ID)
	}
}

// An empty value is no filter: a 400 naming the parameter, never a list
// of everything, on every parameter of every route; so is a parameter
// given twice.
func TestAnEmptyOrRepeatedParameterIsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	before := e.mirrorCount(t)
	refused := func(rq request, name, detail string) {
		t.Helper()
		resp := e.send(t, rq)
		require.Equal(t, http.StatusBadRequest, resp.status, "%s %s: %s", rq.method, rq.path, resp.body)
		p := resp.problem(t)
		require.Equal(t, api.TypeInvalidParameter, p.Type, rq.path)
		require.Equal(t, name, p.Field, rq.path)
		require.Contains(t, p.Detail, detail, rq.path)
	}
	for _, name := range []string{"shipment", "update", "state", "due_from", "due_to", "cursor", "limit", "updated_since", "tenant"} {
		for _, key := range []string{"reader", "admin"} {
			refused(request{method: "GET", path: "/v1/reminders?" + name + "=", key: key, expect: violating}, name, "empty")
		}
	}
	for _, name := range []string{"lifted", "limit", "cursor", "tenant"} {
		refused(request{method: "GET", path: "/v1/suppressions?" + name + "=", key: "admin", expect: violating}, name, "empty")
	}
	for _, r := range routes {
		refused(request{method: r.method, path: r.path + "?tenant=", key: "admin", body: r.body, expect: violating}, "tenant", "empty")
		refused(request{method: r.method, path: r.path + "?tenant=acme&tenant=acme", key: "admin", body: r.body, expect: malformed},
			"tenant", "more than once")
	}
	refused(request{method: "GET", path: "/v1/reminders?shipment=A&shipment=B", key: "reader", expect: malformed}, "shipment", "more than once")
	require.Equal(t, before, e.mirrorCount(t), "nothing written")
}

// A tenant that is no tenant is a typed problem naming the field, and
// never repeats what was sent.
func TestATenantErrorNamesTheFieldAndNotTheInput(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	const bad = "no-such-tenant-<script>-" + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	for _, r := range routes {
		for _, key := range []string{"admin", "acme"} {
			resp := e.send(t, request{method: r.method, path: r.path + "?tenant=" + strings.ReplaceAll(bad, "<", "%3C"), key: key, body: r.body, expect: violating})
			require.Equal(t, http.StatusBadRequest, resp.status, "%s %s: %s", r.method, r.path, resp.body)
			p := resp.problem(t)
			require.Equal(t, api.TypeInvalidParameter, p.Type)
			require.Equal(t, "tenant", p.Field)
			require.NotContains(t, string(resp.body), "no-such-tenant")
		}
	}
}

// A path not in its clean form, under /v1/ or in front of it, is a 404
// problem wherever it points, never the listener's redirect to its clean
// form; a path no route has is one too, and both are counted as
// route="unmatched" (TestMetricsByRouteAndStatus).
func TestAPathNotInItsCleanFormIsAProblemNotARedirect(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	raw := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1//reminders"},
		{"GET", "/v1/./reminders"},
		{"GET", "/v1/shipments/S/updates/./w1/reminders/a"},
		{"GET", "/v1/shipments/S/updates/../updates/w1/reminders/a"},
		{"GET", "/v1//shipments/S/updates/w1/reminders/a"},
		{"POST", "/v1/shipments/S/../S/cancel"},
		{"POST", "//v1/shipments/X/cancel"},
		{"GET", "/console/../v1/reminders"},
		{"GET", "/x/../v1/openapi.json"},
		{"GET", "/nowhere"},
		{"GET", "/"},
	} {
		req, err := http.NewRequest(c.method, e.server.URL+c.path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+e.keys["admin"])
		resp, err := raw.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), c.path)
		require.Empty(t, resp.Header.Get("Location"), c.path)
		var p api.Problem
		require.NoError(t, json.Unmarshal(body, &p), c.path)
		require.Equal(t, http.StatusNotFound, p.Status, c.path)
	}
}

// A method a path does not take is a 405 problem whose Allow lists the
// methods the document gives that path (and HEAD beside GET); the
// document says so, as docs/api.md does.
func TestAWrongMethodIsA405WhoseAllowIsTheDocuments(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	var doc struct {
		Info struct {
			Description string `json:"description"`
		} `json:"info"`
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPI, &doc))
	require.Contains(t, doc.Info.Description, "405")
	require.Contains(t, doc.Info.Description, "Allow")
	fill := strings.NewReplacer("{shipment}", "S", "{update}", "U", "{subscriber}", "A")
	for path, item := range doc.Paths {
		var allow []string
		for method := range item {
			if slices.Contains([]string{"get", "post", "put", "patch", "delete"}, method) {
				allow = append(allow, strings.ToUpper(method))
				if method == "get" {
					allow = append(allow, "HEAD")
				}
			}
		}
		slices.Sort(allow)
		resp := e.send(t, request{method: "DELETE", path: fill.Replace(path), key: "admin", expect: undocumented})
		require.Equal(t, http.StatusMethodNotAllowed, resp.status, "%s: %s", path, resp.body)
		got := strings.Split(resp.header.Get("Allow"), ", ")
		slices.Sort(got)
		require.Equal(t, allow, got, path)
		require.Equal(t, http.StatusMethodNotAllowed, resp.problem(t).Status)
	}
}
