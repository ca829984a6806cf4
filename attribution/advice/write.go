package advice

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// By is how the advice is grouped.
type By string

// The groupings: one row per allocation (DESIGN's columns), per tenant, or per GPU model with
// the fleet's row last.
const (
	ByAllocation By = "allocation"
	ByTenant     By = "tenant"
	ByModel      By = "model"
)

// ParseBy is the grouping a flag or parameter names (empty: by allocation).
func ParseBy(s string) (By, error) {
	switch By(s) {
	case "", ByAllocation:
		return ByAllocation, nil
	case ByTenant, ByModel:
		return By(s), nil
	}
	return "", fmt.Errorf("advice grouping %q: expected allocation, tenant or model", s)
}

// Format is an output format.
type Format string

// The formats.
const (
	CSV  Format = "csv"
	JSON Format = "json"
)

// ParseFormat is the format a flag or parameter names (empty: CSV).
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", CSV:
		return CSV, nil
	case JSON:
		return JSON, nil
	}
	return "", fmt.Errorf("advice format %q: expected csv or json", s)
}

// AllocationHeader is the columns of the advice by allocation (README.md, "Right-sizing").
var AllocationHeader = []string{"allocation_id", "tenant", "node", "instance_id", "kind", "shape", "advised_shape", "action",
	"saturated", "compute_need", "memory_need_bytes", "fraction", "advised_fraction", "savings", "savings_30d", "currency"}

// TenantHeader is the columns of the advice by tenant: its allocations by action, and the sums.
var TenantHeader = []string{"tenant", "window_start", "window_end", "allocations", "downsize", "keep", "unknown", "saturated",
	"savings", "savings_30d", "currency"}

// ModelHeader is the columns of the fleet summary (README.md, "Right-sizing", fleet): per GPU
// model, then __fleet__, the GPU-equivalents allocated now and after the advice, those freed,
// and active / allocated GPU-hours now and after.
var ModelHeader = []string{"model", "window_start", "window_end", "allocations", "downsize", "saturated", "unknown",
	"gpu_equivalents", "advised_gpu_equivalents", "gpu_equivalents_freed", "allocated_gpu_hours", "advised_gpu_hours",
	"active_gpu_hours", "active_ratio", "advised_active_ratio", "savings", "savings_30d", "currency"}

// Fleet is the row name of the whole fleet in the summary by model.
const Fleet = "__fleet__"

// cell is one value: text (empty: CSV empty, JSON null), a number's text, or a bool.
type cell struct {
	text   string
	number bool
	null   bool
}

func str(s string) cell { return cell{text: s} }

// optional is a text that is null when empty.
func optional(s string) cell {
	if s == "" {
		return null
	}
	return str(s)
}

func num(s string) cell { return cell{text: s, number: true} }

func boolean(b bool) cell { return cell{text: strconv.FormatBool(b), number: true} }

var null = cell{null: true}

func money(d decimal.Decimal) cell { return num(d.StringFixed(6)) }

func ratio(v float64) cell { return num(strconv.FormatFloat(v, 'f', 4, 64)) }

func hours(v float64) cell { return num(strconv.FormatFloat(v, 'f', 6, 64)) }

func fraction(r *big.Rat) cell {
	if r == nil {
		return null
	}
	return num(r.FloatString(6))
}

// Table is the result as rows of cells under a header, by the grouping.
func (res Result) Table(by By) (header []string, rows [][]cell) {
	switch by {
	case ByTenant:
		return TenantHeader, res.tenantRows()
	case ByModel:
		return ModelHeader, res.modelRows()
	}
	for _, r := range res.Rows {
		row := []cell{str(r.AllocationID), str(r.Tenant), str(r.Node), str(r.InstanceID), str(r.Kind), str(r.Shape),
			optional(r.AdvisedShape), str(string(r.Action)), boolean(r.Saturated)}
		if r.Action == Unknown {
			row = append(row, null, null, fraction(r.Fraction), null, null, null)
		} else {
			row = append(row, ratio(r.ComputeNeed), num(strconv.FormatUint(r.MemoryNeed, 10)), fraction(r.Fraction),
				fraction(r.AdvisedFraction), money(r.Savings), money(r.Savings30d))
		}
		rows = append(rows, append(row, str(r.Currency)))
	}
	return AllocationHeader, rows
}

func (res Result) window() []cell {
	return []cell{str(res.From.Format(time.RFC3339)), str(res.To.Format(time.RFC3339))}
}

// group sums rows per key, in key order.
type group struct {
	key                                   string
	n, downsize, keep, unknown, saturated int
	savings, savings30d                   decimal.Decimal
	activeH                               float64
	allocatedNS, advisedNS                *big.Rat // Σ fraction × billed ns, exact
}

func (res Result) groups(key func(Row) string) []*group {
	byKey := map[string]*group{}
	var order []string
	for _, r := range res.Rows {
		k := key(r)
		g := byKey[k]
		if g == nil {
			g = &group{key: k, allocatedNS: new(big.Rat), advisedNS: new(big.Rat)}
			byKey[k] = g
			order = append(order, k)
		}
		g.n++
		switch r.Action {
		case Downsize:
			g.downsize++
		case Keep:
			g.keep++
		case Unknown:
			g.unknown++
		}
		if r.Saturated {
			g.saturated++
		}
		g.savings, g.savings30d = g.savings.Add(r.Savings), g.savings30d.Add(r.Savings30d)
		billed := new(big.Rat).SetInt64(int64(r.Billed))
		g.allocatedNS.Add(g.allocatedNS, new(big.Rat).Mul(r.Fraction, billed))
		g.advisedNS.Add(g.advisedNS, new(big.Rat).Mul(r.Advised(), billed))
		g.activeH += r.ActiveGPUHours
	}
	slices.Sort(order)
	out := make([]*group, len(order))
	for i, k := range order {
		out[i] = byKey[k]
	}
	return out
}

// SavingsByTenant is each tenant's savings over 30 days (the gauges').
func (res Result) SavingsByTenant() map[string]decimal.Decimal {
	out := map[string]decimal.Decimal{}
	for _, g := range res.groups(func(r Row) string { return r.Tenant }) {
		out[g.key] = g.savings30d
	}
	return out
}

// FreedByModel is the GPU-equivalents right-sizing frees per GPU model, and the fleet's as
// Fleet: Σ (fraction − advised fraction) × billed time / the window.
func (res Result) FreedByModel() map[string]float64 {
	out := map[string]float64{Fleet: 0}
	windowNS := new(big.Rat).SetInt64(int64(res.To.Sub(res.From)))
	if windowNS.Sign() == 0 {
		return out
	}
	for _, key := range []func(Row) string{func(r Row) string { return r.Model }, func(Row) string { return Fleet }} {
		for _, g := range res.groups(key) {
			out[g.key], _ = new(big.Rat).Quo(new(big.Rat).Sub(g.allocatedNS, g.advisedNS), windowNS).Float64()
		}
	}
	return out
}

func (res Result) tenantRows() [][]cell {
	var rows [][]cell
	for _, g := range res.groups(func(r Row) string { return r.Tenant }) {
		rows = append(rows, slices.Concat([]cell{str(g.key)}, res.window(), []cell{
			num(strconv.Itoa(g.n)), num(strconv.Itoa(g.downsize)), num(strconv.Itoa(g.keep)), num(strconv.Itoa(g.unknown)),
			num(strconv.Itoa(g.saturated)), money(g.savings), money(g.savings30d), str(res.Currency)}))
	}
	return rows
}

func (res Result) modelRows() [][]cell {
	groups := res.groups(func(r Row) string { return r.Model })
	fleet := res.groups(func(Row) string { return Fleet })
	if len(fleet) == 0 {
		fleet = []*group{{key: Fleet, allocatedNS: new(big.Rat), advisedNS: new(big.Rat)}}
	}
	windowNS := new(big.Rat).SetInt64(int64(res.To.Sub(res.From)))
	hour := new(big.Rat).SetInt64(int64(time.Hour))
	var rows [][]cell
	for _, g := range append(groups, fleet...) {
		equiv := func(ns *big.Rat) *big.Rat {
			if windowNS.Sign() == 0 {
				return new(big.Rat)
			}
			return new(big.Rat).Quo(ns, windowNS)
		}
		now, after := equiv(g.allocatedNS), equiv(g.advisedNS)
		allocatedH, _ := new(big.Rat).Quo(g.allocatedNS, hour).Float64()
		advisedH, _ := new(big.Rat).Quo(g.advisedNS, hour).Float64()
		activeRatio := func(h float64) cell {
			if h <= 0 {
				return null
			}
			return ratio(g.activeH / h)
		}
		rows = append(rows, slices.Concat([]cell{str(g.key)}, res.window(), []cell{
			num(strconv.Itoa(g.n)), num(strconv.Itoa(g.downsize)), num(strconv.Itoa(g.saturated)), num(strconv.Itoa(g.unknown)),
			fraction(now), fraction(after), fraction(new(big.Rat).Sub(now, after)),
			hours(allocatedH), hours(advisedH), hours(g.activeH), activeRatio(allocatedH), activeRatio(advisedH),
			money(g.savings), money(g.savings30d), str(res.Currency)}))
	}
	return rows
}

// Write writes the advice grouped by by in the format.
func (res Result) Write(w io.Writer, by By, f Format) error {
	header, rows := res.Table(by)
	if f == JSON {
		return writeJSON(w, header, rows)
	}
	return writeCSV(w, header, rows)
}

func writeCSV(w io.Writer, header []string, rows [][]cell) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("write the advice's header: %w", err)
	}
	for _, row := range rows {
		rec := make([]string, len(row))
		for i, c := range row {
			rec[i] = c.text
			if !c.number {
				rec[i] = report.SpreadsheetSafe(c.text)
			}
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write the advice: %w", err)
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeJSON writes an array of objects with the CSV's fields, in its order (null where the
// CSV is empty; numbers and money as JSON numbers with the CSV's decimals).
func writeJSON(w io.Writer, header []string, rows [][]cell) error {
	var b bytes.Buffer
	b.WriteString("[")
	for i, row := range rows {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  {")
		for j, c := range row {
			if j > 0 {
				b.WriteString(", ")
			}
			k, _ := json.Marshal(header[j])
			b.Write(k)
			b.WriteString(": ")
			switch {
			case c.null:
				b.WriteString("null")
			case c.number:
				b.WriteString(c.text)
			default:
				v, _ := json.Marshal(c.text)
				b.Write(v)
			}
		}
		b.WriteString("}")
	}
	if len(rows) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := w.Write(b.Bytes())
	return err
}
