package fleet

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/fleet/fleetstore"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// usd is an amount as the stored minutes hold it.
func usd(f float64) decimal.Decimal { return decimal.NewFromFloat(f).Round(stored.MoneyScale) }

func mig(node, gpu, id string, slices uint32) fleetstore.FleetInstance {
	return fleetstore.FleetInstance{Target: billing.Target{Node: node, Instance: id}, GPU: billing.GPU{Node: node, UUID: gpu, Model: "A100-SXM4-40GB"},
		Facts:   pricebook.Instance{Kind: "mig", Model: "A100-SXM4-40GB", ComputeSlices: slices, SMCount: 14 * slices, GPUSMCount: 108, MemTotalBytes: 5 << 30, GPUMemTotalBytes: 40 << 30},
		Covered: time.Hour}
}

// TestBuild: the figures that need no ClickHouse — fragmentation against the largest profile
// held, the groups, and what is left empty without costs or capacity.
func TestBuild(t *testing.T) {
	from := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	hour := billing.Interval{Start: from.UnixNano(), End: from.Add(time.Hour).UnixNano()}
	gpuA, gpuB := billing.GPU{Node: "n1", UUID: "GPU-a", Model: "A100-SXM4-40GB"}, billing.GPU{Node: "n2", UUID: "GPU-b", Model: "A100-SXM4-40GB"}
	in := &Inputs{
		From: from, To: from.Add(time.Hour),
		Instances: []fleetstore.FleetInstance{
			mig("n1", "GPU-a", "gpu0/mig0", 3), mig("n1", "GPU-a", "gpu0/mig1", 1), mig("n1", "GPU-a", "gpu0/mig2", 1),
			mig("n2", "GPU-b", "gpu0/mig0", 1), mig("n2", "GPU-b", "gpu0/mig1", 2),
		},
		Capacity: map[billing.GPU][]billing.Interval{gpuA: {hour}, gpuB: {hour}},
		Held: []stored.Held{
			{Target: billing.Target{Node: "n1", Instance: "gpu0/mig0"}, Tenant: "t1", Billed: time.Hour, ListCost: usd(1.6 * 3 / 7), Cost: usd(1.6 * 3 / 7)},
			{Target: billing.Target{Node: "n1", Instance: "gpu0/mig1"}, Tenant: "t2", Billed: time.Hour, ListCost: usd(1.6 / 7), Cost: usd(1.6 / 7)},
			{Target: billing.Target{Node: "n1", Instance: "gpu0/mig2"}, Tenant: "t3", Billed: time.Hour, ListCost: usd(1.6 / 7), Cost: usd(1.6 / 7)},
		},
		TenantsPerHost: map[string]int{"n1": 3},
	}
	book := &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100-SXM4-40GB": 1.6}}
	tests := []struct {
		name       string
		by         By
		costs      *pricebook.Costs
		groups     []string
		fragmented []int // per row
		tenants    []int
	}{
		// GPU-a holds 5 slices: 2 free, a 3g cannot use them; GPU-b holds none: 7 free, 1 left over 3g's.
		{"by gpu", ByGPU, nil, []string{"n1/GPU-a", "n2/GPU-b", Total}, []int{2, 1, 3}, []int{3, 0, 3}},
		{"by node with costs", ByNode, &pricebook.Costs{GPUHour: map[string]float64{"A100-SXM4-40GB": 1}}, []string{"n1", "n2", Total}, []int{2, 1, 3}, []int{3, 0, 3}},
		{"by model", ByModel, nil, []string{"A100-SXM4-40GB", Total}, []int{3, 3}, []int{3, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := *book
			b.Costs = tt.costs
			rows := Build(in, &b, tt.by, 0)
			if len(rows) != len(tt.groups) {
				t.Fatalf("%d rows, want %v", len(rows), tt.groups)
			}
			for i, r := range rows {
				if r.Group != tt.groups[i] || r.FragmentedSlices != tt.fragmented[i] || r.MaxTenantsPerHost != tt.tenants[i] || r.TenantLimit != DefaultMaxTenantsPerHost {
					t.Errorf("row %d: %s fragmented %d tenants %d limit %d; want %s, %d, %d, %d", i, r.Group, r.FragmentedSlices, r.MaxTenantsPerHost,
						r.TenantLimit, tt.groups[i], tt.fragmented[i], tt.tenants[i], DefaultMaxTenantsPerHost)
				}
				if (r.OperatorCost == nil) != (tt.costs == nil) || (r.Margin == nil) != (tt.costs == nil) {
					t.Errorf("row %s: operator cost %v, margin %v with costs %v", r.Group, r.OperatorCost, r.Margin, tt.costs)
				}
			}
			total := rows[len(rows)-1]
			if total.CapacityGPUHours != 2 || total.AllocatedGPUHours < 5./7-1e-9 || total.AllocatedGPUHours > 5./7+1e-9 {
				t.Errorf("fleet capacity %v, allocated %v; want 2 and 5/7", total.CapacityGPUHours, total.AllocatedGPUHours)
			}
			if tt.costs != nil {
				// 2 GPU-hours at 1: the list revenue of an allocated GPU-hour is 1.6, so 1.25 GPU-hours
				// of 2 pay for it.
				if be := total.BreakEvenAllocationRatio; be == nil || *be < 0.625-1e-9 || *be > 0.625+1e-9 {
					t.Errorf("break-even %v, want 0.625", be)
				}
			}
		})
	}
}

// TestBuildEmpty: a window without capacity or allocations has a __fleet__ row of zeros and
// empty ratios, never NaN.
func TestBuildEmpty(t *testing.T) {
	rows := Build(&Inputs{}, &pricebook.PriceBook{Currency: "USD", Costs: &pricebook.Costs{EnergyKWh: 0.1}}, ByModel, 5)
	if len(rows) != 1 || rows[0].Group != Total {
		t.Fatalf("rows %+v, want only __fleet__", rows)
	}
	r := rows[0]
	if r.AllocationRatio != nil || r.ActiveRatio != nil || r.MemoryEfficiency != nil || r.OverheadRatio != nil || r.BreakEvenAllocationRatio != nil {
		t.Errorf("ratios of nothing: %+v", r)
	}
	if r.OperatorCost == nil || *r.OperatorCost != 0 || *r.Margin != 0 {
		t.Errorf("operator cost %v margin %v, want 0", r.OperatorCost, r.Margin)
	}
}

// TestBuildSumsMoneyExactly: money is summed as the stored Decimal amounts, never as floats:
// 0.1 + 0.2 is 0.3 (as floats 0.30000000000000004), for the groups and the fleet, and the
// margin is revenue − operator cost at the same scale.
func TestBuildSumsMoneyExactly(t *testing.T) {
	from := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	gpu := billing.GPU{Node: "n1", UUID: "GPU-a", Model: "A100-SXM4-40GB"}
	x := mig("n1", "GPU-a", "gpu0/mig0", 1)
	held := func(tenant string, cost float64) stored.Held {
		return stored.Held{Target: x.Target, Tenant: tenant, Billed: time.Hour, ListCost: usd(cost), Cost: usd(cost), OverheadCost: usd(cost / 10)}
	}
	in := &Inputs{From: from, To: from.Add(time.Hour), Instances: []fleetstore.FleetInstance{x},
		Capacity: map[billing.GPU][]billing.Interval{gpu: {{Start: from.UnixNano(), End: from.Add(time.Hour).UnixNano()}}},
		Held:     []stored.Held{held("t1", 0.1), held("t2", 0.2)}}
	book := &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100-SXM4-40GB": 1.6},
		Costs: &pricebook.Costs{GPUHour: map[string]float64{"A100-SXM4-40GB": 0.1}}}
	for _, r := range Build(in, book, ByModel, 0) {
		if r.Revenue != 0.3 || r.ListRevenue != 0.3 || r.Margin == nil || *r.Margin != 0.2 {
			t.Errorf("%s: revenue %v, list revenue %v, margin %v; want 0.3, 0.3, 0.2 exactly", r.Group, r.Revenue, r.ListRevenue, show(r.Margin))
		}
	}
}

func show(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}
