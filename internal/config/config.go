// Package config turns an environment into shipnotify's configuration. It
// never reads the process environment itself: the main passes a lookup, so
// tests and embedders choose what the service sees.
package config

import (
	"bytes"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/clientip"
	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/statusevents"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
	"github.com/shipnotify/shipnotify/webhook"
)

// Defaults, chosen so `make demo` runs with nothing set.
const (
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:54329/shipnotify?sslmode=disable"
	DefaultFromEmail   = "reminders@shipnotify.example"
	DefaultFromName    = "shipnotify"
	// DefaultWorkerMaxActivities is the notify slots a worker runs
	// (SHIPNOTIFY_WORKER_MAX_ACTIVITIES): the one home of the number.
	// `capacity --fleet` sizes a fleet with it, and the Helm chart caps
	// the slots it derives from its connection budget at it (deploy's tests
	// hold the chart to it).
	DefaultWorkerMaxActivities = 200
)

// Lookup finds an environment variable, like os.LookupEnv.
type Lookup func(key string) (string, bool)

// Config is everything the commands need.
type Config struct {
	// Temporal holds the client options from the SDK's envconfig conventions:
	// TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*,
	// or a profile in the Temporal config file.
	Temporal  client.Options
	TaskQueue string
	// DelayedStart starts reminders that need no approval with Temporal's
	// start delay (starter.Starter.DelayedStart).
	DelayedStart bool
	// DefaultTenant is the default tenant's name (reminder.ParseTenant).
	DefaultTenant string

	DatabaseURL string
	// MigrateDatabaseURL reaches the mirror as the owner of its tables, for
	// migrations; the rest of the product runs on DatabaseURL.
	MigrateDatabaseURL string
	// PruneDatabaseURL reaches it as a role that may delete old rows
	// (shipnotify_pruner's member, or the owner), for prune only.
	PruneDatabaseURL string

	SendGridAPIKey  string
	SendGridBaseURL string
	FromEmail       string
	FromName        string

	// Webhooks guards webhook destinations; AllowLoopback is a development
	// setting for a receiver on the same machine.
	Webhooks webhook.Guard

	LogLevel slog.Level

	// MetricsAddr is where the worker serves /metrics and health ("" none).
	MetricsAddr string
	// MetricsRefresh is how often the worker re-reads the mirror's gauges;
	// scrapes serve the last values, so they never query the mirror.
	MetricsRefresh time.Duration

	// WorkerCacheSize bounds the reminders a worker keeps in memory.
	WorkerCacheSize int
	// WorkerMaxActivities bounds notify activities in flight per worker;
	// the PostgreSQL pool is sized to match.
	WorkerMaxActivities int
	// WorkerSendsPerSecond is the provider's rate cap: sends a second
	// across all workers of the task queue; 0 is unlimited.
	WorkerSendsPerSecond float64
	// UnconfirmedSendWait is how long a maybe-sent email waits for
	// SendGrid's event for its key before it is sent again under it.
	UnconfirmedSendWait time.Duration

	// Codec encrypts Temporal payloads; nil only when CodecOff.
	Codec    *codec.Codec
	CodecOff bool
	// CodecServerToken, when set, is the bearer token the codec server
	// requires.
	CodecServerToken string

	// PublicURL is the base URL people reach the console at; the
	// escalation email's decision links point under it (nil: unset).
	PublicURL *url.URL
	// LinkKeys sign the decision links (the worker) and check them
	// (serve) (empty: unset).
	LinkKeys links.Keys
	// SessionKeys sign the console's session cookies. Only serve holds
	// them: sharing none with LinkKeys, so the worker cannot log in as
	// an approver (empty: unset).
	SessionKeys links.Keys
	// IDs seal the ids and feed cursors the API shows and the status
	// events carry, which would otherwise count every tenant's events;
	// opaque.Development() while SHIPNOTIFY_ID_KEY is unset
	// (IDKeyUnset), so serve's replicas agree out of the box.
	IDs        *opaque.Keys
	IDKeyUnset bool
	// LinkTTL is how long a decision link stays valid.
	LinkTTL time.Duration
	// ConsoleKeysFile names the console's approvers and their key hashes.
	ConsoleKeysFile string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (the zero Resolver: none, each request is its peer's).
	TrustedProxies clientip.Resolver
	// UnsubscribeMode is how a subscriber's email lets them opt out:
	// UnsubscribeOneClick, UnsubscribeSendGrid or UnsubscribeOff.
	UnsubscribeMode string

	// APIAddr is where `shipnotify serve` listens.
	APIAddr string
	// APIKeys are the tracker API's keys: names, scopes and hashes.
	APIKeys []api.Key
	// APIKeysFile is the file APIKeys were read from, which serve
	// re-reads on a change ("" when they came inline, in
	// SHIPNOTIFY_API_KEYS: those need a restart).
	APIKeysFile string
	// APIRate and APIBurst are each key's token bucket.
	APIRate  float64
	APIBurst int
	// APIReminderRate and APIReminderBurst are each key's and each
	// tenant's reminder bucket (api.Options.ReminderRate).
	APIReminderRate  float64
	APIReminderBurst int
	// StartSlots and TenantStartSlots are serve's fair queue of starts and
	// per-reminder operations (starter.Starter.Slots).
	StartSlots       int
	TenantStartSlots int
	// APIRequestTimeout is the deadline of one API request.
	APIRequestTimeout time.Duration

	// SendGridEventKey verifies the Event Webhook's batches (nil: serve
	// takes none).
	SendGridEventKey *ecdsa.PublicKey
	// SendGridEventTolerance bounds a batch's signed timestamp's distance
	// from serve's clock.
	SendGridEventTolerance time.Duration
	// DeferredEscalateAfter: a deferral not delivered this long after
	// escalates once.
	DeferredEscalateAfter time.Duration
	// OutcomeGrace: the oldest-unconfirmed gauge counts only emails
	// accepted longer ago than this.
	OutcomeGrace time.Duration

	// SendWindows are the tenants' default send windows and holidays,
	// read from SendWindowsFile when the process starts.
	SendWindows     reminder.WindowDefaults
	SendWindowsFile string
	// StatusEndpoints are the tracker's endpoints serve posts status
	// events to, read from StatusEndpointsFile ("" none).
	StatusEndpoints     []statusevents.Endpoint
	StatusEndpointsFile string
}

// MinAPIRequestTimeout is the shortest request deadline the API accepts:
// above the 60 s a reschedule or decision may wait for its workflow, so an
// operation answers with its outcomes rather than a timeout.
const MinAPIRequestTimeout = budget.MinAPIRequest

// ErrNoCodecKeys is returned by RequireCodec when no payload keys are set.
var ErrNoCodecKeys = errors.New("SHIPNOTIFY_CODEC_KEYS or SHIPNOTIFY_CODEC_KEYS_FILE: required, so histories hold " +
	"no personal data in plain view (make one with `shipnotify codec-keygen`), or set SHIPNOTIFY_CODEC=off")

// Load reads the configuration. An invalid value is an error naming its variable.
func Load(lookup Lookup) (Config, error) {
	// Every variable read is in the Variables table, with its default.
	get := func(key string) string {
		if v, ok := lookup(key); ok && v != "" {
			return v
		}
		return variable(key).Default
	}
	var c Config
	var err error
	c.Temporal, err = envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: envLookup(lookup)})
	if err != nil {
		return Config{}, fmt.Errorf("invalid Temporal configuration (TEMPORAL_*): %w", err)
	}
	if c.Temporal.HostPort == "" {
		c.Temporal.HostPort = "127.0.0.1:7233"
	}
	if c.Temporal.Namespace == "" {
		c.Temporal.Namespace = "default"
	}
	c.TaskQueue = get("SHIPNOTIFY_TASK_QUEUE")
	if c.DelayedStart, err = parseBool(get("SHIPNOTIFY_DELAYED_START")); err != nil {
		return Config{}, fmt.Errorf("SHIPNOTIFY_DELAYED_START: %w", err)
	}
	if c.DefaultTenant = get("SHIPNOTIFY_DEFAULT_TENANT"); !reminder.IsID(c.DefaultTenant) {
		return Config{}, fmt.Errorf("SHIPNOTIFY_DEFAULT_TENANT: want an id (letters, digits, '.', '_', '-', at most 64)")
	}

	c.DatabaseURL = get("DATABASE_URL")
	if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return Config{}, fmt.Errorf("DATABASE_URL: want a postgres:// URL")
	}
	c.MigrateDatabaseURL = get("SHIPNOTIFY_MIGRATE_DATABASE_URL")
	if c.MigrateDatabaseURL == "" {
		c.MigrateDatabaseURL = c.DatabaseURL
	} else if u, err := url.Parse(c.MigrateDatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return Config{}, fmt.Errorf("SHIPNOTIFY_MIGRATE_DATABASE_URL: want a postgres:// URL")
	}

	c.PruneDatabaseURL = get("SHIPNOTIFY_PRUNE_DATABASE_URL")
	if c.PruneDatabaseURL == "" {
		c.PruneDatabaseURL = c.MigrateDatabaseURL
	} else if u, err := url.Parse(c.PruneDatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return Config{}, fmt.Errorf("SHIPNOTIFY_PRUNE_DATABASE_URL: want a postgres:// URL")
	}

	c.SendGridAPIKey = get("SENDGRID_API_KEY")
	c.SendGridBaseURL = get("SENDGRID_BASE_URL")
	if err := checkMailAPIURL(c.SendGridBaseURL); err != nil {
		return Config{}, fmt.Errorf("SENDGRID_BASE_URL: %w", err)
	}
	c.FromEmail = get("SHIPNOTIFY_FROM_EMAIL")
	if a, err := mail.ParseAddress(c.FromEmail); err != nil || a.Address != c.FromEmail {
		return Config{}, fmt.Errorf("SHIPNOTIFY_FROM_EMAIL: want a bare address like %s", DefaultFromEmail)
	}
	c.FromName = get("SHIPNOTIFY_FROM_NAME")

	if c.Webhooks.AllowLoopback, err = parseBool(get("SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK")); err != nil {
		return Config{}, fmt.Errorf("SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK: %w", err)
	}
	if err := c.LogLevel.UnmarshalText([]byte(get("SHIPNOTIFY_LOG_LEVEL"))); err != nil {
		return Config{}, fmt.Errorf("SHIPNOTIFY_LOG_LEVEL: want debug, info, warn or error")
	}
	if c.MetricsAddr = get("SHIPNOTIFY_METRICS_ADDR"); c.MetricsAddr == "off" {
		c.MetricsAddr = ""
	}
	if c.MetricsRefresh, err = time.ParseDuration(get("SHIPNOTIFY_METRICS_REFRESH")); err != nil || c.MetricsRefresh < time.Second {
		return Config{}, fmt.Errorf("SHIPNOTIFY_METRICS_REFRESH: want a duration of at least 1s, like 30s")
	}
	if c.WorkerCacheSize, err = positiveInt(get("SHIPNOTIFY_WORKER_CACHE_SIZE")); err != nil {
		return Config{}, fmt.Errorf("SHIPNOTIFY_WORKER_CACHE_SIZE: %w", err)
	}
	if c.WorkerMaxActivities, err = positiveInt(get("SHIPNOTIFY_WORKER_MAX_ACTIVITIES")); err != nil {
		return Config{}, fmt.Errorf("SHIPNOTIFY_WORKER_MAX_ACTIVITIES: %w", err)
	}
	if c.WorkerSendsPerSecond, err = sendsPerSecond(lookup); err != nil {
		return Config{}, err
	}
	if c.UnconfirmedSendWait, err = durationIn(get("SHIPNOTIFY_UNCONFIRMED_SEND_WAIT"), 0, 24*time.Hour); err != nil {
		return Config{}, fmt.Errorf("SHIPNOTIFY_UNCONFIRMED_SEND_WAIT: %w", err)
	}
	if err := c.loadCodec(get); err != nil {
		return Config{}, err
	}
	c.CodecServerToken = get("SHIPNOTIFY_CODEC_SERVER_TOKEN")
	if err := c.loadLinks(get); err != nil {
		return Config{}, err
	}
	if raw := get("SHIPNOTIFY_ID_KEY"); raw != "" {
		if c.IDs, err = opaque.ParseKeys(raw); err != nil {
			return Config{}, fmt.Errorf("SHIPNOTIFY_ID_KEY: %w (make one with: head -c 32 /dev/urandom | base64)", err)
		}
	} else {
		c.IDs, c.IDKeyUnset = opaque.Development(), true
	}
	c.ConsoleKeysFile = get("SHIPNOTIFY_CONSOLE_KEYS_FILE")
	if c.TrustedProxies, err = clientip.Parse(get("SHIPNOTIFY_TRUSTED_PROXIES")); err != nil {
		return Config{}, fmt.Errorf("SHIPNOTIFY_TRUSTED_PROXIES: %w", err)
	}
	if err := c.loadOutcomes(get); err != nil {
		return Config{}, err
	}
	if err := c.loadAPI(get); err != nil {
		return Config{}, err
	}
	if c.SendWindowsFile = get("SHIPNOTIFY_SEND_WINDOWS_FILE"); c.SendWindowsFile != "" {
		if c.SendWindows, err = ReadSendWindows(c.SendWindowsFile, c.DefaultTenant, time.Now()); err != nil {
			return Config{}, fmt.Errorf("SHIPNOTIFY_SEND_WINDOWS_FILE: %w", err)
		}
	}
	if c.StatusEndpointsFile = get("SHIPNOTIFY_STATUS_ENDPOINTS_FILE"); c.StatusEndpointsFile != "" {
		if c.StatusEndpoints, err = ReadStatusEndpoints(c.StatusEndpointsFile, c.Webhooks, c.DefaultTenant); err != nil {
			return Config{}, fmt.Errorf("SHIPNOTIFY_STATUS_ENDPOINTS_FILE: %w", err)
		}
	}
	return c, nil
}

// The rate cap's variable, and the name it had before: still read, so a
// deployment that sets it keeps its cap.
const (
	sendsPerSecondVar           = "SHIPNOTIFY_WORKER_SENDS_PER_SECOND"
	deprecatedSendsPerSecondVar = "SHIPNOTIFY_WORKER_ACTIVITIES_PER_SECOND"
)

// sendsPerSecond reads the rate cap from either of its names. Both set to
// different caps is an error naming both: which one was meant is not ours
// to guess, and the wrong one would over-send or starve.
func sendsPerSecond(lookup Lookup) (float64, error) {
	read := func(name string) (float64, bool, error) {
		v, ok := lookup(name)
		if !ok || v == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("%s: want a number of sends per second, 0 for no cap", name)
		}
		return n, true, nil
	}
	v, set, err := read(sendsPerSecondVar)
	if err != nil {
		return 0, err
	}
	old, oldSet, err := read(deprecatedSendsPerSecondVar)
	switch {
	case err != nil:
		return 0, err
	case set && oldSet && v != old:
		return 0, fmt.Errorf("%s and %s (its deprecated name) set to different caps (%g and %g): set %s only",
			sendsPerSecondVar, deprecatedSendsPerSecondVar, v, old, sendsPerSecondVar)
	case set:
		return v, nil
	case oldSet:
		return old, nil
	}
	return strconv.ParseFloat(variable(sendsPerSecondVar).Default, 64)
}

// ReadSendWindows reads the tenants' default send windows and holidays
// (sendwindow.ParseDefaults's format); a holidays file a line names is read
// relative to the file's directory, and its dates expanded from today. An
// error names the line and the field, never a value. Tenants are keyed by
// id, the default tenant's name (defaultTenant) as "".
func ReadSendWindows(path, defaultTenant string, today time.Time) (reminder.WindowDefaults, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	readFile := func(name string) ([]byte, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(path), name)
		}
		return os.ReadFile(name)
	}
	defaults, err := sendwindow.ParseDefaults(bytes.NewReader(b), readFile, sendwindow.DateOf(today))
	if err != nil {
		return nil, err
	}
	out := make(reminder.WindowDefaults, len(defaults))
	for name, d := range defaults {
		t, err := reminder.ParseTenant("tenant", name)
		if err != nil {
			return nil, err
		}
		id := t.ID(defaultTenant)
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("tenant %s: named twice (the default tenant is %q)", reminder.TenantName(id, defaultTenant), defaultTenant)
		}
		out[id] = d
	}
	return out, nil
}

// ReadStatusEndpoints reads a status endpoints file
// (statusevents.ParseEndpoints's format), checking each URL with guard; an
// error names the line and the field, never a secret or a URL.
func ReadStatusEndpoints(path string, guard webhook.Guard, defaultTenant string) ([]statusevents.Endpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return statusevents.ParseEndpoints(bytes.NewReader(b), statusevents.ParseOptions{Guard: guard, DefaultTenant: defaultTenant})
}

// loadAPI reads the tracker API's settings and keys.
func (c *Config) loadAPI(get func(key string) string) error {
	c.APIAddr = get("SHIPNOTIFY_API_ADDR")
	if _, _, err := net.SplitHostPort(c.APIAddr); err != nil {
		return fmt.Errorf("SHIPNOTIFY_API_ADDR: want host:port, like 127.0.0.1:8090")
	}
	var err error
	if c.APIRate, err = strconv.ParseFloat(get("SHIPNOTIFY_API_RATE"), 64); err != nil || c.APIRate <= 0 {
		return fmt.Errorf("SHIPNOTIFY_API_RATE: want a positive number of requests a second")
	}
	if c.APIBurst, err = positiveInt(get("SHIPNOTIFY_API_BURST")); err != nil {
		return fmt.Errorf("SHIPNOTIFY_API_BURST: %w", err)
	}
	if c.APIReminderRate, err = strconv.ParseFloat(get("SHIPNOTIFY_API_REMINDER_RATE"), 64); err != nil || c.APIReminderRate <= 0 {
		return fmt.Errorf("SHIPNOTIFY_API_REMINDER_RATE: want a positive number of reminders a second")
	}
	if c.APIReminderBurst, err = positiveInt(get("SHIPNOTIFY_API_REMINDER_BURST")); err != nil {
		return fmt.Errorf("SHIPNOTIFY_API_REMINDER_BURST: %w", err)
	}
	if c.StartSlots, err = positiveInt(get("SHIPNOTIFY_START_SLOTS")); err != nil {
		return fmt.Errorf("SHIPNOTIFY_START_SLOTS: %w", err)
	}
	if c.TenantStartSlots, err = positiveInt(get("SHIPNOTIFY_TENANT_START_SLOTS")); err != nil {
		return fmt.Errorf("SHIPNOTIFY_TENANT_START_SLOTS: %w", err)
	}
	if c.TenantStartSlots > c.StartSlots {
		return fmt.Errorf("SHIPNOTIFY_TENANT_START_SLOTS: want at most SHIPNOTIFY_START_SLOTS (%d)", c.StartSlots)
	}
	if c.APIRequestTimeout, err = time.ParseDuration(get("SHIPNOTIFY_API_REQUEST_TIMEOUT")); err != nil || c.APIRequestTimeout < MinAPIRequestTimeout {
		return fmt.Errorf("SHIPNOTIFY_API_REQUEST_TIMEOUT: want a duration of at least %s, like 90s", MinAPIRequestTimeout)
	}
	inline, file := get("SHIPNOTIFY_API_KEYS"), get("SHIPNOTIFY_API_KEYS_FILE")
	switch {
	case inline != "" && file != "":
		return fmt.Errorf("SHIPNOTIFY_API_KEYS and SHIPNOTIFY_API_KEYS_FILE: set one, not both")
	case file != "":
		c.APIKeysFile = file
		if c.APIKeys, err = ReadAPIKeys(file); err != nil {
			return fmt.Errorf("SHIPNOTIFY_API_KEYS_FILE: %w", err)
		}
	default:
		if c.APIKeys, err = api.ParseKeys(strings.NewReader(inline)); err != nil {
			return fmt.Errorf("SHIPNOTIFY_API_KEYS: %w", err)
		}
	}
	return nil
}

// ReadAPIKeys reads an API keys file (api.ParseKeys's format); an error
// names the entry, never a hash.
func ReadAPIKeys(path string) ([]api.Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return api.ParseKeys(bytes.NewReader(b))
}

// RequireAPIKeys checks that the API has keys: without one every request
// would be refused.
func (c Config) RequireAPIKeys() error {
	if len(c.APIKeys) == 0 {
		return fmt.Errorf("SHIPNOTIFY_API_KEYS or SHIPNOTIFY_API_KEYS_FILE: required, or every request is refused (make a key with `shipnotify api-key`)")
	}
	return nil
}

// loadLinks reads what the escalation email's decision links and the
// console's sessions need.
func (c *Config) loadLinks(get func(key string) string) error {
	if raw := get("SHIPNOTIFY_PUBLIC_URL"); raw != "" {
		u, err := checkPublicURL(raw)
		if err != nil {
			return fmt.Errorf("SHIPNOTIFY_PUBLIC_URL: %w", err)
		}
		c.PublicURL = u
	}
	if raw := get("SHIPNOTIFY_LINK_KEY"); raw != "" {
		k, err := links.ParseKeys(raw)
		if err != nil {
			return fmt.Errorf("SHIPNOTIFY_LINK_KEY: %w (make one with: head -c 32 /dev/urandom | base64)", err)
		}
		c.LinkKeys = k
	}
	if raw := get("SHIPNOTIFY_SESSION_KEY"); raw != "" {
		k, err := links.ParseKeys(raw)
		if err != nil {
			return fmt.Errorf("SHIPNOTIFY_SESSION_KEY: %w (make one with: head -c 32 /dev/urandom | base64)", err)
		}
		if k.Shares(c.LinkKeys) {
			return fmt.Errorf("SHIPNOTIFY_SESSION_KEY: holds a key of SHIPNOTIFY_LINK_KEY, which the worker holds too; " +
				"give serve a key of its own (head -c 32 /dev/urandom | base64)")
		}
		c.SessionKeys = k
	}
	switch c.UnsubscribeMode = get("SHIPNOTIFY_UNSUBSCRIBE"); c.UnsubscribeMode {
	case UnsubscribeOneClick:
		if c.PublicURL == nil || c.LinkKeys.Empty() {
			return fmt.Errorf("SHIPNOTIFY_UNSUBSCRIBE: one-click needs SHIPNOTIFY_PUBLIC_URL and SHIPNOTIFY_LINK_KEY " +
				"(the link points under the one and is signed with the other)")
		}
	case UnsubscribeSendGrid, UnsubscribeOff:
	default:
		return fmt.Errorf("SHIPNOTIFY_UNSUBSCRIBE: want one-click, sendgrid or off")
	}
	ttl, err := time.ParseDuration(get("SHIPNOTIFY_LINK_TTL"))
	if err != nil || ttl < time.Minute || ttl > 30*24*time.Hour {
		return fmt.Errorf("SHIPNOTIFY_LINK_TTL: want a duration from 1m to 720h, like 72h")
	}
	c.LinkTTL = ttl
	return nil
}

// loadOutcomes reads what the provider-outcome path needs.
func (c *Config) loadOutcomes(get func(string) string) error {
	if raw := get("SHIPNOTIFY_SENDGRID_EVENT_KEY"); raw != "" {
		k, err := sendgridevents.ParseVerificationKey(raw)
		if err != nil {
			return fmt.Errorf("SHIPNOTIFY_SENDGRID_EVENT_KEY: %w", err)
		}
		c.SendGridEventKey = k
	}
	var err error
	if c.SendGridEventTolerance, err = durationIn(get("SHIPNOTIFY_SENDGRID_EVENT_TOLERANCE"), 10*time.Second, 24*time.Hour); err != nil {
		return fmt.Errorf("SHIPNOTIFY_SENDGRID_EVENT_TOLERANCE: %w", err)
	}
	if c.DeferredEscalateAfter, err = durationIn(get("SHIPNOTIFY_DEFERRED_ESCALATE_AFTER"), time.Second, 72*time.Hour); err != nil {
		return fmt.Errorf("SHIPNOTIFY_DEFERRED_ESCALATE_AFTER: %w", err)
	}
	if c.OutcomeGrace, err = durationIn(get("SHIPNOTIFY_OUTCOME_GRACE"), 0, 30*24*time.Hour); err != nil {
		return fmt.Errorf("SHIPNOTIFY_OUTCOME_GRACE: %w", err)
	}
	return nil
}

// durationIn parses a duration between lo and hi.
func durationIn(s string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		return 0, fmt.Errorf("want a duration from %s to %s, like 4h", lo, hi)
	}
	return d, nil
}

// Links returns the signer of the escalation email's decision links, or
// nil when SHIPNOTIFY_PUBLIC_URL or SHIPNOTIFY_LINK_KEY is unset (the
// emails then carry no links).
func (c Config) Links(now func() time.Time) *links.Signer {
	if c.PublicURL == nil || c.LinkKeys.Empty() {
		return nil
	}
	return &links.Signer{Keys: c.LinkKeys, BaseURL: c.PublicURL, TTL: c.LinkTTL, Now: now}
}

// The ways a subscriber's email lets them opt out (SHIPNOTIFY_UNSUBSCRIBE).
const (
	// UnsubscribeOneClick: List-Unsubscribe and List-Unsubscribe-Post
	// (RFC 8058) headers, to serve's signed one-click link.
	UnsubscribeOneClick = "one-click"
	// UnsubscribeSendGrid: SendGrid's subscription tracking, which adds its
	// own link and headers and reports to the Event Webhook.
	UnsubscribeSendGrid = "sendgrid"
	// UnsubscribeOff: neither; the SendGrid account's settings apply.
	UnsubscribeOff = "off"
)

// Unsubscribe returns how a subscriber's email lets them opt out, by
// reminder, as UnsubscribeMode says; nil when off.
func (c Config) Unsubscribe() func(reminderID string) email.Unsubscribe {
	switch c.UnsubscribeMode {
	case UnsubscribeOneClick:
		signer := &links.Signer{Keys: c.LinkKeys, BaseURL: c.PublicURL}
		return func(id string) email.Unsubscribe { return email.Unsubscribe{OneClick: signer.UnsubscribeURL(id)} }
	case UnsubscribeSendGrid:
		return func(string) email.Unsubscribe { return email.Unsubscribe{SendGrid: true} }
	}
	return nil
}

// RequireConsole checks what the approval console needs: the link keys
// it checks the escalation email's links with, and the session key only
// serve holds.
func (c Config) RequireConsole() error {
	if c.LinkKeys.Empty() {
		return fmt.Errorf("SHIPNOTIFY_LINK_KEY: required by the console, which checks the escalation email's links with it")
	}
	if c.SessionKeys.Empty() {
		return fmt.Errorf("SHIPNOTIFY_SESSION_KEY: required by the console, which signs its session cookies with it " +
			"(a key of serve's own, not the link key: head -c 32 /dev/urandom | base64)")
	}
	return nil
}

// RefuseSessionKey checks that the worker was not given the console's
// session key: with it, whoever holds the worker could log in as any
// approver, which is what keeping it apart from the link key prevents.
func (c Config) RefuseSessionKey() error {
	if !c.SessionKeys.Empty() {
		return fmt.Errorf("SHIPNOTIFY_SESSION_KEY: set for the worker; only serve may hold it (unset it here)")
	}
	return nil
}

// checkPublicURL wants an origin: https (plain http only to loopback: its
// pages carry decision links and session cookies), with no path (the
// console is served at /console/ of its host), credentials, query or
// fragment.
func checkPublicURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("want an http(s) URL like https://shipnotify.example.com")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.Trim(u.Path, "/") != "" {
		return nil, errors.New("want the console's origin, like https://shipnotify.example.com: no path (the console is served at /console/), credentials, query or fragment")
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return nil, errors.New("plain http only to a loopback address (links and sessions must not cross a network in the clear); use https")
	}
	return u, nil
}

// loadCodec reads the payload keys: inline, or from a file (one
// "id:base64" per line, the first sealing new payloads).
func (c *Config) loadCodec(get func(key string) string) error {
	switch mode := get("SHIPNOTIFY_CODEC"); mode {
	case "on":
	case "off":
		c.CodecOff = true
		return nil
	default:
		return fmt.Errorf("SHIPNOTIFY_CODEC: want on or off")
	}
	var o codec.Options
	var err error
	if o.AllowUnsealed, err = parseBool(get("SHIPNOTIFY_CODEC_ALLOW_UNSEALED")); err != nil {
		return fmt.Errorf("SHIPNOTIFY_CODEC_ALLOW_UNSEALED: %w", err)
	}
	inline, file := get("SHIPNOTIFY_CODEC_KEYS"), get("SHIPNOTIFY_CODEC_KEYS_FILE")
	var src io.Reader
	name := "SHIPNOTIFY_CODEC_KEYS"
	switch {
	case inline != "" && file != "":
		return fmt.Errorf("SHIPNOTIFY_CODEC_KEYS and SHIPNOTIFY_CODEC_KEYS_FILE: set one, not both")
	case inline != "":
		src = strings.NewReader(inline)
	case file != "":
		name = "SHIPNOTIFY_CODEC_KEYS_FILE"
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("SHIPNOTIFY_CODEC_KEYS_FILE: %w", err)
		}
		src = strings.NewReader(string(b))
	default:
		return nil
	}
	keys, err := codec.ParseKeys(src)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if c.Codec, err = codec.New(keys, o); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// RequireCodec checks that payload encryption is configured or explicitly off.
func (c Config) RequireCodec() error {
	if c.Codec == nil && !c.CodecOff {
		return ErrNoCodecKeys
	}
	return nil
}

// RequireSender checks what sending mail needs; only the worker sends.
func (c Config) RequireSender() error {
	if c.SendGridAPIKey == "" {
		return fmt.Errorf("SENDGRID_API_KEY: required to send mail")
	}
	return nil
}

// checkMailAPIURL wants an https URL, or plain http to a loopback address
// (the local sink of the demo and the tests): every request to it carries
// SENDGRID_API_KEY, which must not cross a network in the clear.
func checkMailAPIURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("want an http(s) URL like %s", email.DefaultBaseURL)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return errors.New("plain http only to a loopback address (requests carry SENDGRID_API_KEY); use https")
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func positiveInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("want a whole number of at least 1")
	}
	return n, nil
}

func parseBool(s string) (bool, error) {
	b, err := strconv.ParseBool(strings.ToLower(s))
	if err != nil {
		return false, fmt.Errorf("want true or false")
	}
	return b, nil
}

// envLookup adapts a Lookup to envconfig's interface.
type envLookup Lookup

func (l envLookup) LookupEnv(key string) (string, bool) { return l(key) }

// Environ is only used by envconfig for TEMPORAL_GRPC_META_* headers, which
// shipnotify does not pass through.
func (l envLookup) Environ() []string { return nil }
