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

// ParseTenant reads a tenant name as configuration writes it: "" or
// defaultName is the default tenant (""); another name is itself, if it
// is an id. The error names field.
func ParseTenant(field, name, defaultName string) (string, error) {
	if name == "" || name == defaultName {
		return "", nil
	}
	if !IsID(name) {
		return "", fmt.Errorf("%s %q: a tenant is an id (letters, digits, '.', '_', '-', at most 64)", field, name)
	}
	return name, nil
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
