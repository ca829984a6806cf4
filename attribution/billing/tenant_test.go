package billing

import (
	"math"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestTenantRows(t *testing.T) {
	window := Interval{at(0), at(time.Hour)}
	line := func(id, tenant, tier string, requested time.Duration) Line {
		return Line{AllocationID: id, Tenant: tenant, Tier: tier, Requested: UTC(at(requested)), Started: UTC(at(requested + time.Second)),
			ColdStartSLA: 30 * time.Second}
	}
	with := func(l Line, set func(*Line)) Line {
		set(&l)
		return l
	}
	lines := []Line{
		// acme: a MIG instance and a vGPU with waits, at two tiers.
		with(line("a2", "acme", "budget", 10*time.Minute), func(l *Line) {
			l.Billed, l.Metered, l.Active, l.ListCost, l.Cost, l.WasteCost = 1000*time.Second, 900*time.Second, 600*time.Second, 1, 0.7, 0.1
			l.OverheadCost, l.Efficiency = 0.05, 0.2
			l.TimeSliced, l.Waits, l.ColdStart = true, Histogram{5: 99, 7: 1}, ptr(50*time.Second)
			l.MemUsedNS, l.MemNS, l.EnergyJ = 0.5*900e9, 900e9, 1.8e6
		}),
		with(line("a1", "acme", "pro", 0), func(l *Line) {
			l.Billed, l.Metered, l.Active, l.ListCost, l.Cost, l.WasteCost = 3000*time.Second, 300*time.Second, 300*time.Second, 2, 2, 0.2
			l.OverheadCost, l.Efficiency, l.ColdStart = 0.1, 0.6, ptr(12*time.Second)
			l.MemUsedNS, l.MemNS, l.EnergyJ = 0.2*300e9, 300e9, 1.8e6
		}),
		// vee: only a vGPU that never waited, nothing metered, cold start unknown.
		with(line("v1", "vee", "pro", 0), func(l *Line) {
			l.Billed, l.ListCost, l.Cost, l.TimeSliced = 60*time.Second, 0.5, 0.5, true
		}),
		// mig: only MIG, cold start exactly at the SLA (not a breach).
		with(line("m1", "mig", "pro", 0), func(l *Line) {
			l.Billed, l.Metered, l.Active, l.ListCost, l.Cost, l.Efficiency = 60*time.Second, 60*time.Second, 60*time.Second, 0.1, 0.1, 1
			l.ColdStart = ptr(30 * time.Second)
		}),
		// nogpm: a MIG instance of a GPU without GPM, metered but never measured.
		with(line("n1", "nogpm", "pro", 0), func(l *Line) {
			l.Billed, l.Metered, l.ListCost, l.Cost, l.OverheadCost = 60*time.Second, 60*time.Second, 0.1, 0.1, 0.01
		}),
	}
	rows, notes := TenantRows(lines, window, "USD")
	if len(rows) != 4 || rows[0].Tenant != "acme" || rows[1].Tenant != "mig" || rows[2].Tenant != "nogpm" || rows[3].Tenant != "vee" {
		t.Fatalf("rows: %+v", rows)
	}
	acme, mig, nogpm, vee := rows[0], rows[1], rows[2], rows[3]

	if acme.Tier != "pro" {
		t.Errorf("acme's tier = %q, want pro (its first allocation's)", acme.Tier)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], `"acme"`) || !strings.Contains(notes[0], "budget, pro") {
		t.Errorf("notes = %q, want one about acme's two tiers", notes)
	}
	if acme.Allocated != 4000*time.Second || acme.Unmetered != 2800*time.Second {
		t.Errorf("acme allocated %s, unmetered %s", acme.Allocated, acme.Unmetered)
	}
	if acme.ListCost != 3 || acme.Cost != 2.7 || math.Abs(acme.WasteCost-0.3) > 1e-12 || math.Abs(acme.OverheadCost-0.15) > 1e-12 {
		t.Errorf("acme money: %+v", acme)
	}
	// Efficiency weighted by measured seconds: (0.2·600 + 0.6·300) / 900 = 1/3.
	if acme.Efficiency == nil || math.Abs(*acme.Efficiency-1.0/3) > 1e-12 {
		t.Errorf("acme efficiency = %v, want 1/3", acme.Efficiency)
	}
	// 100 waits: rank 99 is 5 ns.
	if acme.JitterP99 == nil || *acme.JitterP99 != 5 {
		t.Errorf("acme jitter = %v, want 5ns", acme.JitterP99)
	}
	if acme.ColdStartMax == nil || *acme.ColdStartMax != 50*time.Second || acme.ColdStartBreaches != 1 {
		t.Errorf("acme cold start = %v, breaches %d; want 50s, 1", acme.ColdStartMax, acme.ColdStartBreaches)
	}
	if acme.WindowStart != UTC(window.Start) || acme.Currency != "USD" {
		t.Errorf("acme window/currency: %+v", acme)
	}

	// Memory efficiency time-weighted: (0.5·900 + 0.2·300) / 1200 = 0.425; 3.6 MJ = 1 kWh.
	if acme.MemoryEfficiency == nil || math.Abs(*acme.MemoryEfficiency-0.425) > 1e-12 || acme.EnergyKWh == nil || math.Abs(*acme.EnergyKWh-1) > 1e-12 {
		t.Errorf("acme memory efficiency %v, energy %v kWh; want 0.425, 1", acme.MemoryEfficiency, acme.EnergyKWh)
	}
	// Nothing measured: no memory efficiency; no energy known is 0 kWh.
	if vee.MemoryEfficiency != nil || vee.EnergyKWh == nil || *vee.EnergyKWh != 0 {
		t.Errorf("vee memory efficiency %v, energy %v kWh; want empty, 0", vee.MemoryEfficiency, vee.EnergyKWh)
	}

	if vee.Efficiency != nil || vee.JitterP99 != nil || vee.ColdStartMax != nil || vee.ColdStartBreaches != 0 {
		t.Errorf("vee: efficiency %v, jitter %v, cold start %v; want all empty", vee.Efficiency, vee.JitterP99, vee.ColdStartMax)
	}
	if vee.Unmetered != time.Minute {
		t.Errorf("vee unmetered = %s", vee.Unmetered)
	}
	// Metered (not unmetered) but unmeasured: no efficiency, like an unmetered tenant.
	if nogpm.Efficiency != nil || nogpm.Unmetered != 0 || nogpm.WasteCost != 0 || nogpm.JitterP99 == nil || *nogpm.JitterP99 != 0 {
		t.Errorf("nogpm: efficiency %v, unmetered %s, waste %g, jitter %v; want empty, 0, 0, 0", nogpm.Efficiency, nogpm.Unmetered, nogpm.WasteCost, nogpm.JitterP99)
	}
	if mig.JitterP99 == nil || *mig.JitterP99 != 0 {
		t.Errorf("mig jitter = %v, want 0 (not time-sliced)", mig.JitterP99)
	}
	if mig.ColdStartBreaches != 0 {
		t.Errorf("mig breaches = %d: a cold start equal to the SLA is not a breach", mig.ColdStartBreaches)
	}
}
