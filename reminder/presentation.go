package reminder

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/text/language"
)

// Limits on how an email looks. Template data rides in every reminder's
// mail body: SendGrid's own limits are far above it.
const (
	MaxTemplateDataBytes = 8 << 10
	MaxNameRunes         = 100
	maxLocaleBytes       = 35 // RFC 5646 asks implementations to take tags this long
	maxTimeZoneBytes     = 64
)

// templateIDPattern is SendGrid's dynamic template id: "d-" and 32
// lower-case hex digits. A legacy template's UUID is refused: its data is
// substitutions, not dynamic data.
var templateIDPattern = regexp.MustCompile(`^d-[0-9a-f]{32}$`)

// timeZonePattern is the shape of an IANA zone name ("Europe/Berlin",
// "America/Argentina/Buenos_Aires", "Etc/GMT+5"), checked before the name
// reaches time.LoadLocation, which reads files by it.
var timeZonePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9][A-Za-z0-9_+-]*)*$`)

// TemplateKeys are the keys shipnotify sets in a dynamic template's data;
// the caller's template_data may not use them. The activity that sends the
// email fills exactly these (activities.templateData).
var TemplateKeys = []string{
	"reminder_id", "shipment_id", "update_id", "subscriber_id", "subscriber_name", "kind",
	"subject", "text", "delivery_key", "time_zone", "locale",
	"due_at_utc", "due_at_local", "due_at_text",
	"window_start_utc", "window_start_local", "window_start_text",
}

// HasTemplate reports whether the message names a dynamic template.
func (m Message) HasTemplate() bool { return m.TemplateID != "" }

func (m Message) checkTemplate() error {
	if m.TemplateID == "" {
		if len(m.TemplateData) > 0 {
			return fieldErr("message.template_data", "needs message.template_id")
		}
		return nil
	}
	if !templateIDPattern.MatchString(m.TemplateID) {
		return fieldErr("message.template_id", `is not a SendGrid dynamic template id ("d-" and 32 lower-case hex digits)`)
	}
	if len(m.TemplateData) == 0 {
		return nil
	}
	if len(m.TemplateData) > MaxTemplateDataBytes {
		return fieldErr("message.template_data", "is %d bytes; at most %d", len(m.TemplateData), MaxTemplateDataBytes)
	}
	keys, err := objectKeys(m.TemplateData)
	if err != nil {
		return fieldErr("message.template_data", "%s", err)
	}
	for _, k := range keys {
		if slices.Contains(TemplateKeys, k) {
			return fieldErr("message.template_data."+keyName(k), "is set by shipnotify; use another key")
		}
	}
	return nil
}

// objectKeys lists the top-level keys of a JSON object, refusing anything
// else and a key given twice: the keys are merged with shipnotify's own.
func objectKeys(data []byte) ([]string, error) {
	notObject := errors.New("must be a JSON object")
	if !json.Valid(data) {
		return nil, errors.New("is not valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, notObject
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notObject
		}
		k, _ := tok.(string)
		if slices.Contains(keys, k) {
			return nil, errors.New("repeats the key " + keyName(k))
		}
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, notObject
		}
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return nil, notObject
	}
	return keys, nil
}

// checkPresentation checks the subscriber's name, time zone and locale,
// which only a channel that writes to a person uses: a webhook's receiver
// formats its own.
func (s Subscriber) checkPresentation(field string, r *Reminder) error {
	if s.Channel == Webhook && (s.Name != "" || s.TimeZone != "" || s.Locale != "") {
		return fieldErr(field, "a webhook subscriber takes no name, time_zone or locale (its receiver formats its own)")
	}
	if s.Name != "" {
		if strings.TrimSpace(s.Name) == "" || !utf8.ValidString(s.Name) {
			return fieldErr(field+".name", "must be one line of UTF-8 text")
		}
		if n := utf8.RuneCountInString(s.Name); n > MaxNameRunes {
			return fieldErr(field+".name", "is %d characters; at most %d", n, MaxNameRunes)
		}
		if err := checkRunes(field+".name", s.Name, false); err != nil {
			return err
		}
	}
	if s.TimeZone != "" {
		if _, err := LoadTimeZone(s.TimeZone); err != nil {
			return fieldErr(field+".time_zone", "%s", err)
		}
	}
	if s.Locale != "" {
		if _, err := ParseLocale(s.Locale); err != nil {
			return fieldErr(field+".locale", "%s", err)
		}
	}
	r.Name, r.TimeZone, r.Locale = s.Name, s.TimeZone, s.Locale
	return nil
}

// LoadTimeZone is the IANA zone a subscriber names; "" is UTC. "Local" is
// refused: it is the worker's zone, not the subscriber's. Its error never
// repeats the name.
func LoadTimeZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if len(name) > maxTimeZoneBytes || name == "Local" || !timeZonePattern.MatchString(name) {
		return nil, errors.New(`is not an IANA time zone name (like "Europe/Berlin")`)
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errors.New(`is not a time zone the IANA database knows (like "Europe/Berlin")`)
	}
	zones.Store(name, loc)
	return loc, nil
}

// zones are the zones loaded so far, by name: time.LoadLocation reads and
// parses the zone's file on every call (17 µs here), and a 500-subscriber
// update with send windows asks for a zone a few times a reminder. Only
// zones the database knows are kept, so it holds at most its ~600 names.
var zones sync.Map

// ParseLocale is the BCP 47 language tag a subscriber names; "" is
// English. A tag must be well formed and its subtags known.
func ParseLocale(tag string) (language.Tag, error) {
	if tag == "" {
		return language.English, nil
	}
	bad := errors.New(`is not a BCP 47 language tag (like "en", "de-DE" or "pt-BR")`)
	// x/text also takes '_' as a separator; BCP 47 does not.
	if len(tag) > maxLocaleBytes || strings.ContainsAny(tag, "_ ") {
		return language.Und, bad
	}
	t, err := language.Parse(tag)
	if err != nil || t == language.Und {
		return language.Und, bad
	}
	return t, nil
}

// sameJSON reports whether two JSON documents hold the same value, however
// spelled: the mirror keeps template data as jsonb, which reorders keys.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}
