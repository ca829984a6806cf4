package statement

import (
	"context"
	"fmt"
	"time"

	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// fixture is a month of allocations priced at a flat rate: its reports are computed from the
// allocations' overlap with the window, so that every window's figures add up the way the
// attribution's do (days sum to the month, line items to the tenant row).
type fixture struct {
	book   *pricebook.PriceBook
	allocs []report.AllocationRow // the whole month's; money per hour of Allocated
}

var november = period.Month{Year: 2026, Month: time.November}

func newFixture(perTenant int) fixture {
	book := &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100-SXM4-40GB": 1.6}, Tiers: map[string]float64{"pro": 1, "budget": 0.7},
		ColdStart: map[string]time.Duration{"pro": 30 * time.Second}, JitterP99: map[string]time.Duration{"pro": 5 * time.Millisecond}}
	start, end := november.Bounds(time.UTC)
	f := fixture{book: book}
	for _, tenant := range []string{"acme", "globex"} {
		for i := range perTenant {
			tier := []string{"pro", "budget"}[i%2]
			from := start.Add(time.Duration(i%20) * 24 * time.Hour)
			to := from.Add(time.Duration(3+i%9) * 24 * time.Hour)
			if to.After(end) {
				to = end
			}
			cold := time.Duration(10+(i*7)%40) * time.Second
			eff := 0.5 + float64(i%5)/10
			jit := time.Duration(2+i%6) * time.Millisecond
			f.allocs = append(f.allocs, report.AllocationRow{
				Tenant: tenant, AllocationID: fmt.Sprintf("%s-%03d", tenant, i), Tier: tier, WindowStart: from, WindowEnd: to,
				Node: fmt.Sprintf("node-%d", i%7), Instance: fmt.Sprintf("GPU-%d/mig-%d", i%7, i%4), Kind: "mig", Model: "A100-SXM4-40GB", Profile: "3g.20gb",
				Fraction: 3.0 / 7, Allocated: to.Sub(from), Efficiency: &eff, Overhead: 0.02, JitterP99: &jit, ColdStart: &cold,
				ColdStartBreach: cold > book.ColdStartSLA(tier), Currency: "USD", Requested: from,
			})
		}
	}
	return f
}

// report is the fixture's Reporter.
func (f fixture) report(_ context.Context, from, to time.Time, lines bool) (report.Report, error) {
	rep := report.Report{WindowStart: from, WindowEnd: to, Currency: "USD"}
	rows := map[[2]string]*report.Row{}
	for _, a := range f.allocs {
		s, e := later(a.WindowStart, from), earlier(a.WindowEnd, to)
		if !e.After(s) {
			continue
		}
		d := e.Sub(s)
		list := pricebook.ListCost(f.book.Prices[a.Model], a.Fraction, d)
		cost := list * f.book.Tiers[a.Tier]
		line := a
		line.WindowStart, line.WindowEnd, line.Allocated, line.Measured = from, to, d, d
		line.ListCost, line.Cost = list, cost
		line.OverheadCost = cost * a.Overhead
		line.WasteCost = cost * (1 - a.Overhead) * (1 - *a.Efficiency)
		if !s.Equal(a.WindowStart) { // the cold start belongs to the window the allocation starts in
			line.ColdStart, line.ColdStartBreach = nil, false
		}
		if lines {
			rep.Allocations = append(rep.Allocations, line)
		}
		k := [2]string{a.Tenant, a.Tier}
		r := rows[k]
		if r == nil {
			r = &report.Row{Tenant: a.Tenant, Tier: a.Tier, WindowStart: from, WindowEnd: to, Currency: "USD"}
			rows[k] = r
		}
		r.Allocated += d
		r.ListCost += list
		r.Cost += cost
		r.WasteCost += line.WasteCost
		r.OverheadCost += line.OverheadCost
		if line.ColdStart != nil && (r.ColdStartMax == nil || *line.ColdStart > *r.ColdStartMax) {
			r.ColdStartMax = line.ColdStart
		}
		if line.ColdStartBreach {
			r.ColdStartBreaches++
		}
		if r.JitterP99 == nil || *a.JitterP99 > *r.JitterP99 {
			r.JitterP99 = a.JitterP99
		}
	}
	for _, r := range rows {
		rep.Tenants = append(rep.Tenants, *r)
	}
	return rep, nil
}

func (f fixture) source() Source { return Source{Report: f.report, Book: f.book} }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
