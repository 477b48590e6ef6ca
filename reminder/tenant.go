package reminder

import (
	"fmt"
	"strings"
)

// Tenants. An update belongs to the tenant (the API key, or the approver)
// that scheduled it, and ids are per tenant: two tenants may both schedule
// shipment SHP-1's update u1, and their reminders, workflow ids and
// delivery keys never meet. The default tenant is the zero value: the
// tenant every reminder scheduled before tenancy belongs to, whose ids
// keep the form they had (shipment/update/subscriber), so workflows
// already sleeping replay as they are. Another tenant's ids lead with its
// name (tenant/shipment/update/subscriber).
//
// The default tenant is stored as ''. Its name, as keys, approvers and the
// CLI spell it, is configuration (DefaultTenantName unless set), so it can
// be renamed without moving a row.

// DefaultTenantName is the default tenant's name unless configured.
const DefaultTenantName = "default"

// Tenant is a tenant as configuration names it (a key's or an approver's
// tenant=, a --tenant flag, a request's ?tenant=, an endpoint's tenant=):
// parsed once, by ParseTenant, and passed on as it is, so no later reader
// checks the name again. The zero Tenant names none: the default tenant.
type Tenant struct{ name string }

// ParseTenant reads a tenant's name as configuration writes it: "" names
// none (the default tenant); another name must be an id. The error names
// field, never the name (it may be a secret pasted in the wrong place).
func ParseTenant(field, name string) (Tenant, error) {
	if name != "" && !IsID(name) {
		return Tenant{}, fmt.Errorf("%s: want letters, digits, '.', '_' or '-', at most 64 (a tenant is an id)", field)
	}
	return Tenant{name: name}, nil
}

// Name is the tenant as it was written ("" when none was), so a
// configuration line reads back as it was.
func (t Tenant) Name() string { return t.name }

// ID is the tenant as ids and rows hold it: "" for the default tenant
// (named none, or named defaultName, its configured name), else its name.
func (t Tenant) ID(defaultName string) string {
	if t.name == defaultName {
		return ""
	}
	return t.name
}

// TenantName is how tenant is written for people: the default tenant by
// defaultName.
func TenantName(tenant, defaultName string) string {
	if tenant == "" {
		return defaultName
	}
	return tenant
}

// TenantShipment is a shipment as the engine sees it (the ShipmentId
// search attribute): qualified by its tenant, as ids are, so a search for
// one tenant's SHP-1 finds none of another's.
func TenantShipment(tenant, shipmentID string) string {
	if tenant == "" {
		return shipmentID
	}
	return tenant + "/" + shipmentID
}

// TenantOf is the tenant a reminder id names: the first of four parts, or
// the default tenant for three.
func TenantOf(reminderID string) string {
	if tenant, rest, ok := strings.Cut(reminderID, "/"); ok && strings.Count(rest, "/") == 2 {
		return tenant
	}
	return ""
}
