package deploy_test

import (
	"context"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/budget"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/internal/testenv"
	shipworker "github.com/shipnotify/shipnotify/worker"
)

// composeSecrets are the values docker-compose.yml requires, each one
// distinct, so a test can find where each one ends up.
var composeSecrets = map[string]string{
	"SHIPNOTIFY_CODEC_KEYS":         "k1:" + strings.Repeat("A", 43) + "=",
	"SENDGRID_API_KEY":              "SG.sendgrid-secret",
	"MIRROR_SUPERUSER_PASSWORD":     "superuser-secret",
	"MIRROR_OWNER_PASSWORD":         "owner-secret",
	"MIRROR_APP_PASSWORD":           "app-secret",
	"TEMPORAL_DB_PASSWORD":          "temporal-db-secret",
	"SHIPNOTIFY_CODEC_SERVER_TOKEN": "codec-token-secret",
	"SHIPNOTIFY_API_KEYS":           "tracker schedule,read " + strings.Repeat("ab", 32),
	"SHIPNOTIFY_LINK_KEY":           "bGluay1rZXktc2VjcmV0LWxpbmsta2V5LXNlY3JldC0xMjM0NQ==",
	"SHIPNOTIFY_SESSION_KEY":        "c2Vzc2lvbi1rZXktc2VjcmV0LXNlc3Npb24ta2V5LXNlY3JldA==",
}

// The services that may see each secret, decided from what each command
// reads: the worker sends mail (SendGrid), seals and opens payloads and
// webhook secrets (codec keys) and runs on the mirror as the app; schedule
// does the same but sends nothing; migrate alone runs as the owner; setup
// only registers search attributes (no payloads, no database); the codec
// server only seals and opens.
var secretUsers = map[string][]string{
	"SHIPNOTIFY_CODEC_KEYS":         {"codec-server", "schedule", "serve", "worker"},
	"SENDGRID_API_KEY":              {"worker"},
	"MIRROR_SUPERUSER_PASSWORD":     {"postgres"},
	"MIRROR_OWNER_PASSWORD":         {"migrate", "postgres"},
	"MIRROR_APP_PASSWORD":           {"postgres", "schedule", "serve", "worker"},
	"TEMPORAL_DB_PASSWORD":          {"temporal", "temporal-postgres", "temporal-schema"},
	"SHIPNOTIFY_CODEC_SERVER_TOKEN": {"codec-server"},
	"SHIPNOTIFY_API_KEYS":           {"serve"},
	"SHIPNOTIFY_LINK_KEY":           {"serve", "worker"},
	"SHIPNOTIFY_SESSION_KEY":        {"serve"},
}

// shipnotifyServices run the shipnotify image.
var shipnotifyServices = []string{"migrate", "setup", "worker", "serve", "codec-server", "schedule"}

func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	abs, err := filepath.Abs("../docker-compose.yml")
	require.NoError(t, err)
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: env,
	}, func(o *loader.Options) {
		o.SetProjectName("shipnotify", true)
		o.Profiles = []string{"tools"} // the schedule service too
	})
}

// compose loads docker-compose.yml with every secret set, and extra.
func compose(t *testing.T, extra ...string) *types.Project {
	t.Helper()
	env := maps.Clone(composeSecrets)
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	p, err := loadCompose(t, env)
	require.NoError(t, err)
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	require.NoError(t, err, name)
	return s
}

// envOf is the value the service sets for key; it must set one.
func envOf(t *testing.T, s types.ServiceConfig, key string) string {
	t.Helper()
	v := s.Environment[key]
	require.NotNil(t, v, "%s sets %s", s.Name, key)
	return *v
}

// The compose file loads with the compose-spec loader (what `docker compose
// config` uses), pins its images, checks health, orders its start (one-shot
// services must have succeeded), and its shipnotify services set only
// documented variables.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	for name := range composeSecrets {
		env := maps.Clone(composeSecrets)
		delete(env, name)
		_, err := loadCompose(t, env)
		require.ErrorContains(t, err, name, "%s is required, not defaulted", name)
	}

	p := compose(t)
	for _, name := range []string{"postgres", "temporal-postgres", "temporal-schema", "temporal", "temporal-namespace",
		"temporal-ui", "migrate", "setup", "worker", "codec-server", "schedule"} {
		service(t, p, name)
	}
	for _, s := range p.Services {
		if s.Image != "" {
			require.Regexp(t, `^[^:]+:[0-9][^:]*$`, s.Image, "%s: images are pinned to a version", s.Name)
		} else {
			require.NotNil(t, s.Build, "%s builds from the repository's Dockerfile", s.Name)
		}
	}
	for _, name := range []string{"postgres", "temporal-postgres", "temporal", "worker"} {
		require.NotNil(t, service(t, p, name).HealthCheck, "%s has a healthcheck", name)
	}
	worker := service(t, p, "worker")
	require.NotNil(t, worker.StopGracePeriod, "the worker gets a stop grace period")
	require.Greater(t, time.Duration(*worker.StopGracePeriod), shipworker.StopTimeout,
		"a deploy lets in-flight sends finish: the grace period outlasts the worker's stop timeout")
	serve := service(t, p, "serve")
	require.NotNil(t, serve.StopGracePeriod, "serve gets a stop grace period")
	require.Greater(t, time.Duration(*serve.StopGracePeriod), budget.APIRequest+budget.ServeShutdownMargin,
		"a deploy lets requests in flight finish: the grace period outlasts a request and serve's drain")

	for _, dep := range []struct{ service, on, condition string }{
		{"temporal-schema", "temporal-postgres", "service_healthy"},
		{"temporal", "temporal-schema", "service_completed_successfully"},
		{"temporal-namespace", "temporal", "service_healthy"},
		{"temporal-ui", "temporal-namespace", "service_completed_successfully"},
		{"setup", "temporal-namespace", "service_completed_successfully"},
		{"migrate", "postgres", "service_healthy"},
		{"worker", "migrate", "service_completed_successfully"},
		{"worker", "setup", "service_completed_successfully"},
		{"schedule", "migrate", "service_completed_successfully"},
		{"schedule", "setup", "service_completed_successfully"},
	} {
		s := service(t, p, dep.service)
		require.Contains(t, s.DependsOn, dep.on, "%s waits for %s", dep.service, dep.on)
		require.Equal(t, dep.condition, s.DependsOn[dep.on].Condition, "%s waits for %s", dep.service, dep.on)
	}

	// The server gets the dynamic config file `make test-engine` runs with.
	temporal := service(t, p, "temporal")
	mounted := map[string]string{}
	for _, v := range temporal.Volumes {
		mounted[v.Target] = v.Source
	}
	path := envOf(t, temporal, "DYNAMIC_CONFIG_FILE_PATH")
	abs, err := filepath.Abs("temporal/dynamicconfig.yaml")
	require.NoError(t, err)
	require.Equal(t, abs, mounted[path], "the server reads deploy/temporal/dynamicconfig.yaml")
	for _, one := range []struct{ service, script string }{
		{"temporal-schema", "temporal/schema.sh"}, {"temporal-namespace", "temporal/namespace.sh"},
		{"postgres", "postgres/init-roles.sh"},
	} {
		abs, err := filepath.Abs(one.script)
		require.NoError(t, err)
		var sources []string
		for _, v := range service(t, p, one.service).Volumes {
			sources = append(sources, v.Source)
		}
		require.Contains(t, sources, abs, "%s runs deploy/%s", one.service, one.script)
	}

	// The shipnotify services set only variables the configuration table
	// documents, and every one the worker needs.
	documented := map[string]bool{}
	for _, v := range config.Variables {
		documented[v.Name] = true
	}
	for _, name := range shipnotifyServices {
		for k := range service(t, p, name).Environment {
			require.True(t, documented[k], "%s sets %s, which the configuration table does not document", name, k)
		}
	}
	for _, k := range []string{"TEMPORAL_ADDRESS", "DATABASE_URL", "SENDGRID_API_KEY", "SHIPNOTIFY_CODEC_KEYS"} {
		require.Contains(t, worker.Environment, k)
	}
	require.Contains(t, service(t, p, "migrate").Environment, "SHIPNOTIFY_MIGRATE_DATABASE_URL")
}

// The Temporal images are the version `make test-engine` builds and tests.
func TestComposeTemporalVersionIsTheTestedOne(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("temporal/VERSION")
	require.NoError(t, err)
	want := strings.TrimSpace(string(b))
	require.Regexp(t, `^\d+\.\d+\.\d+$`, want)
	p := compose(t)
	tags := map[string][]string{}
	for _, s := range p.Services {
		repo, tag, _ := strings.Cut(s.Image, ":")
		tags[repo] = append(tags[repo], tag)
	}
	require.Equal(t, []string{want}, tags["temporalio/server"])
	require.Len(t, tags["temporalio/admin-tools"], 2, "schema and namespace")
	for _, tag := range tags["temporalio/admin-tools"] {
		// admin-tools tags read SERVER-tctl-X-cli-Y.
		version, _, _ := strings.Cut(tag, "-")
		require.Equal(t, want, version, "admin-tools %s is built for the server version", tag)
	}
	require.Empty(t, tags["temporalio/auto-setup"], "auto-setup is deprecated and no longer built")
}

// Nothing listens beyond loopback unless asked: every published port binds
// 127.0.0.1, and the Web UI is read-only unless the operator turns its
// write actions on.
func TestComposeIsClosedByDefault(t *testing.T) {
	t.Parallel()
	p := compose(t)
	published := map[string]bool{}
	for _, s := range p.Services {
		for _, port := range s.Ports {
			require.Equal(t, "127.0.0.1", port.HostIP, "%s publishes %s on every interface", s.Name, port.Published)
			published[s.Name] = true
		}
	}
	for _, name := range []string{"temporal", "temporal-ui", "codec-server", "worker"} {
		require.True(t, published[name], "%s is reachable from the host", name)
	}
	ui := service(t, p, "temporal-ui")
	require.Equal(t, "true", envOf(t, ui, "TEMPORAL_DISABLE_WRITE_ACTIONS"))

	p = compose(t, "TEMPORAL_UI_DISABLE_WRITE_ACTIONS", "false")
	ui = service(t, p, "temporal-ui")
	require.Equal(t, "false", envOf(t, ui, "TEMPORAL_DISABLE_WRITE_ACTIONS"), "the README's switch turns them on")
}

// Each secret reaches only the services that use it (found by value, so a
// shared anchor or a URL that embeds a password counts too).
func TestComposePassesEachSecretOnlyWhereUsed(t *testing.T) {
	t.Parallel()
	p := compose(t)
	for name, value := range composeSecrets {
		var holders []string
		for _, s := range p.Services {
			if serviceHolds(s, value) {
				holders = append(holders, s.Name)
			}
		}
		slices.Sort(holders)
		require.Equal(t, secretUsers[name], holders, "services holding %s", name)
	}
	// Every secret of the configuration table that compose sets is listed
	// above.
	for _, v := range config.Variables {
		if !v.Secret {
			continue
		}
		for _, name := range shipnotifyServices {
			val := service(t, p, name).Environment[v.Name]
			if val == nil || *val == "" {
				continue
			}
			require.True(t, slices.ContainsFunc(slices.Collect(maps.Values(composeSecrets)), func(secret string) bool {
				return strings.Contains(*val, secret)
			}), "%s sets the secret %s from a value the test does not follow", name, v.Name)
		}
	}
}

// serviceHolds reports whether value appears in the service's environment,
// command or entrypoint.
func serviceHolds(s types.ServiceConfig, value string) bool {
	var all []string
	for k, v := range s.Environment {
		if v != nil {
			all = append(all, k+"="+*v)
		}
	}
	all = append(all, s.Command...)
	all = append(all, s.Entrypoint...)
	for _, a := range all {
		if strings.Contains(a, value) {
			return true
		}
	}
	return false
}

// The mirror's init script, run on a real PostgreSQL as the postgres image
// runs it, makes the roles the compose services connect as: migrate, as
// shipnotify_owner with the URL compose gives it, owns every table; the
// worker's URL (shipnotify_app) reads and writes them but cannot create a
// table or truncate the audit trail.
func TestComposeMirrorRoles(t *testing.T) {
	t.Parallel()
	pg := testenv.StartCluster(t)
	p := compose(t)
	u, err := url.Parse(pg.URL)
	require.NoError(t, err)
	port := u.Port()
	local := func(url string) string { return strings.Replace(url, "@postgres:5432/", "@127.0.0.1:"+port+"/", 1) }

	init := exec.Command("sh", "init-roles.sh")
	init.Dir = "postgres"
	init.Env = append(os.Environ(), "PGHOST=127.0.0.1", "PGPORT="+port, "POSTGRES_USER=postgres")
	for k, v := range service(t, p, "postgres").Environment {
		init.Env = append(init.Env, k+"="+*v)
	}
	out, err := init.CombinedOutput()
	require.NoError(t, err, "%s", out)

	migrate := service(t, p, "migrate")
	cmd := exec.Command(testenv.Binary(t), migrate.Command...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"SHIPNOTIFY_MIGRATE_DATABASE_URL=" + local(envOf(t, migrate, "SHIPNOTIFY_MIGRATE_DATABASE_URL"))}
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	ctx := context.Background()
	admin, err := pgx.Connect(ctx, strings.Replace(pg.URL, "/postgres?", "/shipnotify?", 1))
	require.NoError(t, err)
	defer admin.Close(ctx)
	var tables, owned int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE tableowner = 'shipnotify_owner')
		FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables, &owned))
	require.Positive(t, tables)
	require.Equal(t, tables, owned, "migrate ran as shipnotify_owner")
	var dbOwner string
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'shipnotify'`).Scan(&dbOwner))
	require.Equal(t, "shipnotify_owner", dbOwner)

	app, err := pgx.Connect(ctx, local(envOf(t, service(t, p, "worker"), "DATABASE_URL")))
	require.NoError(t, err)
	defer app.Close(ctx)
	var user string
	require.NoError(t, app.QueryRow(ctx, `SELECT current_user`).Scan(&user))
	require.Equal(t, "shipnotify_app", user)
	_, err = app.Exec(ctx, `INSERT INTO updates (shipment_id, update_id, kind, subject, body)
		VALUES ('SHP-1', 'u-1', 'delivery_window', 's', 't')`)
	require.NoError(t, err, "the app writes the mirror")
	for _, stmt := range []string{`TRUNCATE reminder_events`, `CREATE TABLE mine (id int)`, `DROP TABLE deliveries`} {
		_, err := app.Exec(ctx, stmt)
		require.Error(t, err, stmt)
		require.Regexp(t, `permission denied|must be owner`, err.Error(), stmt)
	}
}
