// Package testenv connects tests to the real parts `make test` starts: a
// PostgreSQL database (TEST_DATABASE_URL) and a Temporal dev server
// (TEMPORAL_ADDRESS). Each test gets its own migrated schema and its own task
// queue and ids, so tests run in parallel and rerun on a persistent server.
// Without the variables a test skips, except under CI, where it fails loudly.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/migrations"
)

// need returns the variable's value, or ends the test: a skip on a developer
// machine, a failure under CI.
func need(t testing.TB, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v != "" {
		return v
	}
	Missing(t, key+" is not set; run the tests with `make test`, which starts Temporal and PostgreSQL")
	return ""
}

// SkipServersVariable, set to 1, skips the tests that need a server the
// environment lacks, so the server-free tests run alone
// (`SHIPNOTIFY_TEST_SKIP_SERVERS=1 go test ./...`). Without it such a test
// fails: a plain `go test ./...` never reports green for tests it did not
// run.
const SkipServersVariable = "SHIPNOTIFY_TEST_SKIP_SERVERS"

// Missing ends a test that needs something the environment lacks: skipped
// when the caller asked to skip (SkipServersVariable), failed otherwise.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(SkipServersVariable) == "1" {
		t.Skip(msg)
	}
	t.Fatal(msg + " (set " + SkipServersVariable + "=1 to skip the tests that need it)")
}

// DB is a test's private schema in the test database.
type DB struct {
	Pool   *pgxpool.Pool
	Schema string
	// URL reaches the same schema (search_path set), for commands under test.
	URL string
	// RuntimeURL, when set, reaches it as a member of shipnotify_runtime;
	// the stack's commands use it.
	RuntimeURL string
}

// Postgres returns a pool on a new schema with every migration applied; the
// schema is dropped when the test ends.
func Postgres(t testing.TB) DB {
	t.Helper()
	return PostgresAt(t, need(t, "TEST_DATABASE_URL"))
}

// PostgresAt is Postgres on the database at base.
func PostgresAt(t testing.TB, base string) DB {
	t.Helper()
	// Three minutes, not one: migration 00008 builds an index concurrently,
	// which waits for every transaction in the database to end, and the
	// faults tests freeze a process mid-transaction for up to 75 s.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admin, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatalf("connecting to TEST_DATABASE_URL: %v", err)
	}
	defer admin.Close()
	schema := "t_" + randomHex(6)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgxpool.New(ctx, base)
		if err != nil {
			return
		}
		defer admin.Close()
		_, _ = admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	})

	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parsing TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db := DB{Schema: schema, URL: u.String()}

	db.Pool, err = pgxpool.New(ctx, db.URL)
	if err != nil {
		t.Fatalf("connecting to test schema: %v", err)
	}
	t.Cleanup(db.Pool.Close)
	if err := migrations.Up(ctx, db.Pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("migrating test schema: %v", err)
	}
	return db
}

// TemporalAddress is the dev server's address.
func TemporalAddress(t testing.TB) string {
	t.Helper()
	return need(t, "TEMPORAL_ADDRESS")
}

// CodecKeys is the payload key set of the tests (SHIPNOTIFY_CODEC_KEYS form).
const CodecKeys = "test-2:hBDBAyrebMYrvKhyCyIEzNyePPGuSwMzZJI9xOzprUY=,test-1:O+dGDzZ7wX8RLbpIuzrpACiwCbJC8P0UQ5qpy1w+usU="

// Codec is the tests' payload codec.
func Codec(t testing.TB) *codec.Codec {
	t.Helper()
	keys, err := codec.ParseKeys(strings.NewReader(CodecKeys))
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.New(keys, codec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Temporal returns a client of the dev server that encrypts payloads as
// the product does, closed when the test ends. Its logs go to logs (nil:
// discarded).
func Temporal(t testing.TB, logs ...io.Writer) client.Client {
	t.Helper()
	return TemporalAt(t, TemporalAddress(t), logs...)
}

// TemporalAt is Temporal for the server at addr.
func TemporalAt(t testing.TB, addr string, logs ...io.Writer) client.Client {
	t.Helper()
	var w io.Writer = io.Discard
	if len(logs) > 0 && logs[0] != nil {
		w = logs[0]
	}
	cdc := Codec(t)
	c, err := client.Dial(client.Options{
		HostPort:         addr,
		Namespace:        "default",
		Logger:           tlog.NewStructuredLogger(slog.New(slog.NewJSONHandler(w, nil))),
		DataConverter:    cdc.DataConverter(),
		FailureConverter: cdc.FailureConverter(),
	})
	if err != nil {
		t.Fatalf("connecting to Temporal at %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9-]+`)

// ID returns an id unique to this test run, in the safe id charset, so a
// persistent dev server never sees the same workflow id twice.
func ID(t testing.TB, prefix string) string {
	name := unsafe.ReplaceAllString(t.Name(), "-")
	if len(name) > 30 {
		name = name[len(name)-30:]
	}
	return strings.Trim(fmt.Sprintf("%s-%s-%s", prefix, strings.Trim(name, "-"), randomHex(4)), "-")
}

// TaskQueue returns a task queue private to the test.
func TaskQueue(t testing.TB) string {
	return "test-" + ID(t, "tq")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RuntimeRole creates a login role that is a member of shipnotify_runtime
// (the role migrations grant the product's DML to) and returns a URL that
// reaches db's schema as it, as workers connect in production. The role is
// dropped when the test ends.
func RuntimeRole(t testing.TB, db DB) string {
	t.Helper()
	return memberOf(t, db, "shipnotify_runtime", "t_app_")
}

// PrunerRole is RuntimeRole for shipnotify_pruner, the role migrations
// grant prune's deletes to.
func PrunerRole(t testing.TB, db DB) string {
	t.Helper()
	return memberOf(t, db, "shipnotify_pruner", "t_prune_")
}

// memberOf creates a login role in group, dropped when the test ends, and
// returns a URL that reaches db's schema as it.
func memberOf(t testing.TB, db DB, group, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := prefix + randomHex(6)
	if _, err := db.Pool.Exec(ctx, "CREATE ROLE "+role+" LOGIN IN ROLE "+group); err != nil {
		t.Fatalf("creating a member of %s: %v", group, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.Pool.Exec(ctx, "DROP ROLE IF EXISTS "+role)
	})
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatalf("parsing the schema's URL: %v", err)
	}
	u.User = url.User(role)
	return u.String()
}

// ProductURL is the URL the product runs on: the runtime role's when the
// test made one, else the owner's.
func (db DB) ProductURL() string {
	if db.RuntimeURL != "" {
		return db.RuntimeURL
	}
	return db.URL
}

// Namespace registers a namespace of its own on the dev server, with none
// of our search attributes, and returns a client of it (payloads encrypted
// as the product's). It waits until the namespace answers: a new one
// takes a moment to reach every service. It is deleted when the test ends.
func Namespace(t testing.TB) (string, client.Client) {
	t.Helper()
	addr := TemporalAddress(t)
	ns := strings.ToLower(ID(t, "ns"))
	ctx := context.Background()
	admin := Temporal(t)
	_, err := admin.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	if err != nil {
		t.Fatalf("registering namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		_, _ = admin.OperatorService().DeleteNamespace(context.Background(), &operatorservice.DeleteNamespaceRequest{Namespace: ns})
	})
	cdc := Codec(t)
	c, err := client.Dial(client.Options{
		HostPort: addr, Namespace: ns,
		Logger:        tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		DataConverter: cdc.DataConverter(), FailureConverter: cdc.FailureConverter(),
	})
	if err != nil {
		t.Fatalf("connecting to Temporal at %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	// A count, not DescribeNamespace (which reads the database): it goes
	// through the frontend's namespace cache, as a start does.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: ns, Query: "WorkflowId = 'none'"})
		if err == nil {
			return ns, c
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s not usable in 30 s: %v", ns, err)
		}
		time.Sleep(200 * time.Millisecond) // polling the condition, not synchronising
	}
}

// WaitersBehind counts the sessions whose statement contains stmt and that
// wait on a lock held by holder's session (pg_blocking_pids). Tests run in
// parallel on one PostgreSQL, so a session of another test waiting on its
// own lock with the same statement must not count: a test that went on
// when any session waited would go on before its own write was held.
func (db *DB) WaitersBehind(ctx context.Context, holder pgx.Tx, stmt string) (int, error) {
	var pid int32
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return 0, err
	}
	var n int
	err := db.Pool.QueryRow(ctx, `
SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)) AND strpos(query, $2) > 0`,
		pid, stmt).Scan(&n)
	return n, err
}
