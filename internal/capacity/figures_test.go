package capacity

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchRun is the part of a bench report's result the figures come from.
type benchRun struct {
	Workload      string  `json:"workload"`
	Kind          string  `json:"kind"`
	Round         int     `json:"round"`
	N             int     `json:"n"`
	Invalid       string  `json:"invalid"`
	DrainRate     float64 `json:"drain_rate"`
	HistoryEvents int     `json:"history_events"`
	Actions       *struct {
		Total int `json:"total"`
	} `json:"actions"`
	CPU *struct {
		Server, Worker, Postgres *float64
	} `json:"cpu_seconds"`
}

// fullBursts are the compared full-path bursts of a report in docs/.
func fullBursts(t *testing.T, report string) []benchRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", report))
	require.NoError(t, err)
	var r struct {
		Results []benchRun `json:"results"`
	}
	require.NoError(t, json.Unmarshal(b, &r))
	var out []benchRun
	for _, res := range r.Results {
		if res.Workload == "burst" && res.Kind == "full" && res.Round >= 1 && res.Invalid == "" {
			out = append(out, res)
		}
	}
	require.Len(t, out, 5, "%s: five compared full-path bursts", report)
	return out
}

func medianOver(runs []benchRun, value func(benchRun) float64) float64 {
	var vs []float64
	for _, r := range runs {
		vs = append(vs, value(r))
	}
	return medianOf(vs)
}

// Every default figure is what the report it names says, recomputed here:
// a figure cannot drift from its run, and a new run replaces both.
func TestDefaultFiguresAreTheReports(t *testing.T) {
	t.Parallel()
	engine, dev := fullBursts(t, engineReport), fullBursts(t, devReport)
	perReminder := func(cpu func(benchRun) *float64) func(benchRun) float64 {
		return func(r benchRun) float64 { return *cpu(r) / float64(r.N) }
	}
	server := perReminder(func(r benchRun) *float64 { return r.CPU.Server })
	worker := perReminder(func(r benchRun) *float64 { return r.CPU.Worker })
	postgres := perReminder(func(r benchRun) *float64 { return r.CPU.Postgres })

	f := DefaultFigures
	for name, c := range map[string]struct {
		fig  Figure
		want float64
		tol  float64
	}{
		"actions":     {f.ActionsPerReminder, medianOver(engine, func(r benchRun) float64 { return float64(r.Actions.Total) }), 0},
		"events":      {f.EventsPerReminder, medianOver(engine, func(r benchRun) float64 { return float64(r.HistoryEvents) }), 0},
		"engine CPU":  {f.EngineCPU, medianOver(engine, server), 0.00005},
		"worker CPU":  {f.WorkerCPU, medianOver(engine, worker), 0.00005},
		"mirror CPU":  {f.MirrorCPU, medianOver(dev, postgres), 0.00005},
		"persistence": {f.PersistenceCPU, medianOver(engine, postgres) - medianOver(dev, postgres), 0.0001},
		"drain rate":  {f.MeasuredRate, medianOver(engine, func(r benchRun) float64 { return r.DrainRate }), 0.05},
	} {
		require.InDelta(t, c.want, c.fig.Value, c.tol, name)
		require.True(t, strings.HasPrefix(c.fig.Source, "docs/"), "%s names its report: %s", name, c.fig.Source)
	}
}

// The horizontal run's figures are its report's, and its report's medians
// are its runs': the compared runs without a kill.
func TestHorizontalFiguresAreTheReport(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", horizontalRun))
	require.NoError(t, err)
	var rep struct {
		Runs []struct {
			Round   int `json:"round"`
			Invalid string
			Error   string
			Kill    *struct{} `json:"kill"`
			Engine  *struct {
				Writes  float64 `json:"shard_writes_per_reminder"`
				Latency float64 `json:"shard_write_seconds_mean"`
			} `json:"engine"`
			Slot  float64 `json:"slot_seconds_mean"`
			Check *struct {
				Reminders int `json:"reminders"`
				Applied   int `json:"provider_events_applied"`
			} `json:"check"`
		} `json:"runs"`
		Figures struct {
			Writes  float64 `json:"shard_writes_per_reminder"`
			Latency float64 `json:"shard_write_seconds"`
			Slot    float64 `json:"slot_seconds"`
			Events  float64 `json:"provider_events_per_reminder"`
		} `json:"fleet_figures"`
		Mirror struct {
			Rows  float64 `json:"rows_per_reminder"`
			Bytes float64 `json:"bytes_per_reminder"`
		} `json:"mirror"`
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	var writes, latency, slot, events []float64
	for _, r := range rep.Runs {
		if r.Round < 1 || r.Kill != nil || r.Invalid != "" || r.Error != "" {
			continue
		}
		writes = append(writes, r.Engine.Writes)
		latency = append(latency, r.Engine.Latency)
		slot = append(slot, r.Slot)
		events = append(events, float64(r.Check.Applied)/float64(r.Check.Reminders))
	}
	require.Len(t, slot, 12)
	require.InDelta(t, medianOf(writes), rep.Figures.Writes, 1e-9)
	require.InDelta(t, medianOf(latency), rep.Figures.Latency, 1e-9)
	require.InDelta(t, medianOf(slot), rep.Figures.Slot, 1e-9)
	require.InDelta(t, medianOf(events), rep.Figures.Events, 1e-9)

	f := DefaultFigures
	require.InDelta(t, rep.Figures.Writes, f.PersistenceWrites.Value, 0.005)
	require.InDelta(t, rep.Figures.Latency, f.PersistenceLatency.Value, 0.00005)
	require.InDelta(t, rep.Figures.Slot, f.SendSeconds.Value, 0.0005)
	require.InDelta(t, rep.Figures.Events, f.ProviderEvents.Value, 0)
	require.InDelta(t, rep.Mirror.Rows, f.MirrorRows.Value, 0.005)
	require.InDelta(t, rep.Mirror.Bytes, f.MirrorBytes.Value, 0.5)
	for _, fig := range []Figure{f.PersistenceWrites, f.PersistenceLatency, f.SendSeconds, f.ProviderEvents, f.MirrorRows, f.MirrorBytes} {
		require.True(t, strings.HasPrefix(fig.Source, horizontalRun), fig.Source)
	}
}
