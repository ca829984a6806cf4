package report

import (
	"fmt"
	"strings"
	"time"
)

// The kinds of Unpriced: what the price book lacks.
const (
	UnpricedModel = "model" // a GPU model without a price
	UnpricedTier  = "tier"  // a tier without a multiplier
)

// Unpriced is what a window left out of the money and of the capacity because the price book
// cannot price it: the GPUs of a model without a price, or the allocations at a tier (or on
// such a GPU) that the book does not know. The metric
// slicemeter_attribution_unpriced_seconds_total{kind, name} counts Seconds.
type Unpriced struct {
	Kind string // UnpricedModel or UnpricedTier
	Name string // the GPU model or the tier
	// GPUs of the model left out of the capacity, and their time in the window (model only).
	GPUs    int
	GPUTime time.Duration
	// Allocations left out of the money, their tenants (sorted) and billed time.
	Allocations int
	Tenants     []string
	Allocated   time.Duration
}

// Seconds is what the metric counts: for a model, the GPU time left out of the capacity (it
// holds the time of any allocation on those GPUs) or, when none of its GPUs was sampled in the
// window (allocations billed through an exporter outage), the billed time of its allocations;
// for a tier, the billed time of the allocations left out of the money.
func (u Unpriced) Seconds() float64 {
	if u.Kind == UnpricedModel && u.GPUs > 0 {
		return u.GPUTime.Seconds()
	}
	return u.Allocated.Seconds()
}

// Note is the report's note about it.
func (u Unpriced) Note() string {
	var parts []string
	if u.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPU(s), %s GPU-seconds, left out of the capacity", u.GPUs, seconds(u.GPUTime)))
	}
	if u.Allocations > 0 {
		parts = append(parts, fmt.Sprintf("%d allocation(s) of tenant(s) %q, %s billed seconds, left out of the money", u.Allocations, u.Tenants, seconds(u.Allocated)))
	}
	what := "GPU model %q has no price in the price book"
	if u.Kind == UnpricedTier {
		what = "tier %q is not in the price book"
	}
	return fmt.Sprintf("unpriced: "+what+": %s", u.Name, strings.Join(parts, "; "))
}

func seconds(d time.Duration) string { return fixed(d.Seconds(), 3) }
