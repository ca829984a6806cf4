package fleet

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// Header is the CSV's header: the columns, then the ratios and the limit that the
// gauges carry (columns are only ever added at the end).
var Header = []string{"group", "window_start", "window_end", "capacity_gpu_hours", "allocated_gpu_hours", "active_gpu_hours",
	"memory_efficiency", "idle_memory_cost", "revenue", "list_revenue", "operator_cost", "margin", "break_even_allocation_ratio",
	"overhead_ratio", "max_tenants_per_host", "fragmented_slices", "energy_kwh", "currency",
	"allocation_ratio", "active_ratio", "tenant_limit"}

// Format is an output format of the rows.
type Format string

// The formats.
const (
	CSV  Format = "csv"
	JSON Format = "json"
)

// Write writes the rows in the format.
func Write(w io.Writer, rows []Row, f Format) error {
	if f == JSON {
		return WriteJSON(w, rows)
	}
	return WriteCSV(w, rows)
}

// WriteCSV writes the header and the rows: GPU-hours, money and kWh with 6 decimals, ratios
// with 4, empty where not applicable; times RFC 3339 UTC. A group name that a spreadsheet
// would read as a formula gets a leading ' (as in the tenant report).
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Header); err != nil {
		return fmt.Errorf("write the fleet report's header: %w", err)
	}
	for _, r := range rows {
		rec := []string{
			text(r.Group), r.WindowStart.UTC().Format(time.RFC3339), r.WindowEnd.UTC().Format(time.RFC3339),
			fixed(r.CapacityGPUHours, 6), fixed(r.AllocatedGPUHours, 6), fixed(r.ActiveGPUHours, 6),
			opt(r.MemoryEfficiency, 4), report.Money(r.IdleMemoryCost), report.Money(r.Revenue), report.Money(r.ListRevenue),
			optMoney(r.OperatorCost), optMoney(r.Margin), opt(r.BreakEvenAllocationRatio, 4), opt(r.OverheadRatio, 4),
			strconv.Itoa(r.MaxTenantsPerHost), strconv.Itoa(r.FragmentedSlices), fixed(r.EnergyKWh, 6), text(r.Currency),
			opt(r.AllocationRatio, 4), opt(r.ActiveRatio, 4), strconv.Itoa(r.TenantLimit),
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write the fleet report's row %s: %w", r.Group, err)
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes the rows as a JSON array of objects with the CSV's fields (null where the
// CSV is empty). The money fields are numbers with the CSV's 6 decimals, printed from a
// Decimal (report.Money), not a float's 17 digits.
func WriteJSON(w io.Writer, rows []Row) error {
	out := make([]jsonRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, jsonRow{Row: r, IdleMemoryCost: json.Number(report.Money(r.IdleMemoryCost)), Revenue: json.Number(report.Money(r.Revenue)),
			ListRevenue: json.Number(report.Money(r.ListRevenue)), OperatorCost: optNumber(r.OperatorCost), Margin: optNumber(r.Margin)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write the fleet report as JSON: %w", err)
	}
	return nil
}

// jsonRow is a Row as JSON: its money fields shadow the Row's (encoding/json takes the
// shallower field of a name).
type jsonRow struct {
	Row
	IdleMemoryCost json.Number  `json:"idle_memory_cost"`
	Revenue        json.Number  `json:"revenue"`
	ListRevenue    json.Number  `json:"list_revenue"`
	OperatorCost   *json.Number `json:"operator_cost"`
	Margin         *json.Number `json:"margin"`
}

func optNumber(v *float64) *json.Number {
	if v == nil {
		return nil
	}
	n := json.Number(report.Money(*v))
	return &n
}

func optMoney(v *float64) string {
	if v == nil {
		return ""
	}
	return report.Money(*v)
}

func fixed(v float64, places int) string { return strconv.FormatFloat(v, 'f', places, 64) }

func opt(v *float64, places int) string {
	if v == nil {
		return ""
	}
	return fixed(*v, places)
}

// text guards a cell a spreadsheet would evaluate.
func text(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r') {
		return "'" + s
	}
	return s
}
