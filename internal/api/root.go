package api

import (
	"fmt"
	"net/http"
	"strings"
)

// Root is the whole handler `shipnotify serve` answers with on
// SHIPNOTIFY_API_ADDR: the API under /v1/ and, beside it, what Handle
// mounts (the approval console, one-click unsubscribes, the provider's
// event webhook). The API's tests serve a Root too, so they see every
// answer as a tracker does, through this one constructor.
//
// It is no plain ServeMux in front of the API: a ServeMux answers a path
// not in its clean form (a doubled '/', a '.' or '..' segment) with a
// redirect in HTML before any handler sees it, and would name its own
// "/v1/" pattern for what no route takes. Here such a path is the API's
// 404 problem, and a request nothing takes is the API's problem, counted
// as route="unmatched": so is a mounted tree's path without its trailing
// '/', which a ServeMux would redirect too.
type Root struct {
	api    *API
	others *http.ServeMux
}

// APIPrefix is the path under which the tracker API answers.
const APIPrefix = "/v1/"

// NewRoot is the handler serve listens with, over the API a.
func NewRoot(a *API) *Root {
	return &Root{api: a, others: http.NewServeMux()}
}

// Handle mounts h at pattern (a ServeMux pattern) beside the API. A pattern
// under /v1/ is the API's alone, and panics, as a ServeMux's conflicting
// pattern does.
func (rt *Root) Handle(pattern string, h http.Handler) {
	p := pattern
	if _, path, ok := strings.Cut(pattern, " "); ok {
		p = path
	}
	if underAPI(p) {
		panic(fmt.Sprintf("api: %s is under the API's %s", pattern, APIPrefix))
	}
	rt.others.Handle(pattern, h)
}

func (rt *Root) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if underAPI(p) || p != cleanPath(p) {
		rt.api.ServeHTTP(w, r)
		return
	}
	if _, pattern := rt.others.Handler(r); pattern == "" || redirects(p, pattern) {
		// Nothing mounted takes it: the API's 404 (or 405) problem.
		rt.api.ServeHTTP(w, r)
		return
	}
	rt.others.ServeHTTP(w, r)
}

// redirects reports whether pattern, which a ServeMux named for the clean
// path p, is the tree it would redirect p to (/console to /console/)
// rather than a match: every '/' of a pattern stands for one of the path
// it matches, so a pattern with more of them than p cannot match it. No
// path is redirected on this listener; such a path is a 404 as well.
func redirects(p, pattern string) bool {
	if _, rest, ok := strings.Cut(pattern, " "); ok {
		pattern = rest // the method
	}
	return strings.Count(p, "/") < strings.Count(pattern, "/")
}

// underAPI reports whether a path is the API's: /v1 itself and all below.
func underAPI(p string) bool {
	return p == strings.TrimSuffix(APIPrefix, "/") || strings.HasPrefix(p, APIPrefix)
}
