// Package statement is a tenant's statement of one billing period (attribution/README.md, "Tenant
// statement"): the period's totals, a daily chart of its cost split into used, waste and
// overhead, its line items, cold start and jitter against the SLA, and the corrections of
// earlier periods it bills, as one self-contained HTML page (Render) that prints on A4.
package statement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// Reporter computes the tenant report of [from, to), with its line items when lines is set
// (the attribution service's and `slicemeter report`'s computation).
type Reporter func(ctx context.Context, from, to time.Time, lines bool) (report.Report, error)

// Closes looks up the close of a period: ok false while it is open; lines are the close's
// (its own rows and the corrections of earlier periods it bills).
type Closes func(ctx context.Context, m period.Month) (c period.Closed, lines []period.Line, ok bool, err error)

// Source is where a statement's figures come from.
type Source struct {
	Report Reporter
	Closes Closes // nil: every period is open
	Book   *pricebook.PriceBook
	// Advice is the tenant's right-sizing advice over a window (advice.Compute for one
	// tenant); nil: the statement has no right-sizing section.
	Advice func(ctx context.Context, tenant string, from, to time.Time) (advice.Result, error)
}

// RightSizing is the statement's right-sizing section: the tenant's allocations of the period
// advised a smaller shape, with what each saves, and those that ran at their limit.
type RightSizing struct {
	Downsizes, Saturated []advice.Row
	// Savings and Savings30d sum the downsizes'.
	Savings, Savings30d decimal.Decimal
}

// Totals are a statement's money and seconds, summed over the tenant's tiers.
type Totals struct {
	ListCost, Cost, WasteCost, OverheadCost float64
	Allocated, Unmetered                    time.Duration
}

// TierDiscount is what the tiers and contracts took off the list cost.
func (t Totals) TierDiscount() float64 { return t.ListCost - t.Cost }

// Used is the cost that neither waste nor overhead took.
func (t Totals) Used() float64 { return t.Cost - t.WasteCost - t.OverheadCost }

func (t *Totals) add(r report.Row) {
	t.ListCost += r.ListCost
	t.Cost += r.Cost
	t.WasteCost += r.WasteCost
	t.OverheadCost += r.OverheadCost
	t.Allocated += r.Allocated
	t.Unmetered += r.Unmetered
}

// Day is one day of the period (in the price book's zone) and the tenant's totals in it.
type Day struct {
	Start time.Time
	Totals
}

// Tier is what the SLA promises a tier the tenant was billed at, and what it got.
type Tier struct {
	Name              string
	ColdStartSLA      time.Duration
	JitterSLA         *time.Duration // nil: the tier has no jitter SLA
	ColdStartMax      *time.Duration
	JitterP99         *time.Duration
	ColdStartBreaches int
	JitterBreached    bool
	Allocated         time.Duration
}

// Breach is one allocation whose cold start exceeded its tier's SLA.
type Breach struct {
	AllocationID, Tier string
	ColdStart, SLA     time.Duration
}

// JitterBreach is one allocation whose jitter p99 over the period exceeded its tier's SLA.
type JitterBreach struct {
	AllocationID, Tier string
	JitterP99, SLA     time.Duration
}

// Statement is one tenant's statement of one period.
type Statement struct {
	Tenant   string
	Period   period.Month
	Start    time.Time
	End      time.Time
	Zone     *time.Location
	Currency string
	// Closed is the period's close; nil while the period is open.
	Closed *period.Closed
	Totals Totals
	// Computed are the totals recomputed from the data now: Totals when open; a closed
	// period's totals are what its close billed, and a difference is corrected later.
	Computed    Totals
	Days        []Day
	Allocations []report.AllocationRow
	Tiers       []Tier
	Breaches    []Breach
	// JitterBreaches are the allocations whose jitter p99 exceeded their tier's SLA.
	JitterBreaches []JitterBreach
	// Corrections are the lines of earlier periods that this period bills (closed only).
	Corrections []period.Line
	// RightSizing is nil when the source gives no advice.
	RightSizing *RightSizing
	Generated   time.Time
}

// Build computes the tenant's statement of m.
func Build(ctx context.Context, src Source, tenant string, m period.Month, now time.Time) (*Statement, error) {
	if tenant == "" {
		return nil, fmt.Errorf("statement of %s: no tenant given", m)
	}
	zone := src.Book.Zone()
	start, end := m.Bounds(zone)
	st := &Statement{Tenant: tenant, Period: m, Start: start, End: end, Zone: zone, Currency: src.Book.Currency, Generated: now.UTC()}
	days := Days(start, end, zone)
	month, reps, err := reports(ctx, src.Report, start, end, days)
	if err != nil {
		return nil, fmt.Errorf("statement of %s for %s: %w", tenant, m, err)
	}
	month = month.Only(tenant)
	for _, r := range month.Tenants {
		st.Computed.add(r)
	}
	st.Totals = st.Computed
	for _, a := range month.Allocations {
		if a.Tenant == tenant {
			st.Allocations = append(st.Allocations, a)
		}
	}
	slices.SortStableFunc(st.Allocations, func(a, b report.AllocationRow) int {
		if c := a.Requested.Compare(b.Requested); c != 0 {
			return c
		}
		return strings.Compare(a.AllocationID, b.AllocationID)
	})
	st.Tiers, st.Breaches, st.JitterBreaches = sla(src.Book, month.Tenants, st.Allocations)
	for i, d := range days {
		day := Day{Start: d.Start}
		for _, r := range reps[i].Only(tenant).Tenants {
			day.add(r)
		}
		st.Days = append(st.Days, day)
	}
	if src.Advice != nil {
		// The period so far: advice of the future would be of nothing.
		to := end
		if now.Before(to) {
			to = now
		}
		if to.After(start) {
			res, err := src.Advice(ctx, tenant, start, to)
			if err != nil {
				return nil, fmt.Errorf("statement of %s for %s: its right-sizing: %w", tenant, m, err)
			}
			st.RightSizing = rightSizing(res)
		}
	}
	if src.Closes != nil {
		c, lines, ok, err := src.Closes(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("statement of %s for %s: its close: %w", tenant, m, err)
		}
		if ok {
			st.Closed = &c
			st.Totals = Totals{}
			for _, l := range lines {
				if l.Tenant != tenant {
					continue
				}
				if l.Corrects != "" {
					st.Corrections = append(st.Corrections, l)
					continue
				}
				st.Totals.add(lineRow(l))
			}
		}
	}
	return st, nil
}

// rightSizing is the section of the advice's rows.
func rightSizing(res advice.Result) *RightSizing {
	rs := &RightSizing{}
	for _, r := range res.Rows {
		if r.Action == advice.Downsize {
			rs.Downsizes = append(rs.Downsizes, r)
			rs.Savings, rs.Savings30d = rs.Savings.Add(r.Savings), rs.Savings30d.Add(r.Savings30d)
		}
		if r.Saturated {
			rs.Saturated = append(rs.Saturated, r)
		}
	}
	return rs
}

// concurrentReports is how many of a statement's reports run at once: a day's is a few short
// queries, whose time is mostly their round trips, and a month has 28 to 31 of them.
const concurrentReports = 4

// reports are the period's report with its line items and each day's, concurrentReports at
// a time; the first failure cancels the others and is the one returned.
func reports(ctx context.Context, rep Reporter, start, end time.Time, days []report.Window) (report.Report, []report.Report, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		month report.Report
		each  = make([]report.Report, len(days))
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	slots := make(chan struct{}, concurrentReports)
	run := func(what string, from, to time.Time, lines bool, out *report.Report) {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if ctx.Err() != nil {
				return
			}
			r, err := rep(ctx, from, to, lines)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("report of %s: %w", what, err)
				cancel()
			}
			*out = r
		})
	}
	run("the period", start, end, true, &month)
	for i, d := range days {
		run(d.Start.Format(time.DateOnly), d.Start, d.End, false, &each[i])
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err() // the caller's cancellation, before any report failed
	}
	return month, each, first
}

func lineRow(l period.Line) report.Row {
	return report.Row{ListCost: l.ListCost.InexactFloat64(), Cost: l.Cost.InexactFloat64(), WasteCost: l.WasteCost.InexactFloat64(),
		OverheadCost: l.OverheadCost.InexactFloat64(), Allocated: l.Allocated, Unmetered: l.Unmetered}
}

// sla is the tenant's tiers against the price book's SLA, and the allocations that breached
// the cold-start limit and the jitter limit.
func sla(book *pricebook.PriceBook, rows []report.Row, allocs []report.AllocationRow) ([]Tier, []Breach, []JitterBreach) {
	var tiers []Tier
	for _, r := range rows {
		t := Tier{Name: r.Tier, ColdStartSLA: book.ColdStartSLA(r.Tier), ColdStartMax: r.ColdStartMax, JitterP99: r.JitterP99,
			ColdStartBreaches: r.ColdStartBreaches, Allocated: r.Allocated}
		if d, ok := book.JitterP99[r.Tier]; ok {
			t.JitterSLA = &d
			t.JitterBreached = r.JitterP99 != nil && *r.JitterP99 > d
		}
		tiers = append(tiers, t)
	}
	slices.SortFunc(tiers, func(a, b Tier) int { return strings.Compare(a.Name, b.Name) })
	var (
		breaches []Breach
		jitter   []JitterBreach
	)
	for _, a := range allocs {
		if a.ColdStartBreach && a.ColdStart != nil {
			breaches = append(breaches, Breach{AllocationID: a.AllocationID, Tier: a.Tier, ColdStart: *a.ColdStart, SLA: book.ColdStartSLA(a.Tier)})
		}
		if d, ok := book.JitterP99[a.Tier]; ok && a.JitterP99 != nil && *a.JitterP99 > d {
			jitter = append(jitter, JitterBreach{AllocationID: a.AllocationID, Tier: a.Tier, JitterP99: *a.JitterP99, SLA: d})
		}
	}
	return tiers, breaches, jitter
}

// Days are the calendar days of [start, end) in zone (a day of a DST change is 23 or 25 hours).
func Days(start, end time.Time, zone *time.Location) []report.Window {
	var out []report.Window
	l := start.In(zone)
	for i := 0; ; i++ {
		from := time.Date(l.Year(), l.Month(), l.Day()+i, 0, 0, 0, 0, zone).UTC()
		to := time.Date(l.Year(), l.Month(), l.Day()+i+1, 0, 0, 0, 0, zone).UTC()
		if !from.Before(end) {
			return out
		}
		out = append(out, report.Window{Start: from, End: to})
	}
}
