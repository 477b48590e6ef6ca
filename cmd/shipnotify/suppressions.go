package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

func init() {
	register("suppressions", "list the addresses that unsubscribed or reported spam, or lift one (list | remove)", runSuppressions)
}

const (
	suppressionsListUsage   = "suppressions list [--tenant T] [--address A] [--lifted] [--limit N] [--json]"
	suppressionsRemoveUsage = "suppressions remove --address A [--tenant T] [--by WHO] [--reason WHY]"
	suppressionsUsage       = suppressionsListUsage + "\n       shipnotify " + suppressionsRemoveUsage
)

func runSuppressions(ctx context.Context, e cli.Env, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("suppressions: want a subcommand, list or remove")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		return cli.ParseFlags(cli.NewGroupFlags(e, "suppressions", suppressionsUsage, "list", "remove"), e, args)
	}
	switch args[0] {
	case "list":
		return runSuppressionsList(ctx, e, args[1:])
	case "remove":
		return runSuppressionsRemove(ctx, e, args[1:])
	}
	return cli.Usagef("suppressions: unknown subcommand %q; want list or remove", args[0])
}

func runSuppressionsList(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "suppressions list", suppressionsListUsage)
	tenantName := fs.String("tenant", "", "only this tenant's (default: every tenant's)")
	var f mirror.SuppressionFilter
	fs.StringVar(&f.Address, "address", "", "only this address's suppression")
	fs.BoolVar(&f.Lifted, "lifted", false, "also those an operator lifted")
	fs.IntVar(&f.Limit, "limit", 1000, "at most this many rows")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if f.Address != "" {
		if err := reminder.CheckEmail("--address", f.Address); err != nil {
			return cli.UsageError{Err: err}
		}
	}
	if f.Limit <= 0 {
		return cli.Usagef("--limit must be positive")
	}
	return cli.WithMirror(ctx, e, 2, func(d *cli.Deps, store *mirror.Store) error {
		var err error
		if f.Tenant, f.AnyTenant, err = tenantsOf(d, *tenantName); err != nil {
			return err
		}
		rows, err := store.Suppressions(ctx, f)
		if err != nil {
			return err
		}
		for i := range rows {
			rows[i].Tenant = reminder.TenantName(rows[i].Tenant, d.Cfg.DefaultTenant)
		}
		if *asJSON {
			writeSuppressionsJSON(e.Stdout, rows)
			return nil
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tADDRESS SHA-256\tREASON\tSINCE\tREMINDER\tLIFTED")
		for _, r := range rows {
			lifted := "-"
			if r.LiftedAt != nil {
				lifted = r.LiftedAt.UTC().Format(time.RFC3339) + " by " + r.LiftedBy
			}
			fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\n", r.Tenant, r.AddressSHA256[:16], r.Reason,
				r.SuppressedAt.UTC().Format(time.RFC3339), r.ReminderID, lifted)
		}
		return tw.Flush()
	})
}

func runSuppressionsRemove(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "suppressions remove", suppressionsRemoveUsage)
	address := fs.String("address", "", "the address to send to again (required)")
	tenantName := fs.String("tenant", "", "the tenant whose suppression to lift (default: the default tenant, SHIPNOTIFY_DEFAULT_TENANT)")
	a := actorFlags(fs, e)
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if err := reminder.CheckEmail("--address", *address); err != nil {
		return cli.UsageError{Err: err}
	}
	return cli.WithMirror(ctx, e, 2, func(d *cli.Deps, store *mirror.Store) error {
		tenant, err := tenantOf(d, *tenantName)
		if err != nil {
			return err
		}
		by := a.By
		if a.Reason != "" {
			by += ": " + a.Reason
		}
		err = store.LiftSuppression(ctx, tenant, *address, by)
		if errors.Is(err, mirror.ErrNotSuppressed) {
			return fmt.Errorf("--address: %w for tenant %s", err, reminder.TenantName(tenant, d.Cfg.DefaultTenant))
		}
		if err != nil {
			return err
		}
		d.Logger.Info("suppression lifted", "tenant", reminder.TenantName(tenant, d.Cfg.DefaultTenant), "by", a.By)
		return json.NewEncoder(e.Stdout).Encode(map[string]string{
			"tenant": reminder.TenantName(tenant, d.Cfg.DefaultTenant), "status": "lifted"})
	})
}

// writeSuppressionsJSON is suppressions list --json's output: a
// suppression a line, in the API's wire format (api.Suppression), its
// tenant named as rows name it.
func writeSuppressionsJSON(w io.Writer, rows []mirror.Suppression) {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		_ = enc.Encode(api.SuppressionOf(r, r.Tenant))
	}
}
