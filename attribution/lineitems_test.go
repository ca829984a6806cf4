package attribution_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// withLineItems is the report of the window with its line items, failing unless they sum to
// their tenants' rows (lineItemsSum).
func withLineItems(ctx context.Context, conn store.Querier, o attribution.Options, book *pricebook.PriceBook) (report.Report, error) {
	o.Lines = true
	res, err := attribution.Report(ctx, conn, book, o)
	if err != nil {
		return res.Report, err
	}
	return res.Report, lineItemsSum(res.Report)
}

// lineItemsSum fails unless each tenant's line items sum to its row: seconds and money
// exactly (the same sums in the same order), efficiency as the mean weighted by measured
// seconds, cold start as the maximum, breaches as the count; and, as rendered, the CSV line
// items sum to the CSV tenant rows within the rounding of their 6 decimals.
func lineItemsSum(rep report.Report) error {
	type sums struct {
		n                                  int
		allocated, unmetered, measured     time.Duration
		list, cost, waste, overhead, effNS float64
		coldStart                          *time.Duration
		breaches                           int
	}
	by := map[string]*sums{}
	for _, a := range rep.Allocations {
		s := by[a.Tenant]
		if s == nil {
			s = &sums{}
			by[a.Tenant] = s
		}
		s.n++
		s.allocated += a.Allocated
		s.unmetered += a.Unmetered
		s.measured += a.Measured
		s.list += a.ListCost
		s.cost += a.Cost
		s.waste += a.WasteCost
		s.overhead += a.OverheadCost
		if a.Efficiency != nil {
			s.effNS += *a.Efficiency * a.Measured.Seconds()
		}
		if a.ColdStart != nil && (s.coldStart == nil || *a.ColdStart > *s.coldStart) {
			s.coldStart = a.ColdStart
		}
		if a.ColdStartBreach {
			s.breaches++
		}
	}
	if len(by) != len(rep.Tenants) {
		return fmt.Errorf("line items of %d tenants, %d tenant rows", len(by), len(rep.Tenants))
	}
	for _, row := range rep.Tenants {
		s := by[row.Tenant]
		if s == nil {
			return fmt.Errorf("tenant %q has a row and no line item", row.Tenant)
		}
		if s.allocated != row.Allocated || s.unmetered != row.Unmetered || s.list != row.ListCost || s.cost != row.Cost ||
			s.waste != row.WasteCost || s.overhead != row.OverheadCost || s.breaches != row.ColdStartBreaches {
			return fmt.Errorf("tenant %q: its %d line items sum to %+v, its row is %+v", row.Tenant, s.n, *s, row)
		}
		if (s.coldStart == nil) != (row.ColdStartMax == nil) || s.coldStart != nil && *s.coldStart != *row.ColdStartMax {
			return fmt.Errorf("tenant %q: line items' largest cold start %v, row's %v", row.Tenant, s.coldStart, row.ColdStartMax)
		}
		if (s.measured > 0) != (row.Efficiency != nil) || s.measured > 0 && s.effNS/s.measured.Seconds() != *row.Efficiency {
			return fmt.Errorf("tenant %q: line items' efficiency over %s measured, row's %v", row.Tenant, s.measured, row.Efficiency)
		}
	}
	return renderedSum(rep)
}

// renderedSum compares the CSV line items' sums per tenant with the CSV tenant rows.
func renderedSum(rep report.Report) error {
	read := func(write func(*bytes.Buffer) error) ([][]string, error) {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			return nil, err
		}
		return csv.NewReader(&b).ReadAll()
	}
	items, err := read(func(b *bytes.Buffer) error { return report.Series{rep}.WriteBy(b, report.CSV, report.ByAllocation) })
	if err != nil {
		return err
	}
	tenants, err := read(func(b *bytes.Buffer) error { return rep.WriteCSV(b) })
	if err != nil {
		return err
	}
	// Columns: line items' allocated_seconds, unmetered, list_cost, cost, waste_cost,
	// overhead_cost; the tenant report's the same.
	itemCols, tenantCols := []int{11, 13, 14, 15, 16, 17}, []int{4, 13, 5, 6, 7, 8}
	sum, count := map[string][]float64{}, map[string]int{}
	for _, r := range items[1:] {
		if sum[r[0]] == nil {
			sum[r[0]] = make([]float64, len(itemCols))
		}
		count[r[0]]++
		for i, c := range itemCols {
			v, err := strconv.ParseFloat(r[c], 64)
			if err != nil {
				return fmt.Errorf("line item %v column %s: %w", r, items[0][c], err)
			}
			sum[r[0]][i] += v
		}
	}
	for _, r := range tenants[1:] {
		if r[0] == report.Unallocated {
			continue
		}
		for i, c := range tenantCols {
			v, err := strconv.ParseFloat(r[c], 64)
			if err != nil {
				return fmt.Errorf("tenant row %v column %s: %w", r, tenants[0][c], err)
			}
			// Each rendered amount is within half a unit of its last decimal.
			if tol := float64(count[r[0]]+1) * 5e-7; math.Abs(sum[r[0]][i]-v) > tol+1e-12 {
				return fmt.Errorf("tenant %q %s: rendered line items sum to %.9f, its row says %s", r[0], tenants[0][c], sum[r[0]][i], r[c])
			}
		}
	}
	return nil
}
