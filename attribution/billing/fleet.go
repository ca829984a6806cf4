package billing

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// GPU is one physical GPU: the unit of capacity.
type GPU struct{ Node, UUID, Model string }

// Fleet is what the samples of a window say about the instances, and when each GPU is
// capacity.
type Fleet struct {
	Instances map[Target]pricebook.Instance
	latest    map[Target]int64 // ts of the sample the facts come from
	// GPUs are the GPUs present in the window, each with the intervals (ascending, disjoint,
	// within the window) in which it is capacity (Present).
	GPUs map[GPU][]Interval
}

// NewFleet returns an empty fleet.
func NewFleet() *Fleet {
	return &Fleet{Instances: map[Target]pricebook.Instance{}, latest: map[Target]int64{}, GPUs: map[GPU][]Interval{}}
}

// Add records an instance's facts from its sample at latest (ns). An instance seen on two GPUs
// in the window (a GPU replaced): its latest facts win.
func (f *Fleet) Add(t Target, in pricebook.Instance, latest int64) {
	if prev, ok := f.latest[t]; !ok || latest > prev {
		f.Instances[t], f.latest[t] = in, latest
	}
}

// Span is the first and the last sample (ns) of a GPU within a stretch of time shorter than
// the presence period: the union of their presence is then [First, Last + period).
type Span struct{ First, Last int64 }

// Present is when a GPU is capacity within the window (attribution/README.md, "Definitions"): the union over
// its samples at ts of [ts, ts + period), intersected with the window. A GPU is capacity from its
// first sample; an exporter outage shorter than the period stays capacity, a longer one is not
// beyond the period; a GPU that left is capacity until its last sample plus the period. It is
// additive: the capacity of two adjacent windows sums to that of their union, so stored minutes
// sum to the report of their window.
//
// spans are ascending by First and each shorter than period (Last − First < period, one sample
// a span at least as precise): a span's samples are then less than the period apart, and its
// presence is one interval. The intervals returned are ascending, disjoint and not adjacent.
func Present(spans []Span, period time.Duration, window Interval) []Interval {
	var out []Interval
	p := int64(period)
	for _, s := range spans {
		iv := Interval{Start: max(s.First, window.Start), End: min(s.Last+p, window.End)}
		if iv.Start >= iv.End {
			continue
		}
		if n := len(out); n > 0 && iv.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, iv.End)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// Clipped is the intervals (ascending, disjoint) intersected with the window.
func Clipped(ivs []Interval, window Interval) []Interval {
	var out []Interval
	for _, iv := range ivs {
		c := Interval{Start: max(iv.Start, window.Start), End: min(iv.End, window.End)}
		if c.Start < c.End {
			out = append(out, c)
		}
	}
	return out
}

// Total is the summed length of the intervals.
func Total(ivs []Interval) time.Duration {
	var d time.Duration
	for _, iv := range ivs {
		d += iv.Duration()
	}
	return d
}

// CapacityListCost is the list cost of every GPU of the fleet over the intervals, within the
// window, in which it is capacity, each interval priced at the prices in force in it.
func CapacityListCost(f *Fleet, window Interval, book *pricebook.PriceBook) (float64, error) {
	total := 0.0
	unpriced := map[string]error{}
	for g, ivs := range f.GPUs {
		for _, iv := range Clipped(ivs, window) {
			list, err := book.ListCostBetween(g.Model, 1, UTC(iv.Start), UTC(iv.End))
			if err != nil {
				unpriced[g.Model] = err
				break
			}
			total += list
		}
	}
	if len(unpriced) > 0 {
		var errs []error
		for _, model := range slices.Sorted(maps.Keys(unpriced)) {
			errs = append(errs, unpriced[model])
		}
		return 0, fmt.Errorf("price the capacity of the fleet: %w", errors.Join(errs...))
	}
	return total, nil
}
