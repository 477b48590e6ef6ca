package api_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// The document is valid OpenAPI 3.1 and names exactly the routes the API
// serves, checked without a server: the API is built over a PostgreSQL pool
// and a Temporal client that connect only when used, and nothing here uses
// them.
func TestTheDocumentNamesEveryRouteServed(t *testing.T) {
	t.Parallel()
	v := loadContract(t)
	ok, errs := v.ValidateDocument()
	require.True(t, ok, "openapi.json is not valid OpenAPI:\n%s", describe(errs))
	require.Contains(t, string(api.OpenAPI), `"openapi": "3.1.0"`)

	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	temporal, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(temporal.Close)
	a, err := api.New(api.Options{Starter: &starter.Starter{Mirror: mirror.New(pool), Temporal: temporal}})
	require.NoError(t, err)

	coverageMu.Lock()
	documented := slices.Sorted(maps.Keys(coverage))
	coverageMu.Unlock()
	require.Equal(t, documented, slices.Sorted(slices.Values(a.Patterns())))

	// Each operation's x-scopes (where generated clients and linters see
	// them) is the scope the route's key is checked for.
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPI, &doc))
	scopes := a.RouteScopes()
	for path, item := range doc.Paths {
		for method, raw := range item {
			if !slices.Contains([]string{"get", "post", "put", "patch", "delete"}, method) {
				continue // the path's own parameters
			}
			var op struct {
				XScopes []api.Scope `json:"x-scopes"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			pattern := strings.ToUpper(method) + " " + path
			want, keyed := scopes[pattern]
			if !keyed {
				require.Empty(t, op.XScopes, pattern)
				continue
			}
			require.Equal(t, []api.Scope{want}, op.XScopes, pattern)
		}
	}
}

// The document's enums are the domain's lists: a reminder's states (and
// the list's filter, which adds pending), its provider's outcomes, and the
// channels.
func TestTheDocumentsEnumsAreTheDomains(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(api.OpenAPI, &doc))
	type enum struct {
		Enum       []string                           `json:"enum"`
		Properties map[string]struct{ Enum []string } `json:"properties"`
	}
	schema := func(name string) enum {
		var e enum
		require.NoError(t, json.Unmarshal(doc.Components.Schemas[name], &e), name)
		return e
	}
	require.Equal(t, names(reminder.States), schema("State").Enum)
	require.Equal(t, names(reminder.ProviderOutcomes), schema("ProviderOutcome").Enum)
	require.Equal(t, names(reminder.Channels), schema("Subscriber").Properties["channel"].Enum)
	require.Equal(t, names(reminder.Channels), schema("Reminder").Properties["channel"].Enum)
	require.Equal(t, names(reminder.StatusTypes), schema("StatusType").Enum)
	var prefixed []string
	for _, st := range reminder.StatusTypes {
		prefixed = append(prefixed, "reminder."+string(st))
	}
	require.Equal(t, prefixed, schema("StatusEvent").Properties["type"].Enum, "a status event's type is reminder. and its StatusType")

	type param struct {
		Name   string `json:"name"`
		Schema enum   `json:"schema"`
	}
	var list struct {
		Parameters []param `json:"parameters"`
	}
	require.NoError(t, json.Unmarshal(doc.Paths["/v1/reminders"]["get"], &list))
	i := slices.IndexFunc(list.Parameters, func(p param) bool { return p.Name == "state" })
	require.GreaterOrEqual(t, i, 0, "the list takes a state")
	require.Equal(t, names(mirror.FilterStates), list.Parameters[i].Schema.Enum)
}

func names[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
