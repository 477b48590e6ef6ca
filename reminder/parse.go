package reminder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shipnotify/shipnotify/sendwindow"
)

// Wire format of an update; times and durations stay strings here so that a
// bad one is reported with its field name.
type updateJSON struct {
	ShipmentID  string            `json:"shipment_id"`
	UpdateID    string            `json:"update_id"`
	Kind        string            `json:"kind"`
	WindowStart string            `json:"window_start"`
	Message     json.RawMessage   `json:"message"`
	Subscribers []json.RawMessage `json:"subscribers"`
	Approval    json.RawMessage   `json:"approval"`
	Escalation  json.RawMessage   `json:"escalation"`
	// SendWindow and WindowPolicy are every subscriber's unless it names its own.
	SendWindow   json.RawMessage `json:"send_window"`
	WindowPolicy string          `json:"window_policy"`
	// Digest is every subscriber's digest interval unless it names its own.
	Digest string `json:"digest"`
}

type approvalJSON struct {
	Required    bool   `json:"required"`
	Timeout     string `json:"timeout"`
	ExpireAfter string `json:"expire_after"`
}

type escalationJSON struct {
	Email string `json:"email"`
}

type subscriberJSON struct {
	ID               string          `json:"id"`
	Channel          string          `json:"channel"`
	Email            string          `json:"email"`
	URL              string          `json:"url"`
	Secret           string          `json:"secret"`
	Address          string          `json:"address"`
	DueAt            string          `json:"due_at"`
	RemindBefore     string          `json:"remind_before"`
	RequiresApproval bool            `json:"requires_approval"`
	Name             string          `json:"name"`
	TimeZone         string          `json:"time_zone"`
	Locale           string          `json:"locale"`
	SendWindow       json.RawMessage `json:"send_window"`
	WindowPolicy     string          `json:"window_policy"`
	Digest           string          `json:"digest"`
}

// ParseUpdate reads one update document. It rejects malformed JSON, unknown
// fields (a typo must not silently drop a setting), trailing data, and
// unparsable times and durations, naming the field. Semantic checks are
// Update.Plan's.
func ParseUpdate(r io.Reader) (Update, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxUpdateBytes+1))
	if err != nil {
		return Update{}, fmt.Errorf("error reading update: %w", err)
	}
	if len(data) > MaxUpdateBytes {
		return Update{}, fieldErr("", "update is larger than %d bytes", MaxUpdateBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Update{}, fieldErr("", "update is empty")
	}
	var w updateJSON
	if err := decodeStrict(data, &w, ""); err != nil {
		return Update{}, err
	}
	return w.toUpdate()
}

// decodeStrict decodes one JSON value, refusing duplicate keys, keys not
// spelled exactly as v's fields, and trailing data; errors name fields under
// prefix. Nested objects are decoded by their own call so an unknown field's
// error carries its full path.
func decodeStrict(data []byte, v any, prefix string) error {
	if err := checkKeys(data, v, prefix); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, prefix, data)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fieldErr(prefix, "malformed JSON: unexpected data after the object")
	}
	return nil
}

// checkKeys refuses, among the keys of the object data holds, one given
// twice or one not spelled exactly as a field of v (a pointer to a struct
// with json tags). encoding/json alone keeps the last of two keys and matches
// keys case-insensitively, even "\u212Aind" (a Kelvin sign) for "kind", so
// what we checked could differ from what another reader of the same document
// sees. Data that is not an object, or is malformed, is left to the decoder
// to report.
func checkKeys(data []byte, v any, prefix string) error {
	known := jsonNames(reflect.TypeOf(v).Elem())
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		field := joinField(prefix, keyName(name))
		if seen[name] {
			return fieldErr(field, "duplicate key")
		}
		seen[name] = true
		if !slices.Contains(known, name) {
			for _, k := range known {
				if strings.EqualFold(k, name) {
					return fieldErr(field, "unknown field; keys are case-sensitive (did you mean %q?)", k)
				}
			}
			return fieldErr(field, "unknown field")
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// jsonNames lists the keys a struct type decodes, as its json tags spell them.
func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-":
			continue
		case name == "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// plainKey is a key an error may name as it is; any other is quoted in ASCII
// and cut short, so the error stays one short line.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_]{1,40}$`)

func keyName(name string) string {
	if plainKey.MatchString(name) {
		return name
	}
	if r := []rune(name); len(r) > 40 {
		name = string(r[:40]) + "..."
	}
	return strconv.QuoteToASCII(name)
}

func joinField(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	}
	return prefix + "." + field
}

func jsonError(err error, prefix string, data []byte) error {
	join := func(field string) string { return joinField(prefix, field) }
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line, col := lineAndColumn(data, syntax.Offset)
		return fieldErr(prefix, "malformed JSON at line %d, column %d (byte %d): %s", line, col, syntax.Offset, syntax.Error())
	case errors.As(err, &typ):
		field := join(typ.Field)
		if field == "" {
			field = "update"
		}
		return fieldErr(field, "must be a JSON %s, not %s", jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fieldErr(prefix, "malformed JSON: unexpected end of input")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return fieldErr(join(keyName(name)), "unknown field")
	}
	return fieldErr(prefix, "malformed JSON: %s", err.Error())
}

// lineAndColumn is where byte offset of data is, both from 1: the
// decoder's offset is just past the byte it stopped at, and a column
// counts characters, not bytes.
func lineAndColumn(data []byte, offset int64) (line, col int) {
	before := data[:max(min(offset-1, int64(len(data))), 0)]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = 1 + utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return line, col
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "slice":
		return "array"
	case "struct", "ptr":
		return "object"
	}
	return goKind
}

func (w updateJSON) toUpdate() (Update, error) {
	u := Update{ShipmentID: w.ShipmentID, UpdateID: w.UpdateID, Kind: w.Kind}
	if w.WindowStart != "" {
		t, err := parseTime(w.WindowStart)
		if err != nil {
			return Update{}, fieldErr("window_start", "%s", err)
		}
		u.WindowStart = t
	}
	if len(w.Message) == 0 || string(w.Message) == "null" {
		return Update{}, fieldErr("message", "is required")
	}
	if err := decodeStrict(w.Message, &u.Message, "message"); err != nil {
		return Update{}, err
	}
	if string(u.Message.TemplateData) == "null" {
		u.Message.TemplateData = nil
	}
	if len(w.Approval) > 0 && string(w.Approval) != "null" {
		var a approvalJSON
		if err := decodeStrict(w.Approval, &a, "approval"); err != nil {
			return Update{}, err
		}
		u.Approval.Required = a.Required
		for _, d := range []struct {
			field string
			raw   string
			out   *time.Duration
		}{{"approval.timeout", a.Timeout, &u.Approval.Timeout}, {"approval.expire_after", a.ExpireAfter, &u.Approval.ExpireAfter}} {
			if d.raw == "" {
				continue
			}
			v, err := ParseDuration(d.raw)
			if err != nil {
				return Update{}, fieldErr(d.field, "%s", err)
			}
			*d.out = v
		}
	}
	if len(w.Escalation) > 0 && string(w.Escalation) != "null" {
		var e escalationJSON
		if err := decodeStrict(w.Escalation, &e, "escalation"); err != nil {
			return Update{}, err
		}
		u.EscalationEmail = e.Email
	}
	var err error
	if u.SendWindow, err = parseWindow(w.SendWindow, "send_window"); err != nil {
		return Update{}, err
	}
	if u.WindowPolicy = w.WindowPolicy; u.WindowPolicy != "" {
		if _, err := sendwindow.ParsePolicy(u.WindowPolicy); err != nil {
			return Update{}, fieldErr("window_policy", "%s", err)
		}
	}
	if u.Digest, err = parseDigest("digest", w.Digest); err != nil {
		return Update{}, err
	}
	for i, raw := range w.Subscribers {
		field := fmt.Sprintf("subscribers[%d]", i)
		var s subscriberJSON
		if err := decodeStrict(raw, &s, field); err != nil {
			return Update{}, err
		}
		sub := Subscriber{ID: s.ID, Channel: Channel(s.Channel), Email: s.Email, URL: s.URL, Secret: s.Secret,
			Address: s.Address, RequiresApproval: s.RequiresApproval, Name: s.Name, TimeZone: s.TimeZone, Locale: s.Locale,
			WindowPolicy: s.WindowPolicy}
		if sub.SendWindow, err = parseWindow(s.SendWindow, field+".send_window"); err != nil {
			return Update{}, err
		}
		if sub.Digest, err = parseDigest(field+".digest", s.Digest); err != nil {
			return Update{}, err
		}
		if s.WindowPolicy != "" {
			if _, err := sendwindow.ParsePolicy(s.WindowPolicy); err != nil {
				return Update{}, fieldErr(field+".window_policy", "%s", err)
			}
		}
		if s.DueAt != "" {
			t, err := parseTime(s.DueAt)
			if err != nil {
				return Update{}, fieldErr(field+".due_at", "%s", err)
			}
			sub.DueAt = t
		}
		if s.RemindBefore != "" {
			d, err := ParseDuration(s.RemindBefore)
			if err != nil {
				return Update{}, fieldErr(field+".remind_before", "%s", err)
			}
			if d <= 0 {
				return Update{}, fieldErr(field+".remind_before", "must be positive")
			}
			sub.RemindBefore = d
		}
		u.Subscribers = append(u.Subscribers, sub)
	}
	return u, nil
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("not an RFC 3339 time (like 2026-12-03T08:00:00Z)")
	}
	return t, nil
}

// ParseDuration reads a Go duration ("72h", "90m") optionally preceded by
// whole days ("3d", "2d12h"), since reminders are usually days ahead.
func ParseDuration(s string) (time.Duration, error) {
	bad := errors.New(`not a duration (like "72h", "3d" or "2d12h")`)
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, bad
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, bad
	}
	return days + d, nil
}
