// Package attribution joins the samples in ClickHouse with the tenants' allocations and
// computes, per tenant and window, DESIGN.md's definitions: cost, waste, overhead, efficiency,
// p99 scheduling jitter and cold start, and the unallocated capacity.
//
// Compute reads the raw samples; ComputeFrom can read the collector's per-second or per-minute
// rollups instead (rollup.go); FromMinutes sums the minutes the attribution service stored.
// CheckInvariants checks a report; NoisyNeighbours ranks co-tenants on time-sliced GPUs.
// Around it: pricebook (prices, tiers, contracts, effective-dated changes), report (rendering,
// windows of a step), intake (allocations from files and HTTP into ClickHouse), continuous
// (every closed minute attributed and stored) and api (the HTTP API).
//
// # Unmeasured activity
//
// A sample may say that its instance's activity could not be measured (sm_active_unavailable:
// a MIG instance on a GPU without GPM, before Hopper); its sm_active is 0 and means nothing.
// Such time is metered (it is never unmetered: the exporter saw the instance) but says nothing
// about use, so DESIGN.md's efficiency and waste are taken over the measured time only:
//
//   - an allocation's efficiency is the mean over its metered samples whose activity was
//     measured, weighted by the time each covers in the billed interval;
//   - waste_cost = cost × (1 − o) × (measured metered / billed seconds) × (1 − efficiency);
//   - an allocation without a measured sample has no efficiency (empty in the report, as for
//     an unmetered one) and no waste;
//   - a tenant's efficiency is its allocations' mean weighted by measured seconds.
//
// The overhead is unchanged. With every sample measured these are DESIGN.md's definitions, and
// cost = used + waste + overhead; the unmeasured share of (1 − o) × cost is neither used nor
// waste. The raw samples carry the flag; samples_1s and samples_1m count the measured samples
// and the time they cover (active_samples, active_ns); attribution_minutes stores the measured
// time (active_ns) so that a window's efficiency is Σ efficiency_ns / Σ active_ns.
package attribution

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
)

// Compute builds the tenant report of the window [from, to) from the samples and allocations
// in ClickHouse, priced by the price book.
//
// It fails when an allocation or a GPU of the fleet cannot be priced (a model without a price,
// an unknown tier, a target never sampled), naming what is missing: a report that left them
// out would not add up. Things worth knowing that do not stop the report (a tenant at several
// tiers, an allocation whose cold start is unknown) are in Report.Notes and logged.
func Compute(ctx context.Context, conn driver.Conn, from, to time.Time, book *pricebook.PriceBook) (report.Report, error) {
	rep, _, err := compute(ctx, conn, from, to, book, RawSamples)
	return rep, err
}

// ComputeFrom is Compute reading the sample aggregates from the given source (RawSamples or
// the collector's per-second rollup).
func ComputeFrom(ctx context.Context, conn driver.Conn, from, to time.Time, book *pricebook.PriceBook, source Samples) (report.Report, error) {
	rep, _, err := compute(ctx, conn, from, to, book, source)
	return rep, err
}

// Line is one allocation's part of a window's report.
type Line struct {
	AllocationID, Tenant, Tier, Node, Instance string
	Billed, Metered                            time.Duration
	Active                                     time.Duration // the measured part of Metered (sm_active available)
	ListCost, Cost, WasteCost, OverheadCost    float64
	Efficiency                                 float64 // mean over the measured time; valid when Active > 0
	ColdStart                                  *time.Duration
	ColdStartSLA                               time.Duration
	JitterP99                                  *time.Duration // time-sliced allocations with waits only
	Requested, Started                         time.Time
	TimeSliced                                 bool
	Waits                                      map[uint64]uint64 // vGPU waits (ns) → how many, in the billed time
}

// ComputeLines is ComputeFrom that also returns each allocation's line, in requested_at order.
func ComputeLines(ctx context.Context, conn driver.Conn, from, to time.Time, book *pricebook.PriceBook, source Samples) (report.Report, []Line, error) {
	rep, results, err := compute(ctx, conn, from, to, book, source)
	if err != nil {
		return rep, nil, err
	}
	lines := make([]Line, 0, len(results))
	for _, r := range results {
		l := Line{
			AllocationID: r.alloc.id, Tenant: r.alloc.tenant, Tier: r.alloc.tier, Node: r.alloc.target.node, Instance: r.alloc.target.instance,
			Billed: r.line.billed, Metered: r.line.metered, Active: r.line.active, ListCost: r.line.listCost, Cost: r.line.cost,
			WasteCost: r.line.wasteCost, OverheadCost: r.line.overheadCost, Efficiency: r.line.efficiency,
			ColdStart: r.coldStart, ColdStartSLA: r.sla,
			Requested: time.Unix(0, r.alloc.requested).UTC(), Started: time.Unix(0, r.alloc.started).UTC(),
			TimeSliced: r.timeSliced, Waits: r.waits,
		}
		if p, ok := r.waits.p99(); ok {
			l.JitterP99 = &p
		}
		lines = append(lines, l)
	}
	return rep, lines, nil
}

func compute(ctx context.Context, conn driver.Conn, from, to time.Time, book *pricebook.PriceBook, source Samples) (report.Report, []result, error) {
	q, ok := queriesOf[source]
	if !ok {
		return report.Report{}, nil, fmt.Errorf("sample source %d: expected RawSamples or SecondRollup", source)
	}
	if !from.Before(to) {
		return report.Report{}, nil, fmt.Errorf("report window [%s, %s): the start must be before the end", from, to)
	}
	window := interval{from.UnixNano(), to.UnixNano()}
	allocs, err := readAllocations(ctx, conn, window)
	if err != nil {
		return report.Report{}, nil, err
	}
	fleet, err := readInstancesInWindow(ctx, conn, q, window)
	if err != nil {
		return report.Report{}, nil, err
	}
	capacity, err := capacityListCost(fleet, window, book)
	if err != nil {
		return report.Report{}, nil, err
	}
	billed, unsampled, err := priceAllocations(ctx, conn, q, allocs, window, fleet, book)
	if err != nil {
		return report.Report{}, nil, err
	}
	m, err := measure(ctx, conn, q, billed)
	if err != nil {
		return report.Report{}, nil, err
	}

	overlaps := overlapping(billed)
	var (
		results []result
		notes   = append(unsampled, overlaps...)
	)
	for _, b := range billed {
		r := result{
			alloc:      b.allocation,
			line:       attribute(b.billed.duration(), b.terms, m.usage[b.id]),
			timeSliced: b.terms.timeSliced,
			waits:      m.waits[b.id],
			sla:        book.ColdStartSLA(b.tier),
		}
		if first, ok := m.firstAttached[b.id]; ok {
			d := time.Duration(first - b.requested)
			r.coldStart = &d
		} else {
			notes = append(notes, fmt.Sprintf("allocation %s of tenant %q on %s: no attached sample between its request and %s, cold start unknown",
				b.id, b.tenant, b.target, time.Unix(0, b.billed.end).UTC().Format(time.RFC3339)))
		}
		results = append(results, r)
	}
	rows, tenantNotes := tenantRows(results, window, book.Currency)
	notes = append(notes, tenantNotes...)

	unallocated := capacity
	for _, row := range rows {
		unallocated -= row.ListCost
	}
	if LogsNotes(ctx) { // the attribution service rate-limits its own (notes.go)
		for _, n := range notes {
			slog.WarnContext(ctx, "attribution report note", "window_start", from.UTC(), "window_end", to.UTC(), "note", n)
		}
	}
	return report.Report{
		WindowStart:         from.UTC(),
		WindowEnd:           to.UTC(),
		Currency:            book.Currency,
		Tenants:             rows,
		UnallocatedListCost: unallocated,
		CapacityListCost:    capacity,
		Notes:               notes,
		Unsampled:           len(unsampled),
		Overlaps:            overlaps,
	}, results, nil
}

// capacityListCost is the list cost of every GPU with a sample in the window, for the whole
// window.
func capacityListCost(f *fleet, window interval, book *pricebook.PriceBook) (float64, error) {
	total := 0.0
	unpriced := map[string]error{}
	for g := range f.gpus {
		list, err := book.ListCostBetween(g.model, 1, window.time(window.start), window.time(window.end))
		if err != nil {
			unpriced[g.model] = err
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

// priceAllocations clips the allocations to the window and prices each on its instance. The
// result is ordered by requested_at, so that a chunk's cold-start search spans little time.
//
// An allocation whose target has never been sampled cannot be priced (its model and share are
// unknown) and is left out, described in unsampled: the intake accepts allocations for
// instances not seen yet, and their samples may come later (a later recomputation prices them).
func priceAllocations(ctx context.Context, conn driver.Conn, q sampleQueries, allocs []allocation, window interval, f *fleet, book *pricebook.PriceBook) (billed []billedAllocation, unsampled []string, err error) {
	var (
		all     []billedAllocation
		missing []target
		seen    = map[target]bool{}
	)
	for _, a := range allocs {
		iv, ok := a.billed(window)
		if !ok {
			continue
		}
		all = append(all, billedAllocation{allocation: a, billed: iv})
		if _, ok := f.instances[a.target]; !ok && !seen[a.target] {
			seen[a.target] = true
			missing = append(missing, a.target)
		}
	}
	ever, err := readInstancesEver(ctx, conn, q, missing)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range all {
		in, ok := f.instances[b.target]
		if !ok {
			if in, ok = ever.instances[b.target]; !ok {
				unsampled = append(unsampled, fmt.Sprintf("allocation %s of tenant %q: its target %s has never been sampled, so its GPU model and share are unknown; it is left out until its samples arrive",
					b.id, b.tenant, b.target))
				continue
			}
		}
		if b.terms, err = termsOf(b.allocation, in, book); err != nil {
			return nil, nil, err
		}
		if book.Dated() {
			if err := b.terms.averageOver(b.allocation, in.Model, b.billed, book); err != nil {
				return nil, nil, err
			}
		}
		billed = append(billed, b)
	}
	slices.SortFunc(billed, func(x, y billedAllocation) int {
		switch {
		case earlier(x.allocation, y.allocation):
			return -1
		case earlier(y.allocation, x.allocation):
			return 1
		}
		return 0
	})
	return billed, unsampled, nil
}

// overlapping describes every pair of allocations that hold one instance at the same time in
// the window. The HTTP and file intakes refuse them; allocations from Kafka are stored as the
// scheduler sent them, so they are found here (and break the "overlap" invariant).
func overlapping(billed []billedAllocation) []string {
	byTarget := map[target][]billedAllocation{}
	for _, b := range billed {
		byTarget[b.target] = append(byTarget[b.target], b)
	}
	var out []string
	for _, t := range slices.SortedFunc(maps.Keys(byTarget), func(a, b target) int { return strings.Compare(a.String(), b.String()) }) {
		list := byTarget[t]
		slices.SortFunc(list, func(a, b billedAllocation) int { return cmp.Compare(a.billed.start, b.billed.start) })
		for i := 1; i < len(list); i++ {
			for j := 0; j < i; j++ {
				if list[j].billed.end > list[i].billed.start {
					out = append(out, fmt.Sprintf("allocations %s (tenant %q) and %s (tenant %q) both hold %s from %s",
						list[j].id, list[j].tenant, list[i].id, list[i].tenant, t, time.Unix(0, list[i].billed.start).UTC().Format(time.RFC3339Nano)))
				}
			}
		}
	}
	return out
}
