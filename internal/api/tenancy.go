package api

import (
	"fmt"
	"net/http"

	"github.com/shipnotify/shipnotify/reminder"
)

// caller is an authenticated request's key and the tenant it acts for.
//
// A key belongs to one tenant (its tenant= attribute; none is the default
// tenant) and sees only that tenant's updates: another tenant's are
// answered 404, as if they did not exist, and a schedule under the same
// ids is that tenant's own update, never compared with another's. A key
// with the admin scope acts across tenants: ?tenant= names the tenant a
// request acts for (its own when absent), and a list without it covers
// every tenant.
type caller struct {
	key *Key
	// tenant is the tenant the request acts for ("" is the default).
	tenant string
	// named: the request named its tenant (?tenant=).
	named bool
	// ring is the keys in force when the request came, with the key's
	// rate limiter.
	ring *keyring
}

// anyTenant reports whether a list covers every tenant: an admin's that
// names none.
func (c *caller) anyTenant() bool { return c.key.Allows(ScopeAdmin) && !c.named }

// callerOf resolves the request's tenant for k: a key's own, or, for an
// admin, the ?tenant= it names. A key without admin that names another
// tenant is refused with 403, whether or not that tenant exists.
func (a *API) callerOf(r *http.Request, ring *keyring, k *Key) (*caller, *Problem) {
	own, ok := ring.tenants[k.Name]
	if !ok {
		// Every key in the ring has an entry; fail closed all the same.
		return nil, problem(http.StatusForbidden, fmt.Sprintf("the API key %s names no valid tenant", k.Name))
	}
	c := &caller{key: k, tenant: own, ring: ring}
	named, ok := r.URL.Query()["tenant"]
	if !ok {
		return c, nil
	}
	// A named tenant is an id, given once and not empty (checkQuery saw
	// to the last two on every keyed route; this fails closed all the
	// same). The problem names the parameter, never repeats its value.
	if len(named) != 1 {
		return nil, invalidParameter("tenant", "given more than once")
	}
	if named[0] == "" {
		return nil, invalidParameter("tenant", "empty: give a value, or leave the parameter out")
	}
	parsed, err := reminder.ParseTenant("tenant", named[0])
	tenant := parsed.ID(a.defaultTenant)
	if err != nil {
		return nil, invalidParameter("tenant", "not a tenant: a tenant is an id (letters, digits, '.', '_', '-', at most 64)")
	}
	if tenant != c.tenant && !k.Allows(ScopeAdmin) {
		p := problem(http.StatusForbidden, fmt.Sprintf("the API key %s acts for its own tenant only; naming another needs the %s scope", k.Name, ScopeAdmin))
		p.header = http.Header{"Www-Authenticate": {fmt.Sprintf(`Bearer realm="shipnotify", error="insufficient_scope", scope="%s"`, ScopeAdmin)}}
		return nil, p
	}
	c.tenant, c.named = tenant, true
	return c, nil
}
