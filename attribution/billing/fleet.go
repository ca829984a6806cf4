package billing

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/slicemeter/slicemeter/attribution/pricebook"
)

// GPU is one physical GPU: the unit of capacity.
type GPU struct{ Node, UUID, Model string }

// Fleet is what the samples of a window say about the instances.
type Fleet struct {
	Instances map[Target]pricebook.Instance
	latest    map[Target]int64 // ts of the sample the facts come from
	GPUs      map[GPU]bool
}

// NewFleet returns an empty fleet.
func NewFleet() *Fleet {
	return &Fleet{Instances: map[Target]pricebook.Instance{}, latest: map[Target]int64{}, GPUs: map[GPU]bool{}}
}

// Add records an instance's facts from its sample at latest (ns) on a GPU. An instance seen
// on two GPUs in the window (a GPU replaced): its latest facts win.
func (f *Fleet) Add(t Target, g GPU, in pricebook.Instance, latest int64) {
	f.GPUs[g] = true
	if prev, ok := f.latest[t]; !ok || latest > prev {
		f.Instances[t], f.latest[t] = in, latest
	}
}

// CapacityListCost is the list cost of every GPU of the fleet for the whole window.
func CapacityListCost(f *Fleet, window Interval, book *pricebook.PriceBook) (float64, error) {
	total := 0.0
	unpriced := map[string]error{}
	for g := range f.GPUs {
		list, err := book.ListCostBetween(g.Model, 1, UTC(window.Start), UTC(window.End))
		if err != nil {
			unpriced[g.Model] = err
			continue
		}
		total += list
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
