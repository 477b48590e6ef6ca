package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/shipnotify/shipnotify/internal/capacity"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/config"
)

func init() {
	register("capacity", "the seed article's capacity arithmetic (rates, headroom, catch-up after an outage); --fleet sizes a fleet from measured figures", runCapacity)
}

// figureFlags let an operator replace a measured figure of the fleet model
// with their own (measured on their cluster, say); the output then names
// the flag as its source.
var figureFlags = []struct {
	name, usage string
	scale       float64 // flag units per figure unit
	figure      func(*capacity.Figures) *capacity.Figure
}{
	{"events-per-reminder", "history events of one delivered reminder", 1, func(f *capacity.Figures) *capacity.Figure { return &f.EventsPerReminder }},
	{"engine-cpu-ms", "Temporal server CPU milliseconds per delivered reminder", 1e3, func(f *capacity.Figures) *capacity.Figure { return &f.EngineCPU }},
	{"persistence-cpu-ms", "Temporal's database CPU milliseconds per delivered reminder", 1e3, func(f *capacity.Figures) *capacity.Figure { return &f.PersistenceCPU }},
	{"persistence-writes", "Temporal persistence writes per delivered reminder", 1, func(f *capacity.Figures) *capacity.Figure { return &f.PersistenceWrites }},
	{"persistence-latency-ms", "one persistence write's latency in milliseconds (your database's: a managed one across zones is slower than this machine's)", 1e3, func(f *capacity.Figures) *capacity.Figure { return &f.PersistenceLatency }},
	{"worker-cpu-ms", "worker CPU milliseconds per delivered reminder", 1e3, func(f *capacity.Figures) *capacity.Figure { return &f.WorkerCPU }},
	{"mirror-cpu-ms", "the mirror's PostgreSQL CPU milliseconds per delivered reminder", 1e3, func(f *capacity.Figures) *capacity.Figure { return &f.MirrorCPU }},
	{"mirror-rows", "mirror rows one delivered reminder leaves", 1, func(f *capacity.Figures) *capacity.Figure { return &f.MirrorRows }},
	{"mirror-bytes", "mirror bytes (with indexes) one delivered reminder leaves", 1, func(f *capacity.Figures) *capacity.Figure { return &f.MirrorBytes }},
	{"provider-events", "SendGrid events per delivered reminder", 1, func(f *capacity.Figures) *capacity.Figure { return &f.ProviderEvents }},
	{"send-ms", "milliseconds a notify activity holds its slot (your provider's answer and the mirror's writes)", 1e3, func(f *capacity.Figures) *capacity.Figure { return &f.SendSeconds }},
}

// seedOnly and fleetOnly are the flags of one mode: given to the other,
// they are a mistake.
var (
	seedOnly  = map[string]bool{"drain-rate": true, "bench-results": true}
	fleetOnly = map[string]bool{"catch-up-window": true, "provider-rate": true, "retention": true, "lead": true,
		"slots-per-worker": true, "cores-per-worker": true, "serve-replicas": true, "shard-utilisation": true}
)

func runCapacity(_ context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "capacity", "capacity --updates-per-day N --subscribers-per-update N [--peak-factor N] [--outage D] "+
		"[--drain-rate R] [--actions-per-reminder A] [--price-per-million-actions P]\n"+
		"       capacity --fleet --updates-per-day N --subscribers-per-update N [--peak-factor N] [--outage D] [--catch-up-window D] "+
		"[--provider-rate R] [--retention 90d] [--slots-per-worker N] [--price-per-million-actions P] [a measured figure's flag]")
	var in capacity.Input
	fs.Float64Var(&in.UpdatesPerDay, "updates-per-day", 0, "shipment updates a day")
	fs.Float64Var(&in.SubscribersPerUpdate, "subscribers-per-update", 0, "subscribers each update fans out to")
	fs.Float64Var(&in.PeakFactor, "peak-factor", 10, "peak rate over the average")
	fs.DurationVar(&in.Outage, "outage", 6*time.Hour, "how long nothing is delivered")
	fs.Float64Var(&in.ActionsPerDelivery, "actions-per-reminder", 0, "Temporal Cloud actions one delivered reminder costs; default: what the last benchmark counted in the full path's history, else the measured figure --fleet uses")
	price := fs.Float64("price-per-million-actions", 0, "your Temporal Cloud price per million actions, for a cost line (none is built in)")
	fs.Float64Var(&in.DrainRate, "drain-rate", 0, "deliveries a second the system drains; default: the last benchmark's catch-up rate, else the measured figure --fleet uses")
	benchFile := fs.String("bench-results", "out/bench.json", "where the last benchmark's report is (make bench writes it)")

	fleet := fs.Bool("fleet", false, "size a fleet (workers, history shards, engine CPU, the mirror, connections) from the figures this project measured")
	fi := capacity.FleetInput{Retention: 90 * 24 * time.Hour, Lead: 7 * 24 * time.Hour}
	fs.DurationVar(&fi.CatchUpWindow, "catch-up-window", time.Hour, "--fleet: how soon after the outage its backlog must be gone")
	fs.Float64Var(&fi.ProviderRate, "provider-rate", 0, "--fleet: the provider's rate limit in sends a second (0: none)")
	fs.Var(daysFlag{&fi.Retention}, "retention", "--fleet: how long finished reminders stay in the mirror (prune --older-than), days (90d) or a duration")
	fs.Var(daysFlag{&fi.Lead}, "lead", "--fleet: how far ahead of their due time reminders are scheduled, on average, days (7d) or a duration")
	fs.IntVar(&fi.SlotsPerWorker, "slots-per-worker", config.DefaultWorkerMaxActivities, "--fleet: notify activities in flight per worker (SHIPNOTIFY_WORKER_MAX_ACTIVITIES; its default)")
	fs.Float64Var(&fi.CoresPerWorker, "cores-per-worker", 1, "--fleet: CPU cores a worker is given")
	fs.IntVar(&fi.ServeReplica, "serve-replicas", 2, "--fleet: serve replicas")
	fs.Float64Var(&fi.ShardUtilisation, "shard-utilisation", 0.5, "--fleet: the share of a history shard's write ceiling the design rate may use")
	figures := capacity.DefaultFigures
	for _, ff := range figureFlags {
		fig := ff.figure(&figures)
		fs.Func(ff.name, "--fleet: "+ff.usage+" (default: measured)", func(s string) error {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 {
				return errors.New("want a number, zero or more")
			}
			*fig = capacity.Figure{Value: v / ff.scale, Source: "--" + ff.name}
			return nil
		})
	}
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if *price < 0 {
		return cli.Usagef("--price-per-million-actions must not be negative")
	}
	var misplaced error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case *fleet && seedOnly[f.Name]:
			misplaced = cli.Usagef("--%s: not with --fleet, which sizes the fleet from measured figures instead", f.Name)
		case !*fleet && (fleetOnly[f.Name] || isFigureFlag(f.Name)):
			misplaced = cli.Usagef("--%s: only with --fleet", f.Name)
		}
	})
	if misplaced != nil {
		return misplaced
	}
	if *fleet {
		switch {
		case fi.CatchUpWindow <= 0:
			return cli.Usagef("--catch-up-window must be positive")
		case fi.ProviderRate < 0:
			return cli.Usagef("--provider-rate must not be negative")
		case fi.SlotsPerWorker < 1:
			return cli.Usagef("--slots-per-worker must be at least 1")
		case fi.CoresPerWorker <= 0:
			return cli.Usagef("--cores-per-worker must be positive")
		case fi.ShardUtilisation <= 0 || fi.ShardUtilisation > 1:
			return cli.Usagef("--shard-utilisation must be above 0 and at most 1")
		case fi.ServeReplica < 1:
			return cli.Usagef("--serve-replicas must be at least 1")
		case figures.PersistenceLatency.Value <= 0:
			return cli.Usagef("--persistence-latency-ms must be positive")
		case figures.SendSeconds.Value <= 0:
			return cli.Usagef("--send-ms must be positive")
		}
		return runFleet(e.Stdout, in, fi, figures, *price)
	}
	// Without a benchmark report of its own (make bench writes one), the
	// command takes the figures built into the binary, the ones --fleet
	// uses, so it answers out of the box.
	measured, readErr := readBenchFigures(*benchFile)
	source := "--drain-rate"
	if in.DrainRate == 0 {
		if measured.DrainRate > 0 {
			in.DrainRate, source = measured.DrainRate, "the catch-up drain rate measured in "+*benchFile
		} else {
			in.DrainRate, source = figures.MeasuredRate.Value, builtIn(*benchFile, readErr)+figures.MeasuredRate.Source
		}
	}
	actionsSource := "--actions-per-reminder"
	if in.ActionsPerDelivery == 0 {
		if measured.ActionsPerDelivery > 0 {
			in.ActionsPerDelivery, actionsSource = measured.ActionsPerDelivery, "counted in "+*benchFile
		} else {
			in.ActionsPerDelivery, actionsSource = figures.ActionsPerReminder.Value, builtIn(*benchFile, readErr)+figures.ActionsPerReminder.Source
		}
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
	if err := compareFleet(tw, in, fi, figures); err != nil {
		return err
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

// compareFleet says what --fleet answers on the same inputs and why it
// differs: this command drains at one rate as given (or measured), --fleet
// sizes a fleet to drain at its design rate (the peak, or the outage's
// backlog cleared within its catch-up window, whichever is larger).
func compareFleet(w io.Writer, in capacity.Input, fi capacity.FleetInput, f capacity.Figures) error {
	fi.UpdatesPerDay, fi.SubscribersPerUpdate, fi.PeakFactor, fi.Outage = in.UpdatesPerDay, in.SubscribersPerUpdate, in.PeakFactor, in.Outage
	fi.WorkerPool = int(cli.WorkerPoolSize(fi.SlotsPerWorker))
	fi.ServePool, fi.ExtraConnections = cli.ServePoolSize, cli.MigratePoolSize
	p, err := capacity.PlanFleet(fi, f)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	fmt.Fprintf(w, "catch-up with --fleet\t%s (it sizes a fleet for %s/s, the peak or this backlog cleared within %s, "+
		"whichever is larger, not for the drain rate above)\n", p.CatchUpWhileArriving, ratePerSecond(p.DesignRate), fi.CatchUpWindow)
	return nil
}

func isFigureFlag(name string) bool {
	for _, ff := range figureFlags {
		if ff.name == name {
			return true
		}
	}
	return false
}

// runFleet prints the fleet model: the load, the measured inputs with
// their sources, and what a fleet needs at the design rate, each output
// saying how it was reached.
func runFleet(w io.Writer, in capacity.Input, fi capacity.FleetInput, f capacity.Figures, price float64) error {
	fi.UpdatesPerDay, fi.SubscribersPerUpdate, fi.PeakFactor, fi.Outage, fi.PricePerMillion =
		in.UpdatesPerDay, in.SubscribersPerUpdate, in.PeakFactor, in.Outage, price
	if in.ActionsPerDelivery > 0 {
		f.ActionsPerReminder = capacity.Figure{Value: in.ActionsPerDelivery, Source: "--actions-per-reminder"}
	}
	fi.WorkerPool = int(cli.WorkerPoolSize(fi.SlotsPerWorker))
	fi.ServePool, fi.ExtraConnections = cli.ServePoolSize, cli.MigratePoolSize
	p, err := capacity.PlanFleet(fi, f)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THE LOAD\t\t")
	fmt.Fprintf(tw, "deliveries per day\t%s\t%s updates x %g subscribers\n", thousands(p.DeliveriesPerDay), thousands(in.UpdatesPerDay), in.SubscribersPerUpdate)
	fmt.Fprintf(tw, "average rate\t%s/s\t\n", ratePerSecond(p.AverageRate))
	fmt.Fprintf(tw, "peak rate\t%s/s\tx%g the average\n", ratePerSecond(p.PeakRate), in.PeakFactor)
	fmt.Fprintf(tw, "catch-up rate\t%s/s\ta %s outage's %s cleared within %s while new ones arrive\n",
		ratePerSecond(p.CatchUpRate), fi.Outage, thousands(p.Backlog), fi.CatchUpWindow)
	design := "the larger of the two"
	if p.ProviderBound {
		design = fmt.Sprintf("the provider's limit of %s/s, below both", ratePerSecond(fi.ProviderRate))
	}
	fmt.Fprintf(tw, "design rate\t%s/s\t%s: what the fleet is sized for\n", ratePerSecond(p.DesignRate), design)

	fmt.Fprintln(tw, "\t\t")
	fmt.Fprintln(tw, "MEASURED, PER DELIVERED REMINDER\t\tSOURCE")
	for _, m := range []struct {
		name, value string
		fig         capacity.Figure
	}{
		{"Temporal actions", fmt.Sprintf("%g", f.ActionsPerReminder.Value), f.ActionsPerReminder},
		{"history events", fmt.Sprintf("%g", f.EventsPerReminder.Value), f.EventsPerReminder},
		{"Temporal server CPU", ms(f.EngineCPU.Value), f.EngineCPU},
		{"Temporal's database CPU", ms(f.PersistenceCPU.Value), f.PersistenceCPU},
		{"persistence writes", fmt.Sprintf("%.1f", f.PersistenceWrites.Value), f.PersistenceWrites},
		{"one persistence write", ms(f.PersistenceLatency.Value), f.PersistenceLatency},
		{"worker CPU", ms(f.WorkerCPU.Value), f.WorkerCPU},
		{"slot time (send and record)", ms(f.SendSeconds.Value), f.SendSeconds},
		{"mirror's PostgreSQL CPU", ms(f.MirrorCPU.Value), f.MirrorCPU},
		{"mirror rows", fmt.Sprintf("%.1f", f.MirrorRows.Value), f.MirrorRows},
		{"mirror bytes", thousands(f.MirrorBytes.Value), f.MirrorBytes},
		{"provider events", fmt.Sprintf("%.1f", f.ProviderEvents.Value), f.ProviderEvents},
		{"the CPU figures' drain rate", ratePerSecond(f.MeasuredRate.Value) + "/s", f.MeasuredRate},
	} {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.name, m.value, m.fig.Source)
	}

	extrapolated := fmt.Sprintf("measured CPU x design rate, within the measured %s/s", ratePerSecond(f.MeasuredRate.Value))
	if p.DesignRate > f.MeasuredRate.Value {
		extrapolated = fmt.Sprintf("extrapolated: measured CPU x design rate, %.0fx the %s/s it was measured at on 2 shared cores; an upper bound",
			p.DesignRate/f.MeasuredRate.Value, ratePerSecond(f.MeasuredRate.Value))
	}
	fmt.Fprintln(tw, "\t\t")
	fmt.Fprintln(tw, "THE FLEET AT THE DESIGN RATE\t\tHOW")
	fmt.Fprintf(tw, "Temporal actions per month\t%s\tmeasured actions x deliveries x %d days\n", thousands(p.ActionsPerMonth), capacity.DaysPerMonth)
	if price > 0 {
		fmt.Fprintf(tw, "actions cost per month\t%s\tat %g per million actions\n", thousands(p.Cost), price)
	}
	fmt.Fprintf(tw, "history events\t%s/s\tmeasured events x design rate\n", thousands(p.HistoryEvents))
	fmt.Fprintf(tw, "Temporal server (frontend, history, matching)\t%s cores\t%s\n", cores(p.EngineCores), extrapolated)
	fmt.Fprintf(tw, "Temporal's database\t%s cores\tas above\n", cores(p.PersistenceCores))
	fmt.Fprintf(tw, "history shards\t%s needed; create %s\t%s writes/s; a shard takes one write at a time, %s/s at %s each, used to %.0f%%; created with %dx headroom, a power of two, since the count is fixed at creation\n",
		thousands(float64(p.ShardsNeeded)), thousands(float64(p.ShardsToCreate)), thousands(p.PersistenceWrites), thousands(p.ShardCeiling), ms(f.PersistenceLatency.Value), fi.ShardUtilisation*100, capacity.ShardHeadroom)
	fmt.Fprintf(tw, "workers\t%s, %d slots each\tslots: %s in flight (rate x slot time) need %d; CPU: %s cores at %.0f%% of %g each need %d; at least %d\n",
		thousands(float64(p.Workers)), fi.SlotsPerWorker, thousands(p.Concurrency), p.WorkersForSlots, cores(p.WorkerCores), capacity.CPUTarget*100, fi.CoresPerWorker, p.WorkersForCPU, capacity.MinWorkers)
	fmt.Fprintf(tw, "mirror's PostgreSQL\t%s cores\tmeasured mirror CPU x design rate, as above\n", cores(p.MirrorCores))
	fmt.Fprintf(tw, "mirror size\t%s rows, %s\t%s retention and %s ahead of deliveries, at the measured rows and bytes\n",
		thousands(p.MirrorRows), byteSize(p.MirrorBytes), days(fi.Retention), days(fi.Lead))
	fmt.Fprintf(tw, "mirror connections\t%s\t(%d workers + 1 in a rollout) x %d + (%d serve + 1) x %d + %d (migrate): set max_connections above it\n",
		thousands(float64(p.Connections)), p.Workers, fi.WorkerPool, fi.ServeReplica, fi.ServePool, fi.ExtraConnections)
	if p.Connections > manyConnections {
		fmt.Fprintf(tw, "\t\tmore than a PostgreSQL server takes well: put a pooler (PgBouncer in transaction mode) between the workers and it, and count its server connections\n")
	}
	fmt.Fprintf(tw, "provider events into serve\t%s/s\tmeasured events x design rate\n", thousands(p.ProviderEvents))
	if fi.ProviderRate > 0 {
		if p.ProviderKeeps {
			fmt.Fprintf(tw, "outage drain under the provider's limit\t%s\t%s backlog at %s/s less arrivals\n", p.ProviderCatchUp, thousands(p.Backlog), ratePerSecond(min(fi.ProviderRate, p.DesignRate)))
		} else {
			fmt.Fprintf(tw, "outage drain under the provider's limit\tnever\tits %s/s does not outrun arrivals at %s/s\n", ratePerSecond(fi.ProviderRate), ratePerSecond(p.AverageRate))
		}
	} else {
		fmt.Fprintf(tw, "outage drain\t%s\t%s backlog at the design rate less arrivals (no provider limit given: --provider-rate)\n", p.CatchUpWhileArriving, thousands(p.Backlog))
	}
	return tw.Flush()
}

// manyConnections is where a fleet's connections call for a pooler.
const manyConnections = 1000

// daysFlag reads a duration as whole days (90d) or as a Go duration.
type daysFlag struct{ d *time.Duration }

func (f daysFlag) String() string {
	if f.d == nil {
		return ""
	}
	return days(*f.d)
}

func (f daysFlag) Set(s string) error {
	d, err := parseDays(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func ratePerSecond(r float64) string {
	if r >= 100 {
		return thousands(r)
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

func ms(seconds float64) string { return strconv.FormatFloat(seconds*1e3, 'f', 1, 64) + " ms" }

func cores(c float64) string {
	if c >= 10 {
		return thousands(c)
	}
	return strconv.FormatFloat(c, 'f', 1, 64)
}

func byteSize(b float64) string {
	for _, u := range []struct {
		div  float64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}} {
		if b >= u.div {
			return strconv.FormatFloat(b/u.div, 'f', 1, 64) + " " + u.name
		}
	}
	return thousands(b) + " B"
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

// builtIn introduces a built-in figure's source, saying why the benchmark
// report gave none.
func builtIn(benchFile string, readErr error) string {
	why := "no catch-up result in " + benchFile
	switch {
	case errors.Is(readErr, os.ErrNotExist):
		why = "no " + benchFile
	case readErr != nil:
		why = readErr.Error()
	}
	return "built in, as --fleet uses (" + why + "): "
}

func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
