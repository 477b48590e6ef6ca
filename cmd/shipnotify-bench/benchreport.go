package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/tools/bench"
)

// BenchReport is what bench writes with --json and to --out.
type BenchReport struct {
	Machine string    `json:"machine"`
	At      time.Time `json:"at"`
	// Engine is what the workloads ran on.
	Engine string `json:"engine"`
	// Runs are the invocations gathered here: one, or one per workload
	// when make bench merges them (each on a fresh server).
	Runs        []BenchRun         `json:"runs"`
	Results     []bench.Result     `json:"results"`
	Comparisons []bench.Comparison `json:"comparisons"`
	Targets     []bench.Target     `json:"targets"`
	// Costs are history events, workflow tasks and billable actions per
	// delivered reminder, per workload and path (bench.Costs).
	Costs []bench.WorkloadCost `json:"costs,omitempty"`
	// Prune is each prune that ran beside a steady run (--prune-pairs).
	Prune []bench.PruneResult `json:"prune,omitempty"`
	// Mirror is the mirror workload (PostgreSQL alone, no Temporal).
	Mirror *bench.MirrorResult `json:"mirror,omitempty"`
	// Events is the Event Webhook's ingestion (PostgreSQL alone).
	Events *bench.EventsResult `json:"events,omitempty"`
	Errors []string            `json:"errors,omitempty"`
}

// BenchRun is one invocation of bench and its options.
type BenchRun struct {
	At        time.Time      `json:"at"`
	Workloads string         `json:"workloads"`
	Options   map[string]any `json:"options"`
}

// judge fills in the comparisons and targets from the results.
func (rep *BenchReport) judge() {
	rep.Comparisons = bench.Comparisons(rep.Results)
	rep.Targets = bench.Targets(rep.Results, rep.Comparisons)
	rep.Costs = bench.Costs(rep.Results)
}

// readReport reads a report bench wrote.
func readReport(path string) (BenchReport, error) {
	var rep BenchReport
	b, err := os.ReadFile(path)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, fmt.Errorf("error reading %s: %w", path, err)
	}
	return rep, nil
}

// mergeReports gathers per-workload reports into one.
func mergeReports(paths []string) (BenchReport, error) {
	var out BenchReport
	var engines []string
	for _, p := range paths {
		rep, err := readReport(p)
		if err != nil {
			return out, cli.UsageError{Err: fmt.Errorf("--merge: %w", err)}
		}
		if out.Machine == "" {
			out.Machine, out.At = rep.Machine, rep.At
		}
		if rep.Engine != "" && !slices.Contains(engines, rep.Engine) {
			engines = append(engines, rep.Engine)
		}
		out.Runs = append(out.Runs, rep.Runs...)
		out.Results = append(out.Results, rep.Results...)
		out.Prune = append(out.Prune, rep.Prune...)
		if rep.Mirror != nil {
			out.Mirror = rep.Mirror
		}
		if rep.Events != nil {
			out.Events = rep.Events
		}
		out.Errors = append(out.Errors, rep.Errors...)
	}
	out.Engine = strings.Join(engines, "; ")
	return out, nil
}

// emitReport writes report to out as JSON (when out is set), then prints
// it: as JSON, or as the tables table writes.
func emitReport(w io.Writer, out string, asJSON bool, report any, table func() error) error {
	if out != "" {
		if err := writeJSON(out, report); err != nil {
			return err
		}
	}
	if !asJSON {
		return table()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
