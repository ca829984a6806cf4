package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParseBy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want By
		bad  bool
	}{{"", ByTenant, false}, {"tenant", ByTenant, false}, {"allocation", ByAllocation, false}, {"node", "", true}} {
		got, err := ParseBy(tc.in)
		if got != tc.want || (err != nil) != tc.bad {
			t.Errorf("ParseBy(%q) = %q, %v", tc.in, got, err)
		}
	}
}

// TestWriteLineItems: the line items' CSV and JSON, rows by tenant name (each tenant's as
// given), empty cells where nothing is known, and a NaN refused.
func TestWriteLineItems(t *testing.T) {
	w0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	eff, jitter, cold := 0.5, 4*time.Millisecond, 12*time.Second
	rep := Report{Allocations: []AllocationRow{
		{Tenant: "zeta", AllocationID: "z1", Tier: "pro", WindowStart: w0, WindowEnd: w0.Add(time.Hour), Node: "n", Instance: "gpu0/vgpu1", Kind: "vgpu",
			Model: "H100-SXM5-80GB", Profile: "H100-20C", Fraction: 0.25, Allocated: time.Hour, Measured: time.Hour, ListCost: 0.6, Cost: 0.6,
			WasteCost: 0.29, OverheadCost: 0.01, Efficiency: &eff, Overhead: 0.0166, JitterP99: &jitter, ColdStart: &cold, ColdStartBreach: false, Currency: "USD"},
		{Tenant: "acme", AllocationID: "a1", Tier: "pro", WindowStart: w0, WindowEnd: w0.Add(time.Hour), Node: "n", Instance: "gpu1", Kind: "gpu",
			Model: "A100-SXM4-40GB", Fraction: 1, Allocated: 30 * time.Minute, Unmetered: 30 * time.Minute, ListCost: 0.8, Cost: 0.8, Currency: "USD"},
	}}
	var b bytes.Buffer
	if err := (Series{rep}).WriteBy(&b, CSV, ByAllocation); err != nil {
		t.Fatal(err)
	}
	want := strings.Join(AllocationHeader(), ",") + "\n" +
		"acme,a1,pro,2026-01-05T00:00:00Z,2026-01-05T01:00:00Z,n,gpu1,gpu,A100-SXM4-40GB,,1.000000,1800.000,0.000,1800.000,0.800000,0.800000,0.000000,0.000000,,0.0000,,,false,USD\n" +
		"zeta,z1,pro,2026-01-05T00:00:00Z,2026-01-05T01:00:00Z,n,gpu0/vgpu1,vgpu,H100-SXM5-80GB,H100-20C,0.250000,3600.000,3600.000,0.000,0.600000,0.600000,0.290000,0.010000,0.5000,0.0166,4.000,12.000,false,USD\n"
	if b.String() != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := (Series{rep}).WriteBy(&b, JSON, ByAllocation); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"tenant": "acme"`, `"efficiency": null`, `"cold_start_breach": false`, `"jitter_p99_ms": 4.000`} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("JSON lacks %s:\n%s", s, b.String())
		}
	}
	if strings.Index(b.String(), `"acme"`) > strings.Index(b.String(), `"zeta"`) {
		t.Errorf("JSON rows not by tenant name:\n%s", b.String())
	}
	nan := rep
	nan.Allocations = []AllocationRow{{Tenant: "acme", AllocationID: "a1", Cost: 0 * 1 / zero()}}
	if err := (Series{nan}).WriteBy(&b, CSV, ByAllocation); err == nil || !strings.Contains(err.Error(), "a1") {
		t.Errorf("a NaN cost: %v", err)
	}
	if only := rep.Only("zeta"); len(only.Allocations) != 1 || only.Allocations[0].Tenant != "zeta" {
		t.Errorf("Only(zeta): %+v", only.Allocations)
	}
}

func zero() float64 { return 0 }
