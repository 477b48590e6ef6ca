package reminder_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

var now = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func plan(t *testing.T, doc string) ([]reminder.Reminder, error) {
	t.Helper()
	u, err := reminder.ParseUpdate(strings.NewReader(doc))
	if err != nil {
		return nil, err
	}
	return u.Plan(reminder.PlanOptions{Now: now})
}

func validDoc(t *testing.T) string {
	b, err := json.Marshal(testenv.ValidUpdate(now))
	require.NoError(t, err)
	return string(b)
}

func TestPlanValidUpdate(t *testing.T) {
	t.Parallel()
	rems, err := plan(t, validDoc(t))
	require.NoError(t, err)
	require.Len(t, rems, 3)

	window := now.Add(73 * time.Hour)
	require.Equal(t, "SHP-1001/window-1/shipper-ops", rems[0].ID)
	require.Equal(t, window.Add(-72*time.Hour), rems[0].DueAt, "72h before the window")
	require.Equal(t, window.Add(-72*time.Hour), rems[1].DueAt, "3d before the window")
	require.Equal(t, now.Add(2*time.Hour), rems[2].DueAt, "explicit due_at")
	require.Equal(t, reminder.Email, rems[0].Channel)
	require.Equal(t, "ops@shipper.example", rems[0].Email)
	require.Equal(t, reminder.Webhook, rems[2].Channel)
	require.Equal(t, "https://hooks.consignee.example/in", rems[2].WebhookURL)
}

// A subscriber's name, time zone and locale, and the update's dynamic
// template, reach the reminders as given.
func TestPlanKeepsHowTheEmailLooks(t *testing.T) {
	t.Parallel()
	u := testenv.ValidUpdate(now)
	u["message"].(map[string]any)["template_id"] = testenv.TemplateID
	u["message"].(map[string]any)["template_data"] = map[string]any{"dock": "4", "gates": []any{"A", "B"}}
	s := u["subscribers"].([]any)[0].(map[string]any)
	s["name"], s["time_zone"], s["locale"] = "Rita Ops", "Europe/Berlin", "de-DE"
	b, err := json.Marshal(u)
	require.NoError(t, err)
	parsed, err := reminder.ParseUpdate(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, testenv.TemplateID, parsed.Message.TemplateID)
	require.JSONEq(t, `{"dock":"4","gates":["A","B"]}`, string(parsed.Message.TemplateData))
	rems, err := plan(t, string(b))
	require.NoError(t, err)
	require.Equal(t, "Rita Ops", rems[0].Name)
	require.Equal(t, "Europe/Berlin", rems[0].TimeZone)
	require.Equal(t, "de-DE", rems[0].Locale)
	require.Empty(t, rems[1].Name+rems[1].TimeZone+rems[1].Locale, "unset stays unset")
	for _, ok := range []string{"UTC", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Asia/Kolkata"} {
		_, err := reminder.LoadTimeZone(ok)
		require.NoError(t, err, ok)
	}
	for _, ok := range []string{"en", "de", "de-CH-1901", "pt-BR", "zh-Hant-TW", "en-US-u-hc-h23"} {
		_, err := reminder.ParseLocale(ok)
		require.NoError(t, err, ok)
	}
}

// The seed article's key: sha256 over "reminder id|subscriber id|due time in
// RFC3339Nano UTC", hex. The vector was computed with sha256sum.
func TestDeliveryKeyIsTheSeedsKey(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 11, 30, 12, 0, 0, 500, time.FixedZone("CET", 3600))
	key := reminder.DeliveryKey("SHP-1/u-1/sub-1", "sub-1", due)
	// echo -n 'SHP-1/u-1/sub-1|sub-1|2026-11-30T11:00:00.0000005Z' | sha256sum
	require.Equal(t, "07a9efb05e194d6c86cca94d781f2870b49f75efd424a167efd57aa00eaebe1e", key)

	sum := sha256.Sum256([]byte("SHP-1/u-1/sub-1|sub-1|" + due.UTC().Format(time.RFC3339Nano)))
	require.Equal(t, hex.EncodeToString(sum[:]), key)
	require.Equal(t, key, reminder.DeliveryKey("SHP-1/u-1/sub-1", "sub-1", due.UTC()), "the zone does not matter")
	require.NotEqual(t, key, reminder.DeliveryKey("SHP-1/u-1/sub-1", "sub-1", due.Add(time.Second)), "a new due time is a new key")
	require.NotEqual(t, key, reminder.DeliveryKey("SHP-1/u-1/sub-2", "sub-1", due))
}

func TestDueTimesKeepPostgresPrecision(t *testing.T) {
	t.Parallel()
	u, err := reminder.ParseUpdate(strings.NewReader(strings.Replace(validDoc(t), `"remind_before":"72h"`,
		`"due_at":"`+now.Add(time.Hour+1234567*time.Nanosecond).Format(time.RFC3339Nano)+`"`, 1)))
	require.NoError(t, err)
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Hour+1234*time.Microsecond), rems[0].DueAt, "truncated to microseconds, as timestamptz keeps it")
}

func TestRemindersAreIdentifiedByOpaqueIDsOnly(t *testing.T) {
	t.Parallel()
	a, err := plan(t, validDoc(t))
	require.NoError(t, err)
	b, err := plan(t, strings.ReplaceAll(validDoc(t), "ops@shipper.example", "someone@else.example"))
	require.NoError(t, err)
	for i := range a {
		require.Equal(t, a[i].ID, b[i].ID)
		require.Equal(t, a[i].DeliveryKey(), b[i].DeliveryKey())
		require.NotContains(t, a[i].ID, "@")
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"72h": 72 * time.Hour, "3d": 72 * time.Hour, "2d12h": 60 * time.Hour, "90m": 90 * time.Minute, "0d30m": 30 * time.Minute,
	} {
		got, err := reminder.ParseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "d", "3", "3days", "-3d", "1.5d", "3d3d", "h"} {
		_, err := reminder.ParseDuration(in)
		require.Error(t, err, in)
	}
}

func TestWebhookDestinationIsConsulted(t *testing.T) {
	t.Parallel()
	u, err := reminder.ParseUpdate(strings.NewReader(validDoc(t)))
	require.NoError(t, err)
	var asked []string
	_, err = u.Plan(reminder.PlanOptions{Now: now, WebhookDestination: func(raw string) error {
		asked = append(asked, raw)
		return errors.New("resolves to a forbidden address")
	}})
	require.EqualError(t, err, "subscribers[2].url: resolves to a forbidden address")
	require.Equal(t, []string{"https://hooks.consignee.example/in"}, asked)

	doc := strings.Replace(validDoc(t), "https://hooks.consignee.example/in", "http://hooks.consignee.example/in", 1)
	u, err = reminder.ParseUpdate(strings.NewReader(doc))
	require.NoError(t, err)
	_, err = u.Plan(reminder.PlanOptions{Now: now})
	require.ErrorContains(t, err, "subscribers[2].url: must use https", "without a policy, https only")
}

func TestOversizedDocument(t *testing.T) {
	t.Parallel()
	_, err := reminder.ParseUpdate(bytes.NewReader(make([]byte, reminder.MaxUpdateBytes+1)))
	require.ErrorContains(t, err, "larger than")
}

// guarded plans with the webhook guard the starter uses, its lookups
// stubbed: every name resolves to a public address.
func guarded(t *testing.T, doc string) ([]reminder.Reminder, error) {
	t.Helper()
	u, err := reminder.ParseUpdate(strings.NewReader(doc))
	if err != nil {
		return nil, err
	}
	g := webhook.Guard{Resolver: webhook.ResolverFunc(func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	})}
	return u.Plan(reminder.PlanOptions{Now: now, WebhookDestination: func(raw string) error {
		return g.CheckURL(context.Background(), raw)
	}})
}

// Each malformed update gets a one-line error that names the field and does
// not repeat personal data.
func TestBadUpdates(t *testing.T) {
	t.Parallel()
	_, err := guarded(t, validDoc(t))
	require.NoError(t, err)
	for _, tc := range testenv.BadUpdates(now) {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			_, err := guarded(t, tc.Doc)
			require.Error(t, err)
			var fe *reminder.FieldError
			require.True(t, errors.As(err, &fe), "want a *FieldError, got %T: %v", err, err)
			require.Contains(t, err.Error(), tc.Field)
			require.NotContains(t, err.Error(), "\n")
			require.NotContains(t, err.Error(), "ops@shipper.example", "errors never repeat an address")
		})
	}
}

// The character rules refuse only what hides or breaks text: tabs, line
// breaks in the text, right-to-left scripts and the directional marks
// U+200E/U+200F stay allowed.
func TestOrdinaryTextIsKept(t *testing.T) {
	t.Parallel()
	u := testenv.ValidUpdate(now)
	u["message"] = map[string]any{
		"subject": "Fenster \u05d7\u05dc\u05d5\u05df\u200e\tMorgen 08:00",
		"text":    "Dock 4\r\n\t\u0631\u0635\u064a\u0641 \u200f4\nBring ID. Caf\u00e9 \U0001F69A",
	}
	b, err := json.Marshal(u)
	require.NoError(t, err)
	_, err = plan(t, string(b))
	require.NoError(t, err)
}

func TestApprovalPolicy(t *testing.T) {
	t.Parallel()
	u := testenv.ValidUpdate(now)
	u["approval"] = map[string]any{"required": true, "timeout": "2h"}
	u["escalation"] = map[string]any{"email": "lead@shipper.example"}
	b, err := json.Marshal(u)
	require.NoError(t, err)
	rems, err := plan(t, string(b))
	require.NoError(t, err)
	for _, r := range rems {
		require.Equal(t, reminder.Approval{Required: true, Timeout: 2 * time.Hour, ExpireAfter: reminder.DefaultApprovalExpireAfter}, r.Approval)
		require.Equal(t, reminder.AwaitingApproval, r.InitialState())
	}

	u = testenv.ValidUpdate(now)
	u["subscribers"].([]any)[1].(map[string]any)["requires_approval"] = true
	u["escalation"] = map[string]any{"email": "lead@shipper.example"}
	b, err = json.Marshal(u)
	require.NoError(t, err)
	rems, err = plan(t, string(b))
	require.NoError(t, err)
	require.False(t, rems[0].Approval.Required)
	require.Equal(t, reminder.Scheduled, rems[0].InitialState())
	require.Equal(t, reminder.Approval{Required: true, Timeout: reminder.DefaultApprovalTimeout, ExpireAfter: reminder.DefaultApprovalExpireAfter}, rems[1].Approval)
}

func TestPurposeKeysAreDistinct(t *testing.T) {
	t.Parallel()
	due := now
	keys := map[string]bool{
		reminder.DeliveryKey("S/U/a", "a", due):             true,
		reminder.CancellationKey("S/U/a", "a"):              true,
		reminder.EscalationKey("S/U/a", "approval_timeout"): true,
		reminder.EscalationKey("S/U/a", "delivery_failed"):  true,
		reminder.EscalationKey("S/U/b", "delivery_failed"):  true,
		reminder.CancellationKey("S/U/b", "b"):              true,
	}
	require.Len(t, keys, 6)
}

// A channel beyond email and webhook is one the caller registers with the
// check of its address: its subscriber takes an address only, checked by
// that rule and named by field when wrong (never repeated); without the
// registration the channel is unknown, and the error lists what is known.
func TestAChannelBeyondTheBuiltInsIsCheckedByItsRule(t *testing.T) {
	t.Parallel()
	pager := reminder.Channel("pager")
	opts := reminder.PlanOptions{Now: now, Channels: map[reminder.Channel]reminder.CheckAddress{
		pager: func(a string) error {
			if !strings.HasPrefix(a, "+") {
				return errors.New("is not a number")
			}
			return nil
		},
	}}
	doc := func(sub string) reminder.Update {
		u, err := reminder.ParseUpdate(strings.NewReader(`{"shipment_id":"S","update_id":"U","kind":"k",
			"message":{"subject":"s","text":"t"},"subscribers":[` + sub + `]}`))
		require.NoError(t, err)
		return u
	}
	rems, err := doc(`{"id":"on-call","channel":"pager","address":"+4915112345678","due_at":"2026-12-01T09:00:00Z"}`).Plan(opts)
	require.NoError(t, err)
	require.Equal(t, "+4915112345678", rems[0].Address)
	require.Empty(t, rems[0].Email+rems[0].WebhookURL)

	for _, tc := range []struct{ sub, field, problem string }{
		{`{"id":"a","channel":"pager","due_at":"2026-12-01T09:00:00Z"}`, "subscribers[0].address", "is required for the pager channel"},
		{`{"id":"a","channel":"pager","address":"015112345678","due_at":"2026-12-01T09:00:00Z"}`, "subscribers[0].address", "is not a number"},
		{`{"id":"a","channel":"pager","address":"+49151","email":"a@b.example","due_at":"2026-12-01T09:00:00Z"}`, "subscribers[0]", "a pager subscriber takes an address only"},
		{`{"id":"a","channel":"email","email":"a@b.example","address":"+49151","due_at":"2026-12-01T09:00:00Z"}`, "subscribers[0]", "an email subscriber takes no address"},
		{`{"id":"a","channel":"fax","address":"+49151","due_at":"2026-12-01T09:00:00Z"}`, "subscribers[0].channel", `unknown channel; use "email", "webhook" or "pager"`},
	} {
		_, err := doc(tc.sub).Plan(opts)
		var fe *reminder.FieldError
		require.ErrorAs(t, err, &fe, tc.sub)
		require.Equal(t, tc.field, fe.Field, tc.sub)
		require.Equal(t, tc.problem, fe.Problem, tc.sub)
		require.NotContains(t, fe.Problem, "015112345678", "the address is never repeated")
	}
	_, err = doc(`{"id":"on-call","channel":"pager","address":"+4915112345678","due_at":"2026-12-01T09:00:00Z"}`).
		Plan(reminder.PlanOptions{Now: now})
	require.ErrorContains(t, err, `subscribers[0].channel: unknown channel; use "email" or "webhook"`, "unregistered, it is unknown")
}

func TestIDsOutsideTheCharsetNameNothing(t *testing.T) {
	t.Parallel()
	require.True(t, reminder.IsID("SHP-1.a_b"))
	require.True(t, reminder.IsReminderID(reminder.ID("", "SHP-1", "u1", "sub-a")))
	require.True(t, reminder.IsReminderID(reminder.ID("acme", "SHP-1", "u1", "sub-a")), "a tenant's leads with it")
	for _, s := range []string{"", "x\x00", "\xff", "-x", "a/b", strings.Repeat("x", 65)} {
		require.False(t, reminder.IsID(s), "%q", s)
	}
	for _, s := range []string{"", "S/U", "T/S/U/x/y", "S/U/\x00", "S//x", "T/S//x"} {
		require.False(t, reminder.IsReminderID(s), "%q", s)
	}
}

// A tenant's ids lead with it; the default tenant's are as before tenancy.
func TestIDsArePerTenant(t *testing.T) {
	t.Parallel()
	require.Equal(t, "SHP-1/u1/a", reminder.ID("", "SHP-1", "u1", "a"))
	require.Equal(t, "acme/SHP-1/u1/a", reminder.ID("acme", "SHP-1", "u1", "a"))
	require.Equal(t, "acme", reminder.TenantOf("acme/SHP-1/u1/a"))
	require.Equal(t, "", reminder.TenantOf("SHP-1/u1/a"))
	tenant, err := reminder.ParseTenant("tenant", "default")
	require.NoError(t, err)
	require.Equal(t, "", tenant.ID(reminder.DefaultTenantName), "the default tenant by its name")
	require.Equal(t, "default", tenant.Name(), "written as it was")
	none, err := reminder.ParseTenant("tenant", "")
	require.NoError(t, err)
	require.Equal(t, "", none.ID(reminder.DefaultTenantName), "no name is the default tenant")
	acme, err := reminder.ParseTenant("tenant", "acme")
	require.NoError(t, err)
	require.Equal(t, "acme", acme.ID(reminder.DefaultTenantName))
	_, err = reminder.ParseTenant("tenant", "a/b")
	require.ErrorContains(t, err, "tenant")
	require.NotContains(t, err.Error(), "a/b", "the error never repeats the name")
}

// An update wrong in several places is refused with every problem, in
// document order: each top-level field's and the first of each
// subscriber's; errors.As still finds the first as a *FieldError.
func TestPlanListsEveryProblem(t *testing.T) {
	t.Parallel()
	u := testenv.ValidUpdate(now)
	u["kind"] = "Not A Kind"
	u["message"].(map[string]any)["subject"] = ""
	subs := u["subscribers"].([]any)
	subs[0].(map[string]any)["email"] = "not-an-address"
	subs[0].(map[string]any)["time_zone"] = "Mars/Olympus" // the same subscriber's second: not listed
	subs[2].(map[string]any)["url"] = "ftp://hooks.consignee.example/in"
	b, err := json.Marshal(u)
	require.NoError(t, err)
	_, err = plan(t, string(b))
	var all reminder.FieldErrors
	require.ErrorAs(t, err, &all)
	fields := make([]string, len(all))
	for i, fe := range all {
		fields[i] = fe.Field
	}
	require.Equal(t, []string{"kind", "message.subject", "subscribers[0].email", "subscribers[2].url"}, fields)
	var first *reminder.FieldError
	require.ErrorAs(t, err, &first)
	require.Equal(t, "kind", first.Field)
	require.Contains(t, err.Error(), "subscribers[2].url", "the message names them all")

	// A great many are listed up to MaxFieldErrors.
	many := testenv.ValidUpdate(now)
	var list []any
	for range 2 * reminder.MaxFieldErrors {
		list = append(list, map[string]any{"id": "", "channel": "email", "email": "a@b.example", "remind_before": "1h"})
	}
	many["subscribers"] = list
	b, err = json.Marshal(many)
	require.NoError(t, err)
	_, err = plan(t, string(b))
	require.ErrorAs(t, err, &all)
	require.Len(t, all, reminder.MaxFieldErrors)
}

// A JSON syntax error says where: line, column and byte.
func TestMalformedJSONSaysWhere(t *testing.T) {
	t.Parallel()
	_, err := reminder.ParseUpdate(strings.NewReader("{\n  \"kind\": \"k\",\n  \"message\": {\"subject\": \"ä\" x}\n}"))
	require.ErrorContains(t, err, "malformed JSON at line 3, column 30 (byte")
}
