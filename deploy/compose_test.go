package deploy_test

import (
	"context"
	"encoding/base64"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
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
	"SHIPNOTIFY_ID_KEY":             "aWQta2V5LXNlY3JldC1pZC1rZXktc2VjcmV0LWlkLWtleS0x",
	"SHIPNOTIFY_CONSOLE_KEYS":       "admin approve " + strings.Repeat("cd", 32),
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
	"SHIPNOTIFY_ID_KEY":             {"serve"},
	"SHIPNOTIFY_CONSOLE_KEYS":       {"serve"},
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
	for _, name := range []string{"postgres", "temporal-postgres", "temporal", "worker", "serve", "codec-server", "temporal-ui"} {
		require.NotNil(t, service(t, p, name).HealthCheck, "%s has a healthcheck", name)
	}
	// Every long-running service comes back after a crash or a reboot; the
	// one-shot ones run to completion and stop.
	for _, s := range p.Services {
		oneShot := slices.Contains([]string{"temporal-schema", "temporal-namespace", "migrate", "setup", "schedule"}, s.Name)
		if oneShot {
			require.Empty(t, s.Restart, "%s runs once", s.Name)
		} else {
			require.Equal(t, "unless-stopped", s.Restart, "%s restarts", s.Name)
		}
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
			if serviceHolds(p, s, composeSecrets, value) {
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
// command or entrypoint, or in a secret it mounts from env.
func serviceHolds(p *types.Project, s types.ServiceConfig, env map[string]string, value string) bool {
	var all []string
	for _, ref := range s.Secrets {
		if secret, ok := p.Secrets[ref.Source]; ok && secret.Environment != "" {
			all = append(all, env[secret.Environment])
		}
	}
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

// headerCommands are the shell lines docker-compose.yml's header tells a
// user to run before `docker compose up`, continuation lines joined.
func headerCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var cmds []string
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			break // the header ends at the first line that is not a comment
		}
		text, ok := strings.CutPrefix(line, "#   ")
		if !ok {
			continue
		}
		text = strings.TrimSpace(text)
		if cur != "" {
			text = cur + " " + text
			cur = ""
		}
		if strings.HasPrefix(text, "#") {
			continue // a comment among the commands
		}
		if strings.HasSuffix(text, "\\") {
			cur = strings.TrimSuffix(text, "\\")
			continue
		}
		if strings.HasPrefix(text, "docker compose up") {
			return cmds
		}
		cmds = append(cmds, text)
	}
	t.Fatal("docker-compose.yml's header has no `docker compose up` line")
	return nil
}

// headerEnv runs the header's commands, as written, in a shell that starts
// with nothing but PATH (`go run ./cmd/shipnotify` is the test's build of
// it), and returns exactly the variables they export, and what they print.
func headerEnv(t *testing.T) (env map[string]string, printed string) {
	t.Helper()
	cmds := headerCommands(t)
	require.NotEmpty(t, cmds)
	bin := testenv.Binary(t)
	script := strings.ReplaceAll(strings.Join(cmds, "\n"), "go run ./cmd/shipnotify", bin) + "\nenv -0 > \"$HEADER_ENV_OUT\"\n"
	out := filepath.Join(t.TempDir(), "env")
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = ".."
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HEADER_ENV_OUT=" + out}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "the header's commands: %s", stderr.String())
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	env = map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || slices.Contains([]string{"PATH", "PWD", "OLDPWD", "SHLVL", "_", "HEADER_ENV_OUT"}, k) {
			continue
		}
		env[k] = v
	}
	return env, stderr.String()
}

// requiredVariables are the variables docker-compose.yml refuses to start
// without (${VAR:?…}) and those its secrets read.
func requiredVariables(t *testing.T, p *types.Project) []string {
	t.Helper()
	b, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var names []string
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+):\?`).FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1])
	}
	for _, s := range p.Secrets {
		if s.Environment != "" {
			names = append(names, s.Environment)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Following the header to the letter is enough: its commands export every
// variable compose requires (each one docs/deploying.md lists), and the
// compose-spec loader, as `docker compose config` runs it, takes the file
// with exactly what they export.
func TestComposeHeaderInstructionsStartIt(t *testing.T) {
	t.Parallel()
	env, _ := headerEnv(t)
	p, err := loadCompose(t, maps.Clone(env)) // the loader adds to what it is given
	require.NoError(t, err, "the file loads with the header's variables alone")
	required := requiredVariables(t, p)
	require.ElementsMatch(t, slices.Collect(maps.Keys(composeSecrets)), required,
		"the test's own list of required variables is the file's")
	deploying, err := os.ReadFile("../docs/deploying.md")
	require.NoError(t, err)
	for _, name := range required {
		require.NotEmpty(t, env[name], "the header exports %s", name)
		require.Contains(t, string(deploying), "`"+name+"`", "docs/deploying.md lists %s", name)
	}
	for name := range env {
		require.Contains(t, required, name, "the header exports %s, which nothing requires", name)
	}
	header, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	require.Contains(t, string(header[:strings.Index(string(header), "\nname:")]), "docs/deploying.md", "the header points to the deployment guide")
}

// What a user reaches is wired, with what the header's commands make: the
// console key the header prints logs in (its hash is in the file serve
// reads, mounted where serve's SHIPNOTIFY_CONSOLE_KEYS_FILE points), and
// the Web UI decodes: its codec endpoint is the codec server as the host
// publishes it, the UI's origin is one the codec server allows, and a
// browser that signed in with the header's token gets decoded payloads
// from the codec server compose runs (its handler, with compose's
// arguments and environment), with the CORS grant the UI needs.
func TestComposeWiresWhatUsersReach(t *testing.T) {
	t.Parallel()
	env, printed := headerEnv(t)
	p, err := loadCompose(t, maps.Clone(env))
	require.NoError(t, err)

	// The console.
	serve := service(t, p, "serve")
	path := envOf(t, serve, "SHIPNOTIFY_CONSOLE_KEYS_FILE")
	var content string
	for _, ref := range serve.Secrets {
		target := ref.Target
		if target == "" {
			target = ref.Source
		}
		if !strings.HasPrefix(target, "/") {
			target = "/run/secrets/" + target
		}
		if target == path {
			secret, ok := p.Secrets[ref.Source]
			require.True(t, ok, "serve mounts the secret %s, which the file defines", ref.Source)
			require.NotEmpty(t, secret.Environment, "the console keys come from a variable the header sets")
			content = env[secret.Environment]
		}
	}
	require.NotEmpty(t, content, "serve's SHIPNOTIFY_CONSOLE_KEYS_FILE %s is a file compose mounts from what the header sets", path)
	keys, err := api.ParseKeys(strings.NewReader(content))
	require.NoError(t, err)
	var loginKeys int
	for _, printedKey := range regexp.MustCompile(`(?m)^snk_\S+$`).FindAllString(printed, -1) {
		for _, k := range keys {
			if k.Hash == api.HashKey(printedKey) && k.Allows(api.ScopeApprove) {
				loginKeys++
			}
		}
	}
	require.Equal(t, 1, loginKeys, "the key the header prints logs in to the console")
	// The tracker's key reaches the API the same way.
	apiKeys, err := api.ParseKeys(strings.NewReader(strings.ReplaceAll(envOf(t, serve, "SHIPNOTIFY_API_KEYS"), ";", "\n")))
	require.NoError(t, err)
	require.NotEmpty(t, apiKeys)

	// The Web UI's codec endpoint is the codec server as published.
	ui := service(t, p, "temporal-ui")
	codecServer := service(t, p, "codec-server")
	endpoint, err := url.Parse(envOf(t, ui, "TEMPORAL_CODEC_ENDPOINT"))
	require.NoError(t, err)
	require.Equal(t, "true", envOf(t, ui, "TEMPORAL_CODEC_INCLUDE_CREDENTIALS"), "the UI sends the browser's cookie to the codec server")
	listen := flagOf(t, codecServer.Command, "--listen")
	_, listenPort, err := net.SplitHostPort(listen)
	require.NoError(t, err)
	require.Contains(t, []string{"localhost", "127.0.0.1"}, endpoint.Hostname())
	require.Equal(t, publishedPort(t, codecServer, listenPort), endpoint.Port(), "the endpoint is the port the host publishes the codec server on")
	uiOrigin := "http://localhost:" + publishedPort(t, ui, "8080")
	origins := strings.Split(flagOf(t, codecServer.Command, "--origin"), ",")
	require.Contains(t, origins, uiOrigin, "the codec server lets the Web UI's origin call it")
	for _, s := range p.Services {
		for _, port := range s.Ports {
			if s.Name != "codec-server" {
				require.NotEqual(t, endpoint.Port(), port.Published, "%s publishes the codec server's port", s.Name)
			}
		}
	}

	// The codec server compose runs decodes for a browser signed in with
	// the header's token, as the UI asks.
	keysOf, err := codec.ParseKeys(strings.NewReader(envOf(t, codecServer, "SHIPNOTIFY_CODEC_KEYS")))
	require.NoError(t, err)
	c, err := codec.New(keysOf, codec.Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler(codec.ServerOptions{Origins: origins, Token: envOf(t, codecServer, "SHIPNOTIFY_CODEC_SERVER_TOKEN")}))
	defer srv.Close()
	resp, err := http.PostForm(srv.URL+codec.LoginPath, url.Values{"token": {env["SHIPNOTIFY_CODEC_SERVER_TOKEN"]}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the header's token signs in")
	require.NotEmpty(t, resp.Cookies())
	sealed, err := c.Encode(mustPayloads(t, "a subscriber's address"))
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/decode", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Host = endpoint.Host
	req.Header.Set("Origin", uiOrigin)
	req.Header.Set("Content-Type", "application/json")
	for _, ck := range resp.Cookies() {
		req.AddCookie(ck)
	}
	decoded, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	out, _ := io.ReadAll(decoded.Body)
	decoded.Body.Close()
	require.Equal(t, http.StatusOK, decoded.StatusCode, "%s", out)
	require.Equal(t, uiOrigin, decoded.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", decoded.Header.Get("Access-Control-Allow-Credentials"))
	require.Contains(t, string(out), base64.StdEncoding.EncodeToString([]byte(`"a subscriber's address"`)))
}

func mustPayloads(t *testing.T, v any) []*commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return []*commonpb.Payload{p}
}

// flagOf is the value of a --flag VALUE pair in a command.
func flagOf(t *testing.T, cmd []string, flag string) string {
	t.Helper()
	i := slices.Index(cmd, flag)
	require.True(t, i >= 0 && i+1 < len(cmd), "%v has %s", cmd, flag)
	return cmd[i+1]
}

// publishedPort is the host port a service publishes its container port on.
func publishedPort(t *testing.T, s types.ServiceConfig, target string) string {
	t.Helper()
	for _, port := range s.Ports {
		if strconv.Itoa(int(port.Target)) == target {
			return port.Published
		}
	}
	t.Fatalf("%s publishes no port %s", s.Name, target)
	return ""
}

// The image compose builds starts from base images pinned to an exact
// version or a digest, never a tag that moves: the Go toolchain is go.mod's.
func TestDockerfilePinsItsBaseImages(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	mod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	require.NotNil(t, goVersion)
	var froms []string
	for _, m := range regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllSubmatch(b, -1) {
		froms = append(froms, string(m[1]))
	}
	require.NotEmpty(t, froms)
	for _, from := range froms {
		if strings.Contains(from, "@sha256:") {
			require.Regexp(t, `@sha256:[0-9a-f]{64}$`, from)
			continue
		}
		require.Regexp(t, `^golang:`+regexp.QuoteMeta(string(goVersion[1]))+`-`, from, "%s: an exact version, go.mod's", from)
	}
}

// The tenants' send windows reach the services that schedule (serve and
// schedule) only when asked: unset, their SHIPNOTIFY_SEND_WINDOWS_FILE is
// empty (no defaults) and no other service sets it; with
// SHIPNOTIFY_SEND_WINDOWS_DIR, it is the file send-windows of that
// directory, mounted read-only, and the example there (holidays from an
// .ics file beside it) reads as serve reads it when it starts.
func TestComposeMountsSendWindowsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	const variable = "SHIPNOTIFY_SEND_WINDOWS_FILE"
	schedulers := []string{"schedule", "serve"}
	p := compose(t)
	for _, s := range p.Services {
		if slices.Contains(schedulers, s.Name) {
			require.Empty(t, envOf(t, s, variable), "%s reads no send windows unless asked", s.Name)
		} else {
			require.NotContains(t, s.Environment, variable, "%s schedules nothing", s.Name)
		}
	}

	example, err := filepath.Abs("send-windows")
	require.NoError(t, err)
	p = compose(t, "SHIPNOTIFY_SEND_WINDOWS_DIR", "./deploy/send-windows")
	for _, name := range schedulers {
		s := service(t, p, name)
		file := envOf(t, s, variable)
		require.Equal(t, "send-windows", path.Base(file), name)
		var source string
		for _, v := range s.Volumes {
			if v.Target == path.Dir(file) {
				require.True(t, v.ReadOnly, "%s mounts the send windows read-only", name)
				source = v.Source
			}
		}
		require.Equal(t, example, source, "%s mounts the directory SHIPNOTIFY_SEND_WINDOWS_DIR names, relative to the file", name)
		windows, err := config.ReadSendWindows(filepath.Join(source, path.Base(file)), reminder.DefaultTenantName, time.Now())
		require.NoError(t, err, "the example reads as %s reads it", name)
		require.NotNil(t, windows[""].Window, "the default tenant's window")
		require.NotEmpty(t, windows["acme"].Holidays, "acme's holidays, from the .ics file beside the windows file")
	}
}
