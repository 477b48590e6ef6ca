package config

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// Variable is one environment variable shipnotify reads.
type Variable struct {
	Name    string
	Default string
	Meaning string
	// Secret values are never printed: `shipnotify config` says whether
	// one is set, nothing more.
	Secret bool
	// DatabaseURL marks a PostgreSQL URL (a secret: it can carry a
	// password), printed as its user, host and database with the password
	// and every *password* parameter masked, so an operator can tell which
	// server and role a command would use.
	DatabaseURL bool
}

// Variables is every environment variable shipnotify reads, with its
// default and meaning: the one table docs/configuration.md documents (a test keeps
// them in step), `shipnotify config` prints, and docker-compose.yml sets.
var Variables = []Variable{
	{Name: "TEMPORAL_ADDRESS", Default: "127.0.0.1:7233", Meaning: "Temporal frontend host:port"},
	{Name: "TEMPORAL_NAMESPACE", Default: "default", Meaning: "Temporal namespace"},
	{Name: "TEMPORAL_API_KEY", Meaning: "API key (Temporal Cloud); turns TLS on", Secret: true},
	{Name: "TEMPORAL_TLS", Meaning: "true to connect with TLS (implied by a key, certificate or API key)"},
	{Name: "TEMPORAL_TLS_CLIENT_CERT_PATH", Meaning: "mTLS client certificate file"},
	{Name: "TEMPORAL_TLS_CLIENT_KEY_PATH", Meaning: "mTLS client key file"},
	{Name: "TEMPORAL_TLS_CLIENT_CERT_DATA", Meaning: "mTLS client certificate, PEM inline"},
	{Name: "TEMPORAL_TLS_CLIENT_KEY_DATA", Meaning: "mTLS client key, PEM inline", Secret: true},
	{Name: "TEMPORAL_TLS_SERVER_CA_CERT_PATH", Meaning: "CA certificate file for the server"},
	{Name: "TEMPORAL_TLS_SERVER_CA_CERT_DATA", Meaning: "CA certificate for the server, PEM inline"},
	{Name: "TEMPORAL_TLS_SERVER_NAME", Meaning: "server name to verify (SNI)"},
	{Name: "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", Meaning: "true to skip host verification (testing only)"},
	{Name: "TEMPORAL_CONFIG_FILE", Meaning: "Temporal client config file (TOML profiles); default: the user config dir's temporalio/temporal.toml"},
	{Name: "TEMPORAL_PROFILE", Meaning: "profile in that file (default: default)"},
	{Name: "SHIPNOTIFY_TASK_QUEUE", Default: workflows.DefaultTaskQueue, Meaning: "task queue the worker polls and the starter starts on"},
	{Name: "SHIPNOTIFY_DELAYED_START", Default: "false", Meaning: "true starts a reminder that needs no approval with Temporal's start delay: the engine holds it and runs its first task at the due time, with no timer: 3 billable actions a delivered reminder instead of 4, and less engine CPU, but a burst of reminders coming due drains slower on this project's measurements (docs/performance.md); for deployments that pay by the action"},
	{Name: "SHIPNOTIFY_DEFAULT_TENANT", Default: reminder.DefaultTenantName, Meaning: "the default tenant's name: the tenant of keys and approvers without `tenant=`, and of every reminder scheduled before tenancy"},
	{Name: "DATABASE_URL", Default: DefaultDatabaseURL, Meaning: "the PostgreSQL mirror (the dev cluster by default); in production a member of shipnotify_runtime", Secret: true, DatabaseURL: true},
	{Name: "SHIPNOTIFY_MIGRATE_DATABASE_URL", Meaning: "the mirror as its owner, for `shipnotify migrate` only (default: DATABASE_URL)", Secret: true, DatabaseURL: true},
	{Name: "SHIPNOTIFY_PRUNE_DATABASE_URL", Meaning: "the mirror as a member of shipnotify_pruner (or its owner), for `shipnotify prune` only (default: SHIPNOTIFY_MIGRATE_DATABASE_URL)", Secret: true, DatabaseURL: true},
	{Name: "SENDGRID_API_KEY", Meaning: "SendGrid API key; the worker requires it", Secret: true},
	{Name: "SENDGRID_BASE_URL", Default: email.DefaultBaseURL, Meaning: "mail API base URL; https, or plain http to loopback only, since it carries the API key (the demo and tests use a local sink)"},
	{Name: "SHIPNOTIFY_FROM_EMAIL", Default: DefaultFromEmail, Meaning: "sender address"},
	{Name: "SHIPNOTIFY_FROM_NAME", Default: DefaultFromName, Meaning: "sender name"},
	{Name: "SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK", Default: "false", Meaning: "development only: webhooks may reach loopback addresses, on any port, over plain http too"},
	{Name: "SHIPNOTIFY_LOG_LEVEL", Default: "info", Meaning: "debug, info, warn or error; logs are JSON on stderr"},
	{Name: "SHIPNOTIFY_METRICS_ADDR", Default: "127.0.0.1:9090", Meaning: "where the worker serves /metrics, /healthz and /readyz: loopback unless set, as the API is (off: nowhere)"},
	{Name: "SHIPNOTIFY_METRICS_REFRESH", Default: "30s", Meaning: "how often the worker re-reads the mirror's gauges (reminders by state, oldest overdue); scrapes serve the last values and never query the mirror"},
	{Name: "SHIPNOTIFY_WORKER_CACHE_SIZE", Default: "2000", Meaning: "reminders a worker keeps in memory (about 35 KB each)"},
	{Name: "SHIPNOTIFY_WORKER_MAX_ACTIVITIES", Default: strconv.Itoa(DefaultWorkerMaxActivities), Meaning: "notify activities in flight per worker; the PostgreSQL pool is sized to match"},
	{Name: "SHIPNOTIFY_WORKER_SENDS_PER_SECOND", Default: "0", Meaning: "the provider's rate cap: sends a second across all workers of the task queue, held on the task queue and, exactly, in the mirror; 0: none"},
	{Name: "SHIPNOTIFY_WORKER_ACTIVITIES_PER_SECOND", Meaning: "deprecated: the old name of SHIPNOTIFY_WORKER_SENDS_PER_SECOND, still read when that is unset; both set to different values is an error"},
	{Name: "SHIPNOTIFY_UNCONFIRMED_SEND_WAIT", Default: durationText(activities.DefaultEvidenceWait), Meaning: "an email whose send may have reached SendGrid (no answer after the request left, or its worker died mid-call) waits this long for SendGrid's event for its key before it is sent again under the same key; an event settles it as sent (0s to 24h; 0s without the Event Webhook, where no event comes)"},
	{Name: "SHIPNOTIFY_CODEC", Default: "on", Meaning: "off runs without payload encryption; on with no keys refuses to talk to Temporal"},
	{Name: "SHIPNOTIFY_CODEC_KEYS", Meaning: "payload keys, id:base64(32 bytes), comma-separated; the first seals, all open", Secret: true},
	{Name: "SHIPNOTIFY_CODEC_KEYS_FILE", Meaning: "the same, from a file (one key a line, # comments)"},
	{Name: "SHIPNOTIFY_CODEC_ALLOW_UNSEALED", Default: "false", Meaning: "migration only: true decodes payloads that are not encrypted (histories from before encryption); the worker and codec server refuse them otherwise"},
	{Name: "SHIPNOTIFY_CODEC_SERVER_TOKEN", Meaning: "bearer token the codec server requires; it will not start without one (on loopback, --insecure-loopback waives it for development)", Secret: true},
	{Name: "SHIPNOTIFY_PUBLIC_URL", Meaning: "origin people reach the console at, like https://shipnotify.example.com (https, or plain http to loopback only; no path); the escalation email's approve and reject links point under it, and it carries none while this or SHIPNOTIFY_LINK_KEY is unset"},
	{Name: "SHIPNOTIFY_LINK_KEY", Meaning: "keys signing the escalation email's links (the worker) and checking them (serve): base64 of at least 32 random bytes, comma-separated; the first signs, all verify", Secret: true},
	{Name: "SHIPNOTIFY_SESSION_KEY", Meaning: "keys signing the console's session cookies, for serve only (the worker refuses to start with it, and it may share no key with SHIPNOTIFY_LINK_KEY); the console needs it: base64 of at least 32 random bytes, comma-separated; the first signs, all verify", Secret: true},
	{Name: "SHIPNOTIFY_ID_KEY", Meaning: "keys sealing the ids a tenant sees (audit trail and status event ids, the change feed's cursors), which would otherwise count every tenant's events; serve and `shipnotify show` use it, every replica the same: base64 of at least 32 random bytes, comma-separated; the first seals, all open cursors (a new first key gives every event a new id). Unset: a development key anyone can open (serve warns)", Secret: true},
	{Name: "SHIPNOTIFY_UNSUBSCRIBE", Default: "off", Meaning: "how a subscriber's email lets them opt out: one-click sends List-Unsubscribe and List-Unsubscribe-Post (RFC 8058) to serve's signed link under SHIPNOTIFY_PUBLIC_URL (both it and SHIPNOTIFY_LINK_KEY required); sendgrid turns on SendGrid's subscription tracking (its unsubscribes reach serve through the Event Webhook); off leaves it to the SendGrid account's settings. Either way an unsubscribe or spam report suppresses the address for its tenant"},
	{Name: "SHIPNOTIFY_LINK_TTL", Default: "72h", Meaning: "how long an escalation email's links stay valid (1m to 720h)"},
	{Name: "SHIPNOTIFY_CONSOLE_KEYS_FILE", Meaning: "the console's approvers, one `name scopes sha256hex [tenant=…] [expires=…]` a line (the API keys file's format: a key with the approve scope logs in as name; only keys `shipnotify api-key` makes log in); re-read on SIGHUP and when it changes; no file, no login"},
	{Name: "SHIPNOTIFY_TRUSTED_PROXIES", Meaning: "the reverse proxies in front of serve, as IP addresses and CIDR prefixes, comma-separated: a request from one is charged to the client its X-Forwarded-For names (the right-most address that is not one of these), so failed console logins are throttled per client behind a proxy; unset: each request is its peer's, and X-Forwarded-For is ignored"},
	{Name: "SHIPNOTIFY_API_ADDR", Default: "127.0.0.1:8090", Meaning: "where `shipnotify serve` serves the tracker API; beyond loopback put a TLS proxy in front, since every request carries a key"},
	{Name: "SHIPNOTIFY_API_KEYS", Meaning: "the API's keys, `name scope,scope sha256hex [tenant=…] [expires=…]` entries separated by `;` (`shipnotify api-key` makes one); hashes only, never a key; a change needs a restart", Secret: true},
	{Name: "SHIPNOTIFY_API_KEYS_FILE", Meaning: "the same, from a file (one entry a line, # comments); re-read on SIGHUP and when it changes, a file that does not parse leaving the old keys in force"},
	{Name: "SHIPNOTIFY_API_RATE", Default: "20", Meaning: "requests a second each API key may make; beyond its burst the API answers 429 with Retry-After"},
	{Name: "SHIPNOTIFY_API_BURST", Default: "40", Meaning: "requests an API key may make at once before its rate applies"},
	{Name: "SHIPNOTIFY_API_REMINDER_RATE", Default: "100", Meaning: "reminders a second each API key, and each tenant across its keys, may schedule: an update is charged its reminders and webhook host lookups before anything is written; over it, 429 with Retry-After (per serve replica)"},
	{Name: "SHIPNOTIFY_API_REMINDER_BURST", Default: "1000", Meaning: "reminders an API key, and a tenant, may schedule at once before the reminder rate applies; a larger update needs the bucket full and leaves it in debt"},
	{Name: "SHIPNOTIFY_START_SLOTS", Default: "32", Meaning: "workflow starts, and reminders a cancel, move or decision reaches, one serve runs at once, handed out among tenants in turn"},
	{Name: "SHIPNOTIFY_TENANT_START_SLOTS", Default: "16", Meaning: "of SHIPNOTIFY_START_SLOTS, the most one tenant holds at once, so another tenant's work finds a slot free"},
	{Name: "SHIPNOTIFY_SENDGRID_EVENT_KEY", Meaning: "the SendGrid Event Webhook's verification key (base64, as its settings show it); with it serve accepts signed events at /providers/sendgrid/events, and reminders move from sent to delivered or undeliverable"},
	{Name: "SHIPNOTIFY_SENDGRID_EVENT_TOLERANCE", Default: "5m", Meaning: "how far an event batch's signed timestamp may be from serve's clock (10s to 24h); older or newer batches are refused as replays (a replay within it changes nothing either: event ids are kept)"},
	{Name: "SHIPNOTIFY_DEFERRED_ESCALATE_AFTER", Default: "4h", Meaning: "a reminder SendGrid deferred and has not delivered this long after escalates once (1s to 72h)"},
	{Name: "SHIPNOTIFY_OUTCOME_GRACE", Default: "1h", Meaning: "the worker's gauge of the oldest email accepted without a final outcome (delivered, bounce, dropped) counts only those older than this"},
	{Name: "SHIPNOTIFY_SEND_WINDOWS_FILE", Meaning: "the tenants' default send windows and holidays, one `tenant=name [days=mon-fri hours=08:00-18:00] [time_zone=Europe/Berlin] [policy=next|previous] [holidays=file.ics|2026-12-25,…]` a line (# comments; a holidays file is read relative to this one): a reminder whose update and subscriber name no window goes out in its tenant's, and every window of a tenant skips its holidays; read when the process that schedules starts (serve, the CLI): reminders scheduled before a change keep the window they were scheduled with; none: no defaults"},
	{Name: "SHIPNOTIFY_STATUS_ENDPOINTS_FILE", Meaning: "the tracker's endpoints serve posts status events to (signed Standard Webhooks: scheduled, sent, delivered, …), one `name url secret [events=type,…] [tenant=…]` a line (# comments); it holds the signing secrets, so keep it private; read when serve starts; none: no events are posted (GET /v1/reminders?updated_since= still works)"},
	{Name: "SHIPNOTIFY_API_REQUEST_TIMEOUT", Default: "90s", Meaning: "deadline of one API request; at least 65s, above the 60 s a reschedule or decision may wait for its workflow"},
}

// durationText writes a default duration as people write it: "5m", not
// time.Duration's "5m0s".
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// variable returns the table's entry for name; it panics on a name not in
// the table, so every variable read is documented.
func variable(name string) Variable {
	for _, v := range Variables {
		if v.Name == name {
			return v
		}
	}
	panic("config: undocumented variable " + name)
}

// Setting is one variable as a command sees it.
type Setting struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"` // "environment", "default" or "unset"
}

// Printed in place of a secret's value.
const (
	SecretSet   = "(set)"
	SecretUnset = "(unset)"
	masked      = "xxxxx"
)

// Effective lists every variable with the value in force. A secret shows
// only whether it is set; a database URL its user, host, database and
// parameters, with every password masked.
func Effective(lookup Lookup) []Setting {
	out := make([]Setting, 0, len(Variables))
	for _, v := range Variables {
		s := Setting{Name: v.Name, Value: v.Default, Source: "default"}
		if val, ok := lookup(v.Name); ok && val != "" {
			s.Value, s.Source = val, "environment"
		} else if v.Default == "" {
			s.Source = "unset"
		}
		switch {
		case (v.Secret || v.DatabaseURL) && s.Value == "":
			s.Value = SecretUnset
		case v.DatabaseURL:
			s.Value = maskDatabaseURL(s.Value)
		case v.Secret:
			s.Value = SecretSet
		}
		out = append(out, s)
	}
	return out
}

// maskDatabaseURL keeps a postgres:// URL's user, host, port, database and
// parameters and masks its password and every parameter named like a
// password (password, sslpassword, …). Anything that is not such a URL
// (a keyword/value DSN, a typo) is only "(set)": it is never parsed as
// something else and printed whole.
// safeDatabaseParams are the connection parameters shown as they are.
var safeDatabaseParams = []string{"sslmode", "application_name", "connect_timeout", "target_session_attrs", "pool_max_conns"}

func maskDatabaseURL(v string) string {
	u, err := url.Parse(v)
	// A '#' (a fragment) is where a password with one in it was cut: what
	// follows the cut would print as the host and port.
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Opaque != "" || u.Host == "" ||
		strings.Contains(v, "#") {
		return SecretSet
	}
	out := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if u.User != nil {
		out.User = url.User(u.User.Username())
		if _, has := u.User.Password(); has {
			out.User = url.UserPassword(u.User.Username(), masked)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return SecretSet
	}
	// Only parameters known to hold no secret are shown; any other
	// (sslpassword, options=-c password=…, whatever a driver adds) is
	// named, its value masked.
	for k, vs := range q {
		if !slices.Contains(safeDatabaseParams, strings.ToLower(k)) {
			q[k] = []string{masked}
		} else {
			q[k] = vs
		}
	}
	out.RawQuery = q.Encode()
	return out.String()
}
