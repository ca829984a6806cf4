package billing

import (
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

func TestCheckInvariants(t *testing.T) {
	eff := func(v float64) *float64 { return &v }
	good := func() report.Report {
		return report.Report{
			WindowStart: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), WindowEnd: time.Date(2026, 1, 5, 1, 0, 0, 0, time.UTC),
			Tenants: []report.Row{
				{Tenant: "acme", Allocated: time.Hour, ListCost: 1, Cost: 0.7, WasteCost: 0.3, OverheadCost: 0.1, Efficiency: eff(0.5)},
				{Tenant: "beta", Allocated: time.Hour, ListCost: 0.5, Cost: 0.5, Unmetered: time.Minute},
			},
			UnallocatedListCost: 2.5, CapacityListCost: 4,
		}
	}
	tests := []struct {
		name   string
		change func(r *report.Report)
		want   string // "" when the report holds
	}{
		{"holds", func(*report.Report) {}, ""},
		{"rounding within tolerance", func(r *report.Report) { r.CapacityListCost += 1e-9 }, ""},
		{"sum off", func(r *report.Report) { r.CapacityListCost = 5 }, "capacity list cost = 5"},
		{"negative unallocated adds up", func(r *report.Report) { r.UnallocatedListCost, r.CapacityListCost = -0.5, 1 }, ""},
		{"waste over cost", func(r *report.Report) { r.Tenants[0].WasteCost = 0.65 }, `tenant "acme": waste 0.65 + overhead 0.1 exceed its cost 0.7`},
		{"negative cost", func(r *report.Report) { r.Tenants[1].Cost = -1 }, `tenant "beta" has a negative amount`},
		{"efficiency above 1", func(r *report.Report) { r.Tenants[0].Efficiency = eff(1.2) }, "efficiency 1.2 is outside [0, 1]"},
		{"overlap", func(r *report.Report) { r.Overlaps = []string{"allocations a and b both hold n/gpu0"} }, "both hold n/gpu0"},
		{"unmeasured tenant: no efficiency, no waste", func(r *report.Report) { r.Tenants[1].WasteCost, r.Tenants[1].Unmetered = 0, 0 }, ""},
		{"waste without measured time", func(r *report.Report) { r.Tenants[1].WasteCost = 0.2 }, `tenant "beta": waste 0.2 without any measured time`},
		{"unmetered over allocated", func(r *report.Report) { r.Tenants[1].Unmetered = 2 * time.Hour }, "unmetered 2h0m0s exceeds allocated 1h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			tt.change(&r)
			errs := CheckInvariants(r)
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Errorf("unexpected violations: %v", errs)
			case tt.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want) || !strings.Contains(errs[0].Error(), "2026-01-05T00:00:00Z")):
				t.Errorf("violations %v, want one containing %q and the window", errs, tt.want)
			}
		})
	}
}
