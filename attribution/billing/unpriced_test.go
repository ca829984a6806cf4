package billing

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

func unpricedBook() *pricebook.PriceBook {
	return &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100": 1.60}, Tiers: map[string]float64{"pro": 1}}
}

// fleetOf is a fleet of whole GPUs and the instances on them, as the store builds it: the one
// place these tests say how a GPU is capacity (present for a day either side of at(0), longer
// than any window here).
func fleetOf(instances map[Target]pricebook.Instance, gpus ...GPU) *Fleet {
	f := NewFleet()
	for _, g := range gpus {
		f.GPUs[g] = []Interval{{at(-24 * time.Hour), at(24 * time.Hour)}}
	}
	maps.Copy(f.Instances, instances)
	return f
}

func TestSplitFleet(t *testing.T) {
	window := Interval{at(0), at(time.Minute)}
	tests := []struct {
		name             string
		gpus             []GPU
		priced, unpriced []GPU
	}{
		{"all priced", []GPU{{"n", "g0", "A100"}, {"n", "g1", "A100"}}, []GPU{{"n", "g0", "A100"}, {"n", "g1", "A100"}}, nil},
		{"one unpriced", []GPU{{"n", "g0", "A100"}, {"n", "g9", "B200"}}, []GPU{{"n", "g0", "A100"}}, []GPU{{"n", "g9", "B200"}}},
		{"none priced, sorted by model", []GPU{{"n", "g2", "L40S"}, {"m", "g1", "B200"}, {"n", "g1", "B200"}}, nil,
			[]GPU{{"m", "g1", "B200"}, {"n", "g1", "B200"}, {"n", "g2", "L40S"}}},
		{"empty fleet", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			instances := map[Target]pricebook.Instance{}
			for _, g := range tt.gpus {
				instances[Target{g.Node, g.UUID}] = pricebook.Instance{Kind: "gpu", Model: g.Model}
			}
			f := fleetOf(instances, tt.gpus...)
			priced, unpriced := SplitFleet(f, window, unpricedBook())
			got := slices.SortedFunc(maps.Keys(priced.GPUs), func(a, b GPU) int { return strings.Compare(a.Node+a.UUID, b.Node+b.UUID) })
			var gotUnpriced []GPU
			for _, u := range unpriced {
				gotUnpriced = append(gotUnpriced, u.GPU)
				if u.Time != time.Minute {
					t.Errorf("%v: %s left out of the capacity, want the window's minute", u.GPU, u.Time)
				}
			}
			if !slices.Equal(got, tt.priced) || !slices.Equal(gotUnpriced, tt.unpriced) {
				t.Errorf("priced %v, unpriced %v; want %v, %v", got, gotUnpriced, tt.priced, tt.unpriced)
			}
			if len(f.GPUs) != len(tt.gpus) || len(priced.Instances) != len(tt.gpus) {
				t.Errorf("the fleet changed (%d GPUs) or lost instances (%d): want %d of each", len(f.GPUs), len(priced.Instances), len(tt.gpus))
			}
			// The capacity of the priced part never fails on a model without a price.
			if _, err := CapacityListCost(priced, window, unpricedBook()); err != nil {
				t.Errorf("capacity of the priced part: %v", err)
			}
		})
	}
}

// TestPriceSetsAsideUnpriced: an allocation on a GPU model without a price or at an unknown
// tier is set aside with the reason, one whose terms fail is left out as failed; the others are
// priced.
func TestPriceSetsAsideUnpriced(t *testing.T) {
	whole := func(model string) pricebook.Instance { return pricebook.Instance{Kind: "gpu", Model: model} }
	f := fleetOf(map[Target]pricebook.Instance{
		{"n", "gpu0"}:      whole("A100"),
		{"n", "gpu9"}:      whole("B200"),
		{"n", "gpu1/mig0"}: {Kind: "mig", Model: "A100", ComputeSlices: 0},
	}, GPU{"n", "g0", "A100"}, GPU{"n", "g9", "B200"}, GPU{"n", "g1", "A100"})
	window := Interval{at(0), at(time.Hour)}
	allocs := []Allocation{
		{ID: "ok", Tenant: "a", Tier: "pro", Target: Target{"n", "gpu0"}, Started: at(0), Ended: at(10 * time.Minute)},
		{ID: "model", Tenant: "b", Tier: "pro", Target: Target{"n", "gpu9"}, Started: at(0)},
		{ID: "both", Tenant: "c", Tier: "gold", Target: Target{"n", "gpu9"}, Started: at(30 * time.Minute)},
		{ID: "tier", Tenant: "d", Tier: "gold", Target: Target{"n", "gpu0"}, Started: at(10 * time.Minute)},
		{ID: "broken", Tenant: "e", Tier: "pro", Target: Target{"n", "gpu1/mig0"}, Started: at(0)},
	}
	for _, dated := range []bool{false, true} {
		book := unpricedBook()
		if dated {
			book.Contracts = map[string]map[string]float64{"a": {"A100": 1}}
		}
		clipped, _ := Clip(allocs, window, f)
		p := Price(clipped, f, NewFleet(), book)
		priced, unsampled, aside := p.Priced, p.Unsampled, p.Unpriced
		if len(p.Failed) != 1 || !strings.Contains(p.Failed[0], "allocation broken") || !strings.Contains(p.Failed[0], "MIG compute slices 0") {
			t.Errorf("dated %v: failed %q, want the broken MIG instance's allocation", dated, p.Failed)
		}
		if len(priced) != 1 || priced[0].ID != "ok" || len(unsampled) != 0 {
			t.Errorf("dated %v: priced %v, unsampled %v; want ok alone", dated, priced, unsampled)
		}
		var got []string
		for _, a := range aside {
			got = append(got, a.ID+":"+a.Kind+"="+a.Name)
		}
		if want := []string{"model:model=B200", "both:model=B200", "tier:tier=gold"}; !slices.Equal(got, want) {
			t.Errorf("dated %v: set aside %v, want %v", dated, got, want)
		}
	}
}

func TestUnpriced(t *testing.T) {
	window := Interval{at(0), at(10 * time.Minute)}
	aside := func(id, tenant, kind, name string, d time.Duration) SetAside {
		return SetAside{Billed: Billed{Allocation: Allocation{ID: id, Tenant: tenant}, Billed: Interval{at(0), at(d)}}, Kind: kind, Name: name}
	}
	got, notes := Unpriced(
		[]UnpricedGPU{{GPU{"n", "g9", "B200"}, window.Duration()}, {GPU{"n", "g8", "B200"}, window.Duration()}},
		[]SetAside{aside("t1", "zed", report.UnpricedTier, "gold", time.Minute), aside("m1", "bob", report.UnpricedModel, "B200", 2*time.Minute),
			aside("m2", "al", report.UnpricedModel, "B200", 3*time.Minute), aside("m3", "al", report.UnpricedModel, "L40S", 4*time.Minute)})
	want := []report.Unpriced{
		{Kind: "model", Name: "B200", GPUs: 2, GPUTime: 20 * time.Minute, Allocations: 2, Tenants: []string{"al", "bob"}, Allocated: 5 * time.Minute},
		{Kind: "model", Name: "L40S", Allocations: 1, Tenants: []string{"al"}, Allocated: 4 * time.Minute},
		{Kind: "tier", Name: "gold", Allocations: 1, Tenants: []string{"zed"}, Allocated: time.Minute},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || g.Name != w.Name || g.GPUs != w.GPUs || g.GPUTime != w.GPUTime || g.Allocations != w.Allocations ||
			!slices.Equal(g.Tenants, w.Tenants) || g.Allocated != w.Allocated {
			t.Errorf("%d: got %+v, want %+v", i, g, w)
		}
	}
	wantNotes := []string{
		`unpriced: GPU model "B200" has no price in the price book: 2 GPU(s), 1200.000 GPU-seconds, left out of the capacity; 2 allocation(s) of tenant(s) ["al" "bob"], 300.000 billed seconds, left out of the money`,
		`unpriced: GPU model "L40S" has no price in the price book: 1 allocation(s) of tenant(s) ["al"], 240.000 billed seconds, left out of the money`,
		`unpriced: tier "gold" is not in the price book: 1 allocation(s) of tenant(s) ["zed"], 60.000 billed seconds, left out of the money`,
	}
	if !slices.Equal(notes, wantNotes) {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(notes, "\n"), strings.Join(wantNotes, "\n"))
	}
	if got[0].Seconds() != 1200 || got[1].Seconds() != 240 || got[2].Seconds() != 60 {
		t.Errorf("seconds counted %g (model), %g (model without GPUs in the window), %g (tier); want the GPU time 1200, the billed times 240 and 60",
			got[0].Seconds(), got[1].Seconds(), got[2].Seconds())
	}
	if u, n := Unpriced(nil, nil); u != nil || n != nil {
		t.Errorf("nothing unpriced: %v, %v", u, n)
	}
}
