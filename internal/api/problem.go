package api

import (
	"encoding/json"
	"net/http"
)

// Problem is an error answer, an RFC 9457 problem detail
// (application/problem+json). Type names the kind of problem; Field and
// Fields say which input is wrong, so a client can point at it without
// parsing Detail. Detail never repeats an input's value, which may be
// personal data.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Field is the input a 400 or 422 is about (a JSON path like
	// subscribers[2].url, or a query parameter); absent when the document
	// as a whole is wrong.
	Field string `json:"field,omitempty"`
	// Fields are what differ in a changed resubmission (409).
	Fields []string `json:"fields,omitempty"`
	// Errors are every problem a 422 found in an update, in document
	// order; Field and Detail are the first's.
	Errors []FieldProblem `json:"errors,omitempty"`
	// Results are the reminders an update reached before a failure (503).
	Results []Result `json:"results,omitempty"`
	// Outcomes are what an operation did before a failure (503, 504).
	Outcomes []Outcome `json:"outcomes,omitempty"`

	// header is set on the answer (Retry-After, WWW-Authenticate).
	header http.Header
	// cause is what went wrong underneath a 5xx, for the server's log.
	cause error
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// FieldProblem is one problem of an update: the field and what is wrong.
type FieldProblem struct {
	Field  string `json:"field,omitempty"`
	Detail string `json:"detail"`
}

// Problem types beyond the plain HTTP statuses (those are about:blank, whose
// title is the status text). docs/api.md lists them.
const (
	TypeInvalidUpdate    = "urn:shipnotify:problem:invalid-update"
	TypeUpdateChanged    = "urn:shipnotify:problem:update-changed"
	TypeInvalidRequest   = "urn:shipnotify:problem:invalid-request"
	TypeInvalidParameter = "urn:shipnotify:problem:invalid-parameter"
	TypeNoWindow         = "urn:shipnotify:problem:no-window"
	TypeNothingToDecide  = "urn:shipnotify:problem:nothing-to-decide"
	TypeNoAnswer         = "urn:shipnotify:problem:no-answer"
	TypeUnfinished       = "urn:shipnotify:problem:unfinished"
	TypeIncomplete       = "urn:shipnotify:problem:incomplete"
	TypeWorkflowIDTaken  = "urn:shipnotify:problem:workflow-id-taken"
)

// problem is a problem of a plain HTTP status: about:blank, titled by it.
func problem(status int, detail string) *Problem {
	return &Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail}
}

// typed is a problem of one of our types.
func typed(typ string, status int, title, detail string) *Problem {
	return &Problem{Type: typ, Title: title, Status: status, Detail: detail}
}

func invalidParameter(name, detail string) *Problem {
	p := typed(TypeInvalidParameter, http.StatusBadRequest, "Invalid parameter", name+": "+detail)
	p.Field = name
	return p
}

func writeProblem(w http.ResponseWriter, p *Problem) {
	for k, vs := range p.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	encode(w, p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	encode(w, v)
}

// encode writes v as JSON as it reads ("<key>", not "\u003ckey\u003e"):
// the answers are application/json, never HTML.
func encode(w http.ResponseWriter, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
