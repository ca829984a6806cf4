package billing

import (
	"maps"
	"slices"
	"time"
)

// Histogram counts vGPU scheduling waits by length (ns). The waits query returns one per
// allocation (GROUP BY wait), so only distinct lengths travel, not every wait.
type Histogram map[uint64]uint64

func (h Histogram) add(other Histogram) {
	for w, n := range other {
		h[w] += n
	}
}

// P99 is the nearest-rank 99th percentile: the smallest wait w such that at least 99 % of the
// waits are ≤ w (rank ⌈0.99·N⌉ in sorted order). ok is false when there are no waits.
func (h Histogram) P99() (p time.Duration, ok bool) {
	var total uint64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0, false
	}
	rank := (99*total + 99) / 100 // ⌈99·N/100⌉ in integers, free of float rounding
	waits := slices.Sorted(maps.Keys(h))
	var seen uint64
	for _, w := range waits {
		seen += h[w]
		if seen >= rank {
			return time.Duration(w), true
		}
	}
	return time.Duration(waits[len(waits)-1]), true // not reached: rank ≤ total
}
