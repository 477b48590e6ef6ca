package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shipnotify/shipnotify/mirror"
)

// PruneLoadOptions configure PruneLoad.
type PruneLoadOptions struct {
	// Seed is how many old finished reminders (with their events and
	// deliveries) SeedPrunable loads first; 0 prunes what is there.
	Seed int
	// OlderThan is prune's age (default 90 days); Batch its batch (default
	// mirror.DefaultPruneBatch); Pause its rest between batches.
	OlderThan time.Duration
	Batch     int
	Pause     time.Duration
	Progress  io.Writer
}

// PruneResult is what one PruneLoad removed, and how fast.
type PruneResult struct {
	Seeded      loaded            `json:"seeded"`
	SeedSeconds float64           `json:"seed_seconds,omitempty"`
	Stats       mirror.PruneStats `json:"stats"`
	// RemindersPerSecond and RowsPerSecond (all four tables) are over the
	// prune alone, seeding left out.
	RemindersPerSecond float64 `json:"reminders_per_second"`
	RowsPerSecond      float64 `json:"rows_per_second"`
	// Batch is each batch's time, pause left out: how long a batch's
	// transaction holds its row locks, about.
	Batch Latency `json:"batch"`
	// Interrupted: ctx ended before the rows ran out.
	Interrupted bool `json:"interrupted"`
}

// SeedPrunable loads n reminders finished 100 to 200 days ago, with their
// events and deliveries as the product writes them, into pool's schema,
// under shipment ids of their own (PRUNE-<random>-…), beside whatever the
// schema holds. Run it before a steady workload starts: COPY is heavy.
func SeedPrunable(ctx context.Context, pool *pgxpool.Pool, n int) (loaded, error) {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	now := time.Now()
	f := fleet{Prefix: "PRUNE-" + hex.EncodeToString(b) + "-", N: n, From: now.Add(-200 * 24 * time.Hour),
		To: now.Add(-100 * 24 * time.Hour), Now: now, Seed: uint64(now.UnixNano()), Trail: true}
	return f.load(ctx, pool, nil)
}

// PruneLoad prunes pool's schema (seeding it first when o.Seed is set)
// through the product's Store.Prune, until no old finished reminder is
// left or ctx ends, and reports its rate. pool's role must be allowed to
// prune (the owner, or a member of shipnotify_pruner). It is meant to run
// beside a steady Temporal workload on the same schema, to show what prune
// costs the deliveries: the reminders the workload makes are too young to
// be touched.
func PruneLoad(ctx context.Context, pool *pgxpool.Pool, o PruneLoadOptions) (PruneResult, error) {
	var res PruneResult
	if o.OlderThan == 0 {
		o.OlderThan = 90 * 24 * time.Hour
	}
	logf := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "bench: prune: "+format+"\n", args...)
		}
	}
	if o.Seed > 0 {
		t := time.Now()
		var err error
		if res.Seeded, err = SeedPrunable(ctx, pool, o.Seed); err != nil {
			return res, err
		}
		res.SeedSeconds = time.Since(t).Seconds()
		logf("seeded %d reminders, %d events, %d deliveries in %.0fs",
			res.Seeded.Reminders, res.Seeded.Events, res.Seeded.Deliveries, res.SeedSeconds)
	}
	var batches []time.Duration
	last := time.Now()
	stats, err := mirror.New(pool).Prune(ctx, mirror.PruneOptions{
		OlderThan: o.OlderThan, Batch: o.Batch, Pause: o.Pause,
		OnBatch: func(mirror.PruneStats) {
			now := time.Now()
			batches = append(batches, now.Sub(last))
			last = now.Add(o.Pause)
		},
	})
	res.Stats, res.Batch = stats, latencyOf(batches)
	if secs := stats.Elapsed.Seconds(); secs > 0 {
		res.RemindersPerSecond = float64(stats.Reminders) / secs
		res.RowsPerSecond = float64(stats.Rows()) / secs
	}
	if err != nil && ctx.Err() != nil {
		res.Interrupted, err = true, nil
	}
	logf("pruned %d reminders (%d rows) at %.0f reminders/s, %.0f rows/s; batch p99 %s",
		stats.Reminders, stats.Rows(), res.RemindersPerSecond, res.RowsPerSecond, res.Batch.P99)
	return res, err
}
