package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/mirror"
)

func init() {
	register("config", "print the effective configuration, secrets redacted", runConfig)
	register("export", "stream the schedule of record from the mirror as JSON lines or CSV", runExport)
}

func runConfig(_ context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "config", "config [--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	settings := config.Effective(e.Lookup)
	// Validate too: the same errors the other commands would stop on.
	_, loadErr := config.Load(e.Lookup)
	if *asJSON {
		if err := json.NewEncoder(e.Stdout).Encode(settings); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VARIABLE\tVALUE\tSOURCE")
		for _, s := range settings {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Value, s.Source)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if loadErr != nil {
		return cli.UsageError{Err: loadErr}
	}
	return nil
}

func runExport(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "export", "export [--tenant T] [--shipment S] [--update U] [--state S|pending] [--due-from T] [--due-to T] [--format jsonl|csv]")
	var f mirror.Filter
	tenantName := fs.String("tenant", "", "only this tenant's (default: every tenant's)")
	state := fs.String("state", "", "only this state, or pending (scheduled and awaiting approval)")
	fs.StringVar(&f.ShipmentID, "shipment", "", "only this shipment")
	fs.StringVar(&f.UpdateID, "update", "", "only this update id")
	from := fs.String("due-from", "", "due at or after this time (RFC 3339, or a date like 2026-12-08 for its UTC midnight)")
	to := fs.String("due-to", "", "due before this time (same forms as --due-from)")
	format := fs.String("format", "jsonl", "jsonl or csv (the same columns; docs/operating.md#export)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if f.DueFrom, f.DueTo, err = parseDueWindow(*from, *to); err != nil {
		return err
	}
	if *state == string(mirror.Pending) {
		f.State = mirror.Pending
	} else {
		s, err := parseState(*state)
		if err != nil {
			return err
		}
		f.State = s
	}
	w, err := mirror.NewRowWriter(e.Stdout, *format)
	if err != nil {
		return cli.Usagef("--format: %v", err)
	}
	return cli.WithMirror(ctx, e, 2, func(d *cli.Deps, store *mirror.Store) error {
		var err error
		if f.Tenant, f.AnyTenant, err = tenantsOf(d, *tenantName); err != nil {
			return err
		}
		if err := store.Export(ctx, f, w.Write); err != nil {
			return err
		}
		return w.Flush()
	})
}

func init() {
	register("probe", "exit 0 if an HTTP health endpoint answers 2xx (a container healthcheck)", runProbe)
}

func runProbe(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "probe", "probe [URL]   (default http://127.0.0.1:9090/readyz)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	target := "http://127.0.0.1:9090/readyz"
	if fs.NArg() > 0 {
		target = fs.Arg(0)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return cli.Usagef("not a URL: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probe: %s answered %d", target, resp.StatusCode)
	}
	fmt.Fprintln(e.Stdout, "ok")
	return nil
}
