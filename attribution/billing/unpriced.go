package billing

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// What is valid but cannot be priced (a GPU model or a tier the price book lacks) is stored and
// attributed as unpriced: left out of the money and of the capacity, described in the report
// (report.Unpriced and a note), while every other tenant is billed. One bad input must never
// stop the bill for everyone; `pricebook check` is where an operator is told to fix the book.

// UnpricedGPU is a GPU of a model without a price, and how long it is capacity in the window:
// the time left out of the capacity.
type UnpricedGPU struct {
	GPU
	Time time.Duration
}

// SplitFleet splits the fleet's GPUs into those the price book prices and those of models it
// lacks: the capacity is the list cost of the priced ones only. The instances are kept whole
// (an allocation's terms are looked up there, and Price sets aside those on unpriced models).
// f is not changed.
func SplitFleet(f *Fleet, window Interval, book *pricebook.PriceBook) (priced *Fleet, unpriced []UnpricedGPU) {
	out := *f
	out.GPUs = maps.Clone(f.GPUs)
	for g := range f.GPUs {
		if _, ok := book.Prices[g.Model]; !ok {
			delete(out.GPUs, g)
			unpriced = append(unpriced, UnpricedGPU{g, capacityTime(f, g, window)})
		}
	}
	slices.SortFunc(unpriced, func(a, b UnpricedGPU) int {
		return strings.Compare(a.Model+"\x00"+a.Node+"\x00"+a.UUID, b.Model+"\x00"+b.Node+"\x00"+b.UUID)
	})
	return &out, unpriced
}

// capacityTime is how long a GPU of the fleet is capacity in the window, as CapacityListCost
// counts it: its intervals of presence within the window.
func capacityTime(f *Fleet, g GPU, window Interval) time.Duration {
	return Total(Clipped(f.GPUs[g], window))
}

// SetAside is an allocation that Price left out of the money because the price book cannot
// price it: Kind says why (report.UnpricedModel, report.UnpricedTier), Name what is missing.
type SetAside struct {
	Billed
	Kind, Name string
}

// unpricedReason says whether err is the price book lacking the instance's model or the
// allocation's tier, and which.
func unpricedReason(err error, b Billed, in pricebook.Instance) (kind, name string, ok bool) {
	switch {
	case errors.Is(err, pricebook.ErrNoPrice):
		return report.UnpricedModel, in.Model, true
	case errors.Is(err, pricebook.ErrUnknownTier):
		return report.UnpricedTier, b.Tier, true
	}
	return "", "", false
}

// Unpriced sums what a window left out as unpriced: the GPUs of unpriced models (for the time
// the capacity would have counted them) and the allocations set aside, one entry per model or
// tier, models first, then by name. The notes describe each.
func Unpriced(gpus []UnpricedGPU, aside []SetAside) (out []report.Unpriced, notes []string) {
	type key struct{ kind, name string }
	byKey := map[key]*report.Unpriced{}
	get := func(k key) *report.Unpriced {
		u := byKey[k]
		if u == nil {
			u = &report.Unpriced{Kind: k.kind, Name: k.name}
			byKey[k] = u
		}
		return u
	}
	for _, g := range gpus {
		u := get(key{report.UnpricedModel, g.Model})
		u.GPUs++
		u.GPUTime += g.Time
	}
	tenants := map[key]map[string]bool{}
	for _, a := range aside {
		k := key{a.Kind, a.Name}
		u := get(k)
		u.Allocations++
		u.Allocated += a.Billed.Billed.Duration()
		if tenants[k] == nil {
			tenants[k] = map[string]bool{}
		}
		tenants[k][a.Tenant] = true
	}
	for _, k := range slices.SortedFunc(maps.Keys(byKey), func(a, b key) int {
		if a.kind != b.kind {
			return strings.Compare(a.kind, b.kind) // "model" before "tier"
		}
		return strings.Compare(a.name, b.name)
	}) {
		u := byKey[k]
		u.Tenants = slices.Sorted(maps.Keys(tenants[k]))
		out = append(out, *u)
		notes = append(notes, u.Note())
	}
	return out, notes
}
