package main

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/fairqueue"
	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/statusevents"
	"github.com/shipnotify/shipnotify/internal/unsubscribe"
	"github.com/shipnotify/shipnotify/metrics"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/webhook"
)

func init() {
	register("serve", "serve the tracker API (JSON over HTTP) on SHIPNOTIFY_API_ADDR", runServe)
	register("api-key", "make an API key: prints the key (shown once) and its configuration line", runAPIKey)
}

func runServe(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "serve", "serve   (configured by the environment: SHIPNOTIFY_API_*, see docs/configuration.md)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	// SIGHUP re-reads the key files; heard from the start, so one sent
	// as soon as serve answers never ends it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Cfg.RequireAPIKeys(); err != nil {
		return cli.UsageError{Err: err}
	}
	st := d.NewStarter()
	st.Slots = fairqueue.New(d.Cfg.StartSlots, d.Cfg.TenantStartSlots)
	if st.Mirror, err = d.Mirror(ctx, cli.ServePoolSize); err != nil {
		return err
	}
	if err := cli.RequireMigrated(ctx, st.Mirror); err != nil {
		return err
	}
	reg, tc, closeMetrics, err := cli.OpsTemporal(ctx, d)
	if err != nil {
		return err
	}
	defer closeMetrics()
	st.Temporal = tc
	handler, err := api.New(api.Options{
		Starter: st, Keys: d.Cfg.APIKeys, DefaultTenant: d.Cfg.DefaultTenant,
		Rate: rate.Limit(d.Cfg.APIRate), Burst: d.Cfg.APIBurst,
		ReminderRate: rate.Limit(d.Cfg.APIReminderRate), ReminderBurst: d.Cfg.APIReminderBurst,
		Clients:        d.Cfg.TrustedProxies,
		RequestTimeout: d.Cfg.APIRequestTimeout, Metrics: reg, Logger: d.Logger, IDs: d.Cfg.IDs,
	})
	if err != nil {
		return err
	}
	if d.Cfg.MetricsAddr != "" {
		// Metrics and probes stay on the ops address, as the worker's do:
		// the API's listener may face trackers, the ops port stays inside.
		stop, err := cli.ServeOps(d, reg, cli.Readiness(d, st.Mirror, st.Temporal))
		if err != nil {
			return err
		}
		defer stop()
	}
	ln, err := net.Listen("tcp", d.Cfg.APIAddr)
	if err != nil {
		return cli.UsageError{Err: fmt.Errorf("SHIPNOTIFY_API_ADDR: %w", err)}
	}
	if d.Cfg.IDKeyUnset {
		d.Logger.Warn("SHIPNOTIFY_ID_KEY is unset: the ids and feed cursors tenants see are sealed with the development key, " +
			"which anyone can open to count other tenants' events; set one where tenants share this deployment")
	}
	mux := api.NewRoot(handler)
	var consoleHandler *console.Handler
	if d.Cfg.LinkKeys.Empty() && d.Cfg.SessionKeys.Empty() {
		d.Logger.Warn("the approval console is off: set SHIPNOTIFY_LINK_KEY and SHIPNOTIFY_SESSION_KEY (and SHIPNOTIFY_CONSOLE_KEYS_FILE) to serve it")
	} else {
		if consoleHandler, err = newConsole(d.Cfg, st, st.Mirror, d.Logger); err != nil {
			return err
		}
		mux.Handle(console.Path, consoleHandler)
	}
	if !d.Cfg.LinkKeys.Empty() {
		// One-click unsubscribes (SHIPNOTIFY_UNSUBSCRIBE=one-click), kept
		// while the key that signed them is: links already sent still work
		// after the mode changes.
		mux.Handle(unsubscribe.Path, unsubscribe.New(d.Cfg.LinkKeys, st.Mirror, d.Logger))
	}
	if d.Cfg.APIKeysFile == "" {
		d.Logger.Info("the API's keys come from SHIPNOTIFY_API_KEYS: a change needs a restart (SHIPNOTIFY_API_KEYS_FILE is re-read on SIGHUP and when it changes)")
	}
	watch, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	keyFiles := cli.NewFileWatch(d.Logger, cli.ServeKeyFiles(d.Cfg, handler, consoleHandler))
	go keyFiles.Run(watch, hup, cli.KeyFilesPoll)
	if err := serveOutcomes(ctx, d, mux, st, reg); err != nil {
		return err
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	defer stopRelay()
	relayed, err := serveStatusEvents(relayCtx, d, st.Mirror, reg, d.Cfg.StatusEndpoints)
	if err != nil {
		return err
	}
	defer func() { stopRelay(); <-relayed }()
	srv := api.NewServer(mux, d.Cfg.APIRequestTimeout)
	d.Logger.Info("serving the API", "address", ln.Addr().String(), "keys", len(d.Cfg.APIKeys))
	err = api.Serve(ctx, srv, ln, d.Cfg.APIRequestTimeout+budget.ServeShutdownMargin)
	d.Logger.Info("API stopped")
	return err
}

// serveOutcomes mounts the SendGrid Event Webhook beside the API when its
// key is configured, and runs the escalator that starts what provider
// outcomes owe (always: outcomes recorded before a restart still owe theirs).
func serveOutcomes(ctx context.Context, d *cli.Deps, mux mounter, st *starter.Starter, reg prometheus.Registerer) error {
	if d.Cfg.SendGridEventKey == nil {
		d.Logger.Warn("the SendGrid Event Webhook is off: set SHIPNOTIFY_SENDGRID_EVENT_KEY, or emails stay sent, never delivered or undeliverable")
	}
	return mountProviderEvents(ctx, d, mux, st, d.Cfg.SendGridEventKey, metrics.NewProviderEvents(reg))
}

// mounter is what a handler is mounted on: serve's api.Root (what it
// listens with: the API under /v1/, the others beside it), or a ServeMux.
type mounter interface {
	Handle(pattern string, h http.Handler)
}

// mountProviderEvents runs the escalator until ctx ends and, with a key, mounts
// the Event Webhook's handler on mux at sendgridevents.Path (serve's and the
// demo's, which makes its own key).
func mountProviderEvents(ctx context.Context, d *cli.Deps, mux mounter, st *starter.Starter, key *ecdsa.PublicKey, m *metrics.ProviderEvents) error {
	esc := sendgridevents.NewEscalator(st.Mirror, st.Temporal, st.TaskQueue)
	esc.Metrics, esc.Logger = m, d.Logger
	go esc.Run(ctx)
	if key == nil {
		return nil
	}
	h, err := sendgridevents.NewHandler(sendgridevents.Options{
		Key: key, Store: st.Mirror, Tolerance: d.Cfg.SendGridEventTolerance,
		DeferAfter: d.Cfg.DeferredEscalateAfter, Escalate: esc.Nudge, Metrics: m, Logger: d.Logger,
	})
	if err != nil {
		return err
	}
	mux.Handle(sendgridevents.Path, h)
	return nil
}

// serveStatusEvents registers the tracker's status endpoints (retiring
// any no longer configured) and, when there are any, runs the relay that
// posts their events until ctx ends; the channel closes when it has
// stopped. The outbox's gauges are served on reg either way.
func serveStatusEvents(ctx context.Context, d *cli.Deps, store *mirror.Store, reg prometheus.Registerer, eps []statusevents.Endpoint) (<-chan struct{}, error) {
	done := make(chan struct{})
	urls := make([]string, len(eps))
	regs := make([]mirror.StatusEndpoint, len(eps))
	for i, e := range eps {
		urls[i], regs[i] = e.URL, e.Registration()
	}
	// The configuration checked each URL's form; its host is checked now,
	// as a subscriber's is when scheduled (and every connection after).
	for i, err := range d.Cfg.Webhooks.CheckURLs(ctx, urls) {
		if err != nil {
			return nil, cli.Usagef("SHIPNOTIFY_STATUS_ENDPOINTS_FILE: endpoint %s: url: %v", eps[i].Name, err)
		}
	}
	if err := store.RegisterStatusEndpoints(ctx, regs); err != nil {
		return nil, err
	}
	if d.Cfg.MetricsAddr != "" {
		metrics.WatchOutbox(ctx, reg, store, metrics.MirrorOptions{Every: d.Cfg.MetricsRefresh, Logger: d.Logger})
	}
	if len(eps) == 0 {
		close(done)
		return done, nil
	}
	relay := &statusevents.Relay{
		Store: store, Endpoints: eps, Sender: webhook.NewSender(webhook.Options{Guard: d.Cfg.Webhooks}),
		Metrics: metrics.NewStatusEvents(reg), Logger: d.Logger, IDs: d.Cfg.IDs,
	}
	go func() {
		defer close(done)
		relay.Run(ctx)
	}()
	d.Logger.Info("relaying status events", "endpoints", len(eps))
	return done, nil
}

func runAPIKey(_ context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "api-key", "api-key --name NAME --scopes schedule,operate,approve,read,admin [--tenant NAME] [--expires 2027-01-15]")
	name := fs.String("name", "", "who holds the key: recorded as 'by' in the audit trail, and in the logs (required)")
	scopes := fs.String("scopes", "", "what it may do, comma-separated: schedule, operate, approve, read, admin (required; approve also logs in to the console)")
	tenant := fs.String("tenant", "", "the tenant the key acts for (letters, digits, '.', '_', '-'; optional)")
	expires := fs.String("expires", "", "when the key stops working: an RFC 3339 time, or a date for its UTC midnight (optional; default never)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if *name == "" || *scopes == "" {
		return cli.Usagef("--name and --scopes are required")
	}
	sc, err := api.ParseScopes(*scopes)
	if err != nil {
		return cli.Usagef("--scopes: %v", err)
	}
	var attrs api.Attributes
	if *tenant != "" {
		if attrs.Tenant, err = reminder.ParseTenant("--tenant", *tenant); err != nil {
			return cli.UsageError{Err: err}
		}
	}
	if *expires != "" {
		if attrs.Expires, err = api.ParseExpiry(*expires); err != nil {
			return cli.Usagef("--expires: %v", err)
		}
		if !attrs.Expires.After(time.Now()) {
			return cli.Usagef("--expires: %s has passed; the key would never work", api.FormatExpiry(attrs.Expires))
		}
	}
	key, k, err := api.NewKey(*name, sc)
	if err != nil {
		return cli.Usagef("--name: %v", err)
	}
	k.Tenant, k.Expires = attrs.Tenant, attrs.Expires
	fmt.Fprintln(e.Stdout, key)
	fmt.Fprintln(e.Stdout, k.Line())
	fmt.Fprintln(e.Stderr, strings.Join([]string{
		"shipnotify: line 1 is the key: give it to its holder, who sends it as Authorization: Bearer <key> (or, with the approve scope, types it into the console); it is not kept anywhere, so it is shown only now.",
		"shipnotify: line 2 goes into SHIPNOTIFY_API_KEYS_FILE (or SHIPNOTIFY_API_KEYS, entries separated by ';') or SHIPNOTIFY_CONSOLE_KEYS_FILE: the key's hash, never the key.",
	}, "\n"))
	return nil
}
