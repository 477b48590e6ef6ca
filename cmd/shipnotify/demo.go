package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/migrations"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/webhook"
	"github.com/shipnotify/shipnotify/worker"
	"github.com/shipnotify/shipnotify/workflows"
)

func init() {
	register("demo", "run the product end to end against local stand-ins for SendGrid, a webhook receiver and a tracker hearing back", runDemo)
}

// demoTaskQueue keeps the demo's work away from any real worker, which
// would send the sample through the real SendGrid.
const demoTaskQueue = "shipnotify-demo"

func runDemo(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "demo", "demo [--exit-when-delivered] [--ui URL] [--task-queue Q] [--codec-server ADDR] [--serve ADDR]\n"+
		"       [--mail-sink ADDR] [--webhook-sink ADDR] [--tracker ADDR]")
	// The dev environment's ports (scripts/dev.sh env, SHIPNOTIFY_DEV_*)
	// are the defaults, so the Web UI it started decodes what the demo's
	// codec server serves, and the printed link is its own.
	codecAddr := fs.String("codec-server", devDefault(e, "SHIPNOTIFY_DEV_CODEC_ADDR", "127.0.0.1:8081"),
		"where to serve the codec for the Web UI (\"\" for none; default SHIPNOTIFY_DEV_CODEC_ADDR)")
	serveAddr := fs.String("serve", "127.0.0.1:8090", "where to serve the tracker API and the approval console (\"\" for none)")
	exitWhenDone := fs.Bool("exit-when-delivered", false, "stop once every sample reminder is delivered instead of waiting for Ctrl-C")
	taskQueue := fs.String("task-queue", demoTaskQueue, "the demo worker's own task queue, away from real workers")
	// The stand-ins take any free port unless told one (shipnotify dev-sink
	// serves the first two without the demo).
	mailAddr := fs.String("mail-sink", "127.0.0.1:0", "where the SendGrid stand-in (the mail sink, its mailbox at /mailbox) listens; port 0 is any free one")
	hookAddr := fs.String("webhook-sink", "127.0.0.1:0", "where the sample's webhook subscriber (a receiver checking signatures) listens; port 0 is any free one")
	trackerAddr := fs.String("tracker", "127.0.0.1:0", "where the tracker's endpoint hearing status events back listens; port 0 is any free one")
	uiURL := fs.String("ui", devDefault(e, "SHIPNOTIFY_DEV_UI_URL", "http://localhost:8233"),
		"the Temporal Web UI's address, for the printed link (default SHIPNOTIFY_DEV_UI_URL)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	for flag, addr := range map[string]string{"--mail-sink": *mailAddr, "--webhook-sink": *hookAddr, "--tracker": *trackerAddr} {
		if err := standInOnLoopback(flag, addr); err != nil {
			return err
		}
	}
	// The demo's own output tells the story; keep the logs to warnings.
	e.Lookup = overlay(e.Lookup, "SHIPNOTIFY_LOG_LEVEL", "warn")
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	cfg := d.Cfg
	out := &lockedPrinter{w: e}
	if d.Cfg.Codec != nil && *codecAddr != "" {
		stop := serveCodec(d, *codecAddr, *uiURL, out)
		defer stop()
	}
	store, err := d.Mirror(ctx, 8)
	if err != nil {
		return err
	}
	if err := migrations.Up(ctx, store.Pool(), d.Logger); err != nil {
		return err
	}
	tc, err := d.Temporal(ctx)
	if err != nil {
		return err
	}

	const apiKey = "SG.demo-key"
	mails, err := sink.StartMail(*mailAddr, apiKey)
	if err != nil {
		return fmt.Errorf("--mail-sink %s: %w", *mailAddr, err)
	}
	defer mails.Close()
	secret := webhook.NewSecret()
	hooks, err := sink.StartWebhook(*hookAddr, secret)
	if err != nil {
		return fmt.Errorf("--webhook-sink %s: %w", *hookAddr, err)
	}
	defer hooks.Close()
	start := time.Now()
	mails.OnMail = func(m sink.Mail) {
		// A digest is its members' one mail: named by its size, not by the
		// member that led it.
		what := m.CustomArgs["reminder_id"]
		if n := m.CustomArgs["digest_size"]; n != "" {
			what = "a digest of " + n
		}
		out.printf("  ✉  mail sink got   %-28s %q  key %.12s…  (+%.1fs)\n",
			what, m.Subject, m.CustomArgs["delivery_key"], time.Since(start).Seconds())
	}
	hooks.OnHook = func(h sink.Hook) {
		var ev activities.WebhookEvent
		_ = json.Unmarshal(h.Body, &ev)
		out.printf("  ⚓ webhook got     %-28s %q  key %.12s…  signature verified  (+%.1fs)\n",
			ev.Data.ReminderID, ev.Data.Subject, h.ID, time.Since(start).Seconds())
	}

	// The worker's activities, sending to the local stand-ins; the demo's
	// webhook receiver is on this machine.
	cfg.SendGridAPIKey, cfg.SendGridBaseURL = apiKey, mails.URL()
	cfg.Webhooks = webhook.Guard{AllowLoopback: true}
	st := &starter.Starter{
		Temporal: tc, Namespace: cfg.Temporal.Namespace, Mirror: store, TaskQueue: *taskQueue, Webhooks: cfg.Webhooks, Now: time.Now,
		DelayedStart: cfg.DelayedStart,
	}
	acts := cli.NewActivities(cfg, store)
	var front *demoFront
	if *serveAddr != "" {
		if front, err = startDemoFront(d, st, *serveAddr); err != nil {
			out.printf("(API and console not served on %s: %v)\n", *serveAddr, err)
		} else {
			defer front.stop()
			acts.Links = front.signer
			// One-click unsubscribe headers, to this run's serve.
			acts.Unsubscribe = func(id string) email.Unsubscribe { return email.Unsubscribe{OneClick: front.signer.UnsubscribeURL(id)} }
		}
	}
	stopOutcomes, err := startDemoOutcomes(ctx, d, st, mails, out)
	if err != nil {
		return err
	}
	defer stopOutcomes()
	tracker, err := startDemoTracker(ctx, d, store, *trackerAddr, out, start)
	if err != nil {
		return fmt.Errorf("--tracker %s: %w", *trackerAddr, err)
	}
	defer tracker.stop()
	w := worker.New(tc, *taskQueue, acts, worker.Options{})
	if err := w.Start(); err != nil {
		return fmt.Errorf("error starting worker: %w", err)
	}
	defer w.Stop()

	u := sampleUpdate(start, hooks.URL()+"/consignee/in", secret)
	results, err := st.Schedule(ctx, u)
	if err != nil {
		return err
	}
	night, err := scheduleNightDesk(ctx, st, start)
	if err != nil {
		return err
	}
	defer cancelNightDesk(ctx, st, out)
	ops, err := scheduleOpsDigest(ctx, st, start)
	if err != nil {
		return err
	}
	out.printf("Stand-ins: mail sink %s, webhook receiver %s, tracker %s\n", mails.URL(), hooks.URL(), tracker.receiver.URL())
	out.printf("Scheduled shipment update %s/%s for %s:\n", u.ShipmentID, u.UpdateID, cli.Count(int64(len(results)), "subscriber", "subscribers"))
	for _, r := range results {
		out.printf("  %-40s due %s  %s\n", r.ReminderID, r.DueAt.Local().Format("15:04:05"), r.Status)
	}
	out.printf("And one a send window holds, due at night where its subscriber is:\n  %-40s %s\n", night.r.ReminderID,
		night.w.GoingOut(night.r.DueAt, night.r.GoesOutAt))
	out.printf("And %d shipments' reminders to one ops inbox, in a digest every %s: one mail at %s lists them all:\n",
		len(ops.results), reminder.DigestEvery(demoDigestEvery), ops.at.Local().Format("15:04:05"))
	for _, r := range ops.results {
		out.printf("  %-40s due %s\n", r.ReminderID, r.DueAt.Local().Format("15:04:05"))
	}
	q := url.QueryEscape(fmt.Sprintf(`ShipmentId="%s" AND UpdateId="%s"`, u.ShipmentID, u.UpdateID))
	out.printf("\nTemporal Web UI: %s/namespaces/%s/workflows?query=%s\n", *uiURL, cfg.Temporal.Namespace, q)
	out.printf("Waiting for deliveries…\n")

	done := make(chan error, 2)
	go func() {
		// Four reminders, the bounced one's escalation and the ops digest.
		_, err := mails.Wait(ctx, func(m []sink.Mail) bool { return len(m) >= 6 })
		done <- err
	}()
	go func() {
		_, err := hooks.Wait(ctx, func(h []sink.Hook) bool { return len(h) >= 1 })
		done <- err
	}()
	for range 2 {
		if err := <-done; err != nil {
			return nil // interrupted
		}
	}
	// Let each workflow finish (mirror and search attributes say "sent")
	// before the worker can stop.
	results = append(results, ops.results...)
	for _, r := range results {
		var res workflows.ReminderResult
		if err := tc.GetWorkflow(ctx, r.WorkflowID, "").Get(ctx, &res); err != nil {
			return fmt.Errorf("error waiting for %s: %w", r.ReminderID, err)
		}
	}
	if err := waitDemoOutcomes(ctx, store, results, out); err != nil {
		return err
	}
	tracker.caughtUp(ctx, out)
	digestKey, err := ops.digestKey(ctx, store)
	if err != nil {
		return err
	}
	exe := demoExecutable()
	out.printf("\nThe mail sink's mailbox (every mail as sent, its HTML rendered): %s/mailbox\n", mails.URL())
	out.printf("\nInspect them, from another shell in this checkout:\n  eval \"$(scripts/dev.sh env | sed 's/^/export /')\"\n  %s list --shipment %s\n  %s show %s\n",
		exe, u.ShipmentID, exe, results[len(results)-1].ReminderID)
	out.printf("  %s show %s\n  %s list --goes-out-from %s --goes-out-to %s   # what goes out then\n", exe, night.r.ReminderID,
		exe, night.r.GoesOutAt.UTC().Format(time.RFC3339), night.r.GoesOutAt.Add(time.Minute).UTC().Format(time.RFC3339))
	out.printf("  %s show %s\n  %s list --digest-key %s   # the ops digest's members\n", exe, ops.results[0].ReminderID, exe, digestKey)
	if front != nil {
		out.printf("\nApproval console: %s/console/ (log in with the key %s)\n", front.url, front.approverKey)
		out.printf("The ops digest's page: %s/console/digests/%s\n", front.url, digestKey)
		out.printf("Schedule an update that needs approval through the API, then approve it in the console:\n  %s\n",
			front.curlSchedule(time.Now()))
		out.printf("Poll what changed, as a tracker may instead of hearing back:\n  %s\n", front.curlFeed())
		out.printf("The API's contract: %s/v1/openapi.json\n", front.url)
	}
	if *exitWhenDone {
		return nil
	}
	out.printf("Press Ctrl-C to stop.\n")
	<-ctx.Done()
	return nil
}

// sampleUpdate is one shipment update fanned out to four subscribers, due a
// few seconds apart; its update id is new on every run.
func sampleUpdate(now time.Time, hookURL, secret string) reminder.Update {
	window := now.Add(72*time.Hour + 4*time.Second).Truncate(time.Second)
	return reminder.Update{
		ShipmentID:  "SHP-1001",
		UpdateID:    "window-" + now.UTC().Format("20060102-150405"),
		Kind:        "delivery_window",
		WindowStart: window,
		Message: reminder.Message{
			Subject: "Delivery window for SHP-1001 opens in 3 days",
			Text:    "Shipment SHP-1001 is due at the consignee's dock when the window opens. Reply to reschedule.",
		},
		Subscribers: []reminder.Subscriber{
			// Each email states times in its subscriber's zone and language.
			{ID: "shipper-ops", Channel: reminder.Email, Email: "ops@shipper.example", RemindBefore: 72 * time.Hour,
				Name: "Shipper Ops", TimeZone: "America/New_York"},
			{ID: "consignee-inbox", Channel: reminder.Email, Email: "inbox@consignee.example", DueAt: now.Add(6 * time.Second),
				Name: "Anna Weber", TimeZone: "Europe/Berlin", Locale: "de-DE"},
			{ID: "internal-watcher", Channel: reminder.Email, Email: "watch@shipnotify.example", DueAt: now.Add(7 * time.Second)},
			{ID: "consignee-hook", Channel: reminder.Webhook, URL: hookURL, Secret: secret, DueAt: now.Add(8 * time.Second)},
			// The mail sink bounces this address, as SendGrid would a mailbox that is gone.
			{ID: "consignee-old-inbox", Channel: reminder.Email, Email: demoBounceAddress, DueAt: now.Add(9 * time.Second)},
		},
		EscalationEmail: "lead@shipper.example",
	}
}

// serveCodec runs the codec server for the Web UI beside the demo; a busy
// port (another codec server) is not fatal.
func serveCodec(d *cli.Deps, addr, uiURL string, out *lockedPrinter) (stop func()) {
	// The demo runs on a developer's machine: the Web UI sends no token.
	srv, err := d.Cfg.Codec.Server(addr, codec.ServerOptions{Origins: []string{uiURL}, Token: d.Cfg.CodecServerToken, InsecureLoopback: true})
	if err != nil {
		out.printf("(codec server not started on %s: %v; the Web UI shows payloads encrypted)\n", addr, err)
		return func() {}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		out.printf("(codec server not started on %s: %v; the Web UI shows payloads encrypted)\n", addr, err)
		return func() {}
	}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }
}

// overlay returns lookup with key defaulting to value when unset.
// demoExecutable is how to run this binary from the working directory:
// its path relative to it when inside (make demo's .dev/bin/shipnotify),
// else as found.
func demoExecutable() string {
	exe, err := os.Executable()
	if err != nil {
		return "shipnotify"
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + rel
		}
	}
	return exe
}

func overlay(lookup func(string) (string, bool), key, value string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := lookup(k); ok || k != key {
			return v, ok
		}
		return value, true
	}
}

// lockedPrinter serialises output from the sinks' goroutines.
type lockedPrinter struct {
	mu sync.Mutex
	w  cli.Env
}

func (p *lockedPrinter) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w.Stdout, format, args...)
}
