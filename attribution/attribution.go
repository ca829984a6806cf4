// Package attribution joins the samples in ClickHouse with the tenants' allocations and
// computes, per tenant and window, DESIGN.md's definitions: cost, waste, overhead, efficiency,
// p99 scheduling jitter and cold start, and the unallocated capacity.
package attribution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
	if !from.Before(to) {
		return report.Report{}, fmt.Errorf("report window [%s, %s): the start must be before the end", from, to)
	}
	window := interval{from.UnixNano(), to.UnixNano()}
	allocs, err := readAllocations(ctx, conn, window)
	if err != nil {
		return report.Report{}, err
	}
	fleet, err := readInstancesInWindow(ctx, conn, window)
	if err != nil {
		return report.Report{}, err
	}
	capacity, err := capacityListCost(fleet, window, book)
	if err != nil {
		return report.Report{}, err
	}
	billed, err := priceAllocations(ctx, conn, allocs, window, fleet, book)
	if err != nil {
		return report.Report{}, err
	}
	m, err := measure(ctx, conn, billed)
	if err != nil {
		return report.Report{}, err
	}

	var (
		results []result
		notes   []string
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
	for _, n := range notes {
		slog.WarnContext(ctx, "attribution report note", "window_start", from.UTC(), "window_end", to.UTC(), "note", n)
	}
	return report.Report{
		WindowStart:         from.UTC(),
		WindowEnd:           to.UTC(),
		Currency:            book.Currency,
		Tenants:             rows,
		UnallocatedListCost: unallocated,
		Notes:               notes,
	}, nil
}

// capacityListCost is the list cost of every GPU with a sample in the window, for the whole
// window.
func capacityListCost(f *fleet, window interval, book *pricebook.PriceBook) (float64, error) {
	total := 0.0
	unpriced := map[string]error{}
	for g := range f.gpus {
		price, err := book.Price(g.model)
		if err != nil {
			unpriced[g.model] = err
			continue
		}
		total += pricebook.ListCost(price, 1, window.duration())
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
func priceAllocations(ctx context.Context, conn driver.Conn, allocs []allocation, window interval, f *fleet, book *pricebook.PriceBook) ([]billedAllocation, error) {
	var (
		billed  []billedAllocation
		missing []target
		seen    = map[target]bool{}
	)
	for _, a := range allocs {
		iv, ok := a.billed(window)
		if !ok {
			continue
		}
		billed = append(billed, billedAllocation{allocation: a, billed: iv})
		if _, ok := f.instances[a.target]; !ok && !seen[a.target] {
			seen[a.target] = true
			missing = append(missing, a.target)
		}
	}
	ever, err := readInstancesEver(ctx, conn, missing)
	if err != nil {
		return nil, err
	}
	for i := range billed {
		b := &billed[i]
		in, ok := f.instances[b.target]
		if !ok {
			if in, ok = ever.instances[b.target]; !ok {
				return nil, fmt.Errorf("price allocation %s of tenant %q: its target %s has never been sampled, so its GPU model and share are unknown",
					b.id, b.tenant, b.target)
			}
		}
		if b.terms, err = termsOf(b.allocation, in, book); err != nil {
			return nil, err
		}
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
	return billed, nil
}
