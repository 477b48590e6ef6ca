package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

func init() {
	register("cancel", "cancel every reminder of a shipment (a subscriber already reminded gets a cancellation notice)", runCancel)
	register("reschedule", "move an update's delivery window, or one reminder's due time", runReschedule)
	register("approve", "approve reminders awaiting approval", func(ctx context.Context, e cli.Env, args []string) error {
		return runDecide(ctx, e, args, true)
	})
	register("reject", "reject reminders awaiting approval (they end cancelled)", func(ctx context.Context, e cli.Env, args []string) error {
		return runDecide(ctx, e, args, false)
	})
}

// actorFlags adds --by and --reason; --by defaults to the OS user.
func actorFlags(fs *flag.FlagSet, e cli.Env) *starter.Actor {
	a := &starter.Actor{}
	by, ok := e.Lookup("USER")
	if !ok || by == "" {
		by = "cli"
	}
	fs.StringVar(&a.By, "by", by, "who asks (recorded in the audit trail)")
	fs.StringVar(&a.Reason, "reason", "", "why (recorded in the audit trail)")
	return a
}

// tenantFlag adds --tenant: the tenant whose shipment or update a command
// names (the default tenant when absent). A reminder id names its own.
func tenantFlag(fs *flag.FlagSet) *string {
	return fs.String("tenant", "", "the tenant the shipment belongs to (default: the default tenant, SHIPNOTIFY_DEFAULT_TENANT)")
}

// tenantOf reads --tenant against the configured default tenant's name.
func tenantOf(d *cli.Deps, name string) (string, error) {
	tenant, err := reminder.ParseTenant("--tenant", name)
	if err != nil {
		return "", cli.UsageError{Err: err}
	}
	return tenant.ID(d.Cfg.DefaultTenant), nil
}

// tenantsOf reads a listing's --tenant: every tenant when it names none
// (the operator's view), else that one.
func tenantsOf(d *cli.Deps, name string) (tenant string, anyTenant bool, err error) {
	if name == "" {
		return "", true, nil
	}
	tenant, err = tenantOf(d, name)
	return tenant, false, err
}

// printOutcomes writes one JSON line per reminder and fails when any
// reminder refused the change, could not record it, or could not be
// compensated, so a script notices.
func printOutcomes(e cli.Env, outs []starter.Outcome, err error) error {
	enc := json.NewEncoder(e.Stdout)
	notDone := 0
	for _, o := range outs {
		if o.ReminderID == "" {
			continue
		}
		if o.GoesOutAt != nil {
			// Worked out in the send window's zone: in UTC, as due_at.
			o.GoesOutAt = new(o.GoesOutAt.UTC())
		}
		_ = enc.Encode(o)
		switch o.Status {
		case starter.StatusRefused, starter.StatusFailed, starter.StatusCompensationFailed:
			notDone++
			fmt.Fprintf(e.Stderr, "shipnotify: %s %s: %s\n", o.ReminderID, o.Status, o.Error)
		}
	}
	if err != nil {
		return err
	}
	if notDone > 0 {
		return fmt.Errorf("%d of %s refused or failed", notDone, cli.Count(int64(len(outs)), "reminder", "reminders"))
	}
	return nil
}

func runCancel(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "cancel", "cancel --shipment S [--tenant T] [--reason R] [--by WHO]")
	shipment := fs.String("shipment", "", "the shipment whose reminders to cancel (required)")
	tenantName := tenantFlag(fs)
	who := actorFlags(fs, e)
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if *shipment == "" {
		return cli.Usagef("--shipment is required")
	}
	return cli.WithStarter(ctx, e, func(d *cli.Deps, st *starter.Starter) error {
		tenant, err := tenantOf(d, *tenantName)
		if err != nil {
			return err
		}
		outs, err := st.Cancel(ctx, tenant, *shipment, *who)
		if errors.Is(err, starter.ErrUnknownShipment) {
			return fmt.Errorf("no reminders for shipment %q: nothing to cancel", *shipment)
		}
		return printOutcomes(e, outs, err)
	})
}

func runReschedule(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "reschedule", "reschedule --shipment S --update U [--tenant T] --window-start T | --reminder ID --due-at T  [--reason R] [--by WHO]")
	shipment := fs.String("shipment", "", "the update's shipment")
	tenantName := tenantFlag(fs)
	update := fs.String("update", "", "the update whose delivery window moved")
	window := fs.String("window-start", "", "the new delivery window start (RFC 3339); every pending reminder of the update moves by as much")
	reminderID := fs.String("reminder", "", "one reminder to move instead")
	dueAt := fs.String("due-at", "", "that reminder's new due time (RFC 3339)")
	who := actorFlags(fs, e)
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	one := *reminderID != ""
	switch {
	case one && (*shipment != "" || *update != "" || *window != "" || *tenantName != ""):
		return cli.Usagef("give --reminder with --due-at, or --shipment, --update and --window-start, not both")
	case one && *dueAt == "":
		return cli.Usagef("--due-at is required with --reminder")
	case !one && (*shipment == "" || *update == "" || *window == ""):
		return cli.Usagef("--shipment, --update and --window-start are required (or --reminder and --due-at)")
	}
	flagName, value := "--window-start", *window
	if one {
		flagName, value = "--due-at", *dueAt
	}
	when, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return cli.Usagef("%s: not an RFC 3339 time (like 2026-12-03T08:00:00Z)", flagName)
	}
	// Out of range is bad input, refused before anything is asked.
	check := reminder.CheckWindow
	if one {
		check = reminder.CheckDue
	}
	var fe *reminder.FieldError
	if errors.As(check(flagName, when, time.Now()), &fe) {
		return cli.Usagef("%s", fe.Error())
	}
	return cli.WithStarter(ctx, e, func(d *cli.Deps, st *starter.Starter) error {
		if one {
			out, err := st.RescheduleReminder(ctx, reminder.TenantOf(*reminderID), *reminderID, when, *who)
			if errors.Is(err, mirror.ErrNotFound) {
				return fmt.Errorf("no reminder %q in the mirror", *reminderID)
			}
			return printOutcomes(e, []starter.Outcome{out}, err)
		}
		tenant, err := tenantOf(d, *tenantName)
		if err != nil {
			return err
		}
		outs, err := st.RescheduleUpdate(ctx, tenant, *shipment, *update, when, *who)
		if errors.Is(err, mirror.ErrNotFound) {
			return fmt.Errorf("no update %s/%s in the mirror", *shipment, *update)
		}
		return printOutcomes(e, outs, err)
	})
}

func runDecide(ctx context.Context, e cli.Env, args []string, approve bool) error {
	name := "reject"
	if approve {
		name = "approve"
	}
	fs := cli.NewFlags(e, name, name+" --reminder ID | --shipment S --update U [--tenant T]  [--reason R] [--by WHO]")
	var sel starter.Selection
	fs.StringVar(&sel.ReminderID, "reminder", "", "one reminder")
	fs.StringVar(&sel.ShipmentID, "shipment", "", "with --update: every reminder of the update awaiting approval")
	fs.StringVar(&sel.UpdateID, "update", "", "the update")
	tenantName := tenantFlag(fs)
	who := actorFlags(fs, e)
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if (sel.ReminderID == "") == (sel.ShipmentID == "" || sel.UpdateID == "") || (sel.ReminderID != "" && *tenantName != "") {
		return cli.Usagef("give --reminder, or --shipment with --update")
	}
	if who.By == "" {
		return cli.Usagef("--by: who decides is required")
	}
	return cli.WithStarter(ctx, e, func(d *cli.Deps, st *starter.Starter) error {
		var err error
		if sel.Tenant, err = tenantOf(d, *tenantName); err != nil {
			return err
		}
		if sel.ReminderID != "" {
			sel.Tenant = reminder.TenantOf(sel.ReminderID)
		}
		outs, err := st.Decide(ctx, sel, approve, *who)
		if errors.Is(err, mirror.ErrNotFound) {
			return fmt.Errorf("no reminder %q in the mirror", sel.ReminderID)
		}
		return printOutcomes(e, outs, err)
	})
}

func init() {
	register("reconcile", "start the workflows of mirror rows that never got one; with --verify, check the mirror and Temporal against each other", runReconcile)
}

func runReconcile(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "reconcile", "reconcile [--grace D] [--verify [--dry-run]]")
	grace := fs.Duration("grace", 2*time.Minute, "leave rows changed more recently than this alone: a Schedule or a change may still be running")
	verify := fs.Bool("verify", false, "check every pending row against its workflow and every running reminder workflow against its row; "+
		"print each divergence as a JSON line and repair those with one right answer")
	dryRun := fs.Bool("dry-run", false, "with --verify: report only, repair nothing")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if *grace < 0 {
		return cli.Usagef("--grace must not be negative")
	}
	if *dryRun && !*verify {
		return cli.Usagef("--dry-run goes with --verify")
	}
	return cli.WithStarter(ctx, e, func(d *cli.Deps, st *starter.Starter) error {
		if *verify {
			return runVerify(ctx, e, d, st, starter.VerifyOptions{Grace: *grace, Repair: !*dryRun})
		}
		results, err := st.Reconcile(ctx, *grace)
		printResults(e, results)
		if err == nil {
			d.Logger.Info("reconciled", "started", len(results))
		}
		return startError(err, "reconciling again")
	})
}

// runVerify prints one JSON line per divergence and fails when any is left
// unrepaired (reported only, a failed repair, or a dry run), so cron notices.
func runVerify(ctx context.Context, e cli.Env, d *cli.Deps, st *starter.Starter, o starter.VerifyOptions) error {
	divs, err := st.Verify(ctx, o)
	enc := json.NewEncoder(e.Stdout)
	byKind := map[string]int{}
	left := 0
	for _, dv := range divs {
		_ = enc.Encode(dv)
		byKind[dv.Kind]++
		if !dv.Repaired() {
			left++
		}
	}
	if err != nil {
		return err
	}
	d.Logger.Info("verified", "divergences", len(divs), "repaired", len(divs)-left, "left", left,
		"dry_run", !o.Repair, "kinds", byKind)
	if left > 0 {
		return fmt.Errorf("%d of %s left unrepaired", left, cli.Count(int64(len(divs)), "divergence", "divergences"))
	}
	return nil
}
