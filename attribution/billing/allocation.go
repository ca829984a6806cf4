package billing

import (
	"fmt"
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Interval is [Start, End) in ns since the Unix epoch.
type Interval struct{ Start, End int64 }

// Duration is the interval's length.
func (iv Interval) Duration() time.Duration { return time.Duration(iv.End - iv.Start) }

// UTC is the time of a ns timestamp.
func UTC(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// Target is an instance on a node: what an allocation holds and what samples describe.
type Target struct{ Node, Instance string }

func (t Target) String() string { return t.Node + "/" + t.Instance }

// Allocation is the current state of one allocation (its highest version, not deleted).
type Allocation struct {
	ID, Tenant, Tier string
	Target           Target
	Requested        int64 // ns
	Started          int64 // ns; billing starts
	Ended            int64 // ns; 0: still running
}

// Billed is the allocation's billing interval [started, ended) clipped to the window; ok is
// false when nothing of it falls in the window.
func (a Allocation) Billed(window Interval) (iv Interval, ok bool) {
	end := a.Ended
	if end == 0 || end > window.End {
		end = window.End
	}
	iv = Interval{max(a.Started, window.Start), end}
	return iv, a.Started > 0 && iv.End > iv.Start
}

// Terms are what one allocation is priced at.
type Terms struct {
	ListPrice  float64 // one whole GPU of the model, one hour
	Fraction   float64 // billed fraction of the GPU
	Multiplier float64 // the tier's
	// Overhead is the fixed overhead fraction (whole GPU 0, MIG from its SMs); a time-sliced
	// (vGPU) instance's is measured from its samples instead.
	Overhead   float64
	TimeSliced bool
	// Kind, Model and Profile describe the instance priced (the line items and FOCUS's SKU).
	Kind, Model, Profile string
}

// termsOf prices an allocation on an instance.
func termsOf(a Allocation, in pricebook.Instance, book *pricebook.PriceBook) (Terms, error) {
	fail := func(err error) (Terms, error) {
		return Terms{}, fmt.Errorf("price allocation %s of tenant %q on %s: %w", a.ID, a.Tenant, a.Target, err)
	}
	price, err := book.Price(in.Model)
	if err != nil {
		return fail(err)
	}
	multiplier, err := book.Multiplier(a.Tier)
	if err != nil {
		return fail(err)
	}
	fraction, err := pricebook.BilledFraction(in)
	if err != nil {
		return fail(err)
	}
	t := Terms{ListPrice: price, Fraction: fraction, Multiplier: multiplier, Kind: in.Kind, Model: in.Model, Profile: in.Profile}
	switch in.Kind {
	case pb.Kind_KIND_MIG.Label():
		if t.Overhead, err = pricebook.MIGOverhead(in.SMCount, in.GPUSMCount, fraction); err != nil {
			return fail(err)
		}
	case pb.Kind_KIND_VGPU.Label(), pb.Kind_KIND_SHARE.Label():
		// A share's efficiency is per allocation-minute as a vGPU's; its samples carry no
		// scheduler data, so its overhead (the switch share) and its waits (jitter) are nothing.
		t.TimeSliced = true
	}
	return t, nil
}

// averageOver sets the list price and multiplier to their averages over the billed interval,
// for a price book whose prices change in time or that gives the tenant a contract price: the
// list cost and cost of the interval are then exactly those of CostsBetween, split to the ns.
func (t *Terms) averageOver(a Allocation, model string, billed Interval, book *pricebook.PriceBook) error {
	list, cost, err := book.CostsBetween(a.Tenant, a.Tier, model, t.Fraction, UTC(billed.Start), UTC(billed.End))
	if err != nil {
		return fmt.Errorf("price allocation %s of tenant %q on %s: %w", a.ID, a.Tenant, a.Target, err)
	}
	if hours := billed.Duration().Hours(); hours > 0 && t.Fraction > 0 {
		t.ListPrice = list / (t.Fraction * hours)
	}
	if list > 0 {
		t.Multiplier = cost / list
	}
	return nil
}

// Usage is what the (deduplicated) samples of an allocation's target add up to within its
// billed interval; the store's usage query computes it per allocation.
type Usage struct {
	// Metered is the time the samples cover in the billed interval: the measure of the union
	// of their [ts, ts+interval), never the sum (overlapping samples cover their union once).
	Metered time.Duration
	// Active is the part of Metered covered by samples whose activity was measured (not
	// sm_active_unavailable: a MIG instance on a GPU without GPM is metered but unmeasured), the
	// union of theirs.
	Active time.Duration
	// EfficiencyNS is Σ efficiency × measured ns (where samples overlap, each instant counts
	// once, at the mean of the samples covering it): for a whole GPU or MIG the integral of
	// sm_active over the measured time; for a vGPU per allocation-minute min(1, Σ
	// sm_active·covered / Σ fraction·(1 − o)·covered), o the minute's switch share, times the
	// minute's measured ns.
	EfficiencyNS float64
	// SwitchNS is the integral of vgpu_switch_ns/interval_ns over the metered time (ns): the
	// vGPU overhead, time-weighted.
	SwitchNS float64
	// MemUsedNS is the integral of memory used / memory of the instance over MemNS, and MemNS
	// the time it is known for (ns): per UTC minute of the billed interval, the minute's mean
	// over its samples × the time they cover in it × the share of the minute billed (the
	// fleet's definition, attribution/README.md "Fleet economics"). MemUsedNS / MemNS is the memory
	// efficiency.
	MemUsedNS, MemNS float64
	// EnergyJ is the allocation's share of its GPU's energy (J): per UTC minute, the GPU's
	// mean power × the time the instance's samples cover in it × the billed fraction × the
	// share of the minute billed (store's memenergy.go).
	EnergyJ float64
}

// line is one allocation's part of the report.
type line struct {
	billed, metered                         time.Duration
	active                                  time.Duration // measured metered time, ≤ metered
	listCost, cost, wasteCost, overheadCost float64
	overhead                                float64 // o
	efficiency                              float64 // valid when active > 0
}

// attribute applies the definitions (attribution/README.md, "Definitions") to one allocation.
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
// no waste, like an unmetered one. With every sample measured this is the README's formula.
func attribute(billed time.Duration, t Terms, u Usage) line {
	l := line{billed: billed, metered: min(u.Metered, billed), overhead: t.Overhead}
	l.active = min(u.Active, l.metered)
	l.listCost = pricebook.ListCost(t.ListPrice, t.Fraction, billed)
	l.cost = l.listCost * t.Multiplier
	if u.Metered > 0 && t.TimeSliced {
		l.overhead = TimeMean(u.SwitchNS, u.Metered)
	}
	l.efficiency = TimeMean(u.EfficiencyNS, u.Active)
	l.wasteCost, l.overheadCost = Charges(l.cost, l.overhead, l.efficiency, l.active, billed)
	return l
}

// Charges are the waste and overhead costs of cost with overhead fraction o and efficiency
// over active measured of billed time. Every path computes them from its sums over the
// window, never by adding up those of parts of it: a vGPU's o and efficiency vary from minute
// to minute, and the bill is the formula of the window's means.
func Charges(cost, o, efficiency float64, active, billed time.Duration) (waste, overhead float64) {
	// Unmetered time (an exporter outage) and unmeasured time are never waste: only the
	// measured share can be.
	if billed > 0 && active > 0 {
		waste = cost * (1 - o) * (float64(active) / float64(billed)) * (1 - efficiency)
	}
	return waste, cost * o
}

// TimeMean is the mean of a fraction over a time from its sum over that time (Σ fraction ×
// ns): efficiency from efficiency ns over the measured time, the vGPU overhead from switch
// ns over the metered time. Every path takes a window's efficiency and overhead from its
// sums with it (attribute from the samples, the stored minutes from their columns;
// tables.Efficiency is its SQL, tested against it): the mean of fractions is within 0..1,
// float rounding of the sums aside, and is 0 over no time.
func TimeMean(sumNS float64, over time.Duration) float64 {
	if over <= 0 {
		return 0
	}
	return min(1, max(0, sumNS/float64(over)))
}
