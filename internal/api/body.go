package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// requireJSON refuses a body that does not say it is JSON: a form post or
// text sent by mistake is told so (415) rather than misread.
func requireJSON(r *http.Request) *Problem {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		p := problem(http.StatusUnsupportedMediaType, "the body must be application/json")
		p.header = http.Header{"Accept-Post": {"application/json"}}
		return p
	}
	return nil
}

// bodyProblem turns an error reading a request body into its answer: too
// large 413, a read that failed (a client gone quiet) 400.
func bodyProblem(err error) *Problem {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return problem(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", MaxBodyBytes))
	}
	p := problem(http.StatusBadRequest, "the request body could not be read")
	p.cause = err
	return p
}

// invalidUpdate is the 422 for an update the parser or planner refused,
// naming the field; anything else is the caller's to map.
func invalidUpdate(err error) (*Problem, bool) {
	var fe *reminder.FieldError
	if !errors.As(err, &fe) {
		return nil, false
	}
	p := typed(TypeInvalidUpdate, http.StatusUnprocessableEntity, "Invalid update", fe.Error())
	p.Field = fe.Field
	all := reminder.FieldErrors{fe}
	errors.As(err, &all)
	for _, e := range all {
		p.Errors = append(p.Errors, FieldProblem{Field: e.Field, Detail: e.Error()})
	}
	if len(all) > 1 {
		more := "problems"
		if len(all) == 2 {
			more = "problem"
		}
		p.Detail += fmt.Sprintf(" (and %d more %s: errors lists them all)", len(all)-1, more)
	}
	return p, true
}

// invalidRequest is the 422 for an operation's body, naming the field.
func invalidRequest(field, format string, args ...any) *Problem {
	detail := fmt.Sprintf(format, args...)
	if field != "" {
		detail = field + ": " + detail
	}
	p := typed(TypeInvalidRequest, http.StatusUnprocessableEntity, "Invalid request", detail)
	p.Field = field
	return p
}

// actorBody is the who and why every operation takes.
type actorBody struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

type rescheduleUpdateBody struct {
	WindowStart string `json:"window_start"`
	By          string `json:"by"`
	Reason      string `json:"reason"`
}

type rescheduleReminderBody struct {
	DueAt  string `json:"due_at"`
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// decodeBody reads an operation's JSON object into v, as strictly as the
// update parser reads an update: keys spelled exactly as v's fields and
// given once, no unknown key, nothing after the object. An empty body is an
// empty object when optional.
func decodeBody(r *http.Request, v any, optional bool) *Problem {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyProblem(err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return nil
		}
		return invalidRequest("", "a JSON object is required")
	}
	if p := requireJSON(r); p != nil {
		return p
	}
	if p := checkKeys(data, jsonFields(v)); p != nil {
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return invalidRequest(typeErr.Field, "want a %s", typeErr.Type)
		}
		return invalidRequest("", "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidRequest("", "malformed JSON: unexpected data after the object")
	}
	return nil
}

// checkKeys refuses a key given twice or not exactly one of known
// (encoding/json alone keeps the last of two and folds case).
func checkKeys(data []byte, known []string) *Problem {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return invalidRequest("", "malformed JSON")
	}
	if tok != json.Delim('{') {
		return invalidRequest("", "want a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return invalidRequest("", "malformed JSON")
		}
		name, _ := tok.(string)
		switch {
		case !slices.Contains(known, name):
			if !plainKey.MatchString(name) {
				name = fmt.Sprintf("%.40q", name)
			}
			return invalidRequest(name, "unknown field")
		case seen[name]:
			return invalidRequest(name, "duplicate key")
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return invalidRequest("", "malformed JSON")
		}
	}
	return nil
}

// plainKey is a key a problem may name as it is; any other is quoted.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_]{1,40}$`)

func jsonFields(v any) []string {
	switch v.(type) {
	case *actorBody:
		return []string{"by", "reason"}
	case *rescheduleUpdateBody:
		return []string{"window_start", "by", "reason"}
	case *rescheduleReminderBody:
		return []string{"due_at", "by", "reason"}
	case *liftBody:
		return []string{"address", "by", "reason"}
	}
	panic(fmt.Sprintf("api: no fields listed for %T", v))
}

// actor is who asks and why, for the audit trail. The key's name is always
// recorded, in a field of its own (Key); by is the caller's words as given,
// or the key's name when the request gives none. No words in by can pass
// for a key: the trail never reads a key out of them.
func actor(k *Key, by, reason string) (starter.Actor, *Problem) {
	if p := checkText("by", by, starter.MaxByRunes); p != nil {
		return starter.Actor{}, p
	}
	if p := checkText("reason", reason, starter.MaxReasonRunes); p != nil {
		return starter.Actor{}, p
	}
	if by == "" {
		by = k.Name
	}
	return starter.Actor{By: by, Key: k.Name, Reason: reason}, nil
}

// checkText refuses text that would not read as it looks in the audit
// trail: control and format characters (bidi overrides among them), line
// and paragraph separators. The error names the code point, not the text.
func checkText(field, s string, maxRunes int) *Problem {
	if !utf8.ValidString(s) {
		return invalidRequest(field, "not valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > maxRunes {
		return invalidRequest(field, "longer than %d characters", maxRunes)
	}
	for i, c := range []rune(s) {
		if unicode.In(c, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return invalidRequest(field, "holds U+%04X at character %d", c, i)
		}
	}
	return nil
}

// parseTime reads an RFC 3339 time from a body field.
func parseTime(field, s string) (time.Time, *Problem) {
	if s == "" {
		return time.Time{}, invalidRequest(field, "is required")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalidRequest(field, "not an RFC 3339 time (like 2027-01-15T08:00:00Z)")
	}
	return t, nil
}
