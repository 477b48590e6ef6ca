package testenv

import (
	"encoding/json"
	"strings"
	"time"
)

// ValidUpdate is a well-formed update document as the tracker sends it, its
// times relative to now: two email subscribers reminded before the window,
// one webhook with an explicit due time.
func ValidUpdate(now time.Time) map[string]any {
	window := now.Add(72*time.Hour + time.Hour).UTC().Truncate(time.Second)
	return map[string]any{
		"shipment_id":  "SHP-1001",
		"update_id":    "window-1",
		"kind":         "delivery_window",
		"window_start": window.Format(time.RFC3339),
		"message": map[string]any{
			"subject": "Delivery window opens in 3 days",
			"text":    "Dock 4, 08:00-12:00.",
		},
		"subscribers": []any{
			map[string]any{"id": "shipper-ops", "channel": "email", "email": "ops@shipper.example", "remind_before": "72h"},
			map[string]any{"id": "consignee-inbox", "channel": "email", "email": "inbox@consignee.example", "remind_before": "3d"},
			map[string]any{"id": "consignee-hook", "channel": "webhook", "url": "https://hooks.consignee.example/in",
				"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "due_at": now.Add(2 * time.Hour).UTC().Format(time.RFC3339)},
		},
	}
}

// BadUpdate is a malformed update and the field its error must name.
type BadUpdate struct {
	Name  string
	Field string
	Doc   string
}

// BadUpdates are malformed updates, each wrong in one way, for the parser's
// and the CLI's tests: every one must be refused with an error naming Field
// and must write nothing.
func BadUpdates(now time.Time) []BadUpdate {
	mut := func(f func(u map[string]any)) string {
		u := ValidUpdate(now)
		f(u)
		b, _ := json.Marshal(u)
		return string(b)
	}
	sub := func(u map[string]any, i int) map[string]any { return u["subscribers"].([]any)[i].(map[string]any) }
	set := func(key string, v any) string { return mut(func(u map[string]any) { u[key] = v }) }
	del := func(key string) string { return mut(func(u map[string]any) { delete(u, key) }) }
	subSet := func(i int, key string, v any) string { return mut(func(u map[string]any) { sub(u, i)[key] = v }) }
	subDel := func(i int, key string) string { return mut(func(u map[string]any) { delete(sub(u, i), key) }) }
	valid := mut(func(map[string]any) {})
	subject := func(v string) string {
		return mut(func(u map[string]any) { u["message"].(map[string]any)["subject"] = v })
	}
	text := func(v string) string {
		return mut(func(u map[string]any) { u["message"].(map[string]any)["text"] = v })
	}
	message := func(key string, v any) string {
		return mut(func(u map[string]any) { u["message"].(map[string]any)[key] = v })
	}
	templated := func(data any) string {
		return mut(func(u map[string]any) {
			u["message"].(map[string]any)["template_id"] = TemplateID
			u["message"].(map[string]any)["template_data"] = data
		})
	}
	// edit changes the valid document's text: for what a map cannot hold.
	edit := func(old, new string) string { return strings.Replace(valid, old, new, 1) }
	hook := `"url":"https://hooks.consignee.example/in"`

	return []BadUpdate{
		{"malformed JSON", "malformed JSON", `{"shipment_id": "SHP-1",`},
		{"not JSON at all", "malformed JSON", `shipment SHP-1 please`},
		{"empty document", "empty", ``},
		{"array instead of object", "update", `[]`},
		{"trailing data", "after the object", valid + ` {}`},
		{"unknown field", "shipmentid", set("shipmentid", "SHP-1")},
		{"key in the wrong case", "subscribers[2].URL: unknown field", edit(hook, strings.Replace(hook, "url", "URL", 1))},
		{"top-level key in the wrong case", "Kind: unknown field", edit(`"kind":`, `"Kind":`)},
		{"message key in the wrong case", "message.Subject: unknown field", edit(`"subject":`, `"Subject":`)},
		{"key with a Kelvin sign", `"\u212aind": unknown field`, edit(`"kind":`, `"\u212aind":`)},
		{"duplicate key", "subscribers[2].url: duplicate key", edit(hook, hook+`,"url":"https://10.0.0.1/in"`)},
		{"duplicate key spelled with an escape", "subscribers[2].url: duplicate key", edit(hook, hook+`,"\u0075rl":"https://x.example/"`)},
		{"duplicate top-level key", "update_id: duplicate key", edit(`"update_id":"window-1"`, `"update_id":"window-1","update_id":"window-2"`)},
		{"duplicate message key", "message.text: duplicate key", edit(`"text":`, `"text":"x","text":`)},
		{"missing shipment id", "shipment_id", del("shipment_id")},
		{"shipment id not a string", "shipment_id", set("shipment_id", 42)},
		{"shipment id too long", "shipment_id", set("shipment_id", strings.Repeat("S", 65))},
		{"shipment id with a slash", "shipment_id", set("shipment_id", "SHP/1")},
		{"shipment id that is an address", "shipment_id", set("shipment_id", "ops@shipper.example")},
		{"missing update id", "update_id", del("update_id")},
		{"update id with spaces", "update_id", set("update_id", "window 1")},
		{"missing kind", "kind", del("kind")},
		{"kind with capitals", "kind", set("kind", "DeliveryWindow")},
		{"unparsable window start", "window_start", set("window_start", "next tuesday")},
		{"missing message", "message", del("message")},
		{"empty subject", "message.subject", mut(func(u map[string]any) { u["message"].(map[string]any)["subject"] = " " })},
		{"two-line subject", "message.subject", mut(func(u map[string]any) { u["message"].(map[string]any)["subject"] = "a\nBcc: x" })},
		{"missing text", "message.text", mut(func(u map[string]any) { delete(u["message"].(map[string]any), "text") })},
		{"NUL in the subject", "message.subject: holds U+0000", subject("Delivery\x00window")},
		{"NUL in the text", "message.text: holds U+0000", text("Dock 4\x00")},
		{"escape sequence in the text", "message.text: holds U+001B", text("Dock \x1b[2J4")},
		{"bidi override in the subject", "message.subject: holds U+202E", subject("Invoice \u202efdp.exe")},
		{"bidi isolate in the text", "message.text: holds U+2066", text("Dock \u2066 4\u2069")},
		{"line separator in the subject", "message.subject: holds U+2028", subject("Delivery\u2028window")},
		{"paragraph separator in the text", "message.text: holds U+2029", text("Dock 4.\u2029Bring ID.")},
		{"bidi override in an email", "subscribers[0].email: holds U+202E", subSet(0, "email", "ops\u202e@shipper.example")},
		{"bidi override in a webhook URL", "subscribers[2].url: holds U+202E", subSet(2, "url", "https://hooks.consignee\u202e.example/in")},
		{"oversized text", "message.text", mut(func(u map[string]any) { u["message"].(map[string]any)["text"] = strings.Repeat("x", 33<<10) })},
		{"no subscribers", "subscribers", set("subscribers", []any{})},
		{"subscribers not a list", "subscribers", set("subscribers", "everyone")},
		{"missing subscriber id", "subscribers[0].id", subDel(0, "id")},
		{"empty subscriber id", "subscribers[1].id", subSet(1, "id", "")},
		{"duplicate subscriber id", "subscribers[1].id", subSet(1, "id", "shipper-ops")},
		{"subscriber id too long", "subscribers[0].id", subSet(0, "id", strings.Repeat("a", 65))},
		{"subscriber id with unsafe characters", "subscribers[0].id", subSet(0, "id", "ops;drop")},
		{"unknown subscriber field", "subscribers[0].emial", subSet(0, "emial", "x")},
		{"unknown message field", "message.body", mut(func(u map[string]any) { u["message"].(map[string]any)["body"] = "x" })},
		{"subscriber not an object", "subscribers[1]", mut(func(u map[string]any) { u["subscribers"].([]any)[1] = "ops@shipper.example" })},
		{"unknown channel", "subscribers[0].channel", subSet(0, "channel", "sms")},
		{"missing channel", "subscribers[0].channel", subDel(0, "channel")},
		{"invalid email", "subscribers[0].email", subSet(0, "email", "not-an-address")},
		{"email with display name", "subscribers[0].email", subSet(0, "email", "Ops <ops@shipper.example>")},
		{"email without a dotted domain", "subscribers[0].email", subSet(0, "email", "ops@localhost")},
		{"missing email", "subscribers[1].email", subDel(1, "email")},
		{"email subscriber with a url", "subscribers[0]", subSet(0, "url", "https://x.example/")},
		{"webhook over plain http", "subscribers[2].url", subSet(2, "url", "http://hooks.consignee.example/in")},
		{"webhook URL with credentials", "subscribers[2].url", subSet(2, "url", "https://user:pw@hooks.consignee.example/in")},
		{"webhook URL not absolute", "subscribers[2].url", subSet(2, "url", "/in")},
		{"webhook URL of another scheme", "subscribers[2].url", subSet(2, "url", "ftp://hooks.consignee.example/in")},
		{"webhook to a private address", "subscribers[2].url", subSet(2, "url", "https://10.0.0.1/in")},
		{"webhook to local-use NAT64", "subscribers[2].url", subSet(2, "url", "https://[64:ff9b:1::a00:1]/in")},
		{"webhook to 6to4", "subscribers[2].url", subSet(2, "url", "https://[2002:a00:1::]/in")},
		{"webhook to IPv4-translated (SIIT)", "subscribers[2].url", subSet(2, "url", "https://[::ffff:0:a00:1]/in")},
		{"webhook to IPv4-compatible", "subscribers[2].url", subSet(2, "url", "https://[::a00:1]/in")},
		{"webhook to Teredo", "subscribers[2].url", subSet(2, "url", "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/in")},
		{"missing webhook secret", "subscribers[2].secret", subDel(2, "secret")},
		{"webhook secret without prefix", "subscribers[2].secret", subSet(2, "secret", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")},
		{"webhook secret too short", "subscribers[2].secret", subSet(2, "secret", "whsec_c2hvcnQ=")},
		{"unparsable due time", "subscribers[2].due_at", subSet(2, "due_at", "tomorrow noon")},
		{"unparsable remind_before", "subscribers[0].remind_before", subSet(0, "remind_before", "3 days")},
		{"negative remind_before", "subscribers[0].remind_before", subSet(0, "remind_before", "-5h")},
		{"due_at and remind_before both", "subscribers[2]", subSet(2, "remind_before", "1h")},
		{"neither due_at nor remind_before", "subscribers[0]", subDel(0, "remind_before")},
		{"remind_before without window", "window_start", del("window_start")},
		{"due absurdly far ahead", "subscribers[2].due_at", subSet(2, "due_at", "2100-01-01T00:00:00Z")},
		{"due long past", "subscribers[2].due_at", subSet(2, "due_at", now.AddDate(-1, 0, 0).UTC().Format(time.RFC3339))},
		{"approval without escalation contact", "escalation.email", set("approval", map[string]any{"required": true})},
		{"subscriber approval without escalation contact", "escalation.email", subSet(0, "requires_approval", true)},
		{"unparsable approval timeout", "approval.timeout", set("approval", map[string]any{"required": true, "timeout": "a day"})},
		{"approval expiring before its timeout", "approval.expire_after",
			set("approval", map[string]any{"required": true, "timeout": "48h", "expire_after": "24h"})},
		{"approval waiting for months", "approval.expire_after",
			set("approval", map[string]any{"required": true, "expire_after": "90d"})},
		{"unknown approval field", "approval.requried", set("approval", map[string]any{"requried": true})},
		{"invalid escalation email", "escalation.email", set("escalation", map[string]any{"email": "lead at shipper"})},
		{"template id of another shape", "message.template_id", message("template_id", "welcome-mail")},
		{"legacy template id", "message.template_id", message("template_id", "0b5b1ba4-95a6-4d2f-a3cb-c2c3b5e8d7a1")},
		{"template id in capitals", "message.template_id", message("template_id", "d-0123456789ABCDEF0123456789ABCDEF")},
		{"template data without a template", "message.template_data", message("template_data", map[string]any{"dock": "4"})},
		{"template data not an object", "message.template_data", templated([]any{"dock", 4})},
		{"oversized template data", "message.template_data", templated(map[string]any{"notes": strings.Repeat("x", 9<<10)})},
		{"template data with a key shipnotify sets", "message.template_data.shipment_id", templated(map[string]any{"shipment_id": "SHP-2"})},
		{"template data with a key given twice", "message.template_data", edit(`"text":`,
			`"template_id":"`+TemplateID+`","template_data":{"dock":"4","dock":"5"},"text":`)},
		{"unknown time zone", "subscribers[0].time_zone", subSet(0, "time_zone", "Mars/Olympus_Mons")},
		{"the worker's own time zone", "subscribers[0].time_zone", subSet(0, "time_zone", "Local")},
		{"time zone that is a path", "subscribers[0].time_zone", subSet(0, "time_zone", "../../etc/passwd")},
		{"time zone as an offset", "subscribers[0].time_zone", subSet(0, "time_zone", "+01:00")},
		{"locale that is not a tag", "subscribers[0].locale", subSet(0, "locale", "German please")},
		{"locale with an underscore", "subscribers[0].locale", subSet(0, "locale", "de_DE")},
		{"locale of an unknown language", "subscribers[1].locale", subSet(1, "locale", "xq-DE")},
		{"name too long", "subscribers[0].name", subSet(0, "name", strings.Repeat("n", 101))},
		{"name on two lines", "subscribers[0].name", subSet(0, "name", "Ops\nBcc: x")},
		{"webhook subscriber with a locale", "subscribers[2]", subSet(2, "locale", "de")},

		// Send windows.
		{"send window with an unknown zone", "send_window.time_zone", set("send_window", window("mon-fri", "08:00-18:00", "Mars/Olympus_Mons"))},
		{"send window with no days", "send_window.days", set("send_window", window("", "08:00-18:00", "UTC"))},
		{"send window with an unknown day", "send_window.days", set("send_window", window("mon-fry", "08:00-18:00", "UTC"))},
		{"send window hours out of range", "send_window.hours", set("send_window", window("mon-fri", "08:00-25:00", "UTC"))},
		{"send window hours not a range", "send_window.hours", set("send_window", window("mon-fri", "08:00", "UTC"))},
		{"send window that never opens", "send_window", set("send_window", window("mon-fri", "10:00-10:00", "UTC"))},
		{"send window that closes before it opens", "send_window", set("send_window", window("mon-fri", "18:00-08:00", "UTC"))},
		{"send window skipping a date that is not one", "send_window.skip_dates[0]",
			set("send_window", map[string]any{"days": "mon-fri", "hours": "08:00-18:00", "time_zone": "UTC", "skip_dates": []string{"Christmas"}})},
		{"send window with a typo'd key", "send_window.timezone", set("send_window", map[string]any{"days": "mon-fri", "hours": "08:00-18:00", "timezone": "UTC"})},
		{"send window with its policy inside", "send_window.policy", set("send_window", map[string]any{"days": "mon-fri", "hours": "08:00-18:00", "policy": "previous"})},
		{"unknown window policy", "window_policy", mut(func(u map[string]any) {
			u["send_window"], u["window_policy"] = window("mon-fri", "08:00-18:00", "UTC"), "soonest"
		})},
		{"window policy with no window", "window_policy", set("window_policy", "previous")},
		{"subscriber's send window with no zone anywhere", "subscribers[0].time_zone", subSet(0, "send_window", window("mon-fri", "08:00-18:00", ""))},
		{"subscriber's send window with bad hours", "subscribers[1].send_window.hours", subSet(1, "send_window", window("mon-fri", "8-18", "UTC"))},
		{"subscriber's window policy unknown", "subscribers[1].window_policy", subSet(1, "window_policy", "later")},

		// Digests.
		{"digest that is no interval", "digest", set("digest", "hourly")},
		{"digest shorter than a minute", "digest", set("digest", "30s")},
		{"digest longer than a day", "digest", set("digest", "2d")},
		{"digest of part of a minute", "digest", set("digest", "90s")},
		{"digest that is a number", "digest", set("digest", 30)},
		{"subscriber's digest that is no interval", "subscribers[1].digest", subSet(1, "digest", "-5m")},
	}
}

// window is a send window as a document gives it ("" zone: none).
func window(days, hours, zone string) map[string]any {
	w := map[string]any{"days": days, "hours": hours}
	if zone != "" {
		w["time_zone"] = zone
	}
	return w
}

// TemplateID is a well-formed SendGrid dynamic template id.
const TemplateID = "d-0123456789abcdef0123456789abcdef"
