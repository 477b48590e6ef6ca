// Package statusevents tells the tracker what became of its reminders: the
// endpoints it registers (SHIPNOTIFY_STATUS_ENDPOINTS_FILE) and the relay,
// run by serve, that posts the status outbox's rows to them as signed
// Standard Webhooks. The rows themselves are written by the database, in
// the transaction of the state change each reports (migration 00023).
package statusevents

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// Endpoint is one of the tracker's endpoints: where its status events go,
// the secret they are signed with, which events it takes, and the tenant
// whose events they are.
type Endpoint struct {
	Name   string
	URL    string
	Secret string
	Events []reminder.StatusType
	// Tenant is the tenant as stored ("" the default tenant).
	Tenant string
}

// Registration is the endpoint as the mirror registers it: no secret.
func (e Endpoint) Registration() mirror.StatusEndpoint {
	return mirror.StatusEndpoint{Name: e.Name, Tenant: e.Tenant, Events: e.Events, URL: e.URL}
}

// Takes reports whether the endpoint takes events of type t.
func (e Endpoint) Takes(t reminder.StatusType) bool { return slices.Contains(e.Events, t) }

// ParseOptions say how endpoint lines are read.
type ParseOptions struct {
	// Guard checks each URL's syntax (https on 443, or loopback when it
	// allows); the relay's connections go through it too.
	Guard webhook.Guard
	// DefaultTenant is the default tenant's name: tenant=<it> is the
	// default tenant.
	DefaultTenant string
}

// ParseEndpoints reads endpoint lines,
//
//	name url secret [events=type,type…] [tenant=name]
//
// one a line; blank lines and lines starting with # are skipped. name is
// an id, unique; url is https (the webhook guard's rules: plain http to
// loopback only where it allows); secret is a Standard Webhooks secret
// (whsec_ and base64 of at least 16 random bytes, which the receiver
// verifies with); events defaults to every status event type; tenant to
// the default tenant. An error names the line and the field, never the
// secret or the URL.
func ParseEndpoints(r io.Reader, o ParseOptions) ([]Endpoint, error) {
	var out []Endpoint
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		e, err := parseEndpoint(strings.Fields(text), o)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if slices.ContainsFunc(out, func(x Endpoint) bool { return x.Name == e.Name }) {
			return nil, fmt.Errorf("line %d: endpoint %s: name: given twice", line, e.Name)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func parseEndpoint(fields []string, o ParseOptions) (Endpoint, error) {
	if len(fields) < 3 {
		return Endpoint{}, errors.New("want name, url and secret, then events=… and tenant=… if any")
	}
	e := Endpoint{Name: fields[0], URL: fields[1], Secret: fields[2], Events: slices.Clone(reminder.StatusTypes)}
	if !reminder.IsID(e.Name) {
		return Endpoint{}, errors.New("name: want an id (letters, digits, '.', '_', '-', at most 64)")
	}
	fail := func(field, why string) (Endpoint, error) {
		return Endpoint{}, fmt.Errorf("endpoint %s: %s: %s", e.Name, field, why)
	}
	if err := o.Guard.CheckSyntax(e.URL); err != nil {
		return fail("url", err.Error())
	}
	if !goodSecret(e.Secret) {
		return fail("secret", "want a Standard Webhooks secret: whsec_ and at least 16 random bytes in base64")
	}
	seen := map[string]bool{}
	for _, tok := range fields[3:] {
		name, value, ok := strings.Cut(tok, "=")
		switch {
		case !ok || (name != "events" && name != "tenant"):
			return fail("attributes", "after the secret only events=… and tenant=… may follow")
		case seen[name]:
			return fail(name, "given twice")
		}
		seen[name] = true
		switch name {
		case "events":
			e.Events = nil
			for t := range strings.SplitSeq(value, ",") {
				st := reminder.StatusType(t)
				if !slices.Contains(reminder.StatusTypes, st) {
					return fail("events", fmt.Sprintf("unknown event type %q (want %s)", t, typeList()))
				}
				if !slices.Contains(e.Events, st) {
					e.Events = append(e.Events, st)
				}
			}
		case "tenant":
			t, err := reminder.ParseTenant("tenant", value)
			if err != nil {
				return fail("tenant", "want an id (letters, digits, '.', '_', '-', at most 64)")
			}
			e.Tenant = t.ID(o.DefaultTenant)
		}
	}
	return e, nil
}

// goodSecret reports whether the receiver's library can verify with
// secret and it holds at least 16 bytes.
func goodSecret(secret string) bool {
	if _, err := standardwebhooks.NewWebhook(secret); err != nil {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	return err == nil && len(b) >= 16
}

// typeList is the status event types as an error gives them.
func typeList() string {
	names := make([]string, len(reminder.StatusTypes))
	for i, t := range reminder.StatusTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}
