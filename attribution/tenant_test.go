package attribution

import (
	"math"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestTenantRows(t *testing.T) {
	window := interval{at(0), at(time.Hour)}
	alloc := func(id, tenant, tier string, requested time.Duration) allocation {
		return allocation{id: id, tenant: tenant, tier: tier, requested: at(requested), started: at(requested + time.Second)}
	}
	results := []result{
		// acme: a MIG instance and a vGPU with waits, at two tiers.
		{
			alloc: alloc("a2", "acme", "budget", 10*time.Minute),
			line: line{billed: 1000 * time.Second, metered: 900 * time.Second, active: 600 * time.Second, listCost: 1, cost: 0.7, wasteCost: 0.1,
				overheadCost: 0.05, efficiency: 0.2},
			timeSliced: true, waits: histogram{5: 99, 7: 1}, coldStart: ptr(50 * time.Second), sla: 30 * time.Second,
		},
		{
			alloc: alloc("a1", "acme", "pro", 0),
			line: line{billed: 3000 * time.Second, metered: 300 * time.Second, active: 300 * time.Second, listCost: 2, cost: 2, wasteCost: 0.2,
				overheadCost: 0.1, efficiency: 0.6},
			coldStart: ptr(12 * time.Second), sla: 30 * time.Second,
		},
		// vee: only a vGPU that never waited, nothing metered, cold start unknown.
		{
			alloc:      alloc("v1", "vee", "pro", 0),
			line:       line{billed: 60 * time.Second, listCost: 0.5, cost: 0.5},
			timeSliced: true,
			sla:        30 * time.Second,
		},
		// mig: only MIG, cold start exactly at the SLA (not a breach).
		{
			alloc:     alloc("m1", "mig", "pro", 0),
			line:      line{billed: 60 * time.Second, metered: 60 * time.Second, active: 60 * time.Second, listCost: 0.1, cost: 0.1, efficiency: 1},
			coldStart: ptr(30 * time.Second), sla: 30 * time.Second,
		},
		// nogpm: a MIG instance of a GPU without GPM, metered but never measured.
		{
			alloc: alloc("n1", "nogpm", "pro", 0),
			line:  line{billed: 60 * time.Second, metered: 60 * time.Second, listCost: 0.1, cost: 0.1, overheadCost: 0.01},
			sla:   30 * time.Second,
		},
	}
	rows, notes := tenantRows(results, window, "USD")
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
	if acme.WindowStart != time.Unix(0, window.start).UTC() || acme.Currency != "USD" {
		t.Errorf("acme window/currency: %+v", acme)
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
