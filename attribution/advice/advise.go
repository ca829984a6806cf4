package advice

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// DefaultWindow is how far back advise looks by default, to the horizon.
const DefaultWindow = 7 * 24 * time.Hour

// DefaultMinMeasured is the least measured time an allocation needs for advice.
const DefaultMinMeasured = time.Hour

// Options say what Compute advises on.
type Options struct {
	From, To time.Time
	// Samples is the table the needs are read from (advise reads samples_1m: a week of a
	// large fleet stays cheap; the scenario tests read every table).
	Samples     store.Samples
	Headroom    Headroom
	MinMeasured time.Duration
	// Now and Delay make the horizon as the report does (attribution.Options.Horizon).
	Now   time.Time
	Delay time.Duration
	// Tenants, when set, keeps only those tenants' allocations (a tenant's view); nil: all.
	Tenants []string
	// Nodes, when set, keeps only the allocations on the nodes it accepts (an attribution
	// replica's share of the fleet); nil: every node.
	Nodes func(node string) bool
}

// Check refuses options no advice can be computed for, naming the flag.
func (o Options) Check() error {
	switch {
	case !o.From.Before(o.To):
		return usage.Errorf("--from %s and --to %s: expected the start before the end", o.From.Format(time.RFC3339), o.To.Format(time.RFC3339))
	case o.Headroom.Compute < 0 || o.Headroom.Compute > 10:
		return usage.Errorf("--advise.compute-headroom %g: expected 0 to 10", o.Headroom.Compute)
	case o.Headroom.Memory < 0 || o.Headroom.Memory > 10:
		return usage.Errorf("--advise.memory-headroom %g: expected 0 to 10", o.Headroom.Memory)
	case o.MinMeasured < 0:
		return usage.Errorf("--advise.min-measured %s: expected 0 or more", o.MinMeasured)
	}
	return nil
}

// Row is the advice for one allocation: DESIGN's columns, and what the summaries need.
type Row struct {
	AllocationID, Tenant, Tier, Node, InstanceID, Kind, Model string
	Shape, AdvisedShape                                       string // AdvisedShape empty: unknown
	Action                                                    Action
	Saturated                                                 bool
	ComputeNeed                                               float64 // C, whole-GPU units
	MemoryNeed                                                uint64  // M, bytes
	Fraction, AdvisedFraction                                 *big.Rat
	Savings, Savings30d                                       decimal.Decimal
	Currency                                                  string
	// Billed is the allocation's billed time in the window; ActiveGPUHours its measured
	// activity in whole-GPU hours.
	Billed         time.Duration
	ActiveGPUHours float64
}

// Result is the advice over a window.
type Result struct {
	From, To time.Time // To is the horizon
	Currency string
	Rows     []Row // by allocation id
	// Notes say what was left out and why (unpriced, never sampled, impossible facts).
	Notes []string
}

// Compute advises each allocation billed in the window (README.md, "Right-sizing"), from the
// allocation-minutes the bill reads, priced by the book.
func Compute(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, o Options) (Result, error) {
	if err := o.Check(); err != nil {
		return Result{}, err
	}
	to := attribution.Options{From: o.From, To: o.To, Now: o.Now, Delay: o.Delay}.Horizon()
	res := Result{From: o.From.UTC(), To: to.UTC(), Currency: book.Currency}
	if !to.After(o.From) {
		return res, nil
	}
	window := billing.Interval{Start: o.From.UnixNano(), End: to.UnixNano()}
	allocs, err := store.ReadAllocations(ctx, conn, window)
	if err != nil {
		return res, err
	}
	if o.Tenants != nil {
		allocs = slices.DeleteFunc(allocs, func(a billing.Allocation) bool { return !slices.Contains(o.Tenants, a.Tenant) })
	}
	if o.Nodes != nil {
		allocs = slices.DeleteFunc(allocs, func(a billing.Allocation) bool { return !o.Nodes(a.Target.Node) })
	}
	fleet, err := store.ReadInstancesInWindow(ctx, conn, o.Samples, window, store.Nodes{})
	if err != nil {
		return res, err
	}
	clipped, unseen := billing.Clip(allocs, window, fleet)
	ever, err := store.ReadInstancesEver(ctx, conn, o.Samples, unseen)
	if err != nil {
		return res, err
	}
	p := billing.Price(clipped, fleet, ever, book)
	res.Notes = append(res.Notes, p.Unsampled...)
	res.Notes = append(res.Notes, p.Failed...)
	for _, u := range p.Unpriced {
		res.Notes = append(res.Notes, fmt.Sprintf("allocation %s of tenant %q: unpriced (%s %s), left out of the advice", u.ID, u.Tenant, u.Kind, u.Name))
	}
	needs, err := store.ReadNeeds(ctx, conn, o.Samples, p.Priced)
	if err != nil {
		return res, err
	}
	windowLen := to.Sub(o.From)
	for _, b := range p.Priced {
		in, ok := fleet.Instances[b.Target]
		if !ok {
			in = ever.Instances[b.Target]
		}
		row, err := advise(b, in, needs[b.ID], book, o, windowLen)
		if err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("allocation %s of tenant %q: %v; it is left out of the advice", b.ID, b.Tenant, err))
			continue
		}
		res.Rows = append(res.Rows, row)
	}
	slices.SortFunc(res.Rows, func(a, b Row) int { return cmp.Compare(a.AllocationID, b.AllocationID) })
	return res, nil
}

// advise is one allocation's row.
func advise(b billing.Billed, in pricebook.Instance, n store.Need, book *pricebook.PriceBook, o Options, window time.Duration) (Row, error) {
	unit := Unit(in)
	minutes := make([]float64, len(n.Minutes))
	for i, m := range n.Minutes {
		minutes[i] = m * unit
	}
	need := Need{Compute: P95(minutes), MemoryBytes: n.MemUsedMax, Measured: n.Active}
	d, err := Decide(in, need, o.Headroom, o.MinMeasured)
	if err != nil {
		return Row{}, err
	}
	row := Row{
		AllocationID: b.ID, Tenant: b.Tenant, Tier: b.Tier, Node: b.Target.Node, InstanceID: b.Target.Instance,
		Kind: in.Kind, Model: in.Model, Shape: d.Current.Name, Action: d.Action, Saturated: d.Saturated,
		ComputeNeed: need.Compute, MemoryNeed: need.MemoryBytes, Fraction: d.Current.Fraction, Currency: book.Currency,
		Billed: b.Billed.Duration(), ActiveGPUHours: n.ActiveNS * unit / float64(time.Hour),
	}
	if d.Action == Unknown {
		return row, nil
	}
	row.AdvisedShape, row.AdvisedFraction = d.Advised.Name, d.Advised.Fraction
	whole, err := WholeCost(book, b.Tenant, b.Tier, in.Model, billing.UTC(b.Billed.Start), billing.UTC(b.Billed.End))
	if err != nil {
		return Row{}, err
	}
	row.Savings, row.Savings30d = Savings(whole, d.Current.Fraction, d.Advised.Fraction, window)
	return row, nil
}

// Advised is the fraction the allocation would hold after the advice (its own when unknown).
func (r Row) Advised() *big.Rat {
	if r.AdvisedFraction == nil {
		return r.Fraction
	}
	return r.AdvisedFraction
}
