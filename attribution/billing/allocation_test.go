package billing

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

const gib = 1 << 30

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).UnixNano()

func at(d time.Duration) int64 { return t0 + int64(d) }

func TestBilled(t *testing.T) {
	window := Interval{at(0), at(time.Hour)}
	tests := []struct {
		name   string
		a      Allocation
		want   Interval
		wantOK bool
	}{
		{"inside", Allocation{Started: at(12 * time.Second), Ended: at(40 * time.Minute)}, Interval{at(12 * time.Second), at(40 * time.Minute)}, true},
		{"open: to the window's end", Allocation{Started: at(5 * time.Second)}, Interval{at(5 * time.Second), at(time.Hour)}, true},
		{"started before the window", Allocation{Started: at(-time.Hour), Ended: at(10 * time.Minute)}, Interval{at(0), at(10 * time.Minute)}, true},
		{"ends after the window", Allocation{Started: at(time.Minute), Ended: at(2 * time.Hour)}, Interval{at(time.Minute), at(time.Hour)}, true},
		{"ended before the window", Allocation{Started: at(-2 * time.Hour), Ended: at(-time.Hour)}, Interval{}, false},
		{"ended exactly at the window start", Allocation{Started: at(-time.Hour), Ended: at(0)}, Interval{}, false},
		{"starts at the window end", Allocation{Started: at(time.Hour)}, Interval{}, false},
		{"not started", Allocation{Started: 0}, Interval{}, false},
		{"ends before it starts", Allocation{Started: at(time.Minute), Ended: at(time.Second)}, Interval{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.a.Billed(window)
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Errorf("billed = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestTermsOf(t *testing.T) {
	book := &pricebook.PriceBook{
		Currency: "USD",
		Prices:   map[string]float64{"A100-SXM4-40GB": 1.60, "H100-SXM5-80GB": 2.40},
		Tiers:    map[string]float64{"pro": 1, "budget": 0.7},
	}
	mig := pricebook.Instance{Kind: "mig", Model: "A100-SXM4-40GB", Profile: "1g.5gb", ComputeSlices: 1, SMCount: 14, GPUSMCount: 108}
	vgpu := pricebook.Instance{Kind: "vgpu", Model: "H100-SXM5-80GB", Profile: "H100-20C", MemTotalBytes: 20 * gib, GPUMemTotalBytes: 80 * gib}
	a := Allocation{ID: "a1", Tenant: "acme", Tier: "budget", Target: Target{"node-a", "gpu0/mig0"}}

	got, err := termsOf(a, mig, book)
	want := Terms{ListPrice: 1.60, Fraction: 1.0 / 7, Multiplier: 0.7, Overhead: 1 - (14.0/108)*7}
	if err != nil || math.Abs(got.Overhead-want.Overhead) > 1e-12 || got.Fraction != want.Fraction || got.ListPrice != want.ListPrice ||
		got.Multiplier != want.Multiplier || got.TimeSliced {
		t.Errorf("MIG Terms = %+v, %v; want %+v", got, err, want)
	}
	got, err = termsOf(a, vgpu, book)
	if err != nil || got.Fraction != 0.25 || !got.TimeSliced || got.Overhead != 0 {
		t.Errorf("vGPU Terms = %+v, %v", got, err)
	}

	for name, tc := range map[string]struct {
		a    Allocation
		in   pricebook.Instance
		want []string
	}{
		"model without price": {a, pricebook.Instance{Kind: "gpu", Model: "L40S"}, []string{`"L40S"`, "a1", "acme", "node-a/gpu0/mig0"}},
		"unknown tier":        {Allocation{ID: "a2", Tenant: "x", Tier: "gold"}, mig, []string{`tier "gold"`, "a2"}},
		"bad instance":        {a, pricebook.Instance{Kind: "mig", Model: "A100-SXM4-40GB"}, []string{"compute slices 0"}},
	} {
		_, err := termsOf(tc.a, tc.in, book)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v should contain %q", name, err, w)
			}
		}
	}
}

// TestAttribute checks the per-Allocation math against the public scenarios' expected
// reports (the README's worked examples), fed with the aggregates the Usage query returns.
func TestAttribute(t *testing.T) {
	const interval = 100 * time.Millisecond
	ticks := func(d time.Duration) float64 { return float64(d / interval) }
	migO := 1 - (14.0/108)/(1.0/7)
	vgpuO := 60.0 / 6060 // 3 busy vGPUs, timeslice 2 ms, switch 20 µs
	tests := []struct {
		name   string
		billed time.Duration
		terms  Terms
		usage  Usage
		// expected, as printed in the scenarios' expected CSVs
		list, cost, waste, overhead, efficiency float64
	}{
		{
			"mig-basic acme: 1g.5gb at 0.5",
			3588 * time.Second, Terms{ListPrice: 1.60, Fraction: 1.0 / 7, Multiplier: 1, Overhead: migO},
			Usage{Metered: 3588 * time.Second, Active: 3588 * time.Second, EfficiencyNS: 0.5 * float64(3588*time.Second)},
			0.227810, 0.227810, 0.103358, 0.021093, 0.5,
		},
		{
			"mig-basic gamma: whole H100, steps 0.2 then 0.6",
			3595 * time.Second, Terms{ListPrice: 2.40, Fraction: 1, Multiplier: 1},
			Usage{Metered: 3595 * time.Second, Active: 3595 * time.Second, EfficiencyNS: (ticks(1795*time.Second)*0.2 + ticks(1800*time.Second)*0.6) * float64(interval)},
			2.396667, 2.396667, 1.437333, 0, 0.4003,
		},
		{
			"outage-coldstart slowco: 3g.20gb at 0.3, 120 s unmetered",
			3555 * time.Second, Terms{ListPrice: 1.60, Fraction: 3.0 / 7, Multiplier: 1, Overhead: 1 - (42.0/108)/(3.0/7)},
			Usage{Metered: 3435 * time.Second, Active: 3435 * time.Second, EfficiencyNS: 0.3 * float64(3435*time.Second)},
			0.677143, 0.677143, 0.415593, 0.062698, 0.3,
		},
		{
			"vgpu-timeslice t3: busy, budget",
			3580 * time.Second, Terms{ListPrice: 2.40, Fraction: 0.25, Multiplier: 0.7, TimeSliced: true},
			Usage{Metered: 3580 * time.Second, Active: 3580 * time.Second, EfficiencyNS: float64(3580 * time.Second), SwitchNS: vgpuO * float64(3580*time.Second)},
			0.596667, 0.417667, 0, 0.004135, 1,
		},
		{
			"vgpu-timeslice t4: idle",
			3565 * time.Second, Terms{ListPrice: 2.40, Fraction: 0.25, Multiplier: 0.7, TimeSliced: true},
			Usage{Metered: 3565 * time.Second, Active: 3565 * time.Second, SwitchNS: vgpuO * float64(3565*time.Second)},
			0.594167, 0.415917, 0.411799, 0.004118, 0,
		},
		{
			// A MIG instance on an A100 without GPM: every sample metered, none measured. No
			// efficiency (the report leaves it empty), no waste; the overhead is the SMs'.
			"MIG without GPM: metered, unmeasured",
			time.Hour, Terms{ListPrice: 1.60, Fraction: 1.0 / 7, Multiplier: 1, Overhead: migO},
			Usage{Metered: time.Hour},
			0.228571, 0.228571, 0, 0.021164, 0,
		},
		{
			// Half the hour measured at 0.5: efficiency 0.5 over the measured half, waste on it.
			"MIG, half measured",
			time.Hour, Terms{ListPrice: 1.60, Fraction: 1.0 / 7, Multiplier: 1, Overhead: migO},
			Usage{Metered: time.Hour, Active: 30 * time.Minute, EfficiencyNS: 0.5 * float64(30*time.Minute)},
			0.228571, 0.228571, 0.051852, 0.021164, 0.5,
		},
		{
			// 40 min metered (20 min outage), 20 of them measured at 0.3, budget tier.
			"MIG, outage and unmeasured",
			time.Hour, Terms{ListPrice: 1.60, Fraction: 1.0 / 7, Multiplier: 0.7, Overhead: migO},
			Usage{Metered: 40 * time.Minute, Active: 20 * time.Minute, EfficiencyNS: 0.3 * float64(20*time.Minute)},
			0.228571, 0.16, 0.033877, 0.014815, 0.3,
		},
	}
	round := func(v float64, decimals int) float64 { p := math.Pow10(decimals); return math.Round(v*p) / p }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := attribute(tt.billed, tt.terms, tt.usage)
			check := func(what string, got, want float64, decimals int) {
				if round(got, decimals) != want {
					t.Errorf("%s = %.8f, want %.*f", what, got, decimals, want)
				}
			}
			check("list_cost", l.listCost, tt.list, 6)
			check("cost", l.cost, tt.cost, 6)
			check("waste_cost", l.wasteCost, tt.waste, 6)
			check("overhead_cost", l.overheadCost, tt.overhead, 6)
			check("efficiency", l.efficiency, tt.efficiency, 4)
			if l.billed != tt.billed || l.metered != tt.usage.Metered || l.active != tt.usage.Active {
				t.Errorf("billed, metered, active = %s, %s, %s", l.billed, l.metered, l.active)
			}
		})
	}
}

func TestAttributeEdges(t *testing.T) {
	whole := Terms{ListPrice: 3.6, Fraction: 1, Multiplier: 1}
	// Nothing metered (an outage over the whole Allocation): no waste, no measured efficiency.
	l := attribute(time.Hour, whole, Usage{})
	if l.cost != 3.6 || l.wasteCost != 0 || l.metered != 0 || l.overheadCost != 0 {
		t.Errorf("unmetered allocation: %+v", l)
	}
	// Metered time is capped at the billed time (overlapping samples); efficiency at 1.
	l = attribute(time.Hour, whole, Usage{Metered: 2 * time.Hour, Active: 2 * time.Hour, EfficiencyNS: 3 * float64(2*time.Hour)})
	if l.metered != time.Hour || l.active != time.Hour || l.efficiency != 1 || l.wasteCost != 0 {
		t.Errorf("over-metered allocation: %+v", l)
	}
	// A fully metered allocation: cost = used + waste + overhead.
	mig := Terms{ListPrice: 1.6, Fraction: 3.0 / 7, Multiplier: 0.7, Overhead: 0.1}
	l = attribute(time.Hour, mig, Usage{Metered: time.Hour, Active: time.Hour, EfficiencyNS: 0.25 * float64(time.Hour)})
	used := l.cost * (1 - l.overhead) * l.efficiency
	if math.Abs(used+l.wasteCost+l.overheadCost-l.cost) > 1e-12 {
		t.Errorf("used %v + waste %v + overhead %v != cost %v", used, l.wasteCost, l.overheadCost, l.cost)
	}
	// Partly measured: the equality holds for the measured share; the rest is neither used
	// nor waste.
	l = attribute(time.Hour, mig, Usage{Metered: time.Hour, Active: 15 * time.Minute, EfficiencyNS: 0.25 * float64(15*time.Minute)})
	share := 0.25 // measured / billed
	used = l.cost * (1 - l.overhead) * share * l.efficiency
	unmeasured := l.cost * (1 - l.overhead) * (1 - share)
	if math.Abs(used+l.wasteCost+unmeasured+l.overheadCost-l.cost) > 1e-12 || l.efficiency != 0.25 {
		t.Errorf("partly measured: used %v + waste %v + unmeasured %v + overhead %v != cost %v (efficiency %v)",
			used, l.wasteCost, unmeasured, l.overheadCost, l.cost, l.efficiency)
	}
}

func TestP99(t *testing.T) {
	many := Histogram{}
	for w := uint64(1); w <= 1000; w++ {
		many[w] = 1
	}
	tests := []struct {
		name string
		h    Histogram
		want time.Duration
		ok   bool
	}{
		{"no waits", Histogram{}, 0, false},
		{"nil", nil, 0, false},
		{"one wait", Histogram{4_060_000: 1}, 4_060_000, true},
		{"all equal", Histogram{4_060_000: 35_000}, 4_060_000, true},
		// 100 waits: rank ⌈99⌉ = 99, the 99th smallest.
		{"100 waits", Histogram{1: 98, 2: 1, 3: 1}, 2, true},
		// 101 waits: rank ⌈99.99⌉ = 100.
		{"101 waits", Histogram{1: 99, 2: 1, 3: 1}, 2, true},
		{"102 waits", Histogram{1: 99, 2: 1, 3: 2}, 3, true},
		{"1000 distinct", many, 990, true},
		{"a rare long wait does not count", Histogram{10: 199, 1_000_000: 1}, 10, true},
		{"two long waits of 200 do", Histogram{10: 197, 1_000_000: 3}, 1_000_000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.h.P99()
			if got != tt.want || ok != tt.ok {
				t.Errorf("p99 = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestTimeMean(t *testing.T) {
	for _, tc := range []struct {
		sum  float64
		over time.Duration
		want float64
	}{
		{0, 0, 0}, {5, 0, 0}, {5, -1, 0}, {30, 60, 0.5}, {60, 60, 1}, {61, 60, 1}, {-1, 60, 0},
	} {
		if got := TimeMean(tc.sum, tc.over); got != tc.want {
			t.Errorf("TimeMean(%v, %v) = %v, want %v", tc.sum, tc.over, got, tc.want)
		}
	}
}
