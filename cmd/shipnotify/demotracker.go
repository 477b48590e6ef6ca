package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/statusevents"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// demoTrackerEndpoint names the demo's tracker endpoint in the mirror.
const demoTrackerEndpoint = "demo-tracker"

// demoTracker is a tracker's endpoint on this machine: a receiver that
// verifies each status event's signature with the official Standard
// Webhooks library, fed by serve's relay, run inside the demo.
type demoTracker struct {
	receiver *sink.WebhookSink
	store    *mirror.Store
	stop     func()
}

// startDemoTracker registers the endpoint for the default tenant's every
// event (beside whatever serve registered) and relays to it until stop,
// which retires it again.
func startDemoTracker(ctx context.Context, d *cli.Deps, store *mirror.Store, addr string, out *lockedPrinter, start time.Time) (*demoTracker, error) {
	secret := webhook.NewSecret()
	receiver, err := sink.StartWebhook(addr, secret)
	if err != nil {
		return nil, err
	}
	ep := statusevents.Endpoint{Name: demoTrackerEndpoint, URL: receiver.URL() + "/shipnotify/status", Secret: secret, Events: reminder.StatusTypes}
	if err := store.AddStatusEndpoints(ctx, []mirror.StatusEndpoint{ep.Registration()}); err != nil {
		_ = receiver.Close()
		return nil, err
	}
	receiver.OnHook = func(h sink.Hook) {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				ReminderID string `json:"reminder_id"`
				Sequence   int    `json:"sequence"`
			} `json:"data"`
		}
		_ = json.Unmarshal(h.Body, &ev)
		out.printf("  📮 tracker got     %-24s %-22s #%d  %s  signature verified  (+%.1fs)\n",
			ev.Type, shortReminder(ev.Data.ReminderID), ev.Data.Sequence, h.ID, time.Since(start).Seconds())
	}
	relay := &statusevents.Relay{
		Store: store, Endpoints: []statusevents.Endpoint{ep}, Every: 100 * time.Millisecond, Logger: d.Logger, IDs: d.Cfg.IDs,
		Sender: webhook.NewSender(webhook.Options{Guard: webhook.Guard{AllowLoopback: true}}),
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(rctx) }()
	return &demoTracker{receiver: receiver, store: store, stop: func() {
		cancel()
		<-done
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = store.RetireStatusEndpoints(ctx, []string{demoTrackerEndpoint})
		_ = receiver.Close()
	}}, nil
}

// shortReminder is a reminder id without its update, for one line.
func shortReminder(id string) string {
	if len(id) > 22 {
		for i := len(id) - 1; i >= 0; i-- {
			if id[i] == '/' {
				return "…" + id[i:]
			}
		}
	}
	return id
}

// caughtUp waits until the tracker holds every event written for it, and
// says how many came.
func (t *demoTracker) caughtUp(ctx context.Context, out *lockedPrinter) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		eps, err := t.store.StatusEndpoints(ctx)
		if err == nil {
			for _, ep := range eps {
				if ep.Name == demoTrackerEndpoint && ep.Pending == 0 {
					out.printf("The tracker's endpoint got %s, each signed (Standard Webhooks), each reminder's in order.\n",
						cli.Count(int64(len(t.receiver.Hooks())), "status event", "status events"))
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
