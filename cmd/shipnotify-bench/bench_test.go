package main

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/worker"
)

// make bench runs each workload on its own server and merges the reports:
// results gathered, comparisons and targets computed again over all of
// them, a failed run's error kept (and the exit status says so).
func TestBenchMerge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, rep BenchReport) string {
		path := filepath.Join(dir, name)
		require.NoError(t, writeJSON(path, rep))
		return path
	}
	burst := BenchReport{Engine: "dev server", Runs: []BenchRun{{Workloads: "burst"}}}
	for round, naive := range []float64{40, 50} {
		for kind, drain := range map[bench.Kind]float64{bench.Naive: naive, bench.Lean: 60, bench.Full: 56} {
			burst.Results = append(burst.Results, bench.Result{Workload: "burst", Kind: kind, Round: round + 1, N: 10,
				Delivered: 10, DrainRate: drain, ScheduleRate: 200})
		}
	}
	catchup := BenchReport{Engine: "dev server", Runs: []BenchRun{{Workloads: "catchup"}}, Errors: []string{"catchup full round 1: boom"},
		Results: []bench.Result{{Workload: "catchup", Kind: bench.Full, Round: 1, N: 10, Error: "boom", Invalid: "error: boom"},
			{Workload: "catchup", Kind: bench.Naive, Round: 1, N: 10, Delivered: 10, DrainRate: 40}}}
	out := filepath.Join(dir, "bench.json")
	code, stdout, stderr := cmdline{env: map[string]string{}}.run(t, "", "run", "--merge",
		write("burst.json", burst)+","+write("catchup.json", catchup), "--out", out)
	require.Equal(t, 1, code, "a failed run fails the merge too")
	require.Contains(t, stderr, "catchup full round 1: boom")
	require.Contains(t, stdout, "drain rate full/naive")
	require.Contains(t, stdout, "catchup full round 1: error: boom", "left out, and said so")

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep BenchReport
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Len(t, rep.Runs, 2)
	require.Len(t, rep.Results, 8)
	require.Equal(t, "dev server", rep.Engine)
	byName := map[string]bench.Target{}
	for _, tg := range rep.Targets {
		byName[tg.Name] = tg
	}
	require.Equal(t, bench.Missed, byName["burst drain or time-to-drain p99, full/naive"].Verdict, "1.4 and 1.12: one pair falls short of 1.3")
	require.Equal(t, bench.Met, byName["burst drain, full/lean"].Verdict, "0.93 ≥ 0.9")
	require.Equal(t, bench.NotMeasured, byName["catchup drain or time-to-drain p99, full/naive"].Verdict, "its one pair was left out")
	require.Equal(t, bench.Met, byName["no run in stall mode (drain below a quarter of its path's median)"].Verdict)
}

func TestBenchFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--rate", "fast"}, {"--rate", "-3"}, {"--workloads", "burst,nap"}, {"--pairs", "0"}, {"--pollers", "1"},
		{"--pollers", "-2"}, {"--provider", "sendgrid"}, {"--slow-n", "0"}, {"--outage", "0s"}, {"--rate-cap", "0"},
		{"--workloads", "hold-instant"},
	} {
		code, _, stderr := cmdline{env: map[string]string{}}.run(t, "", append([]string{"run"}, args...)...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
}

// The cold burst and the delayed-start path are run by default, full-local
// only when asked for, and --help says what each is.
func TestBenchRunsTheColdBurstAndTheDelayedPathByDefault(t *testing.T) {
	t.Parallel()
	f, err := parseBenchFlags(cli.Env{Lookup: func(string) (string, bool) { return "", false }, Stdout: io.Discard, Stderr: io.Discard}, nil)
	require.NoError(t, err)
	require.Contains(t, strings.Split(f.workloads, ","), bench.ColdBurstWorkload)
	require.True(t, f.delayedPath)
	require.False(t, f.localPath)
	f, err = parseBenchFlags(cli.Env{Lookup: func(string) (string, bool) { return "", false }, Stdout: io.Discard, Stderr: io.Discard}, []string{"--workloads", "coldburst-instant,catchup", "--delayed-path=false"})
	require.NoError(t, err)
	require.False(t, f.delayedPath)

	code, stdout, stderr := cmdline{env: map[string]string{}}.run(t, "", "run", "--help")
	require.Zero(t, code, stderr)
	help := stdout + stderr
	for _, want := range []string{"coldburst: a burst whose path's worker is stopped and started again", "-delayed-path", "full-delayed", "-local-path"} {
		require.Contains(t, help, want)
	}
}

// A worker's environment: the settings that would set one worker apart
// from another are cleared (they come as flags, the same for all), and
// the bench's own values replace the inherited ones.
func TestWorkerEnv(t *testing.T) {
	t.Parallel()
	got := workerEnv([]string{"PATH=/bin", "SHIPNOTIFY_WORKER_SENDS_PER_SECOND=5", "SHIPNOTIFY_WORKER_MAX_ACTIVITIES=7",
		"SHIPNOTIFY_METRICS_ADDR=:9090", "TEMPORAL_ADDRESS=a:1", "DATABASE_URL=postgres://x"},
		"TEMPORAL_ADDRESS=b:2", "SHIPNOTIFY_METRICS_ADDR=off")
	require.Equal(t, []string{"PATH=/bin", "DATABASE_URL=postgres://x", "TEMPORAL_ADDRESS=b:2", "SHIPNOTIFY_METRICS_ADDR=off"}, got)
}

// --rate auto goes by the lean bursts that were compared; when none was
// valid, by those that delivered everything; never by one that lost.
func TestLeanCeiling(t *testing.T) {
	t.Parallel()
	lean := func(round int, drain float64, invalid string, lost int) bench.Result {
		return bench.Result{Workload: "burst", Kind: bench.Lean, Round: round, N: 10, Delivered: 10 - lost, Lost: lost,
			DrainRate: drain, Invalid: invalid}
	}
	rate, note, ok := leanCeiling([]bench.Result{lean(0, 10, "", 0), lean(1, 60, "", 0), lean(2, 70, "", 0), lean(3, 1, "slack", 0)}, "burst")
	require.True(t, ok)
	require.InDelta(t, 65, rate, 1e-9)
	require.Empty(t, note)

	rate, note, ok = leanCeiling([]bench.Result{lean(0, 40, "slack", 0), lean(1, 50, "slack", 0), lean(2, 5, "partly drained", 3)}, "burst")
	require.True(t, ok)
	require.InDelta(t, 45, rate, 1e-9)
	require.Contains(t, note, "no lean burst was valid")

	_, _, ok = leanCeiling([]bench.Result{lean(1, 5, "partly drained", 3), {Workload: "burst", Kind: bench.Full, Round: 1, DrainRate: 50}}, "burst")
	require.False(t, ok)

	// The steady workload's provider picks the burst it goes by.
	instant := lean(1, 90, "", 0)
	instant.Workload = "burst-instant"
	rate, _, ok = leanCeiling([]bench.Result{lean(1, 60, "", 0), instant}, "burst-instant")
	require.True(t, ok)
	require.InDelta(t, 90, rate, 1e-9)
}

// Pollers 0, the default, leave them to the SDK's autoscaling, as the
// product's worker does; a number pins them, at least the SDK's 2.
func TestWorkerPollersAutoscaleUnlessPinned(t *testing.T) {
	t.Parallel()
	var s workerSettings
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	s.register(fs)
	require.NoError(t, fs.Parse(nil))
	require.Zero(t, s.pollers)
	require.NoError(t, s.check())
	o := worker.SDKOptions(s.options())
	require.NotNil(t, o.WorkflowTaskPollerBehavior, "autoscaling")
	require.NotNil(t, o.ActivityTaskPollerBehavior, "autoscaling")
	require.Contains(t, strings.Join(s.args(), " "), "--pollers 0")

	require.NoError(t, fs.Parse([]string{"--pollers", "8"}))
	require.NoError(t, s.check())
	o = worker.SDKOptions(s.options())
	require.Nil(t, o.WorkflowTaskPollerBehavior)
	require.Equal(t, 8, o.MaxConcurrentWorkflowTaskPollers)
	s.pollers = 1
	require.Error(t, s.check())
}

// A workload runs with the --provider asked for, unless its name says
// instant; results with the instant provider are always named so.
func TestBenchProvider(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		workload, flag, name, provider string
	}{
		{"burst", "realistic", "burst", sink.RealisticName},
		{"burst", "instant", "burst-instant", sink.InstantName},
		{"burst-instant", "realistic", "burst-instant", sink.InstantName},
		{"catchup-instant", "instant", "catchup-instant", sink.InstantName},
		{"steady", "realistic", "steady", sink.RealisticName},
		{"coldburst", "realistic", "coldburst", sink.RealisticName},
		{"coldburst-instant", "realistic", "coldburst-instant", sink.InstantName},
	} {
		p, name := benchProvider(tc.workload, tc.flag)
		require.Equal(t, tc.name, name, "%s with --provider %s", tc.workload, tc.flag)
		require.Equal(t, tc.provider, p.Name)
	}
	p, _ := benchProvider("burst", "realistic")
	require.Equal(t, sink.Realistic(providerSeed), p, "one fixed seed")
}

// A benchmark worker's output: the ready line's instant goes to whoever
// expects it, even when the line comes in pieces, and is not passed on;
// the worker's log lines are.
func TestReadyWriterHandsOverTheReadyLine(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	w := &readyWriter{out: &log}
	ready := w.expect()
	_, _ = w.Write([]byte(`{"level":"WARN","msg":"slow"}` + "\n" + readyLine + " 2026-12-03T09:00:01.5"))
	require.Empty(t, ready, "half a ready line says nothing yet")
	_, _ = w.Write([]byte("Z\n" + `{"level":"ERROR","msg":"late"}` + "\n"))
	select {
	case at := <-ready:
		require.Equal(t, time.Date(2026, 12, 3, 9, 0, 1, 5e8, time.UTC), at)
	default:
		t.Fatal("the ready line was not handed over")
	}
	require.Equal(t, `{"level":"WARN","msg":"slow"}`+"\n"+`{"level":"ERROR","msg":"late"}`+"\n", log.String())
}
