package bench

import (
	"context"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shipnotify/shipnotify/mirror"
)

// ExportResult is an export of every row through the product's export
// path (`shipnotify export`'s: Store.Export into the jsonl writer), to a
// writer that discards, with the process's memory before and at its peak.
type ExportResult struct {
	Rows          int64   `json:"rows"`
	Seconds       float64 `json:"seconds"`
	RowsPerSecond float64 `json:"rows_per_second"`
	// Heap is the Go heap in use (runtime.MemStats.HeapAlloc), RSS the
	// process's resident memory; both sampled every 20 ms.
	HeapBefore uint64 `json:"heap_before_bytes"`
	HeapPeak   uint64 `json:"heap_peak_bytes"`
	RSSBefore  int64  `json:"rss_before_bytes"`
	RSSPeak    int64  `json:"rss_peak_bytes"`
}

func (m *mirrorMeasure) export(ctx context.Context) (ExportResult, error) {
	var res ExportResult
	runtime.GC()
	sample := func() (uint64, int64) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, selfRSS()
	}
	res.HeapBefore, res.RSSBefore = sample()
	res.HeapPeak, res.RSSPeak = res.HeapBefore, res.RSSBefore
	var mu sync.Mutex
	peak := func() {
		h, r := sample()
		mu.Lock()
		res.HeapPeak, res.RSSPeak = max(res.HeapPeak, h), max(res.RSSPeak, r)
		mu.Unlock()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				peak()
			}
		}
	})
	w, err := mirror.NewRowWriter(io.Discard, mirror.FormatJSONL)
	if err != nil {
		return res, err
	}
	var rows int64
	t := time.Now()
	err = m.store.Export(ctx, mirror.Filter{}, func(r mirror.Row) error {
		rows++
		return w.Write(r)
	})
	if err == nil {
		err = w.Flush()
	}
	took := time.Since(t)
	close(done)
	wg.Wait()
	peak()
	res.Rows, res.Seconds, res.RowsPerSecond = rows, took.Seconds(), float64(rows)/took.Seconds()
	return res, err
}

// selfRSS is this process's resident memory in bytes (0 where /proc is
// missing).
func selfRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
