package reminder

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shipnotify/shipnotify/sendwindow"
)

// Limits on an update. They keep one workflow's input and one mirror row far
// below Temporal's 2 MB payload limit and catch a runaway producer early.
const (
	MaxUpdateBytes    = 1 << 20 // a whole update document
	MaxSubjectRunes   = 200
	MaxTextBytes      = 32 << 10
	MaxSubscribers    = 500
	MaxEmailBytes     = 254 // RFC 5321 path limit
	MaxURLBytes       = 2048
	MaxAddressBytes   = 256 // a channel's address beyond email and webhook
	MaxRemindBefore   = 366 * 24 * time.Hour
	MaxHorizon        = 2 * 366 * 24 * time.Hour // due no later than this after now
	MaxPastDue        = 30 * 24 * time.Hour      // backfill no older than this
	minSecretKeyBytes = 24
	maxSecretKeyBytes = 64
)

// idPattern is the safe charset for every id a caller supplies. It excludes
// '@', ':' and '/', so an id can be neither an address nor a URL, and the
// reminder id's '/' separator stays unambiguous.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

var kindPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// Update is one shipment update fanned out to its subscribers.
type Update struct {
	// Tenant owns the update: set by whoever authenticated the caller,
	// never read from the document ("" is the default tenant).
	Tenant     string
	ShipmentID string
	UpdateID   string
	Kind       string
	// WindowStart is when the delivery window opens; subscribers with
	// RemindBefore are due that long before it. Zero when not given.
	WindowStart time.Time
	Message     Message
	Subscribers []Subscriber
	// Approval says whether every reminder of the update waits for an
	// operator's decision, and for how long.
	Approval Approval
	// EscalationEmail is who hears of an overdue approval or a delivery that
	// failed for good; required when any reminder needs approval.
	EscalationEmail string
	// ScheduledBy is the credential that scheduled the update (an API key's
	// name), set by whoever authenticated the caller, never read from the
	// document; the trail's "scheduled" event keeps it as its key, so
	// approvers see who asked. "" when no key was involved (the CLI).
	ScheduledBy string
	// SendWindow is the window every subscriber's reminder goes out in
	// unless the subscriber names its own (nil: the tenant's default, if
	// any); WindowPolicy ("next" or "previous", "" the default's or next)
	// likewise.
	SendWindow   *WindowRequest
	WindowPolicy string
	// Digest is the interval every subscriber's reminders to one address
	// are gathered over into one message (nil: none; the subscriber's own
	// replaces it, "off" included).
	Digest *time.Duration
}

// Approval is an update's approval policy.
type Approval struct {
	// Required makes every reminder of the update wait for approval; a
	// subscriber can also ask for it alone.
	Required bool
	// Timeout is how long a reminder waits for a decision before the
	// escalation contact is told (0 means DefaultApprovalTimeout).
	Timeout time.Duration
	// ExpireAfter is the final deadline, counted like Timeout from
	// scheduling: no decision by then and the reminder expires (0 means
	// DefaultApprovalExpireAfter).
	ExpireAfter time.Duration
}

// approvalInput is Approval as a workflow's input carries it. Timeout and
// ExpireAfter stay nanoseconds, which every release reads (a worker of the
// release before reads a start of this one, during a rolling deploy); the
// Text twins say the same for people reading the input in the Web UI, and
// nothing reads them back.
type approvalInput struct {
	Required        bool
	Timeout         time.Duration
	TimeoutText     string `json:",omitempty"`
	ExpireAfter     time.Duration
	ExpireAfterText string `json:",omitempty"`
}

// MarshalJSON writes the durations twice: in nanoseconds and as text
// ("24h0m0s").
func (a Approval) MarshalJSON() ([]byte, error) {
	j := approvalInput{Required: a.Required, Timeout: a.Timeout, ExpireAfter: a.ExpireAfter}
	if a.Timeout != 0 {
		j.TimeoutText = a.Timeout.String()
	}
	if a.ExpireAfter != 0 {
		j.ExpireAfterText = a.ExpireAfter.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the nanoseconds, as every release wrote them.
func (a *Approval) UnmarshalJSON(b []byte) error {
	var j approvalInput
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*a = Approval{Required: j.Required, Timeout: j.Timeout, ExpireAfter: j.ExpireAfter}
	return nil
}

// Approval defaults and bounds.
const (
	DefaultApprovalTimeout     = 24 * time.Hour
	DefaultApprovalExpireAfter = 72 * time.Hour
	MaxApprovalWait            = 30 * 24 * time.Hour
)

// Message is what every subscriber of an update receives.
type Message struct {
	Subject string `json:"subject"`
	Text    string `json:"text"`
	// TemplateID names a SendGrid dynamic template the email subscribers'
	// reminders are sent with instead of shipnotify's own; TemplateData is
	// the caller's part of its data, a JSON object (template.go).
	TemplateID   string          `json:"template_id,omitempty"`
	TemplateData json.RawMessage `json:"template_data,omitempty"`
}

// Subscriber is one receiver of an update and when it wants its reminder:
// either at DueAt or RemindBefore the window start.
type Subscriber struct {
	ID      string
	Channel Channel
	Email   string
	URL     string
	Secret  string
	// Address is the address of a channel beyond Channels.
	Address      string
	DueAt        time.Time
	RemindBefore time.Duration
	// RequiresApproval makes this subscriber's reminder wait for approval.
	RequiresApproval bool
	// Name, TimeZone and Locale shape the subscriber's email (Reminder).
	Name, TimeZone, Locale string
	// SendWindow and WindowPolicy, when set, replace the update's.
	SendWindow   *WindowRequest
	WindowPolicy string
	// Digest, when set, replaces the update's (0: off).
	Digest *time.Duration
}

// FieldError names the input field that is wrong and why. It never repeats
// the field's value, which may be personal data.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// MaxFieldErrors is how many problems Plan lists at most.
const MaxFieldErrors = 50

// FieldErrors are the problems Plan found in an update, in document order
// (the first of each subscriber's, and each top-level field's). errors.As
// finds the first as a *FieldError.
type FieldErrors []*FieldError

func (e FieldErrors) Error() string {
	msgs := make([]string, len(e))
	for i, fe := range e {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap is the problems, each a *FieldError.
func (e FieldErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, fe := range e {
		out[i] = fe
	}
	return out
}

// collector gathers Plan's problems: a *FieldError is kept (up to
// MaxFieldErrors), anything else ends the plan.
type collector struct {
	found FieldErrors
	other error
}

// add keeps err's problem; it reports whether err was nil.
func (c *collector) add(err error) bool {
	var fe *FieldError
	switch {
	case err == nil:
		return true
	case errors.As(err, &fe):
		if len(c.found) < MaxFieldErrors {
			c.found = append(c.found, fe)
		}
	case c.other == nil:
		c.other = err
	}
	return false
}

// err is what was gathered: nil, the one problem as it is, or them all.
func (c *collector) err() error {
	switch {
	case c.other != nil:
		return c.other
	case len(c.found) == 0:
		return nil
	case len(c.found) == 1:
		return c.found[0]
	}
	return c.found
}

// PlanOptions are the deployment's rules for what an update may ask for.
type PlanOptions struct {
	// Now is the time due times are checked against.
	Now time.Time
	// WebhookDestination decides whether a well-formed webhook URL may be
	// used: scheme, port, and the addresses its host is or resolves to (the
	// webhook package's Guard). Nil accepts https URLs only.
	WebhookDestination func(rawURL string) error
	// Channels are the channels a subscriber may use beyond the built-in
	// ones (Channels), each with the check of its address.
	Channels map[Channel]CheckAddress
	// Windows are the tenants' default send windows and holidays.
	Windows WindowDefaults
}

// Plan checks an update and turns it into its reminders, one per subscriber,
// in input order. One problem is returned as a *FieldError, more as
// FieldErrors: every top-level field's, and the first of each subscriber's
// (at most MaxFieldErrors), in document order.
func (u Update) Plan(opts PlanOptions) ([]Reminder, error) {
	var c collector
	if u.Tenant != "" && !IsID(u.Tenant) {
		c.add(fieldErr("tenant", "is not an id"))
	}
	c.add(checkID("shipment_id", u.ShipmentID))
	c.add(checkID("update_id", u.UpdateID))
	switch {
	case u.Kind == "":
		c.add(fieldErr("kind", "is required"))
	case !kindPattern.MatchString(u.Kind):
		c.add(fieldErr("kind", "must be lower-case letters, digits and '_', starting with a letter, at most 32"))
	}
	c.add(u.Message.check())
	approval, err := u.approvalPolicy()
	c.add(err)
	if u.EscalationEmail != "" {
		c.add(checkEmail("escalation.email", u.EscalationEmail))
	}
	switch {
	case len(u.Subscribers) == 0:
		c.add(fieldErr("subscribers", "must list at least one subscriber"))
		return nil, c.err()
	case len(u.Subscribers) > MaxSubscribers:
		c.add(fieldErr("subscribers", "lists %d subscribers; at most %d per update", len(u.Subscribers), MaxSubscribers))
		return nil, c.err()
	}
	seen := make(map[string]int, len(u.Subscribers))
	out := make([]Reminder, 0, len(u.Subscribers))
	needsContact := u.EscalationEmail == ""
	for i, s := range u.Subscribers {
		field := fmt.Sprintf("subscribers[%d]", i)
		if !c.add(checkSubscriberID(field, i, s.ID, seen)) {
			continue
		}
		if (s.RequiresApproval || approval.Required) && needsContact {
			// Once, where the first reminder that needs it is.
			c.add(fieldErr("escalation.email", "is required when a reminder needs approval (overdue approvals escalate to it)"))
			needsContact = false
		}
		r, err := u.plan(field, s, approval, opts)
		if c.add(err) {
			out = append(out, r)
		}
		if c.other != nil {
			break
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkSubscriberID checks subscriber i's id, and that no subscriber
// before it has it (seen).
func checkSubscriberID(field string, i int, id string, seen map[string]int) error {
	if err := checkID(field+".id", id); err != nil {
		return err
	}
	if j, dup := seen[id]; dup {
		return fieldErr(field+".id", "duplicates subscribers[%d].id %q", j, id)
	}
	seen[id] = i
	return nil
}

// plan checks the rest of a subscriber (field) and makes its reminder: its
// first problem, if any, as a *FieldError.
func (u Update) plan(field string, s Subscriber, approval Approval, opts PlanOptions) (Reminder, error) {
	r := Reminder{
		ID:           ID(u.Tenant, u.ShipmentID, u.UpdateID, s.ID),
		Tenant:       u.Tenant,
		ShipmentID:   u.ShipmentID,
		UpdateID:     u.UpdateID,
		SubscriberID: s.ID,
		Channel:      s.Channel,
	}
	if s.RequiresApproval || approval.Required {
		r.Approval = approval
		r.Approval.Required = true
	}
	if err := s.checkChannel(field, opts, &r); err != nil {
		return Reminder{}, err
	}
	if err := s.checkPresentation(field, &r); err != nil {
		return Reminder{}, err
	}
	due, err := s.due(field, u.WindowStart, opts.Now)
	if err != nil {
		return Reminder{}, err
	}
	r.DueAt = due
	if r.Window, err = u.sendWindow(field, s, opts.Windows); err != nil {
		return Reminder{}, err
	}
	if r.Digest, err = u.digest(field, s, opts.Windows); err != nil {
		return Reminder{}, err
	}
	if r.Window != nil {
		if _, err := r.Window.GoesOut(due); err != nil {
			where := "send_window"
			if s.SendWindow != nil {
				where = field + ".send_window"
			}
			return Reminder{}, fieldErr(where, "never opens within %d days of the due time (every open day is skipped)",
				sendwindow.Horizon/(24*time.Hour))
		}
	}
	return r, nil
}

// digest is the subscriber's digest interval: its own, else the update's,
// else its tenant's default (0: none). Only email and webhook gather
// several reminders into one message; a tenant's default passes the other
// channels by.
func (u Update) digest(field string, s Subscriber, defaults WindowDefaults) (time.Duration, error) {
	d, where := u.Digest, "digest"
	if s.Digest != nil {
		d, where = s.Digest, field+".digest"
	}
	if d == nil {
		if def := defaults[u.Tenant].Digest; def > 0 && (s.Channel == Email || s.Channel == Webhook) {
			return def, nil
		}
		return 0, nil
	}
	if *d == 0 {
		return 0, nil
	}
	if s.Channel != Email && s.Channel != Webhook {
		return 0, fieldErr(where, "only an email or webhook subscriber can have a digest")
	}
	return *d, nil
}

// approvalPolicy is the update's approval settings with defaults filled in.
func (u Update) approvalPolicy() (Approval, error) {
	a := u.Approval
	if a.Timeout == 0 {
		a.Timeout = DefaultApprovalTimeout
	}
	if a.ExpireAfter == 0 {
		a.ExpireAfter = max(DefaultApprovalExpireAfter, a.Timeout)
	}
	switch {
	case a.Timeout < 0:
		return Approval{}, fieldErr("approval.timeout", "must be positive")
	case a.ExpireAfter < a.Timeout:
		return Approval{}, fieldErr("approval.expire_after", "must not be shorter than approval.timeout")
	case a.ExpireAfter > MaxApprovalWait:
		return Approval{}, fieldErr("approval.expire_after", "is more than %d days", MaxApprovalWait/(24*time.Hour))
	}
	return a, nil
}

// IsID reports whether s is in the charset of a caller's ids (a shipment,
// an update, a subscriber): one that is not names nothing.
func IsID(s string) bool { return idPattern.MatchString(s) }

// IsReminderID reports whether s is a reminder's id: three ids joined by
// '/', or four for a tenant's (ID).
func IsReminderID(s string) bool {
	parts := strings.Split(s, "/")
	return (len(parts) == 3 || len(parts) == 4) && !slices.ContainsFunc(parts, func(p string) bool { return !IsID(p) })
}

func checkID(field, id string) error {
	if id == "" {
		return fieldErr(field, "is required")
	}
	if len(id) > 64 {
		return fieldErr(field, "is %d characters; at most 64", len(id))
	}
	if !idPattern.MatchString(id) {
		return fieldErr(field, "may hold only letters, digits, '.', '_' and '-', starting with a letter or digit")
	}
	return nil
}

func (m Message) check() error {
	if strings.TrimSpace(m.Subject) == "" {
		return fieldErr("message.subject", "is required")
	}
	if !utf8.ValidString(m.Subject) || strings.ContainsAny(m.Subject, "\r\n") {
		return fieldErr("message.subject", "must be one line of UTF-8 text")
	}
	if n := utf8.RuneCountInString(m.Subject); n > MaxSubjectRunes {
		return fieldErr("message.subject", "is %d characters; at most %d", n, MaxSubjectRunes)
	}
	if err := checkRunes("message.subject", m.Subject, false); err != nil {
		return err
	}
	if strings.TrimSpace(m.Text) == "" {
		return fieldErr("message.text", "is required")
	}
	if !utf8.ValidString(m.Text) {
		return fieldErr("message.text", "must be UTF-8 text")
	}
	if len(m.Text) > MaxTextBytes {
		return fieldErr("message.text", "is %d bytes; at most %d", len(m.Text), MaxTextBytes)
	}
	if err := checkRunes("message.text", m.Text, true); err != nil {
		return err
	}
	return m.checkTemplate()
}

// checkRunes refuses a character that text we pass on to people and their
// systems must not hold: NUL and the other control characters (tab aside,
// and line breaks where lines are allowed), which truncate strings in C and
// drive terminals; the bidi overrides and isolates U+202A-U+202E and
// U+2066-U+2069, which make text read otherwise than it is stored (the
// "Trojan Source" trick, or a link that shows one domain and is another);
// and the separators U+2028/U+2029, which break a line where a log line or a
// JavaScript string does not expect one. The error names the character's
// code point and position, never the text.
func checkRunes(field, s string, lines bool) error {
	pos := 0
	for _, r := range s {
		pos++
		switch {
		case r == '\t', lines && (r == '\n' || r == '\r'):
			continue
		case r < 0x20, r >= 0x7f && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
			return fieldErr(field, "holds %U at character %d; control characters, bidi overrides and isolates, and U+2028/U+2029 are refused", r, pos)
		}
	}
	return nil
}

func (s Subscriber) checkChannel(field string, opts PlanOptions, r *Reminder) error {
	if s.Address != "" && (s.Channel == Email || s.Channel == Webhook) {
		return fieldErr(field, "an %s subscriber takes no address", s.Channel)
	}
	switch s.Channel {
	case Email:
		if s.URL != "" || s.Secret != "" {
			return fieldErr(field, "an email subscriber takes no url or secret")
		}
		if err := checkEmail(field+".email", s.Email); err != nil {
			return err
		}
		r.Email = s.Email
	case Webhook:
		if s.Email != "" {
			return fieldErr(field, "a webhook subscriber takes no email")
		}
		if err := CheckWebhookURL(field+".url", s.URL, opts.WebhookDestination); err != nil {
			return err
		}
		if err := checkSecret(field+".secret", s.Secret); err != nil {
			return err
		}
		r.WebhookURL, r.WebhookSecret = s.URL, s.Secret
	case "":
		return fieldErr(field+".channel", "is required (%s)", channelsText(opts.Channels))
	default:
		check, ok := opts.Channels[s.Channel]
		if !ok {
			return fieldErr(field+".channel", "unknown channel; use %s", channelsText(opts.Channels))
		}
		if s.Email != "" || s.URL != "" || s.Secret != "" {
			return fieldErr(field, "a %s subscriber takes an address only", s.Channel)
		}
		if s.Address == "" {
			return fieldErr(field+".address", "is required for the %s channel", s.Channel)
		}
		if len(s.Address) > MaxAddressBytes {
			return fieldErr(field+".address", "is %d bytes; at most %d", len(s.Address), MaxAddressBytes)
		}
		if err := checkRunes(field+".address", s.Address, false); err != nil {
			return err
		}
		if err := check(s.Address); err != nil {
			return fieldErr(field+".address", "%s", err)
		}
		r.Address = s.Address
	}
	return nil
}

func checkEmail(field, addr string) error {
	if addr == "" {
		return fieldErr(field, "is required for the email channel")
	}
	if len(addr) > MaxEmailBytes {
		return fieldErr(field, "is longer than %d bytes", MaxEmailBytes)
	}
	if err := checkRunes(field, addr, false); err != nil {
		return err
	}
	parsed, err := mail.ParseAddress(addr)
	// A bare address only: no display name, no comments, no angle brackets.
	if err != nil || parsed.Address != addr || parsed.Name != "" {
		return fieldErr(field, "is not a valid email address (want a bare address like ops@example.com)")
	}
	domain := addr[strings.LastIndexByte(addr, '@')+1:]
	if !strings.Contains(domain, ".") || strings.HasPrefix(domain, "[") {
		return fieldErr(field, "must have a domain name with a dot")
	}
	return nil
}

// CheckWebhookURL checks a webhook URL: absolute, with a host, no
// credentials or fragment, then destination's verdict (https only when nil).
func CheckWebhookURL(field, raw string, destination func(string) error) error {
	if raw == "" {
		return fieldErr(field, "is required for the webhook channel")
	}
	if len(raw) > MaxURLBytes {
		return fieldErr(field, "is longer than %d bytes", MaxURLBytes)
	}
	if err := checkRunes(field, raw, false); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return fieldErr(field, "is not an absolute URL")
	}
	if u.User != nil {
		return fieldErr(field, "must not carry credentials")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return fieldErr(field, "must not have a fragment")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fieldErr(field, "must use https")
	}
	if destination == nil {
		if u.Scheme != "https" {
			return fieldErr(field, "must use https")
		}
		return nil
	}
	if err := destination(raw); err != nil {
		return fieldErr(field, "%s", err)
	}
	return nil
}

func checkSecret(field, secret string) error {
	if secret == "" {
		return fieldErr(field, "is required for the webhook channel")
	}
	raw, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return fieldErr(field, `must start with "whsec_" (a Standard Webhooks secret)`)
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return fieldErr(field, `must be "whsec_" followed by base64`)
	}
	if len(key) < minSecretKeyBytes || len(key) > maxSecretKeyBytes {
		return fieldErr(field, "must hold %d to %d bytes of key; it holds %d", minSecretKeyBytes, maxSecretKeyBytes, len(key))
	}
	return nil
}

func (s Subscriber) due(field string, windowStart, now time.Time) (time.Time, error) {
	var due time.Time
	dueField := field + ".due_at"
	switch {
	case !s.DueAt.IsZero() && s.RemindBefore != 0:
		return time.Time{}, fieldErr(field, "give due_at or remind_before, not both")
	case !s.DueAt.IsZero():
		due = s.DueAt
	case s.RemindBefore != 0:
		dueField = field + ".remind_before"
		if s.RemindBefore < 0 {
			return time.Time{}, fieldErr(field+".remind_before", "must be positive")
		}
		if s.RemindBefore > MaxRemindBefore {
			return time.Time{}, fieldErr(field+".remind_before", "is more than %d days", MaxRemindBefore/(24*time.Hour))
		}
		if windowStart.IsZero() {
			return time.Time{}, fieldErr("window_start", "is required when a subscriber uses remind_before")
		}
		due = windowStart.Add(-s.RemindBefore)
	default:
		return time.Time{}, fieldErr(field, "needs due_at or remind_before")
	}
	if now.IsZero() {
		return time.Time{}, errors.New("reminder: PlanOptions.Now is required")
	}
	if err := CheckDue(dueField, due, now); err != nil {
		return time.Time{}, err
	}
	return NormalizeTime(due), nil
}

// CheckDue refuses a due time further back than MaxPastDue or further
// ahead than MaxHorizon from now, as a *FieldError naming field: the rule
// a schedule and a reschedule share.
func CheckDue(field string, due, now time.Time) error {
	if due.Before(now.Add(-MaxPastDue)) {
		return fieldErr(field, "puts the due time more than %d days in the past", MaxPastDue/(24*time.Hour))
	}
	if due.After(now.Add(MaxHorizon)) {
		return fieldErr(field, "puts the due time more than %d days ahead", MaxHorizon/(24*time.Hour))
	}
	return nil
}

// CheckWindow refuses a window start that puts every reminder it can
// have out of CheckDue's range: before the oldest due time allowed, or
// further ahead than the furthest due time plus MaxRemindBefore.
func CheckWindow(field string, start, now time.Time) error {
	if start.Before(now.Add(-MaxPastDue)) {
		return fieldErr(field, "is more than %d days in the past: every reminder would be", MaxPastDue/(24*time.Hour))
	}
	if start.After(now.Add(MaxHorizon + MaxRemindBefore)) {
		return fieldErr(field, "is more than %d days ahead: every reminder would be due more than %d days ahead",
			(MaxHorizon+MaxRemindBefore)/(24*time.Hour), MaxHorizon/(24*time.Hour))
	}
	return nil
}
