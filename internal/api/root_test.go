package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

// What serve mounts beside the API is reached at its own paths, and only
// in their clean form: an unclean path to it is the API's 404 problem, not
// a redirect, and nothing may be mounted under /v1/. Checked without
// servers, as TestTheDocumentNamesEveryRouteServed is.
func TestTheRootMountsBesideTheAPIOnly(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	temporal, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(temporal.Close)
	a, err := api.New(api.Options{Starter: &starter.Starter{Mirror: mirror.New(pool), Temporal: temporal}})
	require.NoError(t, err)
	root := api.NewRoot(a)
	root.Handle("/console/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	require.Panics(t, func() { root.Handle("/v1/console/", http.NotFoundHandler()) })
	require.Panics(t, func() { root.Handle("POST /v1", http.NotFoundHandler()) })

	serve := func(method, path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		root.ServeHTTP(w, httptest.NewRequest(method, "http://shipnotify.example"+path, nil))
		return w
	}
	require.Equal(t, http.StatusTeapot, serve("GET", "/console/x").Code)
	for _, p := range []string{"/console//x", "/console/./x", "/v1/../console/x", "//console/x", "/elsewhere", "/v1"} {
		w := serve("GET", p)
		require.Equal(t, http.StatusNotFound, w.Code, p)
		require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"), p)
		require.Empty(t, w.Header().Get("Location"), p)
	}
	w := serve("DELETE", "/v1/reminders")
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	require.Contains(t, w.Header().Get("Allow"), "GET")
}

// A mounted tree's path without its trailing '/' (/console, /unsubscribe)
// is the API's 404 problem, as any path nothing takes: the ServeMux behind
// the root used to redirect it to the tree, and nothing on serve's
// listener redirects to a path.
func TestTheRootRedirectsNoPathToAMountedTree(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	temporal, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	t.Cleanup(temporal.Close)
	a, err := api.New(api.Options{Starter: &starter.Starter{Mirror: mirror.New(pool), Temporal: temporal}})
	require.NoError(t, err)
	root := api.NewRoot(a)
	teapot := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	root.Handle("/console/", teapot)
	root.Handle("POST /unsubscribe/", teapot)
	root.Handle("/providers/sendgrid/events", teapot)

	for _, c := range []struct{ method, path string }{
		{"GET", "/console"}, {"POST", "/console"}, {"POST", "/unsubscribe"}, {"GET", "/providers/sendgrid/events/"},
	} {
		w := httptest.NewRecorder()
		root.ServeHTTP(w, httptest.NewRequest(c.method, "http://shipnotify.example"+c.path, nil))
		require.Equal(t, http.StatusNotFound, w.Code, "%s %s", c.method, c.path)
		require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"), c.path)
		require.Empty(t, w.Header().Get("Location"), c.path)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/console/"}, {"POST", "/unsubscribe/t"}, {"POST", "/providers/sendgrid/events"},
	} {
		w := httptest.NewRecorder()
		root.ServeHTTP(w, httptest.NewRequest(c.method, "http://shipnotify.example"+c.path, nil))
		require.Equal(t, http.StatusTeapot, w.Code, "%s %s: what is mounted is reached", c.method, c.path)
	}
}
