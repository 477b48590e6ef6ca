package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A run's CPU seconds say what it cost; they do not say what was busy
// while it drained. The sampler reads every part's CPU every second, so a
// run's drain window can be cut out of the series: cores busy per part
// over exactly that window, against the machine's cores, show where the
// throughput stops.

// CPUSample is every part's CPU seconds so far at one instant; a part
// missing could not be read then.
type CPUSample struct {
	At      time.Time          `json:"at"`
	Seconds map[string]float64 `json:"seconds"`
}

// Parts the horizontal benchmark samples.
const (
	PartServer   = "server"
	PartPostgres = "postgres"
	// PartMirror is the PostgreSQL backends connected to the mirror's
	// database: the product's share of PostgreSQL (Temporal's persistence
	// and visibility have databases of their own on the same cluster).
	PartMirror  = "mirror"
	PartWorkers = "workers"
	PartServes  = "serves"
	// PartHarness is the benchmark's own process: the starter, the mail
	// sink, the tracker's receiver and the balancer.
	PartHarness = "harness"
	// PartMachine is every process on the machine: less the parts above,
	// what else ran (another engineer's tests, say).
	PartMachine = "machine"
)

// cpuSampler reads each source every period into a series.
type cpuSampler struct {
	every   time.Duration
	sources map[string]func() (float64, error)

	mu      sync.Mutex
	samples []CPUSample
}

// run samples until ctx ends.
func (s *cpuSampler) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *cpuSampler) sample() {
	smp := CPUSample{At: time.Now(), Seconds: map[string]float64{}}
	for name, read := range s.sources {
		if v, err := read(); err == nil {
			smp.Seconds[name] = v
		}
	}
	s.mu.Lock()
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
}

// series is the samples taken so far.
func (s *cpuSampler) series() []CPUSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// CoresBetween is how many cores each part kept busy on average from from
// to to: its CPU seconds over the window (read between samples by linear
// interpolation) divided by the window's length. A window reaching past
// the samples is cut to them; a part is left out where it was not read at
// both ends.
func CoresBetween(samples []CPUSample, from, to time.Time) map[string]float64 {
	out := map[string]float64{}
	if len(samples) < 2 {
		return out
	}
	if first := samples[0].At; from.Before(first) {
		from = first
	}
	if last := samples[len(samples)-1].At; to.After(last) {
		to = last
	}
	span := to.Sub(from).Seconds()
	if span <= 0 {
		return out
	}
	parts := map[string]bool{}
	for _, s := range samples {
		for p := range s.Seconds {
			parts[p] = true
		}
	}
	for p := range parts {
		a, okA := cumulativeAt(samples, p, from)
		b, okB := cumulativeAt(samples, p, to)
		if okA && okB {
			out[p] = (b - a) / span
		}
	}
	return out
}

// cumulativeAt is part's CPU seconds at t, interpolated between the
// samples around it that read the part.
func cumulativeAt(samples []CPUSample, part string, t time.Time) (float64, bool) {
	var before, after *CPUSample
	for i := range samples {
		s := &samples[i]
		if _, ok := s.Seconds[part]; !ok {
			continue
		}
		if !s.At.After(t) {
			before = s
		}
		if !s.At.Before(t) && after == nil {
			after = s
		}
	}
	switch {
	case before == nil || after == nil:
		return 0, false
	case !after.At.After(before.At):
		return before.Seconds[part], true
	}
	f := t.Sub(before.At).Seconds() / after.At.Sub(before.At).Seconds()
	return before.Seconds[part] + f*(after.Seconds[part]-before.Seconds[part]), true
}

// backendReading is one PostgreSQL backend at a sample: its pid, when it
// started, and the CPU seconds it has used.
type backendReading struct {
	pid     int
	started time.Time
	seconds float64
}

// backendCPU keeps a running total of the CPU the backends of one
// database have used: backends come and go with the pools, so the total
// adds each backend's growth between samples, and all of a backend that
// started after the sample before.
type backendCPU struct {
	total float64
	prev  map[int]float64
	at    time.Time
}

// add takes a sample's readings at now and returns the running total.
// The first sample only sets the baseline: what a backend used before it
// is not the window's.
func (b *backendCPU) add(readings []backendReading, now time.Time) float64 {
	next := make(map[int]float64, len(readings))
	for _, r := range readings {
		next[r.pid] = r.seconds
		if b.prev == nil {
			continue
		}
		if was, ok := b.prev[r.pid]; ok {
			if r.seconds > was {
				b.total += r.seconds - was
			}
		} else if !r.started.Before(b.at) {
			b.total += r.seconds
		}
	}
	b.prev, b.at = next, now
	return b.total
}

// databaseCPU reads the CPU of the backends connected to the database
// pool is on, less the pool's own reading connection, from /proc.
func databaseCPU(pool *pgxpool.Pool, procRoot string) func() (float64, error) {
	var mu sync.Mutex
	acc := &backendCPU{}
	return func() (float64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		now := time.Now()
		rows, _ := pool.Query(ctx, `
SELECT pid, backend_start FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
		var readings []backendReading
		var pid int
		var started time.Time
		if _, err := pgx.ForEachRow(rows, []any{&pid, &started}, func() error {
			// A backend gone since the query is simply not read.
			if own, _, err := ProcessCPU(procRoot, pid); err == nil {
				readings = append(readings, backendReading{pid: pid, started: started, seconds: own})
			}
			return nil
		}); err != nil {
			return 0, fmt.Errorf("error reading the mirror's backends: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		return acc.add(readings, now), nil
	}
}
