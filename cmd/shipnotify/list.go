package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

func init() {
	register("list", "list reminders from the mirror: by shipment, by state, due or going out between two times", runList)
}

func runList(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "list", "list [--tenant T] [--shipment S] [--update U] [--state S] [--due-from T] [--due-to T]\n"+
		"       [--goes-out-from T] [--goes-out-to T] [--digest-key K] [--limit N] [--after ID] [--json]")
	var f mirror.Filter
	var state, from, to, outFrom, outTo, tenantName, after string
	fs.StringVar(&tenantName, "tenant", "", "only this tenant's (default: every tenant's)")
	fs.StringVar(&f.ShipmentID, "shipment", "", "only this shipment id")
	fs.StringVar(&f.UpdateID, "update", "", "only this update id")
	fs.StringVar(&state, "state", "", "only this state: "+mirror.FilterStatesText())
	fs.StringVar(&from, "due-from", "", "due at or after this time (RFC 3339, or a date like 2026-12-08 for its UTC midnight)")
	fs.StringVar(&to, "due-to", "", "due before this time (same forms as --due-from)")
	// What is owed on a day counts by when reminders go out: a reminder
	// with a send window goes out at its opening, not at its due time.
	fs.StringVar(&outFrom, "goes-out-from", "", "going out at or after this time: its send window's opening, else its due time (same forms as --due-from)")
	fs.StringVar(&outTo, "goes-out-to", "", "going out before this time (same forms as --due-from)")
	// A digest's key names the one message its members went out in, as
	// show prints it: which reminders did that mail carry?
	fs.StringVar(&f.DigestKey, "digest-key", "", "only the reminders of this digest (its key, "+reminder.DigestKeyPrefix+"…, as show prints it)")
	fs.IntVar(&f.Limit, "limit", 1000, "at most this many rows (0 for all); when there are more, the next page's command is printed")
	fs.StringVar(&after, "after", "", "continue after this reminder id, in the list's order (due time, then id): the next page")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	var err error
	if f.State, err = parseState(state); err != nil {
		return err
	}
	if f.DueFrom, f.DueTo, err = parseDueWindow(from, to); err != nil {
		return err
	}
	if f.GoesOutFrom, f.GoesOutTo, err = parseSpan("--goes-out-from", "--goes-out-to", outFrom, outTo); err != nil {
		return err
	}
	if f.DigestKey != "" && !reminder.IsDigestKey(f.DigestKey) {
		return cli.Usagef("--digest-key: not a digest's key (%s and 64 hex digits, as show prints it)", reminder.DigestKeyPrefix)
	}
	if f.Limit < 0 {
		return cli.Usagef("--limit must not be negative")
	}
	if after != "" && !reminder.IsReminderID(after) {
		return cli.Usagef("--after: not a reminder id")
	}
	return cli.WithMirror(ctx, e, 2, func(d *cli.Deps, store *mirror.Store) error {
		var err error
		if f.Tenant, f.AnyTenant, err = tenantsOf(d, tenantName); err != nil {
			return err
		}
		if after != "" {
			row, err := store.Get(ctx, after)
			if errors.Is(err, mirror.ErrNotFound) {
				return cli.Usagef("--after: no reminder %s in the mirror", after)
			}
			if err != nil {
				return err
			}
			f.AfterDueAt, f.AfterID = row.DueAt, row.ID
		}
		limit := f.Limit
		if limit > 0 {
			f.Limit++ // one more says whether there are more
		}
		rows, err := store.List(ctx, f)
		if err != nil {
			return err
		}
		more := limit > 0 && len(rows) > limit
		if more {
			rows = rows[:limit]
			match := "match"
			if limit == 1 {
				match = "matches"
			}
			defer fmt.Fprintf(e.Stderr, "shipnotify: more than %s %s; the next page: shipnotify %s --after %s\n",
				cli.Count(int64(limit), "reminder", "reminders"), match, strings.Join(withoutAfter(args), " "), rows[len(rows)-1].ID)
		}
		if *asJSON {
			writeListJSON(e.Stdout, rows, d.Cfg.IDs)
			return nil
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		// GOES OUT is the due time but for a reminder a send window holds
		// (or, under window_policy previous, sends before it is due).
		fmt.Fprintln(tw, "REMINDER\tCHANNEL\tDUE\tGOES OUT\tSTATE\tOUTCOME\tDELIVERY KEY")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Channel, r.DueAt.UTC().Format(time.RFC3339),
				r.GoesOutAt.UTC().Format(time.RFC3339), r.State, cmp.Or(string(r.ProviderOutcome), "-"), r.DeliveryKey[:16]+"…")
		}
		return tw.Flush()
	})
}

// writeListJSON is list --json's output: a reminder a line, in the API's
// wire format (api.Reminder), not the mirror's row, so a column added to
// the mirror changes neither; ids seal what the API seals.
func writeListJSON(w io.Writer, rows []mirror.Row, ids *opaque.Keys) {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		_ = enc.Encode(api.ReminderOf(r, ids))
	}
}

// withoutAfter is list's arguments less an --after and its value, so the
// next page's command names its own.
func withoutAfter(args []string) []string {
	out := []string{"list"}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--after" || a == "-after":
			i++
		case strings.HasPrefix(a, "--after=") || strings.HasPrefix(a, "-after="):
		default:
			out = append(out, a)
		}
	}
	return out
}

func parseState(s string) (reminder.State, error) {
	if s == "" {
		return "", nil
	}
	if k := reminder.State(s); slices.Contains(mirror.FilterStates, k) {
		return k, nil
	}
	return "", cli.Usagef("--state: unknown state %q; want %s", s, mirror.FilterStatesText())
}

// parseDueWindow is --due-from and --due-to, as list and export take them.
func parseDueWindow(from, to string) (dueFrom, dueTo time.Time, err error) {
	return parseSpan("--due-from", "--due-to", from, to)
}

// parseSpan is a half-open span of time given by two flags, fromFlag and
// toFlag, either of them empty: --due-from and --due-to, --goes-out-from
// and --goes-out-to.
func parseSpan(fromFlag, toFlag, from, to string) (start, end time.Time, err error) {
	if start, err = parseWhen(fromFlag, from); err != nil {
		return
	}
	if end, err = parseWhen(toFlag, to); err != nil {
		return
	}
	if !start.IsZero() && !end.IsZero() && !end.After(start) {
		return time.Time{}, time.Time{}, cli.Usagef("%s must be after %s", toFlag, fromFlag)
	}
	return start, end, nil
}

func parseWhen(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, cli.Usagef("%s: not an RFC 3339 time or a YYYY-MM-DD date", flag)
}
