package billing

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// Billed is an allocation clipped to a window, with the terms it is priced at.
type Billed struct {
	Allocation
	Billed Interval
	Terms  Terms
}

// ColdStartSearch is where the first attached sample is looked for: from requested_at up to
// the end of the allocation or of the window, whichever is first. ok is false when there is
// no requested_at to measure from.
func (b Billed) ColdStartSearch() (iv Interval, ok bool) {
	iv = Interval{b.Requested, b.Billed.End}
	return iv, b.Requested > 0 && iv.End > iv.Start
}

// Clip clips the allocations to the window, leaving out those with nothing in it, and names
// the targets without a sample in the window (the fleet), once each: their facts have to be
// read from earlier samples.
func Clip(allocs []Allocation, window Interval, f *Fleet) (billed []Billed, unseen []Target) {
	seen := map[Target]bool{}
	for _, a := range allocs {
		iv, ok := a.Billed(window)
		if !ok {
			continue
		}
		billed = append(billed, Billed{Allocation: a, Billed: iv})
		if _, ok := f.Instances[a.Target]; !ok && !seen[a.Target] {
			seen[a.Target] = true
			unseen = append(unseen, a.Target)
		}
	}
	return billed, unseen
}

// Pricing is what Price made of the clipped allocations.
type Pricing struct {
	Priced []Billed // ordered by requested_at
	// Unsampled describes the allocations whose target has never been sampled.
	Unsampled []string
	// Unpriced are the allocations the price book cannot price (a model, a tier).
	Unpriced []SetAside
	// Failed describes the allocations whose terms could not be computed (an instance whose
	// samples describe an impossible profile): each is left out, so that the others are billed.
	Failed []string
}

// Price prices each clipped allocation on its instance, as the window's fleet describes it or
// else, for a target not sampled in the window, as ever (its latest samples) does. The result
// is ordered by requested_at, so that a chunk's cold-start search spans little time.
//
// An allocation whose target has never been sampled cannot be priced (its model and share are
// unknown) and is left out, described in Unsampled: the intake accepts allocations for
// instances not seen yet, and their samples may come later (a later recomputation prices them).
// One on a GPU model without a price, or at a tier the price book lacks, is set aside as
// Unpriced; one whose terms fail otherwise is left out as Failed. Neither stops the others:
// one bad allocation never stops the bill.
func Price(all []Billed, f, ever *Fleet, book *pricebook.PriceBook) Pricing {
	var p Pricing
	for _, b := range all {
		in, ok := f.Instances[b.Target]
		if !ok {
			if in, ok = ever.Instances[b.Target]; !ok {
				p.Unsampled = append(p.Unsampled, fmt.Sprintf("allocation %s of tenant %q: its target %s has never been sampled, so its GPU model and share are unknown; it is left out until its samples arrive",
					b.ID, b.Tenant, b.Target))
				continue
			}
		}
		var err error
		b.Terms, err = termsOf(b.Allocation, in, book)
		if err == nil && book.Dated() {
			err = b.Terms.averageOver(b.Allocation, in.Model, b.Billed, book)
		}
		if kind, name, ok := unpricedReason(err, b, in); ok {
			p.Unpriced = append(p.Unpriced, SetAside{Billed: b, Kind: kind, Name: name})
			continue
		}
		if err != nil {
			p.Failed = append(p.Failed, fmt.Sprintf("%v; it is left out of the bill", err))
			continue
		}
		p.Priced = append(p.Priced, b)
	}
	slices.SortFunc(p.Priced, func(x, y Billed) int {
		switch {
		case earlier(x.Allocation, y.Allocation):
			return -1
		case earlier(y.Allocation, x.Allocation):
			return 1
		}
		return 0
	})
	return p
}

// Overlapping describes every pair of allocations that hold one instance at the same time in
// the window. The HTTP and file intakes refuse them; allocations from Kafka are stored as the
// scheduler sent them, so they are found here (and break the "overlap" invariant).
func Overlapping(billed []Billed) []string {
	byTarget := map[Target][]Billed{}
	for _, b := range billed {
		byTarget[b.Target] = append(byTarget[b.Target], b)
	}
	var out []string
	for _, t := range slices.SortedFunc(maps.Keys(byTarget), func(a, b Target) int { return strings.Compare(a.String(), b.String()) }) {
		list := byTarget[t]
		slices.SortFunc(list, func(a, b Billed) int { return cmp.Compare(a.Billed.Start, b.Billed.Start) })
		for i := 1; i < len(list); i++ {
			for j := 0; j < i; j++ {
				if list[j].Billed.End > list[i].Billed.Start {
					out = append(out, fmt.Sprintf("allocations %s (tenant %q) and %s (tenant %q) both hold %s from %s",
						list[j].ID, list[j].Tenant, list[i].ID, list[i].Tenant, t, UTC(list[i].Billed.Start).Format(time.RFC3339Nano)))
				}
			}
		}
	}
	return out
}

// Measured is what the samples say about each billed allocation, by id.
type Measured struct {
	Usage         map[string]Usage
	Waits         map[string]Histogram
	FirstAttached map[string]int64 // ns of the first attached sample in its cold-start search
}

// Lines applies the definitions to each priced allocation with what was measured of it, in
// the order given. The notes name the allocations whose cold start is unknown.
func Lines(priced []Billed, m Measured, book *pricebook.PriceBook) (lines []Line, notes []string) {
	for _, b := range priced {
		u := m.Usage[b.ID]
		a := attribute(b.Billed.Duration(), b.Terms, u)
		l := Line{
			AllocationID: b.ID, Tenant: b.Tenant, Tier: b.Tier, Node: b.Target.Node, Instance: b.Target.Instance,
			Kind: b.Terms.Kind, Model: b.Terms.Model, Profile: b.Terms.Profile, Fraction: b.Terms.Fraction,
			Billed: a.billed, Metered: a.metered, Active: a.active, ListCost: a.listCost, Cost: a.cost,
			WasteCost: a.wasteCost, OverheadCost: a.overheadCost, Overhead: a.overhead, Efficiency: a.efficiency,
			ColdStartSLA: book.ColdStartSLA(b.Tier),
			Requested:    UTC(b.Requested), Started: UTC(b.Started),
			TimeSliced: b.Terms.TimeSliced, Waits: m.Waits[b.ID],
			MemUsedNS: u.MemUsedNS, MemNS: u.MemNS, EnergyJ: u.EnergyJ,
		}
		if p, ok := l.Waits.P99(); ok {
			l.JitterP99 = &p
		}
		if first, ok := m.FirstAttached[b.ID]; ok {
			d := time.Duration(first - b.Requested)
			l.ColdStart = &d
		} else {
			notes = append(notes, fmt.Sprintf("allocation %s of tenant %q on %s: no attached sample between its request and %s, cold start unknown",
				b.ID, b.Tenant, b.Target, UTC(b.Billed.End).Format(time.RFC3339)))
		}
		lines = append(lines, l)
	}
	return lines, notes
}
