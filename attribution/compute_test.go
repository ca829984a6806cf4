package attribution_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

var (
	t0   = chtest.T0
	book = chtest.Book()
)

// instance is one instance of chtest's hand-built fleet, by the names these tests use.
type instance struct {
	chtest.Instance
	id string
}

func fleetInstance(in chtest.Instance) instance { return instance{in, in.ID} }

var (
	migA100   = fleetInstance(chtest.MigA100)
	wholeA100 = fleetInstance(chtest.WholeA100)
	vgpu0     = fleetInstance(chtest.VGPU0)
	vgpu1     = fleetInstance(chtest.VGPU1)
)

// reportOf is Report's report of [from, to) from the source.
func reportOf(ctx context.Context, conn store.Querier, from, to time.Time, book *pricebook.PriceBook, src store.Samples) (report.Report, error) {
	res, err := attribution.Report(ctx, conn, book, attribution.Options{From: from, To: to, Samples: src})
	return res.Report, err
}

// linesOf is reportOf with the allocations' lines.
func linesOf(ctx context.Context, conn store.Querier, from, to time.Time, book *pricebook.PriceBook, src store.Samples) (report.Report, []billing.Line, error) {
	res, err := attribution.Report(ctx, conn, book, attribution.Options{From: from, To: to, Samples: src, Lines: true})
	return res.Report, res.Lines, err
}

// sample is chtest's sample of the instance, under the id the test gave it.
func (in instance) sample(at time.Duration, interval time.Duration, attached bool, sm float64) *pb.Sample {
	named := in.Instance
	named.ID = in.id
	return named.Sample(at, interval, attached, sm)
}

// TestCompute checks Compute against a hand-built fleet, with the definitions worked out by
// hand below. The window is ten minutes of 1 s samples:
//
//	node-a: gpu0 (A100) MIG 1g.5gb gpu0/mig0; gpu1 (A100) whole. Exporter down [200 s, 260 s).
//	        The first 100 s of gpu0/mig0 are delivered twice.
//	node-b: gpu0 (H100) with vGPUs H100-20C: vgpu0 busy (sm 0.2, 5 waits a tick), vgpu1 idle;
//	        switching 10 ms a tick. Sampled from 130 s before the window; the first 50 s of the
//	        window are delivered twice.
//
// Tenants: acme (pro) holds gpu0/mig0 from 12 s on and (budget) gpu0/vgpu1 [300 s, 400 s),
// never attached; bolt (budget) holds gpu1 [100 s, 400 s), requested at 60 s; vee (pro) holds
// gpu0/vgpu0 since 240 s before the window, requested 300 s before it. ghost's allocation was
// deleted, old's ended before the window.
func TestCompute(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	const window = 600 * time.Second
	tick := time.Second
	var nodeA, nodeB []*pb.Sample
	for at := time.Duration(0); at < window; at += tick {
		if at >= 200*time.Second && at < 260*time.Second {
			continue // node-a's exporter is down
		}
		nodeA = append(nodeA, migA100.sample(at, tick, at >= 12*time.Second, map[bool]float64{true: 0.5}[at >= 12*time.Second]))
		bolt := at >= 100*time.Second && at < 400*time.Second
		nodeA = append(nodeA, wholeA100.sample(at, tick, bolt, map[bool]float64{true: 0.25}[bolt]))
	}
	nodeA = append(nodeA, nodeA[:200]...) // ticks 0-99 of node-a again: a batch delivered twice
	for at := -130 * time.Second; at < window; at += tick {
		busy := vgpu0.sample(at, tick, at >= -125*time.Second, 0.2)
		busy.Vgpu.SwitchNs = uint64(10 * time.Millisecond)
		busy.Vgpu.WaitsNs = []uint64{4_060_000, 4_060_000, 4_060_000, 4_060_000, 4_060_000}
		if at < 0 {
			busy.Vgpu.WaitsNs[0] = 50_000_000 // before the window: must not count
		} else if (at/tick)%20 == 0 {
			busy.Vgpu.WaitsNs[4] = 9_000_000 // 30 long waits of 3000: exactly 1 %
		}
		idle := vgpu1.sample(at, tick, false, 0)
		idle.Vgpu.SwitchNs = busy.Vgpu.SwitchNs
		nodeB = append(nodeB, busy, idle)
	}
	nodeB = append(nodeB, nodeB[260:360]...) // ticks 0-49 of the window again
	insertSamples(t, conn, "node-a", nodeA)
	insertSamples(t, conn, "node-b", nodeB)

	at := func(d time.Duration) time.Time { return t0.Add(d) }
	insertAllocations(t, conn, []allocationRow{
		{id: "acme-1", tenant: "acme", tier: "pro", node: "node-a", instance: "gpu0/mig0", requested: at(0), started: at(12 * time.Second), version: 1},
		{id: "acme-2", tenant: "acme", tier: "budget", node: "node-b", instance: "gpu0/vgpu1", requested: at(290 * time.Second),
			started: at(300 * time.Second), ended: at(400 * time.Second), version: 1},
		// bolt's allocation was opened, then closed (version 2, delivered twice).
		{id: "bolt-1", tenant: "bolt", tier: "budget", node: "node-a", instance: "gpu1", requested: at(60 * time.Second), started: at(100 * time.Second), version: 1},
		{id: "bolt-1", tenant: "bolt", tier: "budget", node: "node-a", instance: "gpu1", requested: at(60 * time.Second), started: at(100 * time.Second),
			ended: at(400 * time.Second), version: 2},
		{id: "bolt-1", tenant: "bolt", tier: "budget", node: "node-a", instance: "gpu1", requested: at(60 * time.Second), started: at(100 * time.Second),
			ended: at(400 * time.Second), version: 2},
		{id: "vee-1", tenant: "vee", tier: "pro", node: "node-b", instance: "gpu0/vgpu0", requested: at(-300 * time.Second), started: at(-240 * time.Second), version: 1},
		{id: "ghost-1", tenant: "ghost", tier: "pro", node: "node-a", instance: "gpu1", requested: at(0), started: at(0), version: 1},
		{id: "ghost-1", tenant: "ghost", tier: "pro", node: "node-a", instance: "gpu1", requested: at(0), started: at(0), version: 2, deleted: true},
		{id: "old-1", tenant: "old", tier: "pro", node: "node-a", instance: "gpu1", requested: at(-2 * time.Hour), started: at(-2 * time.Hour),
			ended: at(-time.Hour), version: 1},
	})

	got, err := reportOf(context.Background(), conn, t0, t0.Add(window), book, store.RawSamples)
	if err != nil {
		t.Fatal(err)
	}

	// By hand, from the definitions (attribution/README.md, "Definitions").
	hours := func(d time.Duration) float64 { return d.Hours() }
	migO := 1 - (14.0/108)/(1.0/7)
	acmeMIGList := 1.60 * (1.0 / 7) * hours(588*time.Second)             // billed [12 s, 600 s)
	acmeMIGWaste := acmeMIGList * (1 - migO) * (528.0 / 588) * (1 - 0.5) // 60 s unmetered
	acmeVGPUList := 2.40 * 0.25 * hours(100*time.Second)                 // billed [300 s, 400 s)
	acmeVGPUWaste := acmeVGPUList * 0.7 * (1 - 0.01) * (1 - 0)           // idle: efficiency 0
	boltList := 1.60 * hours(300*time.Second)                            // billed [100 s, 400 s)
	boltWaste := boltList * 0.7 * (240.0 / 300) * (1 - 0.25)             // 60 s unmetered
	veeList := 2.40 * 0.25 * hours(window)                               // clipped to the window
	veeEff := 0.2 / (0.25 * (1 - 0.01))                                  // share run / (fraction × (1 − o))
	veeWaste := veeList * (1 - 0.01) * (1 - veeEff)                      //
	capacity := (1.60 + 1.60 + 2.40) * hours(window)                     // GPU-a0, GPU-a1, GPU-b0
	ptr := func(d time.Duration) *time.Duration { return &d }
	f := func(v float64) *float64 { return &v }
	row := func(r report.Row) report.Row {
		r.WindowStart, r.WindowEnd, r.Currency = t0, t0.Add(window), "USD"
		return r
	}
	want := report.Report{
		WindowStart: t0, WindowEnd: t0.Add(window), Currency: "USD",
		Tenants: []report.Row{
			row(report.Row{
				Tenant: "acme", Tier: "pro", Allocated: 688 * time.Second,
				ListCost: acmeMIGList + acmeVGPUList, Cost: acmeMIGList + acmeVGPUList*0.7,
				WasteCost: acmeMIGWaste + acmeVGPUWaste, OverheadCost: acmeMIGList*migO + acmeVGPUList*0.7*0.01,
				Efficiency: f((0.5*528 + 0*100) / 628), JitterP99: ptr(0), ColdStartMax: ptr(12 * time.Second),
				Unmetered: 60 * time.Second,
			}),
			row(report.Row{
				Tenant: "bolt", Tier: "budget", Allocated: 300 * time.Second, ListCost: boltList, Cost: boltList * 0.7,
				WasteCost: boltWaste, Efficiency: f(0.25), JitterP99: ptr(0), ColdStartMax: ptr(40 * time.Second),
				ColdStartBreaches: 1, Unmetered: 60 * time.Second,
			}),
			row(report.Row{
				Tenant: "vee", Tier: "pro", Allocated: window, ListCost: veeList, Cost: veeList, WasteCost: veeWaste,
				OverheadCost: veeList * 0.01, Efficiency: f(veeEff), JitterP99: ptr(4_060 * time.Microsecond),
				ColdStartMax: ptr(175 * time.Second), ColdStartBreaches: 1,
			}),
		},
		UnallocatedListCost: capacity - (acmeMIGList + acmeVGPUList) - boltList - veeList,
	}

	var gotCSV, wantCSV bytes.Buffer
	if err := got.WriteCSV(&gotCSV); err != nil {
		t.Fatal(err)
	}
	if err := want.WriteCSV(&wantCSV); err != nil {
		t.Fatal(err)
	}
	if gotCSV.String() != wantCSV.String() {
		t.Errorf("report:\n%s\nwant:\n%s", gotCSV.String(), wantCSV.String())
	}
	// Unrounded, the money adds up exactly as defined.
	if len(got.Tenants) == len(want.Tenants) {
		for i, g := range got.Tenants {
			w := want.Tenants[i]
			for _, c := range []struct {
				name      string
				got, want float64
			}{{"list_cost", g.ListCost, w.ListCost}, {"cost", g.Cost, w.Cost}, {"waste_cost", g.WasteCost, w.WasteCost},
				{"overhead_cost", g.OverheadCost, w.OverheadCost}, {"efficiency", *g.Efficiency, *w.Efficiency}} {
				if math.Abs(c.got-c.want) > 1e-12 {
					t.Errorf("%s %s = %.15f, want %.15f", g.Tenant, c.name, c.got, c.want)
				}
			}
		}
	}
	sum := got.UnallocatedListCost
	for _, r := range got.Tenants {
		sum += r.ListCost
	}
	if math.Abs(sum-capacity) > 1e-12 {
		t.Errorf("Σ list_cost + unallocated = %.15f, capacity %.15f", sum, capacity)
	}
	// acme is at two tiers; acme-2 was never attached.
	notes := strings.Join(got.Notes, "\n")
	for _, w := range []string{`tenant "acme" has allocations at tiers budget, pro`, "allocation acme-2", "cold start unknown"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes %q should mention %q", notes, w)
		}
	}
}

// TestComputeTargetNotSampledInWindow: an allocation whose node's exporter was down for the
// whole window is still priced (from its latest earlier sample) and entirely unmetered. Its GPU
// has no sample in the window: it is capacity only for the presence period (1 h) after its
// last sample, the window's first half hour, so unallocated goes negative by the other half,
// and the sum still holds.
func TestComputeTargetNotSampledInWindow(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	insertSamples(t, conn, "node-a", []*pb.Sample{
		wholeA100.sample(-time.Hour, time.Second, true, 1),
		wholeA100.sample(-30*time.Minute, time.Second, true, 1),
	})
	insertAllocations(t, conn, []allocationRow{
		{id: "d-1", tenant: "dark", tier: "pro", node: "node-a", instance: "gpu1", requested: t0.Add(-2 * time.Hour), started: t0.Add(-time.Hour), version: 1},
	})
	got, err := reportOf(context.Background(), conn, t0, t0.Add(time.Hour), book, store.RawSamples)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tenants) != 1 {
		t.Fatalf("tenants: %+v", got.Tenants)
	}
	dark := got.Tenants[0]
	if dark.Allocated != time.Hour || dark.Unmetered != time.Hour || dark.ListCost != 1.60 || dark.WasteCost != 0 ||
		dark.Efficiency != nil || *dark.ColdStartMax != time.Hour {
		t.Errorf("dark: %+v", dark)
	}
	if math.Abs(got.CapacityListCost-0.80) > 1e-12 || math.Abs(got.UnallocatedListCost+0.80) > 1e-12 {
		t.Errorf("capacity %v, unallocated %v; want 0.80 and -0.80", got.CapacityListCost, got.UnallocatedListCost)
	}
}

func TestComputeErrors(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	insertSamples(t, conn, "node-a", []*pb.Sample{migA100.sample(0, time.Second, true, 1), wholeA100.sample(0, time.Second, true, 1)})
	ctx := context.Background()
	window := func() (time.Time, time.Time) { return t0, t0.Add(time.Minute) }

	from, to := window()
	if _, err := reportOf(ctx, conn, to, from, book, store.RawSamples); err == nil {
		t.Error("a window that ends before it starts: want an error")
	}

	// What the price book cannot price is not an error: it is unpriced (TestReportUnpriced).
	unpriced := &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"H100-SXM5-80GB": 2.40}, Tiers: book.Tiers}
	rep, err := reportOf(ctx, conn, from, to, unpriced, store.RawSamples)
	if err != nil || rep.CapacityListCost != 0 || len(rep.Unpriced) != 1 || rep.Unpriced[0].Name != "A100-SXM4-40GB" || rep.Unpriced[0].GPUs != 2 {
		t.Errorf("a GPU model without a price: %+v, %v; want both A100s unpriced, no capacity", rep, err)
	}

	insertAllocations(t, conn, []allocationRow{
		{id: "g-1", tenant: "gold", tier: "gold", node: "node-a", instance: "gpu1", requested: t0, started: t0, version: 1},
	})
	rep, err = reportOf(ctx, conn, from, to, book, store.RawSamples)
	if err != nil || len(rep.Tenants) != 0 || len(rep.Unpriced) != 1 || rep.Unpriced[0].Kind != report.UnpricedTier ||
		rep.Unpriced[0].Name != "gold" || rep.Unpriced[0].Allocated != time.Minute || math.Abs(rep.UnallocatedListCost-2*1.60/60) > 1e-12 {
		t.Errorf("an unknown tier: %+v, %v; want gold's minute unpriced, the capacity unallocated", rep, err)
	}

	insertAllocations(t, conn, []allocationRow{
		{id: "g-1", tenant: "gold", tier: "pro", node: "node-a", instance: "gpu7", requested: t0, started: t0, version: 2},
	})
	// A target never sampled: the allocation is accepted but cannot be priced yet; it is left
	// out, noted and counted, and the report still adds up.
	rep, err = reportOf(ctx, conn, from, to, book, store.RawSamples)
	if err != nil || rep.Unsampled != 1 || len(rep.Tenants) != 0 || len(rep.Notes) != 1 ||
		!strings.Contains(rep.Notes[0], "node-a/gpu7") || !strings.Contains(rep.Notes[0], "never been sampled") {
		t.Errorf("a target never sampled: %+v, %v", rep, err)
	}
}

// TestComputeOverlap: two allocations from Kafka (which the intakes' overlap check never saw)
// on one instance at once are reported, and break the overlap invariant.
func TestComputeOverlap(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	insertSamples(t, conn, "node-a", []*pb.Sample{wholeA100.sample(0, time.Second, true, 1)})
	insertAllocations(t, conn, []allocationRow{
		{id: "o-1", tenant: "one", tier: "pro", node: "node-a", instance: "gpu1", requested: t0, started: t0, ended: t0.Add(40 * time.Second), version: 1},
		{id: "o-2", tenant: "two", tier: "pro", node: "node-a", instance: "gpu1", requested: t0, started: t0.Add(30 * time.Second), version: 1},
	})
	res, err := attribution.Report(context.Background(), conn, book, attribution.Options{From: t0, To: t0.Add(time.Minute)})
	if !errors.Is(err, attribution.ErrInvariants) || !strings.Contains(err.Error(), "the report breaks its invariants: overlap invariant") {
		t.Fatalf("want the overlap invariant broken: %v", err)
	}
	rep, errs := res.Report, res.Violations
	if len(rep.Overlaps) != 1 || !strings.Contains(rep.Overlaps[0], "o-1") || !strings.Contains(rep.Overlaps[0], "o-2") || len(errs) != 1 ||
		!strings.Contains(errs[0].Error(), "overlap invariant") {
		t.Errorf("overlaps %v, violations %v", rep.Overlaps, errs)
	}
}
