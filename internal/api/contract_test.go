package api_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
)

// The contract test: every request the suite sends and every answer it gets
// goes through checkedTransport, which validates both against api/openapi.json
// with libopenapi-validator (strict: undeclared properties count too). A
// request the test sends to break the contract on purpose says so, and the
// validator must then refuse it: the document describes that limit too.

// expectation is what the validator must say of a request.
type expectation int

const (
	// conforming requests must validate (the default).
	conforming expectation = iota
	// violating requests break the contract on purpose (no key, a limit
	// below the minimum): the validator must refuse them.
	violating
	// malformed requests carry content the document may or may not catch
	// (the malformed updates: the server checks more than a schema can);
	// they are validated and the outcome is not asserted.
	malformed
	// undocumented requests go to a path the document does not have; the
	// validator must say so, and the answer must be a problem.
	undocumented
)

type expectKey struct{}

// expecting marks a request's context with what the validator must say.
func expecting(ctx context.Context, e expectation) context.Context {
	return context.WithValue(ctx, expectKey{}, e)
}

var (
	contractOnce sync.Once
	contract     validator.Validator
	// lenient is the contract without strict mode, for the one answer whose
	// members are not ours to declare: the OpenAPI document itself.
	lenient     validator.Validator
	contractErr error
	// routeOf finds the document's operation for a request, by Go's own
	// pattern matching over the document's paths.
	routeOf *http.ServeMux

	coverageMu sync.Mutex
	// coverage is, per documented operation, the statuses the suite saw.
	coverage = map[string]map[int]bool{}
)

func loadContract(t testing.TB) validator.Validator {
	t.Helper()
	contractOnce.Do(func() {
		doc, err := libopenapi.NewDocument(api.OpenAPI)
		if err != nil {
			contractErr = err
			return
		}
		// Strict mode reports members a schema does not declare; an event's
		// detail is free-form (by, reason, from, to, kind, …), and so is an
		// update's template data (the caller's own template's keys).
		// X-Content-Type-Options (nosniff) goes on every answer, as
		// Date does; it is no part of any operation's contract.
		v, errs := validator.NewValidator(doc, config.WithFormatAssertions(),
			config.WithStrictMode(), config.WithStrictIgnorePaths("$.body.events[*].detail.**", "$.body.message.template_data.**"),
			config.WithStrictIgnoredHeadersExtra("X-Content-Type-Options"))
		if len(errs) > 0 {
			contractErr = fmt.Errorf("building the validator: %v", errs)
			return
		}
		contract = v
		if lenient, errs = validator.NewValidator(doc, config.WithFormatAssertions()); len(errs) > 0 {
			contractErr = fmt.Errorf("building the validator: %v", errs)
			return
		}
		routeOf = http.NewServeMux()
		model, err := doc.BuildV3Model()
		if err != nil {
			contractErr = err
			return
		}
		for path, item := range model.Model.Paths.PathItems.FromOldest() {
			for method := range item.GetOperations().KeysFromOldest() {
				pattern := strings.ToUpper(method) + " " + path
				routeOf.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
				coverage[pattern] = map[int]bool{}
			}
		}
	})
	require.NoError(t, contractErr)
	return contract
}

// checkedTransport validates every round trip against the document.
type checkedTransport struct {
	t    testing.TB
	base http.RoundTripper
}

func (c checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	v := loadContract(c.t)
	want, _ := req.Context().Value(expectKey{}).(expectation)
	// The body as sent: from GetBody when the request has one, otherwise
	// (a streamed body) as the transport reads it.
	var sent bytes.Buffer
	if req.Body != nil && req.GetBody == nil {
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(req.Body, &sent), req.Body}
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))

	check := req.Clone(context.Background())
	switch {
	case req.GetBody != nil:
		if check.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	case req.Body != nil:
		check.Body = io.NopCloser(bytes.NewReader(sent.Bytes()))
	}
	reqOK, reqErrs := v.ValidateHttpRequestSync(check)
	name := req.Method + " " + req.URL.RequestURI()
	switch want {
	case conforming:
		if !reqOK {
			c.t.Errorf("contract: request %s does not conform to openapi.json:\n%s", name, describe(reqErrs))
		}
	case violating, undocumented:
		if reqOK {
			c.t.Errorf("contract: request %s breaks the contract on purpose, but openapi.json accepts it", name)
		}
	}
	if want == undocumented {
		if _, pattern := routeOf.Handler(req); pattern != "" {
			c.t.Errorf("contract: %s is documented as %s", name, pattern)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			c.t.Errorf("contract: %s answered %d with %s, not a problem", name, resp.StatusCode, ct)
		}
		return resp, nil
	}
	checkResp := *resp
	checkResp.Body = io.NopCloser(bytes.NewReader(answer))
	rv := v
	if req.URL.Path == "/v1/openapi.json" {
		rv = lenient
	}
	if ok, errs := rv.ValidateHttpResponse(check, &checkResp); !ok {
		c.t.Errorf("contract: the answer %d to %s does not conform to openapi.json:\n%s\nbody: %.2000s",
			resp.StatusCode, name, describe(errs), answer)
	}
	if _, pattern := routeOf.Handler(req); pattern != "" {
		coverageMu.Lock()
		coverage[pattern][resp.StatusCode] = true
		coverageMu.Unlock()
	}
	return resp, nil
}

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  - %s: %s (%s/%s)\n", e.Message, e.Reason, e.ValidationType, e.ValidationSubType)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "      %s\n", f.Error())
		}
	}
	return b.String()
}

// TestMain runs the suite, then, when every test ran (no -run, -skip or
// -short) and the integration tests did, requires that every operation of
// the document was seen both succeeding and failing.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	all := flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" && !testing.Short()
	coverageMu.Lock()
	defer coverageMu.Unlock()
	if code != 0 || !all || !slices.ContainsFunc(slices.Collect(maps.Values(coverage)), func(s map[int]bool) bool { return len(s) > 0 }) {
		os.Exit(code)
	}
	for _, pattern := range slices.Sorted(maps.Keys(coverage)) {
		statuses := coverage[pattern]
		ok, failed := false, false
		for s := range statuses {
			ok = ok || s < 300
			failed = failed || s >= 400
		}
		if !ok || (!failed && pattern != "GET /v1/openapi.json") {
			fmt.Fprintf(os.Stderr, "contract coverage: %s was seen with statuses %v; every operation needs a success and a failure\n",
				pattern, slices.Sorted(maps.Keys(statuses)))
			code = 1
		}
	}
	os.Exit(code)
}

// The document is served as it is embedded (that it is valid and names
// every route: TestTheDocumentNamesEveryRouteServed, without servers).
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	e := setup(t, withoutWorker)
	resp := e.do(t, "GET", "/v1/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, resp.status)
	require.Equal(t, api.OpenAPI, resp.body)
	// It takes no parameter: one given is refused, named, as on every route.
	resp = e.send(t, request{method: "GET", path: "/v1/openapi.json?version=2", expect: violating})
	require.Equal(t, http.StatusBadRequest, resp.status)
	require.Equal(t, "version", resp.problem(t).Field)
}
