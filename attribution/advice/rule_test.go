package advice

import (
	"math/big"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

const gib = 1 << 30

var (
	a100Whole  = pricebook.Instance{Kind: "gpu", Model: "A100-SXM4-40GB", SMCount: 108, GPUSMCount: 108, MemTotalBytes: 40 * gib, GPUMemTotalBytes: 40 * gib}
	a100MIG3g  = pricebook.Instance{Kind: "mig", Model: "A100-SXM4-40GB", Profile: "3g.20gb", ComputeSlices: 3, SMCount: 42, GPUSMCount: 108, MemTotalBytes: 20 * gib, GPUMemTotalBytes: 40 * gib}
	a100MIG1g  = pricebook.Instance{Kind: "mig", Model: "A100-SXM4-40GB", Profile: "1g.5gb", ComputeSlices: 1, SMCount: 14, GPUSMCount: 108, MemTotalBytes: 5 * gib, GPUMemTotalBytes: 40 * gib}
	h100MIG3g  = pricebook.Instance{Kind: "mig", Model: "H100-SXM5-80GB", Profile: "3g.40gb", ComputeSlices: 3, SMCount: 60, GPUSMCount: 132, MemTotalBytes: 40 * gib, GPUMemTotalBytes: 80 * gib}
	h100VGPU40 = pricebook.Instance{Kind: "vgpu", Model: "H100-SXM5-80GB", Profile: "H100-40C", SMCount: 132, GPUSMCount: 132, MemTotalBytes: 40 * gib, GPUMemTotalBytes: 80 * gib}
	h100VGPU20 = pricebook.Instance{Kind: "vgpu", Model: "H100-SXM5-80GB", Profile: "H100-20C", SMCount: 132, GPUSMCount: 132, MemTotalBytes: 20 * gib, GPUMemTotalBytes: 80 * gib}
	h100Share2 = pricebook.Instance{Kind: "share", Model: "H100-SXM5-80GB", SMCount: 132, GPUSMCount: 132, MemTotalBytes: 80 * gib, GPUMemTotalBytes: 80 * gib, ShareReplicas: 2}
	h100Whole  = pricebook.Instance{Kind: "gpu", Model: "H100-SXM5-80GB", SMCount: 132, GPUSMCount: 132, MemTotalBytes: 80 * gib, GPUMemTotalBytes: 80 * gib}
	l40sWhole  = pricebook.Instance{Kind: "gpu", Model: "L40S", SMCount: 142, GPUSMCount: 142, MemTotalBytes: 48 * gib, GPUMemTotalBytes: 48 * gib}
)

// TestDecide checks the rule against cases computed by hand (the comment of each says how).
func TestDecide(t *testing.T) {
	hour := time.Hour
	for _, tc := range []struct {
		name      string
		in        pricebook.Instance
		need      Need
		h         Headroom
		action    Action
		advised   string
		saturated bool
	}{
		// Needs 0.05 × 1.2 = 0.06 of the GPU and 8 × 1.1 = 8.8 GiB: 1g.5gb (14/108 = 0.130) has
		// too little memory, 2g.10gb (28/108 = 0.259, 10 GiB, 2/7) holds it.
		{"whole A100 to MIG", a100Whole, Need{0.05, 8 * gib, hour}, DefaultHeadroom, Downsize, "2g.10gb", false},
		// 0.1 × 1.2 = 0.12 ≤ 14/108 = 0.1296 and 4.4 GiB ≤ 5 GiB: 1g.5gb.
		{"A100 3g to 1g", a100MIG3g, Need{0.1, 4 * gib, hour}, DefaultHeadroom, Downsize, "1g.5gb", false},
		// With 50 % compute headroom 0.15 > 0.1296: 2g.10gb.
		{"A100 3g, more headroom", a100MIG3g, Need{0.1, 4 * gib, hour}, Headroom{0.5, 0.1}, Downsize, "2g.10gb", false},
		// 1g.5gb itself holds 0.12 and nothing is smaller.
		{"A100 1g keeps", a100MIG1g, Need{0.1, 4 * gib, hour}, DefaultHeadroom, Keep, "1g.5gb", false},
		// 0.13 ≥ 0.95 × 14/108 = 0.1231: ran at its limit.
		{"A100 1g saturated", a100MIG1g, Need{0.13, 1 * gib, hour}, DefaultHeadroom, Keep, "1g.5gb", true},
		// 0.12 ≤ 16/132 = 0.1212; 13.2 GiB > 10 GiB of 1g.10gb, ≤ 20 GiB of 1g.20gb (also 1/7).
		{"H100 3g to 1g.20gb", h100MIG3g, Need{0.1, 12 * gib, hour}, DefaultHeadroom, Downsize, "1g.20gb", false},
		// 1g.10gb and 1g.20gb both 1/7 and both fit: less memory wins.
		{"H100 tie on fraction", h100MIG3g, Need{0.05, 1 * gib, hour}, DefaultHeadroom, Downsize, "1g.10gb", false},
		// 0.12 of the GPU: 10C is 10/80 = 0.125 and 10 GiB ≥ 5.5 GiB; 8C's 0.1 is too little.
		{"vGPU 40C to 10C", h100VGPU40, Need{0.1, 5 * gib, hour}, DefaultHeadroom, Downsize, "H100-10C", false},
		// 0.33 ≥ 0.95 × 0.25: saturated; 40C would hold it but is larger: keep.
		{"vGPU 20C saturated", h100VGPU20, Need{0.33, 14 * gib, hour}, DefaultHeadroom, Keep, "H100-20C", true},
		// Shares: 1/N ≥ 0.096 → N ≤ 10; 80/N ≥ 6.6 GiB → N ≤ 12: ten ways.
		{"share 2 to 10 ways", h100Share2, Need{0.08, 6 * gib, hour}, DefaultHeadroom, Downsize, "share-10", false},
		// 1/N ≥ 0.6 only for N = 1: larger than 1/2, keep.
		{"share 2 keeps", h100Share2, Need{0.5, 6 * gib, hour}, DefaultHeadroom, Keep, "share-2", true},
		// Memory alone: 0.01 of compute, 70 GiB × 1.1 = 77 GiB needs the whole 80 GiB.
		{"whole H100 memory-bound", h100Whole, Need{0.01, 70 * gib, hour}, DefaultHeadroom, Keep, "gpu", false},
		// 7g.80gb (132/132, 80 GiB) ties the whole GPU at 1: no move.
		{"whole H100 busy", h100Whole, Need{0.97, 1 * gib, hour}, DefaultHeadroom, Keep, "gpu", true},
		// No MIG on an L40S: the whole GPU is the only candidate.
		{"L40S has no MIG", l40sWhole, Need{0.01, 1 * gib, hour}, DefaultHeadroom, Keep, "gpu", false},
		// 59 minutes measured of the hour asked for.
		{"unknown", a100Whole, Need{0.05, 8 * gib, 59 * time.Minute}, DefaultHeadroom, Unknown, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decide(tc.in, tc.need, tc.h, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != tc.action || d.Advised.Name != tc.advised || d.Saturated != tc.saturated {
				t.Errorf("got %s to %q (saturated %v), want %s to %q (saturated %v)", d.Action, d.Advised.Name, d.Saturated, tc.action, tc.advised, tc.saturated)
			}
		})
	}
}

func TestDecideRefusesImpossibleInstances(t *testing.T) {
	bad := a100MIG3g
	bad.ComputeSlices = 9
	if _, err := Decide(bad, Need{0.1, gib, time.Hour}, DefaultHeadroom, time.Hour); err == nil {
		t.Error("a MIG instance of 9 slices was advised")
	}
}

func TestP95(t *testing.T) {
	seq := func(n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[n-1-i] = float64(i + 1) // descending: P95 sorts
		}
		return out
	}
	for _, tc := range []struct {
		values []float64
		want   float64
	}{{nil, 0}, {[]float64{0.3}, 0.3}, {seq(20), 19}, {seq(100), 95}, {seq(21), 20}, {seq(60), 57}} {
		if got := P95(tc.values); got != tc.want {
			t.Errorf("P95 of %d values: %v, want %v", len(tc.values), got, tc.want)
		}
	}
}

func TestSavings(t *testing.T) {
	for _, tc := range []struct {
		name             string
		whole            string
		current, advised *big.Rat
		window           time.Duration
		want, want30d    string
	}{
		// (1 − 2/7) × 1.60 = 8/7 = 1.142857142857…; over a 1 h window × 720.
		{"whole to 2g", "1.6", big.NewRat(1, 1), big.NewRat(2, 7), time.Hour, "1.142857", "822.857143"},
		// (1/2 − 1/8) × 2.80 × 0.5 = 0.525; the window is 7 days: × 30/7.
		{"40C to 10C", "1.4", big.NewRat(1, 2), big.NewRat(1, 8), 7 * 24 * time.Hour, "0.525000", "2.250000"},
		{"keep", "1.6", big.NewRat(3, 7), big.NewRat(3, 7), time.Hour, "0.000000", "0.000000"},
	} {
		whole := decimal.RequireFromString(tc.whole)
		s, s30 := Savings(whole, tc.current, tc.advised, tc.window)
		if s.StringFixed(6) != tc.want || s30.StringFixed(6) != tc.want30d {
			t.Errorf("%s: %s and %s, want %s and %s", tc.name, s.StringFixed(6), s30.StringFixed(6), tc.want, tc.want30d)
		}
	}
}

func TestWholeCost(t *testing.T) {
	book := &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"H100-SXM5-80GB": 2.8}, Tiers: map[string]float64{"spot": 0.5}}
	from := time.Date(2026, 3, 2, 12, 0, 7, 0, time.UTC)
	got, err := WholeCost(book, "halftime", "spot", "H100-SXM5-80GB", from, from.Add(59*time.Minute+53*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// 2.80 × 0.5 × 3593 s / 3600 = 1.397277…
	if got.StringFixed(6) != "1.397278" {
		t.Errorf("whole cost %s, want 1.397278", got.StringFixed(6))
	}
}

// TestWholeCostContract: a tenant with a contract price pays it, not list price × tier; the
// savings of a move are then at the contract's price.
func TestWholeCostContract(t *testing.T) {
	book := &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100-SXM4-40GB": 1.6}, Tiers: map[string]float64{"pro": 1},
		Contracts: map[string]map[string]float64{"acme": {"A100-SXM4-40GB": 1.2}}}
	from := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ tenant, want string }{{"acme", "0.900000"}, {"beta", "1.200000"}} {
		// 45 minutes: acme 1.2 × 0.75 = 0.9; beta at list price 1.6 × 1.0 × 0.75 = 1.2.
		got, err := WholeCost(book, tc.tenant, "pro", "A100-SXM4-40GB", from, from.Add(45*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if got.StringFixed(6) != tc.want {
			t.Errorf("%s: whole cost %s, want %s", tc.tenant, got.StringFixed(6), tc.want)
		}
	}
	// Whole GPU to 2g.10gb at the contract: (1 − 2/7) × 0.9 = 0.642857…
	whole, _ := WholeCost(book, "acme", "pro", "A100-SXM4-40GB", from, from.Add(45*time.Minute))
	if s, _ := Savings(whole, big.NewRat(1, 1), big.NewRat(2, 7), time.Hour); s.StringFixed(6) != "0.642857" {
		t.Errorf("savings at the contract price %s, want 0.642857", s.StringFixed(6))
	}
}
