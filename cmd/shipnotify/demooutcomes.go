package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// demoBounceAddress is the sample's address the demo's mail sink bounces.
const demoBounceAddress = "old-inbox@consignee.example"

// startDemoOutcomes runs what `serve` runs for SendGrid's Event Webhook —
// the handler, with a key pair made for this run, and the escalator — and
// has the mail sink post signed events to it, as SendGrid would.
func startDemoOutcomes(ctx context.Context, d *cli.Deps, st *starter.Starter, mails *sink.MailSink, out *lockedPrinter) (stop func(), err error) {
	key, err := sink.NewEventKey()
	if err != nil {
		return nil, err
	}
	pub, err := sendgridevents.ParseVerificationKey(key.PublicKey())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	mux := http.NewServeMux()
	if err := mountProviderEvents(ctx, d, mux, st, pub, nil); err != nil {
		cancel()
		_ = ln.Close()
		return nil, err
	}
	srv := api.NewServer(mux, api.DefaultRequestTimeout)
	go func() { _ = srv.Serve(ln) }()
	mails.EmitEvents(sink.EventOptions{
		URL: "http://" + ln.Addr().String() + sendgridevents.Path, Key: key, Bounce: []string{demoBounceAddress},
		OnPosted: func(events []sink.Event, status int, err error) {
			if err != nil {
				out.printf("  ⚑  SendGrid events  not posted: %v\n", err)
				return
			}
			out.printf("  ⚑  SendGrid events  %s  signed batch answered %d\n", eventCounts(events), status)
		},
	})
	return func() { cancel(); _ = srv.Close() }, nil
}

// eventCounts is "processed ×2, delivered ×1", in SendGrid's order.
func eventCounts(events []sink.Event) string {
	n := map[string]int{}
	for _, e := range events {
		n[e.Event]++
	}
	var parts []string
	for _, o := range reminder.ProviderOutcomes {
		if n[string(o)] > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", o, n[string(o)]))
		}
	}
	return strings.Join(parts, ", ")
}

// waitDemoOutcomes waits until every sample reminder has its final
// outcome in the mirror and prints them.
func waitDemoOutcomes(ctx context.Context, store *mirror.Store, results []starter.Result, out *lockedPrinter) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		rows := make([]mirror.Row, 0, len(results))
		final := true
		for _, r := range results {
			row, err := store.Get(ctx, r.ReminderID)
			if err != nil {
				return err
			}
			final = final && (row.State == reminder.Delivered || row.State == reminder.Undeliverable)
			if final && row.State == reminder.Undeliverable {
				// Its escalation is recorded after its mail goes out: wait
				// for the record, whose status event the tracker then hears.
				escalated, err := escalationRecorded(ctx, store, row.ID)
				if err != nil {
					return err
				}
				final = escalated
			}
			rows = append(rows, row)
		}
		if final {
			sort.Slice(rows, func(i, j int) bool { return rows[i].DueAt.Before(rows[j].DueAt) })
			out.printf("\nWhere each reminder ended (SendGrid's events for email, the receiver's 2xx for the webhook):\n")
			for _, row := range rows {
				note := ""
				if row.State == reminder.Undeliverable {
					note = "  bounced: the update's escalation contact was told, once"
				}
				out.printf("  %-52s %s%s\n", row.ID, row.State, note)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("error waiting for the sample's outcomes: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// escalationRecorded reports whether the reminder's trail records its
// escalation as sent.
func escalationRecorded(ctx context.Context, store *mirror.Store, reminderID string) (bool, error) {
	events, err := store.Events(ctx, reminderID)
	if err != nil {
		return false, err
	}
	for _, e := range events {
		if e.Type == "escalation_sent" {
			return true, nil
		}
	}
	return false, nil
}
