package config_test

import (
	"encoding/base64"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/internal/opaque"
)

func lookup(env map[string]string) config.Lookup {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// docs/configuration.md's table lists exactly the variables shipnotify
// reads, in config.Variables' order.
func TestConfigurationTableIsInStep(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		documented = append(documented, m[1])
	}
	require.NotEmpty(t, documented, "docs/configuration.md has no table of variables")
	var read []string
	for _, v := range config.Variables {
		read = append(read, v.Name)
	}
	require.Equal(t, read, documented)
}

func TestDefaultsLoad(t *testing.T) {
	t.Parallel()
	c, err := config.Load(lookup(map[string]string{"TEMPORAL_CONFIG_FILE": "/nonexistent"}))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7233", c.Temporal.HostPort)
	require.Equal(t, "default", c.Temporal.Namespace)
	require.Equal(t, "shipnotify", c.TaskQueue)
	require.Equal(t, config.DefaultDatabaseURL, c.DatabaseURL)
	require.Equal(t, 2000, c.WorkerCacheSize)
	require.Equal(t, "127.0.0.1:9090", c.MetricsAddr, "loopback, as the API is: a deployment names the address its scraper reaches")
	require.Equal(t, 30*time.Second, c.MetricsRefresh)
	require.Equal(t, activities.DefaultEvidenceWait, c.UnconfirmedSendWait, "the evidence wait's default has one home")
	require.Zero(t, c.WorkerSendsPerSecond, "no rate cap unless set")
	require.Equal(t, api.DefaultRequestTimeout, c.APIRequestTimeout, "the API's request deadline defaults to its budget")
	require.ErrorIs(t, c.RequireCodec(), config.ErrNoCodecKeys)
	require.Error(t, c.RequireSender())
}

func TestInvalidValuesNameTheirVariable(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]string{
		"DATABASE_URL":                            "mysql://x",
		"SENDGRID_BASE_URL":                       "ftp://x",
		"SHIPNOTIFY_FROM_EMAIL":                   "nobody",
		"SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK":       "sometimes",
		"SHIPNOTIFY_LOG_LEVEL":                    "chatty",
		"SHIPNOTIFY_METRICS_REFRESH":              "500ms",
		"SHIPNOTIFY_WORKER_CACHE_SIZE":            "0",
		"SHIPNOTIFY_WORKER_MAX_ACTIVITIES":        "many",
		"SHIPNOTIFY_WORKER_SENDS_PER_SECOND":      "-1",
		"SHIPNOTIFY_WORKER_ACTIVITIES_PER_SECOND": "-1",
		"SHIPNOTIFY_CODEC":                        "maybe",
		"SHIPNOTIFY_CODEC_KEYS":                   "k:short",
		"SHIPNOTIFY_CODEC_ALLOW_UNSEALED":         "sometimes",
		"SHIPNOTIFY_PUBLIC_URL":                   "ftp://console.example",
		"SHIPNOTIFY_LINK_KEY":                     "c2hvcnQ=",
		"SHIPNOTIFY_SESSION_KEY":                  "c2hvcnQ=",
		"SHIPNOTIFY_ID_KEY":                       "c2hvcnQ=",
		"SHIPNOTIFY_LINK_TTL":                     "90d",
		"SHIPNOTIFY_SENDGRID_EVENT_KEY":           "not a key",
		"SHIPNOTIFY_SENDGRID_EVENT_TOLERANCE":     "1s",
		"SHIPNOTIFY_DEFERRED_ESCALATE_AFTER":      "0s",
		"SHIPNOTIFY_OUTCOME_GRACE":                "soon",
		"SHIPNOTIFY_STATUS_ENDPOINTS_FILE":        "/nonexistent/status-endpoints",
	} {
		_, err := config.Load(lookup(map[string]string{name: value, "TEMPORAL_CONFIG_FILE": "/nonexistent"}))
		require.Error(t, err, name)
		require.Contains(t, err.Error(), name, name)
	}
}

// The ids tenants see are sealed with SHIPNOTIFY_ID_KEY, and with the
// development key, said to be, while it is unset: two replicas with the
// same setting seal alike.
func TestTheIDKeySealsTheIdsTenantsSee(t *testing.T) {
	t.Parallel()
	key := "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	unset, err := config.Load(lookup(map[string]string{"TEMPORAL_CONFIG_FILE": "/nonexistent"}))
	require.NoError(t, err)
	require.True(t, unset.IDKeyUnset)
	require.Equal(t, opaque.Development().EventID(7), unset.IDs.EventID(7))
	set, err := config.Load(lookup(map[string]string{"SHIPNOTIFY_ID_KEY": key, "TEMPORAL_CONFIG_FILE": "/nonexistent"}))
	require.NoError(t, err)
	require.False(t, set.IDKeyUnset)
	require.NotEqual(t, opaque.Development().EventID(7), set.IDs.EventID(7))
	again, err := config.Load(lookup(map[string]string{"SHIPNOTIFY_ID_KEY": key, "TEMPORAL_CONFIG_FILE": "/nonexistent"}))
	require.NoError(t, err)
	require.Equal(t, set.IDs.EventID(7), again.IDs.EventID(7), "another replica, the same ids")
}

// The rate cap is "sends per second": SHIPNOTIFY_WORKER_SENDS_PER_SECOND,
// with its old name still read; both set to different caps is an error
// naming both, and writes nothing.
func TestTheRateCapIsReadUnderBothNames(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (config.Config, error) {
		env["TEMPORAL_CONFIG_FILE"] = "/nonexistent"
		return config.Load(lookup(env))
	}
	for _, tc := range []struct {
		env  map[string]string
		want float64
	}{
		{map[string]string{"SHIPNOTIFY_WORKER_SENDS_PER_SECOND": "5"}, 5},
		{map[string]string{"SHIPNOTIFY_WORKER_ACTIVITIES_PER_SECOND": "7"}, 7},
		{map[string]string{"SHIPNOTIFY_WORKER_SENDS_PER_SECOND": "2.5", "SHIPNOTIFY_WORKER_ACTIVITIES_PER_SECOND": "2.5"}, 2.5},
		{map[string]string{"SHIPNOTIFY_WORKER_SENDS_PER_SECOND": "3", "SHIPNOTIFY_WORKER_ACTIVITIES_PER_SECOND": ""}, 3},
	} {
		c, err := load(tc.env)
		require.NoError(t, err, tc.env)
		require.Equal(t, tc.want, c.WorkerSendsPerSecond, tc.env)
	}
	_, err := load(map[string]string{"SHIPNOTIFY_WORKER_SENDS_PER_SECOND": "5", "SHIPNOTIFY_WORKER_ACTIVITIES_PER_SECOND": "7"})
	require.ErrorContains(t, err, "SHIPNOTIFY_WORKER_SENDS_PER_SECOND")
	require.ErrorContains(t, err, "SHIPNOTIFY_WORKER_ACTIVITIES_PER_SECOND")
	require.ErrorContains(t, err, "different")
}

// The mail API URL carries the API key, so plain http goes to loopback only.
func TestMailAPIOverPlainHTTPOnlyToLoopback(t *testing.T) {
	t.Parallel()
	load := func(url string) error {
		_, err := config.Load(lookup(map[string]string{"SENDGRID_BASE_URL": url, "TEMPORAL_CONFIG_FILE": "/nonexistent"}))
		return err
	}
	for _, url := range []string{"http://api.sendgrid.com", "http://10.0.0.5:8080", "http://sink.internal:9000/v3",
		"http://[fd00::1]:8080", "http://localhost.evil.example", "http://127.0.0.1.nip.io"} {
		err := load(url)
		require.ErrorContains(t, err, "SENDGRID_BASE_URL", url)
		require.ErrorContains(t, err, "loopback", url)
	}
	for _, url := range []string{"https://api.sendgrid.com", "https://mail.internal:8443", "http://127.0.0.1:8025",
		"http://127.3.4.5", "http://localhost:8025", "http://[::1]:8025"} {
		require.NoError(t, load(url), url)
	}
}

// `shipnotify config` shows values but never a secret: a secret is only
// set or unset; a database URL keeps its user, host and database, and
// loses its password and every *password* parameter.
func TestEffectiveRedactsSecrets(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL": "postgres://app:hunter2@db.internal:5432/shipnotify?sslmode=require&sslpassword=keypass&Password=again&options=-c%20password%3Dthird",
		// A '#' in the password cuts the URL there: its rest is no host.
		"SHIPNOTIFY_MIGRATE_DATABASE_URL": "postgres://app:9999#x@db/x",
		"SENDGRID_API_KEY":                "SG.very-secret",
		"SHIPNOTIFY_CODEC_KEYS":           "k1:c2VjcmV0",
		"TEMPORAL_API_KEY":                "tmprl-secret",
		"SHIPNOTIFY_LOG_LEVEL":            "debug",
	}
	got := map[string]config.Setting{}
	for _, s := range config.Effective(lookup(env)) {
		got[s.Name] = s
	}
	require.Len(t, got, len(config.Variables))
	require.Equal(t, "postgres://app:xxxxx@db.internal:5432/shipnotify?Password=xxxxx&options=xxxxx&sslmode=require&sslpassword=xxxxx", got["DATABASE_URL"].Value)
	require.Equal(t, config.SecretSet, got["SHIPNOTIFY_MIGRATE_DATABASE_URL"].Value)
	for _, name := range []string{"SENDGRID_API_KEY", "SHIPNOTIFY_CODEC_KEYS", "TEMPORAL_API_KEY"} {
		require.Equal(t, config.SecretSet, got[name].Value, name)
		require.Equal(t, "environment", got[name].Source)
	}
	require.Equal(t, "debug", got["SHIPNOTIFY_LOG_LEVEL"].Value)
	require.Equal(t, "default", got["SHIPNOTIFY_TASK_QUEUE"].Source)
	require.Equal(t, "unset", got["SHIPNOTIFY_CODEC_SERVER_TOKEN"].Source)
	require.Equal(t, config.SecretUnset, got["SHIPNOTIFY_CODEC_SERVER_TOKEN"].Value)
	for _, s := range got {
		for _, secret := range []string{"hunter2", "keypass", "again", "third", "9999", "very-secret", "c2VjcmV0", "tmprl-secret"} {
			require.NotContains(t, s.Value, secret)
		}
	}
}

// Secrets that look like URLs are still only "(set)". A codec key's
// base64 starts with "//" for about 1 key in 4,096 (its first 12 bits all
// ones); "id://…" then parses as a URL with a scheme and a host, and a
// redaction that keeps URLs printed the key whole. A database URL that
// does not parse as postgres:// is not printed either.
func TestEffectiveNeverPrintsASecretThatLooksLikeAURL(t *testing.T) {
	t.Parallel()
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i*37 + 11)
	}
	secret[0], secret[1] = 0xff, 0xf3
	b64 := base64.StdEncoding.EncodeToString(secret)
	require.True(t, strings.HasPrefix(b64, "//"), b64)
	key := "k1:" + b64
	keys, err := codec.ParseKeys(strings.NewReader(key))
	require.NoError(t, err, "a valid key")
	require.Equal(t, secret, keys[0].Secret)

	for name, value := range map[string]string{
		"SHIPNOTIFY_CODEC_KEYS":         key,
		"SENDGRID_API_KEY":              "https://user:pass@sendgrid.example/SG.x",
		"SHIPNOTIFY_CODEC_SERVER_TOKEN": "//token.example/abc",
		"TEMPORAL_TLS_CLIENT_KEY_DATA":  "k://-----BEGIN PRIVATE KEY-----",
		"DATABASE_URL":                  "host=db.internal user=app password=hunter2 dbname=x",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var printed config.Setting
			for _, s := range config.Effective(lookup(map[string]string{name: value})) {
				if s.Name == name {
					printed = s
				}
			}
			require.Equal(t, config.SecretSet, printed.Value)
		})
	}
}

// Every variable holding a database URL is marked as one, so its password
// is masked.
func TestDatabaseURLVariablesAreMarked(t *testing.T) {
	t.Parallel()
	for _, v := range config.Variables {
		if strings.Contains(v.Name, "DATABASE") && strings.HasSuffix(v.Name, "_URL") {
			require.True(t, v.DatabaseURL && v.Secret, v.Name)
		}
	}
}

// The decision links need a public base URL and a key; they point at the
// console over https, or plain http to loopback only, and the key is a
// secret `shipnotify config` never prints.
func TestLinkSettings(t *testing.T) {
	t.Parallel()
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	load := func(env map[string]string) (config.Config, error) {
		env["TEMPORAL_CONFIG_FILE"] = "/nonexistent"
		return config.Load(lookup(env))
	}
	c, err := load(map[string]string{})
	require.NoError(t, err)
	require.Nil(t, c.Links(time.Now), "no key and no URL: no links")
	require.Equal(t, 72*time.Hour, c.LinkTTL)
	require.ErrorContains(t, c.RequireConsole(), "SHIPNOTIFY_LINK_KEY")

	c, err = load(map[string]string{"SHIPNOTIFY_LINK_KEY": key})
	require.NoError(t, err)
	require.Nil(t, c.Links(time.Now), "a key without a public URL makes no links")

	c, err = load(map[string]string{"SHIPNOTIFY_LINK_KEY": key, "SHIPNOTIFY_PUBLIC_URL": "https://ops.example.com/", "SHIPNOTIFY_LINK_TTL": "24h"})
	require.NoError(t, err)
	s := c.Links(time.Now)
	require.NotNil(t, s)
	approve, _, expires := s.DecisionLinks("SHP-1/window-1/ops")
	require.Contains(t, approve, "https://ops.example.com/console/link/")
	require.WithinDuration(t, time.Now().Add(24*time.Hour), expires, time.Minute)

	for _, raw := range []string{"http://console.example.com", "http://10.0.0.5:8080", "https://u:p@console.example.com",
		"https://console.example.com/?next=x", "console.example.com", "https://console.example.com/#top", "https://console.example.com/shipnotify"} {
		_, err := load(map[string]string{"SHIPNOTIFY_PUBLIC_URL": raw})
		require.ErrorContains(t, err, "SHIPNOTIFY_PUBLIC_URL", raw)
	}
	for _, raw := range []string{"https://console.example.com", "http://127.0.0.1:8080", "http://localhost:8080/"} {
		_, err := load(map[string]string{"SHIPNOTIFY_PUBLIC_URL": raw})
		require.NoError(t, err, raw)
	}

	got := map[string]config.Setting{}
	for _, s := range config.Effective(lookup(map[string]string{"SHIPNOTIFY_LINK_KEY": key})) {
		got[s.Name] = s
	}
	require.Equal(t, config.SecretSet, got["SHIPNOTIFY_LINK_KEY"].Value)
}

// The console signs sessions with a key only serve holds: required beside
// the link key, refused when it shares a key with it (the worker holds
// those), and refused by the worker, which must not hold it; a secret.
func TestSessionKeyIsServesOwn(t *testing.T) {
	t.Parallel()
	link := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	session := base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	load := func(env map[string]string) (config.Config, error) {
		env["TEMPORAL_CONFIG_FILE"] = "/nonexistent"
		return config.Load(lookup(env))
	}
	c, err := load(map[string]string{"SHIPNOTIFY_LINK_KEY": link})
	require.NoError(t, err)
	require.ErrorContains(t, c.RequireConsole(), "SHIPNOTIFY_SESSION_KEY")
	require.NoError(t, c.RefuseSessionKey())

	for _, same := range []string{link, session + "," + link} {
		_, err = load(map[string]string{"SHIPNOTIFY_LINK_KEY": link, "SHIPNOTIFY_SESSION_KEY": same})
		require.ErrorContains(t, err, "SHIPNOTIFY_SESSION_KEY", same)
		require.ErrorContains(t, err, "SHIPNOTIFY_LINK_KEY", same)
	}

	c, err = load(map[string]string{"SHIPNOTIFY_LINK_KEY": link, "SHIPNOTIFY_SESSION_KEY": session})
	require.NoError(t, err)
	require.NoError(t, c.RequireConsole())
	require.ErrorContains(t, c.RefuseSessionKey(), "SHIPNOTIFY_SESSION_KEY")

	c, err = load(map[string]string{"SHIPNOTIFY_SESSION_KEY": session})
	require.NoError(t, err)
	require.ErrorContains(t, c.RequireConsole(), "SHIPNOTIFY_LINK_KEY")

	got := map[string]config.Setting{}
	for _, s := range config.Effective(lookup(map[string]string{"SHIPNOTIFY_SESSION_KEY": session})) {
		got[s.Name] = s
	}
	require.Equal(t, config.SecretSet, got["SHIPNOTIFY_SESSION_KEY"].Value)
}

// SHIPNOTIFY_TRUSTED_PROXIES names the proxies whose X-Forwarded-For is
// believed: unset, none is; a value that is not addresses and prefixes is
// refused, naming the variable and the entry.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (config.Config, error) {
		env["TEMPORAL_CONFIG_FILE"] = "/nonexistent"
		return config.Load(lookup(env))
	}
	c, err := load(map[string]string{})
	require.NoError(t, err)
	require.False(t, c.TrustedProxies.Trusts(netip.MustParseAddr("127.0.0.1")), "unset: no proxy is trusted")

	c, err = load(map[string]string{"SHIPNOTIFY_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1"})
	require.NoError(t, err)
	require.True(t, c.TrustedProxies.Trusts(netip.MustParseAddr("10.20.30.40")))
	require.True(t, c.TrustedProxies.Trusts(netip.MustParseAddr("127.0.0.1")))
	require.False(t, c.TrustedProxies.Trusts(netip.MustParseAddr("127.0.0.2")))

	for _, bad := range []string{"10.0.0.0/8,proxy.internal", "10.0.0.1/8", "10.0.0.0/8,"} {
		_, err := load(map[string]string{"SHIPNOTIFY_TRUSTED_PROXIES": bad})
		require.ErrorContains(t, err, "SHIPNOTIFY_TRUSTED_PROXIES: entry", bad)
	}
}
