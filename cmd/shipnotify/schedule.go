package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

func init() {
	register("schedule", "schedule the reminders of a shipment update (JSON from -f or stdin)", runSchedule)
}

func runSchedule(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "schedule", "schedule [--tenant T] -f update.json")
	file := fs.String("f", "-", "the update's JSON file; - reads stdin")
	tenantName := fs.String("tenant", "", "the tenant the update belongs to (default: the default tenant, SHIPNOTIFY_DEFAULT_TENANT)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	u, err := readUpdate(e, *file)
	if err != nil {
		return err
	}
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	if u.Tenant, err = tenantOf(d, *tenantName); err != nil {
		return err
	}
	// Check before connecting to anything: bad input writes nothing.
	rems, err := d.NewStarter().Plan(ctx, u)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	st, err := d.Starter(ctx)
	if err != nil {
		return err
	}
	// A namespace never set up would refuse every start: say so before
	// writing rows that could not start. Any other failure of the check
	// (visibility down) is left to the starts, which do not need it.
	if err := st.CheckSearchAttributes(ctx); errors.Is(err, starter.ErrSearchAttributesUnknown) {
		return err
	}
	results, err := st.SchedulePlanned(ctx, u, rems)
	printResults(e, results)
	printGoingOut(e, results, rems)
	return startError(err, "scheduling the same update again")
}

// printGoingOut tells the person who scheduled, on stderr (stdout is the
// results' JSON), of each reminder a send window holds past its due time
// or sends before it, and of each that goes out in a digest (at its
// interval's boundary): when it goes out, and why, by the clock of the
// subscriber's zone. A reminder that goes out alone when due is not
// mentioned.
func printGoingOut(e cli.Env, results []starter.Result, rems []reminder.Reminder) {
	planned := map[string]reminder.Reminder{}
	for _, r := range rems {
		planned[r.ID] = r
	}
	for _, r := range results {
		p := planned[r.ReminderID]
		held := p.Window != nil && !r.GoesOutAt.Equal(r.DueAt)
		if r.GoesOutAt.IsZero() || (!held && p.Digest == 0) {
			continue
		}
		var why []string
		if held {
			why = append(why, p.Window.GoingOut(r.DueAt, r.GoesOutAt))
		}
		if p.Digest > 0 {
			why = append(why, reminder.GoingOutInDigest(p.Digest))
		}
		when := "not at its due time"
		if r.GoesOutAt.Equal(r.DueAt) {
			when = "its due time"
		}
		fmt.Fprintf(e.Stderr, "%s: %s goes out at %s, %s: %s\n", e.Program, r.ReminderID,
			r.GoesOutAt.UTC().Format(time.RFC3339), when, strings.Join(why, "; "))
	}
}

// startError is the error of a command that started reminders (schedule,
// reconcile) as it says it: a refusal for want of the search attributes
// once, not once per reminder, with what became of the rows and what
// starts them (again); any other failure as it is.
func startError(err error, again string) error {
	var sa *starter.SearchAttributesError
	if !errors.As(err, &sa) {
		return err
	}
	told := fmt.Errorf("%w; the reminders not started are kept, and %s starts them", sa, again)
	return errors.Join(told, withoutRefusals(err))
}

// withoutRefusals is err's joined errors without the search attribute
// refusals, nil when nothing else is left.
func withoutRefusals(err error) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var rest []error
		for _, e := range joined.Unwrap() {
			rest = append(rest, withoutRefusals(e))
		}
		return errors.Join(rest...)
	}
	if errors.Is(err, starter.ErrSearchAttributesUnknown) {
		return nil
	}
	return err
}

// printResults writes one JSON line per reminder a start reached, every
// time in UTC (a send window's opening is worked out in its zone).
func printResults(e cli.Env, results []starter.Result) {
	enc := json.NewEncoder(e.Stdout)
	for _, r := range results {
		if r.ReminderID != "" {
			r.DueAt, r.GoesOutAt = r.DueAt.UTC(), r.GoesOutAt.UTC()
			_ = enc.Encode(r)
		}
	}
}

func readUpdate(e cli.Env, file string) (reminder.Update, error) {
	var in io.Reader = e.Stdin
	if f, ok := in.(*os.File); ok && file == "-" && isTerminal(f) {
		// Not a silent wait: someone typed the command without -f.
		fmt.Fprintf(e.Stderr, "%s schedule: reading the update's JSON from the terminal; end it with Ctrl-D (or Ctrl-C, and give -f update.json)\n", e.Program)
	}
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return reminder.Update{}, cli.Usagef("cannot read update file: %v", err)
		}
		defer f.Close()
		in = f
	}
	u, err := reminder.ParseUpdate(in)
	if err != nil {
		return reminder.Update{}, cli.UsageError{Err: err}
	}
	return u, nil
}
