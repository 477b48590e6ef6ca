package capacity

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// Measured is what the arithmetic takes from a benchmark report (the JSON
// make bench writes to out/bench.json): the full path's catch-up drain
// rate, and the Temporal actions one of its delivered reminders cost
// (burst, else steady). Each is the median over the compared runs, 0 when
// the report has none.
type Measured struct {
	DrainRate, ActionsPerDelivery float64
}

// benchResult is the part of a report's result the arithmetic reads.
// internal/tools/bench's tests hold ReadMeasured to the report it writes.
type benchResult struct {
	Workload  string  `json:"workload"`
	Kind      string  `json:"kind"`
	Round     int     `json:"round"`
	Invalid   string  `json:"invalid"`
	DrainRate float64 `json:"drain_rate"`
	Actions   *struct {
		Total int `json:"total"`
	} `json:"actions"`
}

// ReadMeasured reads a benchmark report. A compared run is the full
// path's, past the warm-up (round 0), and not left out as invalid.
func ReadMeasured(r io.Reader) (Measured, error) {
	var report struct {
		Results []benchResult `json:"results"`
	}
	if err := json.NewDecoder(r).Decode(&report); err != nil {
		return Measured{}, fmt.Errorf("error reading the benchmark report: %w", err)
	}
	median := func(workload string, value func(benchResult) (float64, bool)) float64 {
		var vs []float64
		for _, res := range report.Results {
			if res.Workload == workload && res.Kind == "full" && res.Round >= 1 && res.Invalid == "" {
				if v, ok := value(res); ok {
					vs = append(vs, v)
				}
			}
		}
		return medianOf(vs)
	}
	var m Measured
	m.DrainRate = median("catchup", func(r benchResult) (float64, bool) { return r.DrainRate, r.DrainRate > 0 })
	for _, w := range []string{"burst", "steady"} {
		if m.ActionsPerDelivery = median(w, func(r benchResult) (float64, bool) {
			if r.Actions == nil {
				return 0, false
			}
			return float64(r.Actions.Total), true
		}); m.ActionsPerDelivery > 0 {
			break
		}
	}
	return m, nil
}

// medianOf is the median of vs, 0 for none.
func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
