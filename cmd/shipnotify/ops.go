package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/shipnotify/shipnotify/internal/capacity"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/config"
	"github.com/shipnotify/shipnotify/mirror"
)

func init() {
	register("config", "print the effective configuration, secrets redacted", runConfig)
	register("capacity", "the seed article's capacity arithmetic: rates, headroom, catch-up after an outage", runCapacity)
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

func runCapacity(_ context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "capacity", "capacity --updates-per-day N --subscribers-per-update N --peak-factor N [--drain-rate R] [--outage D] "+
		"[--actions-per-reminder A] [--price-per-million-actions P]")
	var in capacity.Input
	fs.Float64Var(&in.UpdatesPerDay, "updates-per-day", 0, "shipment updates a day")
	fs.Float64Var(&in.SubscribersPerUpdate, "subscribers-per-update", 0, "subscribers each update fans out to")
	fs.Float64Var(&in.PeakFactor, "peak-factor", 10, "peak rate over the average")
	fs.Float64Var(&in.DrainRate, "drain-rate", 0, "deliveries a second the system drains; default: the last benchmark's catch-up rate")
	fs.DurationVar(&in.Outage, "outage", 6*time.Hour, "how long nothing is delivered")
	fs.Float64Var(&in.ActionsPerDelivery, "actions-per-reminder", 0, "Temporal Cloud actions one delivered reminder costs; default: what the last benchmark counted in the full path's history")
	price := fs.Float64("price-per-million-actions", 0, "your Temporal Cloud price per million actions, for a cost line (none is built in)")
	benchFile := fs.String("bench-results", "out/bench.json", "where the last benchmark's report is (make bench writes it)")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if *price < 0 {
		return cli.Usagef("--price-per-million-actions must not be negative")
	}
	measured, readErr := readBenchFigures(*benchFile)
	source := "--drain-rate"
	if in.DrainRate == 0 {
		if measured.DrainRate == 0 {
			return cli.Usagef("--drain-rate: not given, and no benchmark result to take it from (%v); run make bench or pass it", cmpErr(readErr, "no catch-up result"))
		}
		in.DrainRate, source = measured.DrainRate, "the catch-up drain rate measured in "+*benchFile
	}
	actionsSource := "--actions-per-reminder"
	if in.ActionsPerDelivery == 0 && measured.ActionsPerDelivery > 0 {
		in.ActionsPerDelivery, actionsSource = measured.ActionsPerDelivery, "counted in "+*benchFile
	}
	if *price > 0 && in.ActionsPerDelivery == 0 {
		return cli.Usagef("--price-per-million-actions: no actions per reminder to price (%v); pass --actions-per-reminder or run make bench", cmpErr(readErr, "no actions counted"))
	}
	p, err := capacity.Compute(in)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "deliveries per day\t%s\n", thousands(p.DeliveriesPerDay))
	fmt.Fprintf(tw, "average rate\t%.2f/s\n", p.AverageRate)
	fmt.Fprintf(tw, "peak rate (x%g)\t%.1f/s\n", in.PeakFactor, p.PeakRate)
	fmt.Fprintf(tw, "drain rate\t%.1f/s (%s)\n", in.DrainRate, source)
	fmt.Fprintf(tw, "headroom at peak\t%.1fx\n", p.Headroom)
	fmt.Fprintf(tw, "backlog after a %s outage\t%s deliveries\n", in.Outage, thousands(p.Backlog))
	fmt.Fprintf(tw, "catch-up\t%s", p.CatchUp)
	if p.Keeps {
		fmt.Fprintf(tw, " (%s while new ones keep arriving at the average rate)\n", p.CatchUpWhileArriving)
	} else {
		fmt.Fprintf(tw, " (never, while new ones keep arriving faster than the drain)\n")
	}
	if in.ActionsPerDelivery > 0 {
		fmt.Fprintf(tw, "Temporal actions per reminder\t%g (%s)\n", in.ActionsPerDelivery, actionsSource)
		fmt.Fprintf(tw, "Temporal actions per day\t%s\n", thousands(p.ActionsPerDay))
		fmt.Fprintf(tw, "Temporal actions per month\t%s (%d days)\n", thousands(p.ActionsPerMonth), capacity.DaysPerMonth)
		if *price > 0 {
			fmt.Fprintf(tw, "actions cost per month\t%.2f (at %g per million actions)\n", capacity.Cost(p.ActionsPerMonth, *price), *price)
		}
	}
	return tw.Flush()
}

// readBenchFigures reads the figures capacity takes from a benchmark report.
func readBenchFigures(path string) (capacity.Measured, error) {
	f, err := os.Open(path)
	if err != nil {
		return capacity.Measured{}, err
	}
	defer f.Close()
	m, err := capacity.ReadMeasured(f)
	if err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// cmpErr is err, or a plain error saying what was missing.
func cmpErr(err error, missing string) error {
	if err != nil {
		return err
	}
	return errors.New(missing)
}

func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func runExport(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "export", "export [--tenant T] [--state S|pending] [--shipment S] [--format jsonl|csv]")
	var f mirror.Filter
	tenantName := fs.String("tenant", "", "only this tenant's (default: every tenant's)")
	state := fs.String("state", "", "only this state, or pending (scheduled and awaiting approval)")
	fs.StringVar(&f.ShipmentID, "shipment", "", "only this shipment")
	format := fs.String("format", "jsonl", "jsonl or csv")
	if err := cli.ParseFlags(fs, e, args); err != nil {
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
