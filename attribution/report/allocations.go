package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// By is what one row of a report stands for: a tenant (the tenant report) or an allocation
// (its line items, `report --by allocation`).
type By string

// The values of `slicemeter report --by` and the API's by=.
const (
	ByTenant     By = "tenant"
	ByAllocation By = "allocation"
)

// ParseBy checks a --by value; empty is ByTenant.
func ParseBy(s string) (By, error) {
	switch b := By(s); b {
	case "":
		return ByTenant, nil
	case ByTenant, ByAllocation:
		return b, nil
	default:
		return "", fmt.Errorf("report rows by %q: expected tenant or allocation", s)
	}
}

// AllocationHeader is the CSV header of the line items: one row per allocation per window.
func AllocationHeader() []string {
	return []string{
		"tenant", "allocation_id", "tier", "window_start", "window_end", "node", "instance_id", "kind", "model", "profile",
		"billed_fraction", "allocated_seconds", "measured_seconds", "unmetered_seconds", "list_cost", "cost",
		"waste_cost", "overhead_cost", "efficiency", "overhead_fraction", "jitter_p99_ms", "cold_start_s",
		"cold_start_breach", "currency",
	}
}

// AllocationRow is one allocation's part of a window's report: the line its tenant's row sums
// (allocated, unmetered and the money exactly; efficiency is the tenants' mean weighted by
// measured seconds, cold start the maximum, breaches the count of cold_start_breach).
type AllocationRow struct {
	Tenant, AllocationID, Tier string
	WindowStart, WindowEnd     time.Time
	Node, Instance             string
	Kind, Model, Profile       string        // gpu, mig or vgpu; GPU model; MIG or vGPU profile
	Fraction                   float64       // billed fraction of the GPU
	Allocated                  time.Duration // billed time in the window
	Measured                   time.Duration // metered time whose activity was measured
	Unmetered                  time.Duration
	ListCost, Cost             float64
	WasteCost, OverheadCost    float64
	Efficiency                 *float64 // nil: nothing measured
	Overhead                   float64  // the overhead fraction o
	JitterP99                  *time.Duration
	ColdStart                  *time.Duration // nil: unknown
	ColdStartBreach            bool
	Currency                   string
	Requested                  time.Time // not rendered: the rows' order within a tenant
	Started                    time.Time // not rendered: where billing starts (FOCUS's ChargePeriodStart)
	// MemoryEfficiency (nil: no memory measured) and EnergyJ, the line's share of its GPU's
	// energy: FOCUS's x_MemoryEfficiency and x_EnergyJoules, not in the CSV of line items.
	MemoryEfficiency *float64
	EnergyJ          float64
}

func (row AllocationRow) cells() ([]cell, error) {
	var r renderer
	num, seconds, millis := r.num, r.seconds, r.millis
	c := columns{
		"tenant":            text(row.Tenant),
		"allocation_id":     text(row.AllocationID),
		"tier":              text(row.Tier),
		"window_start":      text(timestamp(row.WindowStart)),
		"window_end":        text(timestamp(row.WindowEnd)),
		"node":              text(row.Node),
		"instance_id":       text(row.Instance),
		"kind":              text(row.Kind),
		"model":             text(row.Model),
		"profile":           text(row.Profile),
		"billed_fraction":   num("billed_fraction", row.Fraction, 6),
		"allocated_seconds": seconds(row.Allocated),
		"measured_seconds":  seconds(row.Measured),
		"unmetered_seconds": seconds(row.Unmetered),
		"list_cost":         r.money("list_cost", row.ListCost),
		"cost":              r.money("cost", row.Cost),
		"waste_cost":        r.money("waste_cost", row.WasteCost),
		"overhead_cost":     r.money("overhead_cost", row.OverheadCost),
		"overhead_fraction": num("overhead_fraction", row.Overhead, 4),
		"cold_start_breach": {text: strconv.FormatBool(row.ColdStartBreach), number: true},
		"currency":          text(row.Currency),
	}
	if row.Efficiency != nil {
		c["efficiency"] = num("efficiency", *row.Efficiency, 4)
	}
	if row.JitterP99 != nil {
		c["jitter_p99_ms"] = millis(*row.JitterP99)
	}
	if row.ColdStart != nil {
		c["cold_start_s"] = seconds(*row.ColdStart)
	}
	if err := r.err(); err != nil {
		return nil, fmt.Errorf("line item of allocation %q: %w", row.AllocationID, err)
	}
	return c.in(AllocationHeader()), nil
}

// allocationRows are the line items of a window in output order: by tenant name, each
// tenant's in requested_at order (as given).
func (r Report) allocationRows() []AllocationRow {
	rows := slices.Clone(r.Allocations)
	slices.SortStableFunc(rows, func(a, b AllocationRow) int { return strings.Compare(a.Tenant, b.Tenant) })
	return rows
}

func (s Series) allocationCells() ([][]cell, error) {
	var table [][]cell
	for _, r := range s {
		for _, row := range r.allocationRows() {
			c, err := row.cells()
			if err != nil {
				return nil, err
			}
			table = append(table, c)
		}
	}
	return table, nil
}

// WriteBy writes the series in the format, one row per tenant (Write) or per allocation: the
// line items, AllocationHeader's columns, each window's rows by tenant name. The line items
// have no __unallocated__ row and no correction lines.
func (s Series) WriteBy(w io.Writer, f Format, by By) error {
	if by != ByAllocation {
		return s.Write(w, f)
	}
	table, err := s.allocationCells()
	if err != nil {
		return err
	}
	switch f {
	case CSV:
		return writeCSV(w, AllocationHeader(), table)
	case JSON:
		return writeJSON(w, AllocationHeader(), table, nil)
	default:
		return fmt.Errorf("line items format %q: expected csv or json", f)
	}
}
