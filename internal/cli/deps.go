package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

// Deps is a command's configuration and the connections it opened; Close
// releases them all.
type Deps struct {
	Cfg    config.Config
	Logger *slog.Logger
	// SDKMetrics, when set before Temporal, receives the SDK's metrics.
	SDKMetrics client.MetricsHandler
	closers    []func()
}

// NewDeps loads the configuration; a bad value is a usage error naming its
// variable. Nothing is connected yet.
func NewDeps(e Env) (*Deps, error) {
	cfg, err := config.Load(e.Lookup)
	if err != nil {
		return nil, UsageError{Err: err}
	}
	// Logs are JSON on Stderr: structured, one event a line.
	logger := slog.New(slog.NewJSONHandler(e.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	return &Deps{Cfg: cfg, Logger: logger}, nil
}

// OnClose adds f to what Close runs, before what was added earlier.
func (d *Deps) OnClose(f func()) { d.closers = append(d.closers, f) }

// Close releases every connection opened, the last first.
func (d *Deps) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// Mirror connects to PostgreSQL with a pool of maxConns (0: pgx's
// default), as the product's runtime role: every session's transactions
// are bounded (boundTransactions).
func (d *Deps) Mirror(ctx context.Context, maxConns int32) (*mirror.Store, error) {
	return d.mirrorAt(ctx, "DATABASE_URL", d.Cfg.DatabaseURL, maxConns, true)
}

// MirrorAt connects to the mirror at url, named by its variable in errors,
// its transactions unbounded: migrate's and prune's may run long.
func (d *Deps) MirrorAt(ctx context.Context, variable, url string, maxConns int32) (*mirror.Store, error) {
	return d.mirrorAt(ctx, variable, url, maxConns, false)
}

func (d *Deps) mirrorAt(ctx context.Context, variable, url string, maxConns int32, bounded bool) (*mirror.Store, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, UsageError{Err: fmt.Errorf("%s: %w", variable, err)}
	}
	if maxConns > 0 {
		pcfg.MaxConns = maxConns
	}
	pcfg.AfterConnect = scanTimesInUTC
	if bounded {
		pcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			if err := scanTimesInUTC(ctx, conn); err != nil {
				return err
			}
			return boundTransactions(ctx, conn)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("error connecting to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("error connecting to PostgreSQL at %s: %w", variable, err)
	}
	d.closers = append(d.closers, pool.Close)
	store := mirror.New(pool)
	if c := d.Cfg.Codec; c != nil {
		// Webhook secrets are sealed at rest with the payload keys.
		store.SealSecretsWith(c)
	}
	return store, nil
}

// scanTimesInUTC has a connection read every timestamptz in UTC, not the
// host's zone: every output states times in RFC 3339 with Z, whatever the
// zone of the machine a command runs on.
func scanTimesInUTC(_ context.Context, conn *pgx.Conn) error {
	ts := &pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}}
	conn.TypeMap().RegisterType(ts)
	conn.TypeMap().RegisterType(&pgtype.Type{Name: "_timestamptz", OID: pgtype.TimestamptzArrayOID, Codec: &pgtype.ArrayCodec{ElementType: ts}})
	return nil
}

// boundTransactions has the server end a session whose transaction sits
// idle, or lasts, past the runtime budgets (budget.IdleInTransaction,
// budget.Transaction), so no transaction of the product holds the trail,
// the change feed or a lock for long. They are set here, per session,
// because a setting of the shipnotify_runtime role would reach only
// sessions that log in as it, never its members'. transaction_timeout is
// PostgreSQL 17's; an older server is bounded by the idle timeout alone.
func boundTransactions(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `
SELECT set_config('idle_in_transaction_session_timeout', $1, false),
       CASE WHEN current_setting('server_version_num')::int >= 170000
            THEN set_config('transaction_timeout', $2, false) END`,
		strconv.FormatInt(budget.IdleInTransaction.Milliseconds(), 10),
		strconv.FormatInt(budget.Transaction.Milliseconds(), 10))
	if err != nil {
		return fmt.Errorf("error bounding the session's transactions: %w", err)
	}
	return nil
}

// Temporal dials the Temporal frontend, with the payload codec.
func (d *Deps) Temporal(ctx context.Context) (client.Client, error) {
	if err := d.Cfg.RequireCodec(); err != nil {
		return nil, UsageError{Err: err}
	}
	opts := d.Cfg.Temporal
	opts.Logger = tlog.NewStructuredLogger(d.Logger)
	if c := d.Cfg.Codec; c != nil {
		opts.DataConverter, opts.FailureConverter = c.DataConverter(), c.FailureConverter()
	}
	if d.SDKMetrics != nil {
		opts.MetricsHandler = d.SDKMetrics
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("error connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	d.closers = append(d.closers, c.Close)
	return c, nil
}

// NewStarter is a starter on the configured task queue, not yet connected.
func (d *Deps) NewStarter() *starter.Starter {
	return &starter.Starter{
		Namespace: d.Cfg.Temporal.Namespace, TaskQueue: d.Cfg.TaskQueue, Webhooks: d.Cfg.Webhooks, Now: time.Now,
		DelayedStart: d.Cfg.DelayedStart, Windows: d.Cfg.SendWindows,
	}
}

// Starter connects a starter to the mirror and Temporal.
func (d *Deps) Starter(ctx context.Context) (*starter.Starter, error) {
	st := d.NewStarter()
	var err error
	if st.Mirror, err = d.Mirror(ctx, 0); err != nil {
		return nil, err
	}
	if st.Temporal, err = d.Temporal(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// WithMirror loads the configuration, connects the mirror (maxConns 0:
// pgx's default) and runs fn; connections close after.
func WithMirror(ctx context.Context, e Env, maxConns int32, fn func(*Deps, *mirror.Store) error) error {
	d, err := NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	store, err := d.Mirror(ctx, maxConns)
	if err != nil {
		return err
	}
	return fn(d, store)
}

// WithTemporal loads the configuration, dials Temporal and runs fn.
func WithTemporal(ctx context.Context, e Env, fn func(*Deps, client.Client) error) error {
	d, err := NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	tc, err := d.Temporal(ctx)
	if err != nil {
		return err
	}
	return fn(d, tc)
}

// WithStarter loads the configuration, connects a starter and runs fn.
func WithStarter(ctx context.Context, e Env, fn func(*Deps, *starter.Starter) error) error {
	d, err := NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	st, err := d.Starter(ctx)
	if err != nil {
		return err
	}
	return fn(d, st)
}
