package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/starter"
)

// newConsole builds the approval console from the configuration, for
// `shipnotify serve` to mount at console.Path: the approvers from
// SHIPNOTIFY_CONSOLE_KEYS_FILE, link checks on SHIPNOTIFY_LINK_KEY,
// sessions on SHIPNOTIFY_SESSION_KEY, __Host- cookies when
// SHIPNOTIFY_PUBLIC_URL is https, failed logins charged to the client
// SHIPNOTIFY_TRUSTED_PROXIES' proxies forward.
func newConsole(cfg config.Config, st *starter.Starter, store *mirror.Store, logger *slog.Logger) (*console.Handler, error) {
	if err := cfg.RequireConsole(); err != nil {
		return nil, cli.UsageError{Err: err}
	}
	var approvers []console.Approver
	if cfg.ConsoleKeysFile != "" {
		var err error
		if approvers, err = cli.ReadApprovers(cfg.ConsoleKeysFile); err != nil {
			return nil, cli.UsageError{Err: fmt.Errorf("SHIPNOTIFY_CONSOLE_KEYS_FILE: %w", err)}
		}
	}
	if len(approvers) == 0 {
		logger.Warn("the console has no approvers (SHIPNOTIFY_CONSOLE_KEYS_FILE): no one can log in; escalation links still work")
	}
	signer := cfg.Links(time.Now)
	if signer == nil {
		// No public URL: this process makes no links, it only checks them.
		signer = &links.Signer{Keys: cfg.LinkKeys, TTL: cfg.LinkTTL, Now: time.Now}
	}
	return console.New(console.Options{
		Starter: st, Mirror: store, Links: signer, SessionKeys: cfg.SessionKeys, Approvers: approvers, DefaultTenant: cfg.DefaultTenant,
		SecureCookie: cfg.PublicURL != nil && cfg.PublicURL.Scheme == "https",
		Clients:      cfg.TrustedProxies,
		Now:          time.Now, Logger: logger,
	}), nil
}
