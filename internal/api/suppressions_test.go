package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/mirror"
)

// A tracker lists its own tenant's suppressions and lifts them, as `shipnotify
// suppressions remove` does: an admin sees every tenant's; a key sees and
// lifts only its own tenant's (another tenant's suppression of the same
// address stays, and one only another tenant holds is not found); the
// address is never shown, only its hash; a lift records who, with which key,
// and why, and a repeat reads as done; bad input changes nothing.
func TestSuppressionsAreListedAndLiftedPerTenant(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	const shared, acmeOnly = "Leaver@Customer.example", "quiet@customer.example"
	// acme's update reaches both addresses; globex's the shared one.
	suppress := func(tenant string, addrs ...string) {
		t.Helper()
		doc := e.update(t)
		subs := doc["subscribers"].([]any)
		for i, addr := range addrs {
			subs[i].(map[string]any)["email"] = addr
		}
		resp := e.do(t, "POST", "/v1/updates", tenant, doc)
		require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
		var rs api.Results
		resp.decode(t, &rs)
		for i := range addrs {
			found, err := e.Mirror.SuppressAddressOf(t.Context(), rs.Results[i].ReminderID, "one_click")
			require.NoError(t, err)
			require.True(t, found)
		}
	}
	suppress("acme", shared, acmeOnly)
	suppress("globex", shared)
	hash := func(addr string) string {
		sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(addr))))
		return hex.EncodeToString(sum[:])
	}

	list := func(key, query string) api.SuppressionPage {
		t.Helper()
		resp := e.do(t, "GET", "/v1/suppressions"+query, key, nil)
		require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
		require.NotContains(t, strings.ToLower(string(resp.body)), "customer.example", "an address is never shown")
		var page api.SuppressionPage
		resp.decode(t, &page)
		return page
	}
	held := func(key string) map[string]string { // address hash: tenant
		t.Helper()
		out := map[string]string{}
		for _, s := range list(key, "").Suppressions {
			require.Nil(t, s.LiftedAt)
			out[s.AddressSHA256] = s.Tenant
		}
		return out
	}
	before := map[string]map[string]string{
		"acme":   {hash(shared): "acme", hash(acmeOnly): "acme"},
		"globex": {hash(shared): "globex"},
		"reader": {},
	}
	for key, want := range before {
		require.Equal(t, want, held(key), key)
	}
	require.Len(t, list("admin", "").Suppressions, 3, "an admin naming no tenant sees every tenant's")
	require.Len(t, list("admin", "?tenant=acme").Suppressions, 2)
	// Keyset pages, one row at a time: every row once.
	seen := map[string]bool{}
	for query, pages := "?limit=1", 0; ; pages++ {
		require.Less(t, pages, 3)
		page := list("admin", query)
		require.Len(t, page.Suppressions, 1)
		s := page.Suppressions[0]
		require.False(t, seen[s.Tenant+s.AddressSHA256], "a row repeated")
		seen[s.Tenant+s.AddressSHA256] = true
		if page.NextCursor == "" {
			break
		}
		query = "?limit=1&cursor=" + page.NextCursor
	}
	require.Len(t, seen, 3)

	// Bad input, a missing scope and another tenant: refused, nothing lifted.
	lift := func(key, query string, body any, expect expectation) response {
		t.Helper()
		return e.send(t, request{method: "POST", path: "/v1/suppressions/lift" + query, key: key, body: body, expect: expect})
	}
	for _, c := range []struct {
		key, query string
		body       any
		expect     expectation
		status     int
		field      string
	}{
		{"acme", "", map[string]any{"address": "not an address"}, malformed, http.StatusUnprocessableEntity, "address"},
		{"acme", "", map[string]any{"address": "Leaver <" + shared + ">"}, malformed, http.StatusUnprocessableEntity, "address"},
		{"acme", "", map[string]any{}, violating, http.StatusUnprocessableEntity, "address"},
		{"acme", "", "", violating, http.StatusUnprocessableEntity, ""},
		{"acme", "", map[string]any{"address": shared, "force": true}, violating, http.StatusUnprocessableEntity, "force"},
		{"acme", "", map[string]any{"address": shared, "reason": "a\u202eb"}, malformed, http.StatusUnprocessableEntity, "reason"},
		{"acme", "?dry_run=1", map[string]any{"address": shared}, violating, http.StatusBadRequest, "dry_run"},
		{"reader", "", map[string]any{"address": shared}, conforming, http.StatusForbidden, ""},
		{"globex", "?tenant=acme", map[string]any{"address": acmeOnly}, conforming, http.StatusForbidden, ""},
		// Only acme holds it: for globex it is not suppressed.
		{"globex", "", map[string]any{"address": acmeOnly}, conforming, http.StatusNotFound, ""},
	} {
		resp := lift(c.key, c.query, c.body, c.expect)
		require.Equal(t, c.status, resp.status, "%+v: %s", c, resp.body)
		p := resp.problem(t)
		require.Equal(t, c.field, p.Field, "%+v", c)
		require.NotContains(t, strings.ToLower(string(resp.body)), "customer.example", "the address is not repeated")
	}
	for key, want := range before {
		require.Equal(t, want, held(key), "after the refusals, %s", key)
	}

	// globex lifts the shared address: its own suppression only.
	resp := lift("globex", "", map[string]any{"address": " " + strings.ToUpper(shared) + " ", "by": "dispatch", "reason": "asked to resubscribe"}, malformed)
	require.Equal(t, http.StatusUnprocessableEntity, resp.status, "an address is bare: %s", resp.body)
	resp = lift("globex", "", map[string]any{"address": strings.ToUpper(shared), "by": "dispatch", "reason": "asked to resubscribe"}, conforming)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	var res api.LiftResult
	resp.decode(t, &res)
	require.Equal(t, api.Lifted, res.Status)
	require.Equal(t, "globex", res.Suppression.Tenant)
	require.Equal(t, hash(shared), res.Suppression.AddressSHA256)
	require.NotNil(t, res.Suppression.LiftedAt)
	require.Equal(t, "dispatch (API key globex): asked to resubscribe", res.Suppression.LiftedBy)
	require.Contains(t, e.logs.String(), `"msg":"suppression lifted"`)
	require.NotContains(t, strings.ToLower(e.logs.String()), "customer.example", "the log keeps no address")

	require.Equal(t, map[string]string{}, held("globex"))
	require.Equal(t, before["acme"], held("acme"), "acme's suppression of the same address stays")
	lifted := list("globex", "?lifted=true").Suppressions
	require.Len(t, lifted, 1, "the row stays, lifted")
	require.Equal(t, res.Suppression, lifted[0])

	// Again: done already, saying by whom and when; nothing changes.
	resp = lift("globex", "", map[string]any{"address": shared}, conforming)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	var again api.LiftResult
	resp.decode(t, &again)
	require.Equal(t, api.AlreadyLifted, again.Status)
	require.Equal(t, res.Suppression, again.Suppression)

	// An admin lifts acme's, naming it; by defaults to the key's name.
	resp = lift("admin", "?tenant=acme", map[string]any{"address": acmeOnly}, conforming)
	require.Equal(t, http.StatusOK, resp.status, "%s", resp.body)
	resp.decode(t, &res)
	require.Equal(t, "admin (API key admin)", res.Suppression.LiftedBy)
	require.Equal(t, map[string]string{hash(shared): "acme"}, held("acme"))
	rows, err := e.Mirror.Suppressions(t.Context(), mirror.SuppressionFilter{AnyTenant: true})
	require.NoError(t, err)
	require.Len(t, rows, 1, "only acme's suppression of the shared address holds")
}
