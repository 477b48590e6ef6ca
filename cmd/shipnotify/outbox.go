package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

func init() {
	register("outbox", "the status events owed to the tracker's endpoints: list them, retry those given up or waiting", runOutbox)
}

const outboxUsage = "outbox list [--endpoint E] [--reminder ID] [--status pending|given_up|delivered] [--limit N] [--json]\n" +
	"       shipnotify outbox retry (--endpoint E | --id N[,N…])"

func runOutbox(ctx context.Context, e cli.Env, args []string) error {
	verb := ""
	if len(args) > 0 {
		verb = args[0]
	}
	switch verb {
	case "list":
		return runOutboxList(ctx, e, args[1:])
	case "retry":
		return runOutboxRetry(ctx, e, args[1:])
	}
	fs := cli.NewGroupFlags(e, "outbox", outboxUsage, "list", "retry")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if verb == "" {
		return cli.Usagef("outbox: say list or retry")
	}
	return cli.Usagef("outbox: unknown verb %q; want list or retry", verb)
}

func runOutboxList(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "outbox list", "outbox list [--endpoint E] [--reminder ID] [--status pending|given_up|delivered] [--limit N] [--json]")
	var f mirror.OutboxFilter
	fs.StringVar(&f.Endpoint, "endpoint", "", "only this endpoint's events")
	fs.StringVar(&f.ReminderID, "reminder", "", "only this reminder's events (its id, as list prints it)")
	fs.StringVar(&f.Status, "status", "", "only events in this status: "+strings.Join(mirror.OutboxStatuses, ", ")+" (default: pending and given_up)")
	fs.IntVar(&f.Limit, "limit", 1000, "at most this many events (0 for all)")
	asJSON := fs.Bool("json", false, "print the endpoints and the events as one JSON object")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	case f.Status != "" && !slices.Contains(mirror.OutboxStatuses, f.Status):
		return cli.Usagef("--status: want %s", strings.Join(mirror.OutboxStatuses, ", "))
	case f.Limit < 0:
		return cli.Usagef("--limit must not be negative")
	}
	return cli.WithMirror(ctx, e, 2, func(d *cli.Deps, store *mirror.Store) error {
		eps, err := store.StatusEndpoints(ctx)
		if err != nil {
			return err
		}
		rows, err := store.OutboxRows(ctx, f)
		if err != nil {
			return err
		}
		if *asJSON {
			if eps == nil {
				eps = []mirror.StatusEndpointState{}
			}
			if rows == nil {
				rows = []mirror.OutboxRow{}
			}
			enc := json.NewEncoder(e.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(struct {
				Endpoints []mirror.StatusEndpointState `json:"endpoints"`
				Events    []mirror.OutboxRow           `json:"events"`
			}{eps, rows})
		}
		return printOutbox(e.Stdout, eps, rows, d.Cfg.DefaultTenant, time.Now())
	})
}

func printOutbox(w io.Writer, eps []mirror.StatusEndpointState, rows []mirror.OutboxRow, defaultTenant string, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(eps) == 0 {
		fmt.Fprintln(tw, "no status endpoint is registered (SHIPNOTIFY_STATUS_ENDPOINTS_FILE, read by serve)")
	} else {
		fmt.Fprintln(tw, "ENDPOINT\tTENANT\tSTATE\tPENDING\tOLDEST\tGIVEN UP")
		for _, ep := range eps {
			oldest := "-"
			if ep.Pending > 0 {
				oldest = ep.OldestPending.Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\n", ep.Name, reminder.TenantName(ep.Tenant, defaultTenant),
				endpointState(ep, now), ep.Pending, oldest, ep.GivenUp)
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "ID\tENDPOINT\tREMINDER\tSEQ\tEVENT\tSTATUS\tATTEMPTS\tCREATED\tLAST ERROR")
	for _, r := range rows {
		status := r.Status
		if r.Status == "pending" && r.NextAttemptAt.After(now) {
			status += " (next " + r.NextAttemptAt.UTC().Format(time.RFC3339) + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Endpoint, r.ReminderID, r.Seq, r.Type, status,
			r.Attempts, r.CreatedAt.UTC().Format(time.RFC3339), cmp.Or(r.LastError, "-"))
	}
	return tw.Flush()
}

// endpointState is how outbox list says where an endpoint stands.
func endpointState(ep mirror.StatusEndpointState, now time.Time) string {
	switch {
	case ep.DisabledAt != nil:
		return "disabled: " + cmp.Or(ep.DisabledReason, "410") + " (retry --endpoint enables it)"
	case ep.RetiredAt != nil:
		return "retired (not configured)"
	case ep.RetryAt != nil && ep.RetryAt.After(now):
		return fmt.Sprintf("failing (%d in a row), next try %s", ep.Failures, ep.RetryAt.UTC().Format(time.RFC3339))
	}
	return "active"
}

func runOutboxRetry(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "outbox retry", "outbox retry (--endpoint E | --id N[,N…])")
	endpoint := fs.String("endpoint", "", "every event of this endpoint: given-up ones are put back, waiting ones are due now; a disabled endpoint (410) is enabled again, and a failing one tried at once")
	ids := fs.String("id", "", "these events only (ids as outbox list prints them, comma-separated)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	o := mirror.RetryOptions{Endpoint: *endpoint}
	switch {
	case fs.NArg() > 0:
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	case (*endpoint == "") == (*ids == ""):
		return cli.Usagef("give --endpoint or --id, one of them")
	case *ids != "":
		for s := range strings.SplitSeq(*ids, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil || n < 1 {
				return cli.Usagef("--id: %q is not an event id", s)
			}
			o.IDs = append(o.IDs, n)
		}
	}
	return cli.WithMirror(ctx, e, 2, func(d *cli.Deps, store *mirror.Store) error {
		res, err := store.RetryOutbox(ctx, o)
		if errors.Is(err, mirror.ErrNotFound) {
			return cli.Usagef("--endpoint: no status endpoint %s is registered (outbox list names them)", *endpoint)
		}
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("%d given up put back, %d waiting made due now", res.Requeued, res.Hastened)
		if res.Enabled {
			msg += fmt.Sprintf("; endpoint %s enabled again", *endpoint)
		}
		fmt.Fprintln(e.Stdout, msg)
		return nil
	})
}
