// Package report is the tenant report (attribution/README.md, "The tenant report"): one row per tenant
// per window, then the __unallocated__ row, as CSV or JSON.
package report

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Unallocated names the row that holds the capacity no tenant paid list price for.
const Unallocated = "__unallocated__"

// AnotherTenant stands for a tenant the reader may not see (a noisy neighbour outside the
// tenants of a restricted report).
const AnotherTenant = "another tenant"

// Header is the CSV header: the report's columns in order.
func Header() []string {
	return []string{
		"tenant", "tier", "window_start", "window_end", "allocated_seconds", "list_cost", "cost",
		"waste_cost", "overhead_cost", "efficiency", "jitter_p99_ms", "cold_start_max_s",
		"cold_start_breaches", "unmetered_seconds", "currency",
	}
}

// Row is one line of the report, with exactly the report's columns. Durations are rendered in
// the column's unit; money and ratios are kept unrounded until rendered.
type Row struct {
	Tenant            string
	Tier              string
	WindowStart       time.Time
	WindowEnd         time.Time
	Allocated         time.Duration // allocated_seconds: billed time in the window
	ListCost          float64
	Cost              float64
	WasteCost         float64
	OverheadCost      float64
	Efficiency        *float64       // nil: no measured metered time (unmetered, or activity unavailable)
	JitterP99         *time.Duration // jitter_p99_ms; nil: only time-sliced allocations and no waits
	ColdStartMax      *time.Duration // cold_start_max_s; nil: no allocation's cold start is known
	ColdStartBreaches int
	Unmetered         time.Duration // unmetered_seconds
	Currency          string
	// NoisyNeighbour is the co-tenant whose vGPU activity coincided most with this tenant's
	// scheduling waits; empty when none or not computed. In a report restricted to some
	// tenants (Only) a neighbour outside them is AnotherTenant. JSON only (noisy_neighbour).
	NoisyNeighbour string
	// NoisyNeighbourShare is the part of this tenant's vGPU waiting seconds in which another
	// tenant's vGPU on the same GPU ran (0..1); nil when it never waited or not computed. It
	// says how much a co-tenant was in the way, not who. JSON only (noisy_neighbour_share).
	NoisyNeighbourShare *float64
	// MemoryEfficiency is the time-weighted mean of memory used / memory of the instance over
	// the tenant's billed time (nil: no memory measured); EnergyKWh its share of the GPUs'
	// energy (nil: not known, the __unallocated__ row without the fleet's). JSON only
	// (memory_efficiency, energy_kwh).
	MemoryEfficiency, EnergyKWh *float64
}

// KWh is an energy in J as kWh.
func KWh(joules float64) *float64 {
	k := joules / 3.6e6
	return &k
}

// Report is the tenant report of one window.
type Report struct {
	WindowStart time.Time
	WindowEnd   time.Time
	Currency    string
	Tenants     []Row // in any order; rendered in tenant-name order
	// UnallocatedListCost is the fleet's capacity list cost minus the tenants' list costs.
	UnallocatedListCost float64
	// UnallocatedByNode splits UnallocatedListCost by node (the list cost of the node's GPUs
	// minus that of the lines on it), when computed from the samples: the attribution service
	// stores it per node, so that replicas sharing the fleet by node each store their own.
	UnallocatedByNode map[string]float64 `json:"-"`
	// CapacityListCost is the list cost of every GPU of the fleet over the window (not
	// rendered: it is Σ tenants' list_cost + unallocated).
	CapacityListCost float64
	// Unsampled counts the allocations left out because their target was never sampled
	// (described in Notes).
	Unsampled int
	// Overlaps describes allocations that hold one instance at the same time (also in Notes).
	Overlaps []string
	// OmitUnallocated leaves the __unallocated__ row out (a tenant's view, see Only).
	OmitUnallocated bool
	// Notes are things the reader should know that have no column (e.g. a tenant seen at
	// several tiers). They are not rendered, except those of Unpriced (see WriteJSON).
	Notes []string
	// Unpriced is what the window left out of the money and the capacity because the price
	// book cannot price it, one entry per GPU model or tier (each also has a note).
	Unpriced []Unpriced
	// Failed describes the allocations left out because computing them failed (also in Notes).
	Failed []string
	// Corrections are the correction lines of closed periods that this report bills (a closed
	// period's report, attribution/period): rendered after the __unallocated__ row in their
	// order, each with tier CorrectionTier(the corrected period) and the differences of the
	// amounts and seconds (efficiency, jitter and cold start empty). A __unallocated__
	// correction fills the window, tier, list_cost and currency.
	Corrections []Row
	// Allocations are the line items of the window (attribution.Options.Lines): one per
	// allocation, the lines each tenant row sums.
	Allocations []AllocationRow
}

// CorrectionPrefix starts the tier of a correction line: "correction:2026-11" corrects the
// closed period 2026-11.
const CorrectionPrefix = "correction:"

// CorrectionTier is the tier of a correction line of the period ("2026-11").
func CorrectionTier(period string) string { return CorrectionPrefix + period }

// IsCorrection reports whether a row's tier marks a correction line.
func IsCorrection(tier string) bool { return strings.HasPrefix(tier, CorrectionPrefix) }

// Rows are the report's rows in output order: tenants by name, then __unallocated__.
func (r Report) Rows() []Row {
	rows := slices.Clone(r.Tenants)
	slices.SortStableFunc(rows, func(a, b Row) int { return strings.Compare(a.Tenant, b.Tenant) })
	if !r.OmitUnallocated {
		rows = append(rows, Row{
			Tenant:      Unallocated,
			WindowStart: r.WindowStart,
			WindowEnd:   r.WindowEnd,
			ListCost:    r.UnallocatedListCost,
			Currency:    r.Currency,
		})
	}
	return append(rows, r.Corrections...)
}

// cell is one rendered value; an empty text is an empty CSV field and a JSON null.
type cell struct {
	text   string
	number bool
}

// unallocatedBlank are the columns the __unallocated__ row leaves empty; a correction of it
// keeps its tier.
var unallocatedBlank = []string{
	"tier", "allocated_seconds", "cost", "waste_cost", "overhead_cost", "efficiency", "jitter_p99_ms",
	"cold_start_max_s", "cold_start_breaches", "unmetered_seconds",
}

// cells renders a row in column order. The __unallocated__ row fills only the window,
// list_cost and currency.
func (row Row) cells() ([]cell, error) {
	var r renderer
	num, seconds, millis := r.num, r.seconds, r.millis
	c := columns{
		"tenant":              text(row.Tenant),
		"tier":                text(row.Tier),
		"window_start":        text(timestamp(row.WindowStart)),
		"window_end":          text(timestamp(row.WindowEnd)),
		"allocated_seconds":   seconds(row.Allocated),
		"list_cost":           r.money("list_cost", row.ListCost),
		"cost":                r.money("cost", row.Cost),
		"waste_cost":          r.money("waste_cost", row.WasteCost),
		"overhead_cost":       r.money("overhead_cost", row.OverheadCost),
		"cold_start_breaches": {text: strconv.Itoa(row.ColdStartBreaches), number: true},
		"unmetered_seconds":   seconds(row.Unmetered),
		"currency":            text(row.Currency),
	}
	if row.Efficiency != nil {
		c["efficiency"] = num("efficiency", *row.Efficiency, 4)
	}
	if row.JitterP99 != nil {
		c["jitter_p99_ms"] = millis(*row.JitterP99)
	}
	if row.ColdStartMax != nil {
		c["cold_start_max_s"] = seconds(*row.ColdStartMax)
	}
	if row.Tenant == Unallocated {
		blank := unallocatedBlank
		if IsCorrection(row.Tier) {
			blank = blank[1:]
		}
		for _, name := range blank {
			delete(c, name)
		}
	}
	if err := r.err(); err != nil {
		return nil, fmt.Errorf("report row %q: %w", row.Tenant, err)
	}
	return c.in(Header()), nil
}

// columns are a row's cells by column name; a column not there is empty.
type columns map[string]cell

// in is the cells in the header's order. A name that is no column of the header is a
// misspelling in this package: it panics, so that every test rendering a row finds it.
func (c columns) in(header []string) []cell {
	out := make([]cell, len(header))
	found := 0
	for i, name := range header {
		if v, ok := c[name]; ok {
			out[i] = v
			found++
		}
	}
	if found != len(c) {
		panic(fmt.Sprintf("report: a cell is named after no column of %v: %v", header, c))
	}
	return out
}

// renderer renders numbers into cells and remembers the ones that are not finite: a report
// never prints NaN or Inf as if it were an amount.
type renderer struct{ bad []string }

func (r *renderer) num(name string, v float64, decimals int) cell {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		r.bad = append(r.bad, fmt.Sprintf("%s is %v", name, v))
	}
	return cell{text: fixed(v, decimals), number: true}
}

// money renders an amount (MoneyPlaces decimals, from a Decimal: Money).
func (r *renderer) money(name string, v float64) cell {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		r.bad = append(r.bad, fmt.Sprintf("%s is %v", name, v))
		return cell{text: fixed(v, MoneyPlaces), number: true}
	}
	return cell{text: Money(v), number: true}
}

func (r *renderer) seconds(d time.Duration) cell { return r.num("", d.Seconds(), 3) }

func (r *renderer) millis(d time.Duration) cell {
	return r.num("", float64(d)/float64(time.Millisecond), 3)
}

func (r *renderer) err() error {
	if len(r.bad) == 0 {
		return nil
	}
	return errors.New(strings.Join(r.bad, ", "))
}

func text(s string) cell { return cell{text: s} }

// MoneyPlaces are the decimals of every amount a report, a statement or the fleet report
// prints (DESIGN's "money 6 decimals").
const MoneyPlaces = 6

// Money prints an amount with MoneyPlaces decimals, rounded as a Decimal (half away from
// zero) from the float's shortest decimal form: an amount read from the stored Decimal
// minutes is that decimal exactly, so it is rounded as finance would round it, not as its
// binary neighbour would be; never "-0.000000". NaN and ±Inf print as fixed does (a report
// refuses them before).
func Money(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fixed(v, MoneyPlaces)
	}
	return decimal.NewFromFloat(v).StringFixed(MoneyPlaces)
}

// fixed prints v with the given decimals, never as "-0.000".
func fixed(v float64, decimals int) string {
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Trim(s, "-0.") == "" {
		s = strings.TrimPrefix(s, "-")
	}
	return s
}

// timestamp is RFC 3339 in UTC ("2026-01-05T00:00:00Z"), with a fraction only if there is one.
func timestamp(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}

// Only is the report cut down to the tenants' rows, without the __unallocated__ row (which
// describes the whole fleet): what a tenant may see.
func (r Report) Only(tenants ...string) Report {
	out := r
	out.Tenants, out.Corrections, out.Allocations = nil, nil, nil
	for _, row := range r.Tenants {
		if slices.Contains(tenants, row.Tenant) {
			if row.NoisyNeighbour != "" && !slices.Contains(tenants, row.NoisyNeighbour) {
				row.NoisyNeighbour = AnotherTenant // a tenant never sees another's name
			}
			out.Tenants = append(out.Tenants, row)
		}
	}
	for _, row := range r.Corrections {
		if slices.Contains(tenants, row.Tenant) {
			out.Corrections = append(out.Corrections, row)
		}
	}
	for _, row := range r.Allocations {
		if slices.Contains(tenants, row.Tenant) {
			out.Allocations = append(out.Allocations, row)
		}
	}
	out.OmitUnallocated = true
	return out
}
