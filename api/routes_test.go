package api_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/api"
	"github.com/shipnotify/shipnotify/mirror"
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
}
