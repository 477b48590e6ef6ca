package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/webhook"
)

func init() {
	register("dev-sink", "serve the demo's stand-ins alone (a SendGrid-compatible mail sink, a webhook receiver) for a worker or serve of your own", runDevSink)
}

// devSinkAPIKey is the key the mail sink takes by default: not a secret,
// nothing leaves the machine.
const devSinkAPIKey = "SG.dev-sink"

func runDevSink(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "dev-sink", "dev-sink [--mail ADDR] [--webhook ADDR] [--api-key KEY] [--secret whsec_…]")
	mailAddr := fs.String("mail", "127.0.0.1:8025", "where the mail sink (SendGrid's v3 mail send; every mail at /mailbox) listens (\"\" for none; port 0 is any free one)")
	hookAddr := fs.String("webhook", "127.0.0.1:8026", "where the webhook receiver listens, any path: a subscriber's webhook, a tracker's status endpoint (\"\" for none; port 0 is any free one)")
	apiKey := fs.String("api-key", devSinkAPIKey, "the API key the mail sink takes (the worker's SENDGRID_API_KEY)")
	secret := fs.String("secret", "", "the webhook receiver's Standard Webhooks secret, whsec_… (default: a new one, printed)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	case *mailAddr == "" && *hookAddr == "":
		return cli.Usagef("--mail and --webhook are both empty: nothing to serve")
	case *apiKey == "":
		return cli.Usagef("--api-key must not be empty")
	}
	for flag, addr := range map[string]string{"--mail": *mailAddr, "--webhook": *hookAddr} {
		if err := standInOnLoopback(flag, addr); err != nil {
			return err
		}
	}
	if *secret == "" {
		*secret = webhook.NewSecret()
	} else if _, err := standardwebhooks.NewWebhook(*secret); err != nil {
		return cli.Usagef("--secret: want a Standard Webhooks secret, whsec_ and base64 (%v)", err)
	}
	out := &lockedPrinter{w: e}
	if *mailAddr != "" {
		mails, err := sink.StartMail(*mailAddr, *apiKey)
		if err != nil {
			return fmt.Errorf("--mail %s: %w", *mailAddr, err)
		}
		defer mails.Close()
		mails.OnMail = func(m sink.Mail) {
			out.printf("✉  mail     %s  to %s  %q  key %.12s…\n", m.Received.UTC().Format(time.RFC3339), strings.Join(m.To, ", "), m.Subject, m.CustomArgs["delivery_key"])
		}
		out.printf("Mail sink:        %s (every mail: %s/mailbox)\n", mails.URL(), mails.URL())
		out.printf("  for the worker: SENDGRID_BASE_URL=%s SENDGRID_API_KEY=%s\n", mails.URL(), *apiKey)
	}
	if *hookAddr != "" {
		hooks, err := sink.StartWebhook(*hookAddr, *secret)
		if err != nil {
			return fmt.Errorf("--webhook %s: %w", *hookAddr, err)
		}
		defer hooks.Close()
		hooks.OnHook = func(h sink.Hook) {
			var ev struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(h.Body, &ev)
			out.printf("⚓ webhook  %s  %s  %s  id %.12s…  signature verified\n", h.Received.UTC().Format(time.RFC3339), h.Path, ev.Type, h.ID)
		}
		out.printf("Webhook receiver: %s/ANY-PATH (signatures checked with %s)\n", hooks.URL(), *secret)
		out.printf("  for the worker: SHIPNOTIFY_WEBHOOK_ALLOW_LOOPBACK=true; give a subscriber or a status endpoint this URL and secret\n")
	}
	out.printf("Press Ctrl-C to stop.\n")
	<-ctx.Done()
	return nil
}

// standInOnLoopback refuses a stand-in's address beyond loopback ("" is
// none): the mail sink's mailbox shows every mail, addresses and all, to
// whoever reaches it.
func standInOnLoopback(flag, addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return cli.Usagef("%s: %v", flag, err)
	}
	if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.IsLoopback()) {
		return cli.Usagef("%s %s: the stand-ins serve loopback only (127.0.0.1, ::1 or localhost); the mailbox shows every mail to whoever reaches it", flag, addr)
	}
	return nil
}
