//go:build soak

package soak

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestSoak runs the seeded workload and faults for SHIPNOTIFY_SOAK_DURATION
// (2m), quiesces, checks, writes its summary to SHIPNOTIFY_SOAK_OUT (out/
// at the repository's top) and fails on any violation. `make soak` runs it.
func TestSoak(t *testing.T) {
	seed := uint64(1)
	if v := os.Getenv("SHIPNOTIFY_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SHIPNOTIFY_SOAK_SEED: %v", err)
		}
		seed = n
	}
	duration := 2 * time.Minute
	if v := os.Getenv("SHIPNOTIFY_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SHIPNOTIFY_SOAK_DURATION: %v", err)
		}
		duration = d
	}
	t.Logf("soak: seed %d for %s (SHIPNOTIFY_SOAK_SEED=%d replays it)", seed, duration, seed)

	e := Start(t)
	w := NewWorkload(e, seed)
	f := NewFaults(e, seed, duration)
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	// The operator's cron: reconcile --verify every 30 s, through the
	// workload and the quiesce.
	vctx, vcancel := context.WithCancel(context.Background())
	defer vcancel()
	verified := make(chan []VerifyRun, 1)
	go func() { verified <- e.Verifier(vctx, verifyEvery) }()
	began := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	f.Run(ctx) // faults restart parts, which may fail the test: on its goroutine
	<-done
	took := time.Since(began)

	f.Restore()
	e.waitServing()
	qctx, qcancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer qcancel()
	quiet := time.Now()
	if err := e.Quiesce(qctx, time.Until(w.LastDue())+5*time.Minute); err != nil {
		t.Logf("soak: %v (the checker says which rows)", err)
	}
	t.Logf("soak: quiet %s after the workload", time.Since(quiet).Round(time.Second))
	vcancel()
	snap, err := e.Snapshot(qctx, w.Ops(), f.Log(), <-verified)
	if err != nil {
		t.Fatalf("soak: reading what happened: %v", err)
	}
	res := Check(snap)
	sum := Summarise(seed, took, snap, res)
	writeSummary(t, sum, snap)
	t.Log("\n" + sum.Text())
	if len(res.Violations) > 0 {
		t.Fatalf("soak: %d violation(s) with seed %d (SHIPNOTIFY_SOAK_SEED=%d replays it)", len(res.Violations), seed, seed)
	}
}

// verifyEvery is how often the operator's cron runs reconcile --verify.
const verifyEvery = 30 * time.Second

// writeSummary keeps the summary, and the run's operations and faults for
// whoever reads a violation, under SHIPNOTIFY_SOAK_OUT.
func writeSummary(t *testing.T, sum Summary, snap Snapshot) {
	dir := os.Getenv("SHIPNOTIFY_SOAK_OUT")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "out")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("soak: %v", err)
		return
	}
	base := filepath.Join(dir, "soak-"+strconv.FormatUint(sum.Seed, 10))
	run, _ := json.MarshalIndent(map[string]any{"summary": sum, "operations": snap.Ops, "faults": snap.Faults,
		"verify_runs": snap.Verifies, "workflow_views": snap.WorkflowViews}, "", "  ")
	for path, b := range map[string][]byte{base + ".txt": []byte(sum.Text()), base + ".json": run} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Logf("soak: %v", err)
		}
	}
	t.Logf("soak: summary in %s.txt, operations and faults in %s.json", base, base)
}
