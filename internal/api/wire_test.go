package api_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
	"github.com/shipnotify/shipnotify/starter"
)

// responseTypes are the Go types of the document's answers, by schema.
var responseTypes = map[string]reflect.Type{
	"Page":            reflect.TypeFor[api.Page](),
	"ReminderView":    reflect.TypeFor[api.ReminderView](),
	"SuppressionPage": reflect.TypeFor[api.SuppressionPage](),
	"LiftResult":      reflect.TypeFor[api.LiftResult](),
	"Results":         reflect.TypeFor[api.Results](),
	"Outcomes":        reflect.TypeFor[api.Outcomes](),
	"Problem":         reflect.TypeFor[api.Problem](),
}

// The API's response types are openapi.json's schemas, field for field,
// both ways, without a server: every member a type writes is a property
// of its schema and every property is a member of its type, and a member
// always written (no omitempty) is exactly a required one. So a field added
// to a response type (a mirror column mapped into it) fails here until the
// document has it, and a property documented but never written does too.
// The contract test (contract_test.go) then holds every answer the suite
// gets to the document.
func TestTheResponseTypesAreTheDocuments(t *testing.T) {
	t.Parallel()
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(api.OpenAPI, &doc))

	// Every schema an answer is documented with has its Go type here.
	answered := map[string]bool{}
	refOf := func(content map[string]struct{ Schema schema }) {
		for _, c := range content {
			if name, ok := strings.CutPrefix(c.Schema.Ref, "#/components/schemas/"); ok {
				answered[name] = true
			}
		}
	}
	for _, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op struct {
				Responses map[string]struct {
					Content map[string]struct{ Schema schema } `json:"content"`
				} `json:"responses"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			for _, r := range op.Responses {
				refOf(r.Content)
			}
		}
	}
	for _, r := range doc.Components.Responses {
		refOf(r.Content)
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(answered)), slices.Collect(maps.Keys(responseTypes)),
		"each schema an answer is documented with, and only those, has its Go type in responseTypes")

	for name, typ := range responseTypes {
		for _, p := range matchSchema(doc, schema{Ref: "#/components/schemas/" + name}, typ, name) {
			t.Error(p)
		}
	}
}

// The walk must catch a drift both ways: a member a type has and the
// schema lacks, and a property the schema has and the type lacks.
func TestTheWalkCatchesADrift(t *testing.T) {
	t.Parallel()
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(api.OpenAPI, &doc))
	type withMore struct {
		api.Suppression
		Address string `json:"address"`
	}
	type fewer struct {
		Tenant        string    `json:"tenant"`
		AddressSHA256 string    `json:"address_sha256"`
		Reason        string    `json:"reason"`
		ReminderID    string    `json:"reminder_id"`
		SuppressedAt  time.Time `json:"suppressed_at"`
	}
	type optional struct {
		api.Suppression
		Reason string `json:"reason,omitempty"`
	}
	ref := schema{Ref: "#/components/schemas/Suppression"}
	require.Empty(t, matchSchema(doc, ref, reflect.TypeFor[api.Suppression](), "Suppression"))
	require.NotEmpty(t, matchSchema(doc, ref, reflect.TypeFor[withMore](), "Suppression"), "a member the document lacks")
	require.NotEmpty(t, matchSchema(doc, ref, reflect.TypeFor[fewer](), "Suppression"), "properties the type lacks")
	require.NotEmpty(t, matchSchema(doc, ref, reflect.TypeFor[optional](), "Suppression"), "a required member left out when empty")
}

// The store's types are no wire format: they carry no JSON tags, so
// nothing can serialise a mirror row (or a trail event, a suppression, a
// change) as a client's contract by accident. The API maps them into its
// own types (wire.go); the CLI prints those.
func TestTheStoresTypesCarryNoWireTags(t *testing.T) {
	t.Parallel()
	for _, typ := range []reflect.Type{
		reflect.TypeFor[mirror.Row](), reflect.TypeFor[mirror.Event](),
		reflect.TypeFor[mirror.Suppression](), reflect.TypeFor[mirror.LastChange](),
	} {
		for f := range typ.Fields() {
			_, tagged := f.Tag.Lookup("json")
			require.False(t, tagged, "%s.%s has a JSON tag: the wire format is internal/api's (wire.go)", typ, f.Name)
		}
	}
}

// The API's answers are the bytes they were when the store's types were
// the wire format (issue 36): these are what json.Marshal made of the
// mirror's and starter's types on main before then, each optional member
// both present and absent, with the members added since in their places
// (goes_out_at and send_window, issue 39: a reminder without a window goes
// out at its due time; digest and digest_key, issue 39 part 2).
func TestTheWireIsAsItWas(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 8, 10, 0, 0, 123456789, time.UTC)
	p := func(d time.Duration) *time.Time { v := at.Add(d); return &v }
	window := reminder.SendWindow{Window: sendwindow.Window{Days: sendwindow.Weekdays, From: 8 * 60, To: 18 * 60,
		Skip: []sendwindow.Date{{Year: 2026, Month: 12, Day: 25}}}, TimeZone: "Asia/Singapore", Policy: sendwindow.Next}
	full := mirror.Row{ID: "acme/S-1/w-1/ops", Tenant: "acme", ShipmentID: "S-1", UpdateID: "w-1", SubscriberID: "ops",
		Channel: reminder.Email, DueAt: at, RequestedDueAt: at.Add(-time.Hour), State: reminder.Delivered, DeliveryKey: "k",
		WorkflowID: "wf", WorkflowStartedAt: p(time.Second), SentAt: p(2 * time.Second), CancelRequestedAt: p(3 * time.Second),
		CreatedAt: at.Add(-2 * time.Hour), UpdatedAt: at.Add(time.Minute), ProviderOutcome: reminder.OutcomeDelivered,
		ProviderOutcomeAt: p(4 * time.Second), DeliveredAt: p(5 * time.Second),
		LastChange: &mirror.LastChange{Event: 1, Type: reminder.StatusTypes[0], At: at, Sequence: 3},
		GoesOutAt:  at.Add(22 * time.Hour), Window: &window, Digest: 30 * time.Minute, DigestKey: "digest_k"}
	sparse := mirror.Row{ID: "S-1/w-1/ops", ShipmentID: "S-1", UpdateID: "w-1", SubscriberID: "ops", Channel: reminder.Webhook,
		DueAt: at, RequestedDueAt: at, State: reminder.Scheduled, DeliveryKey: "k", WorkflowID: "wf", CreatedAt: at, UpdatedAt: at}
	ev := mirror.Event{ID: 7, Type: "sent", At: at, Detail: map[string]any{"attempts": 1.0, "delivery_key": "k"}}
	sup := mirror.Suppression{Tenant: "t-1", AddressSHA256: "ab", Reason: "unsubscribe", ReminderID: "r", EventID: "e",
		SuppressedAt: at, LiftedAt: p(time.Hour), LiftedBy: "alice"}
	sup0 := mirror.Suppression{AddressSHA256: "ab", Reason: "one_click", ReminderID: "r", SuppressedAt: at}
	res := starter.Result{ReminderID: "r", WorkflowID: "wf", SubscriberID: "s", DeliveryKey: "k", DueAt: at,
		GoesOutAt: at, Status: starter.Scheduled, State: reminder.Scheduled}
	out := starter.Outcome{ReminderID: "r", Status: "approved", State: reminder.Scheduled, DueAt: p(0), GoesOutAt: p(22 * time.Hour),
		DeliveryKey: "k", Error: "x", DecidedBy: "bob", DecidedAt: p(time.Minute)}
	out0 := starter.Outcome{ReminderID: "r", Status: "failed"}
	dev := opaque.Development()

	for _, c := range []struct {
		got  any
		want string
	}{
		{api.ReminderOf(full, dev), `{"reminder_id":"acme/S-1/w-1/ops","tenant":"acme","shipment_id":"S-1","update_id":"w-1","subscriber_id":"ops","channel":"email","due_at":"2026-12-08T10:00:00.123456789Z","requested_due_at":"2026-12-08T09:00:00.123456789Z","goes_out_at":"2026-12-09T08:00:00.123456789Z","send_window":{"days":"mon,tue,wed,thu,fri","hours":"08:00-18:00","time_zone":"Asia/Singapore","skip_dates":["2026-12-25"],"policy":"next"},"digest":"30m","digest_key":"digest_k","state":"delivered","delivery_key":"k","workflow_id":"wf","workflow_started_at":"2026-12-08T10:00:01.123456789Z","sent_at":"2026-12-08T10:00:02.123456789Z","cancel_requested_at":"2026-12-08T10:00:03.123456789Z","created_at":"2026-12-08T08:00:00.123456789Z","updated_at":"2026-12-08T10:01:00.123456789Z","provider_outcome":"delivered","provider_outcome_at":"2026-12-08T10:00:04.123456789Z","delivered_at":"2026-12-08T10:00:05.123456789Z","last_change":{"id":"evt_hcDI9wOWVJf4iEmsmu-5SA","type":"scheduled","at":"2026-12-08T10:00:00.123456789Z","sequence":3}}`},
		{api.ReminderOf(sparse, dev), `{"reminder_id":"S-1/w-1/ops","shipment_id":"S-1","update_id":"w-1","subscriber_id":"ops","channel":"webhook","due_at":"2026-12-08T10:00:00.123456789Z","requested_due_at":"2026-12-08T10:00:00.123456789Z","goes_out_at":"2026-12-08T10:00:00.123456789Z","state":"scheduled","delivery_key":"k","workflow_id":"wf","created_at":"2026-12-08T10:00:00.123456789Z","updated_at":"2026-12-08T10:00:00.123456789Z"}`},
		{api.EventOf(ev, dev), `{"id":"evt_LV7-7SbkaQxlhDLTBDQUig","type":"sent","at":"2026-12-08T10:00:00.123456789Z","detail":{"attempts":1,"delivery_key":"k"}}`},
		{api.SuppressionOf(sup, "acme"), `{"tenant":"acme","address_sha256":"ab","reason":"unsubscribe","reminder_id":"r","event_id":"e","suppressed_at":"2026-12-08T10:00:00.123456789Z","lifted_at":"2026-12-08T11:00:00.123456789Z","lifted_by":"alice"}`},
		{api.SuppressionOf(sup0, "default"), `{"tenant":"default","address_sha256":"ab","reason":"one_click","reminder_id":"r","suppressed_at":"2026-12-08T10:00:00.123456789Z"}`},
		{api.ResultOf(res), `{"reminder_id":"r","workflow_id":"wf","subscriber_id":"s","delivery_key":"k","due_at":"2026-12-08T10:00:00.123456789Z","goes_out_at":"2026-12-08T10:00:00.123456789Z","status":"scheduled","state":"scheduled"}`},
		{api.OutcomeOf(out), `{"reminder_id":"r","status":"approved","state":"scheduled","due_at":"2026-12-08T10:00:00.123456789Z","goes_out_at":"2026-12-09T08:00:00.123456789Z","delivery_key":"k","error":"x","decided_by":"bob","decided_at":"2026-12-08T10:01:00.123456789Z"}`},
		{api.OutcomeOf(out0), `{"reminder_id":"r","status":"failed"}`},
		{api.Page{Reminders: []api.Reminder{}}, `{"reminders":[]}`},
		{api.SuppressionPage{Suppressions: []api.Suppression{}, NextCursor: "c"}, `{"suppressions":[],"next_cursor":"c"}`},
	} {
		b, err := json.Marshal(c.got)
		require.NoError(t, err)
		require.Equal(t, c.want, string(b))
	}
}

// A digest interval reads back as an update document spells it, hours
// and minutes, never time.Duration's "30m0s", and the update's parser
// takes it back as the same interval; none is absent.
func TestTheDigestIntervalReadsAsTheUpdateSpellsIt(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		time.Minute: "1m", 30 * time.Minute: "30m", 2 * time.Hour: "2h", 90 * time.Minute: "1h30m", 24 * time.Hour: "24h", 0: "",
	} {
		got := api.ReminderOf(mirror.Row{Digest: d}, opaque.Development()).Digest
		require.Equal(t, want, got, "%s", d)
		if want != "" {
			back, err := reminder.ParseDuration(got)
			require.NoError(t, err)
			require.Equal(t, d, back)
		}
	}
}

// openAPIDoc is as much of openapi.json as the walk reads.
type openAPIDoc struct {
	// Paths holds each path's operations by method, and its parameters.
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas   map[string]schema `json:"schemas"`
		Responses map[string]struct {
			Content map[string]struct{ Schema schema } `json:"content"`
		} `json:"responses"`
	} `json:"components"`
}

type schema struct {
	Ref        string            `json:"$ref"`
	Type       any               `json:"type"`
	Properties map[string]schema `json:"properties"`
	Required   []string          `json:"required"`
	Items      *schema           `json:"items"`
}

// matchSchema compares a Go type with a schema, into the structs it holds,
// and returns every difference, each at its path.
func matchSchema(doc openAPIDoc, s schema, typ reflect.Type, path string) []string {
	if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
		r, found := doc.Components.Schemas[name]
		if !found {
			return []string{path + ": no schema " + name}
		}
		s = r
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ.Kind() == reflect.Slice:
		if s.Items == nil {
			return []string{path + ": a list in Go, not in the document"}
		}
		return matchSchema(doc, *s.Items, typ.Elem(), path+"[]")
	case typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]():
		return nil // a value: the contract test checks its form
	}
	var problems []string
	members := map[string]bool{}
	var always []string
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		// A struct's own members first: they hide an embedded struct's
		// of the same name, as encoding/json has it.
		var embedded []reflect.Type
		defer func() {
			for _, e := range embedded {
				walk(e)
			}
		}()
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if f.Anonymous && tag == "" {
				embedded = append(embedded, f.Type)
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if members[name] {
				continue
			}
			members[name] = true
			if !slices.Contains(strings.Split(opts, ","), "omitempty") {
				always = append(always, name)
			}
			prop, documented := s.Properties[name]
			if !documented {
				problems = append(problems, path+"."+name+": written by "+typ.String()+", not in the document")
				continue
			}
			problems = append(problems, matchSchema(doc, prop, f.Type, path+"."+name)...)
		}
	}
	walk(typ)
	for name := range s.Properties {
		if !members[name] {
			problems = append(problems, path+"."+name+": in the document, never written by "+typ.String())
		}
	}
	slices.Sort(always)
	required := slices.Sorted(slices.Values(s.Required))
	if !slices.Equal(always, required) {
		problems = append(problems, path+": always written "+strings.Join(always, ", ")+"; required "+strings.Join(required, ", "))
	}
	return problems
}

// Every member of a wire type is mapped from the store's type: with every
// field of the store's value set, no member of the answer is left zero. A
// member added to a wire type (and to the document) without its line in
// the mapping fails here. (A store field left out of the wire is a choice;
// the way back is the document's.)
func TestEveryWireMemberIsMapped(t *testing.T) {
	t.Parallel()
	for name, got := range map[string]any{
		"Reminder":    api.ReminderOf(filled[mirror.Row](t), opaque.Development()),
		"Event":       api.EventOf(filled[mirror.Event](t), opaque.Development()),
		"Suppression": api.SuppressionOf(filled[mirror.Suppression](t), "acme"),
		"Result":      api.ResultOf(filled[starter.Result](t)),
		"Outcome":     api.OutcomeOf(filled[starter.Outcome](t)),
	} {
		for _, p := range zeroMembers(reflect.ValueOf(got), name) {
			t.Errorf("%s is zero: its mapping (internal/api/wire.go) does not set it", p)
		}
	}
}

// filled is a T with every field set to something not zero.
func filled[T any](t *testing.T) T {
	var v T
	fill(t, reflect.ValueOf(&v).Elem())
	return v
}

func fill(t *testing.T, v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)))
	case v.Kind() == reflect.String:
		v.SetString("x")
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		v.SetInt(1)
	case v.Kind() == reflect.Uint8:
		v.SetUint(1)
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0))
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case v.Kind() == reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf(any(1)))
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("fill: no value for a %s", v.Type())
	}
}

// zeroMembers are the paths of v's exported fields left zero, into its
// structs.
func zeroMembers(v reflect.Value, path string) []string {
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.IsZero() {
		return []string{path}
	}
	if v.Kind() != reflect.Struct || v.Type() == reflect.TypeFor[time.Time]() {
		return nil
	}
	var out []string
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() {
			out = append(out, zeroMembers(v.Field(i), path+"."+f.Name)...)
		}
	}
	return out
}
