package attribution

import (
	"fmt"
	"time"

	"github.com/slicemeter/slicemeter/attribution/pricebook"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// interval is [start, end) in ns since the Unix epoch.
type interval struct{ start, end int64 }

func (iv interval) duration() time.Duration { return time.Duration(iv.end - iv.start) }

func (interval) time(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// target is an instance on a node: what an allocation holds and what samples describe.
type target struct{ node, instance string }

func (t target) String() string { return t.node + "/" + t.instance }

// allocation is the current state of one allocation (its highest version, not deleted).
type allocation struct {
	id, tenant, tier string
	target           target
	requested        int64 // ns
	started          int64 // ns; billing starts
	ended            int64 // ns; 0: still running
}

// billed is the allocation's billing interval [started, ended) clipped to the window; ok is
// false when nothing of it falls in the window.
func (a allocation) billed(window interval) (iv interval, ok bool) {
	end := a.ended
	if end == 0 || end > window.end {
		end = window.end
	}
	iv = interval{max(a.started, window.start), end}
	return iv, a.started > 0 && iv.end > iv.start
}

// terms are what one allocation is priced at.
type terms struct {
	listPrice  float64 // one whole GPU of the model, one hour
	fraction   float64 // billed fraction of the GPU
	multiplier float64 // the tier's
	// overhead is the fixed overhead fraction (whole GPU 0, MIG from its SMs); a time-sliced
	// (vGPU) instance's is measured from its samples instead.
	overhead   float64
	timeSliced bool
}

// termsOf prices an allocation on an instance.
func termsOf(a allocation, in pricebook.Instance, book *pricebook.PriceBook) (terms, error) {
	fail := func(err error) (terms, error) {
		return terms{}, fmt.Errorf("price allocation %s of tenant %q on %s: %w", a.id, a.tenant, a.target, err)
	}
	price, err := book.Price(in.Model)
	if err != nil {
		return fail(err)
	}
	multiplier, err := book.Multiplier(a.tier)
	if err != nil {
		return fail(err)
	}
	fraction, err := pricebook.BilledFraction(in)
	if err != nil {
		return fail(err)
	}
	t := terms{listPrice: price, fraction: fraction, multiplier: multiplier}
	switch in.Kind {
	case pb.Kind_KIND_MIG.Label():
		if t.overhead, err = pricebook.MIGOverhead(in.SMCount, in.GPUSMCount, fraction); err != nil {
			return fail(err)
		}
	case pb.Kind_KIND_VGPU.Label():
		t.timeSliced = true
	}
	return t, nil
}

// averageOver sets the list price and multiplier to their averages over the billed interval,
// for a price book whose prices change in time or that gives the tenant a contract price: the
// list cost and cost of the interval are then exactly those of CostsBetween, split to the ns.
func (t *terms) averageOver(a allocation, model string, billed interval, book *pricebook.PriceBook) error {
	list, cost, err := book.CostsBetween(a.tenant, a.tier, model, t.fraction, billed.time(billed.start), billed.time(billed.end))
	if err != nil {
		return fmt.Errorf("price allocation %s of tenant %q on %s: %w", a.id, a.tenant, a.target, err)
	}
	if hours := billed.duration().Hours(); hours > 0 && t.fraction > 0 {
		t.listPrice = list / (t.fraction * hours)
	}
	if list > 0 {
		t.multiplier = cost / list
	}
	return nil
}

// usage is what the (deduplicated) samples of an allocation's target add up to within its
// billed interval; the usage query computes it per allocation.
type usage struct {
	metered time.Duration // Σ overlap of each sample's [ts, ts+interval) with the billed interval
	// active is the part of metered covered by samples whose activity was measured (not
	// sm_active_unavailable: a MIG instance on a GPU without GPM is metered but unmeasured).
	active time.Duration
	// efficiencyNS is Σ per-sample efficiency × overlap (ns) over the measured samples:
	// sm_active for a whole GPU or MIG, min(1, sm_active / (fraction × (1 − o_tick))) for a vGPU.
	efficiencyNS float64
	// switchNS is Σ vgpu_switch_ns/interval_ns × overlap (ns): the vGPU overhead, time-weighted.
	switchNS float64
}

// line is one allocation's part of the report.
type line struct {
	billed, metered                         time.Duration
	active                                  time.Duration // measured metered time, ≤ metered
	listCost, cost, wasteCost, overheadCost float64
	overhead                                float64 // o
	efficiency                              float64 // valid when active > 0
}

// attribute applies DESIGN.md's definitions to one allocation.
//
// Efficiency and the vGPU overhead are means over the metered samples weighted by how much
// of each sample lies in the billed time; with samples inside the billed time, as usual, that
// is the plain mean over the samples.
//
// Samples whose activity was not measured (sm_active_unavailable) are metered but say nothing
// about use: efficiency is the mean over the measured ones only, and waste counts only the
// measured share of the billed time,
//
//	waste_cost = cost × (1 − o) × (measured metered / billed seconds) × (1 − efficiency),
//
// so an allocation with no measured sample has no efficiency (valid only when active > 0) and
// no waste, like an unmetered one. With every sample measured this is DESIGN.md's formula.
func attribute(billed time.Duration, t terms, u usage) line {
	l := line{billed: billed, metered: min(u.metered, billed), overhead: t.overhead}
	l.active = min(u.active, l.metered)
	l.listCost = pricebook.ListCost(t.listPrice, t.fraction, billed)
	l.cost = l.listCost * t.multiplier
	if u.metered > 0 && t.timeSliced {
		l.overhead = clamp01(u.switchNS / float64(u.metered))
	}
	if u.active > 0 {
		l.efficiency = clamp01(u.efficiencyNS / float64(u.active))
	}
	// Unmetered time (an exporter outage) and unmeasured time are never waste: only the
	// measured share can be.
	if billed > 0 && l.active > 0 {
		l.wasteCost = l.cost * (1 - l.overhead) * (float64(l.active) / float64(billed)) * (1 - l.efficiency)
	}
	l.overheadCost = l.cost * l.overhead
	return l
}

func clamp01(v float64) float64 { return min(1, max(0, v)) }
