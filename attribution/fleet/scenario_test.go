package fleet_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"log/slog"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

func TestMain(m *testing.M) { localtest.Main(m) }

// economics is the scenario fleet-economics.yaml.
func economics(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("testdata", "fleet-economics.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// economicsAttributed is fleet-economics.yaml, its price book and a database holding its
// attributed hour (attributed); skipped with -short.
func economicsAttributed(t *testing.T) (*scenario.Scenario, *pricebook.PriceBook, driver.Conn) {
	t.Helper()
	if testing.Short() {
		t.Skip("simulates an hour of a fleet into ClickHouse")
	}
	sc := economics(t)
	return sc, sc.Book, attributed(t, sc)
}

// attributed is a database holding the scenario's samples, their rollups and the minutes the
// attribution service stores for its hour.
func attributed(t *testing.T, sc *scenario.Scenario) driver.Conn {
	t.Helper()
	return attributedUntil(t, sc, sc.End())
}

// attributedUntil is attributed with the service's minutes stored up to end only.
func attributedUntil(t *testing.T, sc *scenario.Scenario, end time.Time) driver.Conn {
	t.Helper()
	conn := chtest.NewDatabase(t, nil)
	chtest.InsertScenario(t, conn, sc)
	chtest.RollUp(t, conn)
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: time.Hour, Backfill: time.Hour, MaxRecompute: time.Hour, MaxMinutes: 120,
		Presence: time.Hour, Samples: store.SecondRollup}
	runner := service.NewRunner(conn, sc.Book, cfg, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return end.Add(30 * time.Second) })
	if p, err := runner.Once(context.Background()); err != nil || !p.Done.Equal(end) || end.Equal(sc.End()) && p.Fresh+p.Recomputed != 60 {
		t.Fatalf("attributing the scenario up to %s: %+v, %v", end.Format(time.RFC3339), p, err)
	}
	return conn
}

// The scenario's figures, by hand from README's definitions (fleet-economics.yaml): every
// workload is constant and every allocation starts and ends on a whole minute, so each figure
// is a sum of rectangles. Minutes of each allocation: acme, delta [0, 60) on 1g.5gb instances
// (1/7 of the A100, 14 of 108 SMs), beta [0, 30) on one too, gamma [10, 60) on the 3g.20gb
// (3/7, 42 SMs); epsilon [0, 60) and zeta [20, 40) on whole H100s; node-b's H100 idle.
const (
	small, large = 14. / 108, 42. / 108 // SM shares of 1g.5gb and 3g.20gb
	migOverhead  = 1 - small*7          // 1 − (14/108) / (1/7), the same for 3g.20gb
)

var (
	// A100 activity (whole-GPU units) in [0, 10), [10, 30), [30, 60), and its power.
	a100Act   = [3]float64{(0.5 + 0.8 + 0.2) * small, (0.5+0.8+0.2)*small + large, (0.5+0.2)*small + large}
	a100Power = func(act float64) float64 { return 55 + (400-55)*act }
	// Watt-minutes of the A100 in the three stretches.
	a100Wmin = [3]float64{a100Power(a100Act[0]) * 10, a100Power(a100Act[1]) * 20, a100Power(a100Act[2]) * 30}
	a100Wh   = (a100Wmin[0] + a100Wmin[1] + a100Wmin[2]) / 60
	// H100s: epsilon's at 0.6 all hour, zeta's at 1.0 for 20 minutes and idle for 40, node-b's idle.
	h100Wh = [3]float64{70 + 630*0.6, (700*20 + 70*40) / 60., 70}

	cost = map[string]float64{ // price × fraction × hours × tier
		"acme": 1.6 / 7, "beta": 1.6 / 7 * 0.5 * 0.7, "delta": 1.6 / 7, "gamma": 1.6 * 3 / 7 * 50 / 60,
		"epsilon": 2.4 * 0.7, "zeta": 2.4 / 3,
	}
	listCost = map[string]float64{"acme": 1.6 / 7, "beta": 1.6 / 7 * 0.5, "delta": 1.6 / 7, "gamma": 1.6 * 3 / 7 * 50 / 60, "epsilon": 2.4, "zeta": 2.4 / 3}
	// Memory used while held: what each workload says.
	heldMem = map[string]float64{"acme": 0.6, "beta": 0.5, "delta": 1.0, "gamma": 0.25, "epsilon": 0.5, "zeta": 0.75}
)

func sumOf(m map[string]float64, tenants ...string) float64 {
	s := 0.
	for _, t := range tenants {
		s += m[t]
	}
	return s
}

func idle(tenants ...string) float64 {
	s := 0.
	for _, t := range tenants {
		s += cost[t] * (1 - heldMem[t])
	}
	return s
}

func ptr(v float64) *float64 { return &v }

// wantRows are the scenario's rows by model, computed by hand.
func wantRows(sc *scenario.Scenario) []fleet.Row {
	a100T, h100T := []string{"acme", "beta", "delta", "gamma"}, []string{"epsilon", "zeta"}
	a100 := fleet.Row{
		Group: "A100-SXM4-40GB", CapacityGPUHours: 1,
		AllocatedGPUHours: (1+0.5+1)/7. + 3./7*50/60,
		ActiveGPUHours:    (0.5*60+0.8*30+0.2*60)/60*small + 1.0*50/60*large,
		MemoryEfficiency:  ptr((0.6 + 0.5*0.5 + 1.0 + 0.25*50/60) / 4),
		IdleMemoryCost:    idle(a100T...), Revenue: sumOf(cost, a100T...), ListRevenue: sumOf(listCost, a100T...),
		OverheadRatio: ptr(migOverhead), MaxTenantsPerHost: 6, FragmentedSlices: 1, EnergyKWh: a100Wh / 1000,
	}
	h100 := fleet.Row{
		Group: "H100-SXM5-80GB", CapacityGPUHours: 3, AllocatedGPUHours: 1 + 1./3, ActiveGPUHours: 0.6 + 1./3,
		MemoryEfficiency: ptr((0.5 + 0.75/3 + 0) / 3),
		IdleMemoryCost:   idle(h100T...), Revenue: sumOf(cost, h100T...), ListRevenue: sumOf(listCost, h100T...),
		OverheadRatio: ptr(0), MaxTenantsPerHost: 6, EnergyKWh: (h100Wh[0] + h100Wh[1] + h100Wh[2]) / 1000,
	}
	total := fleet.Row{
		Group: fleet.Total, CapacityGPUHours: 4, AllocatedGPUHours: a100.AllocatedGPUHours + h100.AllocatedGPUHours,
		ActiveGPUHours:   a100.ActiveGPUHours + h100.ActiveGPUHours,
		MemoryEfficiency: ptr((*a100.MemoryEfficiency*4 + *h100.MemoryEfficiency*3) / 7),
		IdleMemoryCost:   a100.IdleMemoryCost + h100.IdleMemoryCost, Revenue: a100.Revenue + h100.Revenue, ListRevenue: a100.ListRevenue + h100.ListRevenue,
		MaxTenantsPerHost: 6, FragmentedSlices: 1, EnergyKWh: a100.EnergyKWh + h100.EnergyKWh,
	}
	total.OverheadRatio = ptr(sumOf(cost, a100T...) * migOverhead / total.Revenue)
	gpuHour := map[string]float64{a100.Group: 0.5 * 1, h100.Group: 1.0 * 3, fleet.Total: 0.5 + 3}
	out := []fleet.Row{a100, h100, total}
	for i := range out {
		r := &out[i]
		r.WindowStart, r.WindowEnd, r.Currency, r.TenantLimit = sc.Start, sc.End(), "USD", 5
		r.AllocationRatio, r.ActiveRatio = ptr(r.AllocatedGPUHours/r.CapacityGPUHours), ptr(r.ActiveGPUHours/r.CapacityGPUHours)
		opCost := gpuHour[r.Group] + r.EnergyKWh*0.20
		r.OperatorCost, r.Margin = ptr(opCost), ptr(r.Revenue-opCost)
		r.BreakEvenAllocationRatio = ptr(opCost / (r.ListRevenue / r.AllocatedGPUHours) / r.CapacityGPUHours)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6+1e-6*math.Abs(b) }

func nearPtr(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || near(*a, *b)) }

// compareRows names every figure of got that differs from want.
func compareRows(got, want []fleet.Row) []string {
	if len(got) != len(want) {
		return []string{"rows: got " + strconv.Itoa(len(got)) + ", want " + strconv.Itoa(len(want))}
	}
	var d []string
	f := func(g, name string, a, b float64) {
		if !near(a, b) {
			d = append(d, g+" "+name+": got "+strconv.FormatFloat(a, 'g', 10, 64)+", want "+strconv.FormatFloat(b, 'g', 10, 64))
		}
	}
	p := func(g, name string, a, b *float64) {
		if !nearPtr(a, b) {
			d = append(d, g+" "+name+": got "+show(a)+", want "+show(b))
		}
	}
	for i, w := range want {
		g := got[i]
		if g.Group != w.Group || !g.WindowStart.Equal(w.WindowStart) || !g.WindowEnd.Equal(w.WindowEnd) || g.Currency != w.Currency {
			d = append(d, "row "+strconv.Itoa(i)+": got "+g.Group+" "+g.WindowStart.String()+" "+g.Currency+", want "+w.Group)
			continue
		}
		f(w.Group, "capacity", g.CapacityGPUHours, w.CapacityGPUHours)
		f(w.Group, "allocated", g.AllocatedGPUHours, w.AllocatedGPUHours)
		f(w.Group, "active", g.ActiveGPUHours, w.ActiveGPUHours)
		p(w.Group, "allocation ratio", g.AllocationRatio, w.AllocationRatio)
		p(w.Group, "active ratio", g.ActiveRatio, w.ActiveRatio)
		p(w.Group, "memory efficiency", g.MemoryEfficiency, w.MemoryEfficiency)
		f(w.Group, "idle memory cost", g.IdleMemoryCost, w.IdleMemoryCost)
		f(w.Group, "revenue", g.Revenue, w.Revenue)
		f(w.Group, "list revenue", g.ListRevenue, w.ListRevenue)
		p(w.Group, "operator cost", g.OperatorCost, w.OperatorCost)
		p(w.Group, "margin", g.Margin, w.Margin)
		p(w.Group, "break-even", g.BreakEvenAllocationRatio, w.BreakEvenAllocationRatio)
		p(w.Group, "overhead ratio", g.OverheadRatio, w.OverheadRatio)
		f(w.Group, "energy", g.EnergyKWh, w.EnergyKWh)
		if g.MaxTenantsPerHost != w.MaxTenantsPerHost || g.FragmentedSlices != w.FragmentedSlices || g.TenantLimit != w.TenantLimit {
			d = append(d, w.Group+": tenants per host, fragmented slices, limit: got "+
				strconv.Itoa(g.MaxTenantsPerHost)+", "+strconv.Itoa(g.FragmentedSlices)+", "+strconv.Itoa(g.TenantLimit)+
				"; want "+strconv.Itoa(w.MaxTenantsPerHost)+", "+strconv.Itoa(w.FragmentedSlices)+", "+strconv.Itoa(w.TenantLimit))
		}
	}
	return d
}

func show(v *float64) string {
	if v == nil {
		return "empty"
	}
	return strconv.FormatFloat(*v, 'g', 10, 64)
}

// TestFleetScenario computes the fleet report of fleet-economics.yaml from what ClickHouse
// stores and checks it against the figures computed by hand, and the invariants: Σ revenue =
// Σ tenants' cost (the tenant report's), capacity = Σ GPU presence × fraction (the tenant
// report's capacity list cost, priced back), and Σ energy over the tenants and unallocated =
// the fleet's energy (by hand, from the simulator's power model).
func TestFleetScenario(t *testing.T) {
	ctx := context.Background()
	sc, book, conn := economicsAttributed(t)
	got, err := fleet.Compute(ctx, conn, book, fleet.Options{From: sc.Start, To: sc.End(), By: fleet.ByModel})
	if err != nil {
		t.Fatal(err)
	}
	if d := compareRows(got, wantRows(sc)); len(d) > 0 {
		t.Errorf("fleet by model differs from the figures by hand:\n  %s", strings.Join(d, "\n  "))
	}

	// The tenant report of the hour: Σ revenue is Σ its cost, and its capacity list cost
	// (Σ tenants' list cost + unallocated) is the capacity priced per model.
	res, err := attribution.Report(ctx, conn, book, attribution.Options{From: sc.Start, To: sc.End(), FromMinutes: true})
	if err != nil {
		t.Fatal(err)
	}
	// Σ tenants' cost exactly: each tenant's cost is the sum of its stored amounts (money at
	// the columns' scale), and so is the fleet's revenue.
	var tenantCost, tenantList decimal.Decimal
	capacityList := res.Report.UnallocatedListCost
	for _, r := range res.Report.Tenants {
		for _, m := range []struct {
			sum *decimal.Decimal
			v   float64
		}{{&tenantCost, r.Cost}, {&tenantList, r.ListCost}} {
			d, err := stored.Money(m.v)
			if err != nil {
				t.Fatal(err)
			}
			*m.sum = m.sum.Add(d)
		}
		capacityList += r.ListCost
	}
	total := got[len(got)-1]
	if total.Revenue != tenantCost.InexactFloat64() || total.ListRevenue != tenantList.InexactFloat64() {
		t.Errorf("Σ revenue %v, Σ tenants' cost %v; list revenue %v, Σ tenants' list cost %v: want them equal",
			total.Revenue, tenantCost, total.ListRevenue, tenantList)
	}
	priced := 0.
	for _, r := range got[:len(got)-1] {
		priced += r.CapacityGPUHours * book.Prices[r.Group]
	}
	if !near(priced, capacityList) {
		t.Errorf("capacity priced per model %.9f, the tenant report's capacity list cost %.9f", priced, capacityList)
	}

	// Every grouping sums to the same fleet.
	for _, by := range []fleet.By{fleet.ByNode, fleet.ByGPU} {
		rows, err := fleet.Compute(ctx, conn, book, fleet.Options{From: sc.Start, To: sc.End(), By: by})
		if err != nil {
			t.Fatal(err)
		}
		if d := compareRows(rows[len(rows)-1:], got[len(got)-1:]); len(d) > 0 {
			t.Errorf("by %s, the __fleet__ row differs from by model's:\n  %s", by, strings.Join(d, "\n  "))
		}
		wantGroups := map[fleet.By]int{fleet.ByNode: 2, fleet.ByGPU: 4}[by]
		if len(rows)-1 != wantGroups {
			t.Errorf("by %s: %d groups, want %d", by, len(rows)-1, wantGroups)
		}
	}

	// Energy: each tenant's share of its GPU's energy in the minutes it holds its instance, as
	// the tenant report gives it; what no tenant is billed for is the rest of the fleet's.
	energy, tenants := map[string]float64{}, 0.
	for _, r := range res.Report.Tenants {
		if r.EnergyKWh != nil {
			energy[r.Tenant] = *r.EnergyKWh * 3.6e6
			tenants += energy[r.Tenant]
		}
	}
	energy[report.Unallocated] = total.EnergyKWh*3.6e6 - tenants
	wantWh := map[string]float64{
		"acme": a100Wh / 7, "delta": a100Wh / 7, "beta": (a100Wmin[0] + a100Wmin[1]) / 60 / 7, "gamma": (a100Wmin[1] + a100Wmin[2]) / 60 * 3 / 7,
		"epsilon": h100Wh[0], "zeta": 700. * 20 / 60,
		// The free slice all hour, beta's instance after 30m, zeta's H100 outside its 20
		// minutes, node-b's H100, and gamma's 3g.20gb before 10m.
		report.Unallocated: a100Wh/7 + a100Wmin[2]/60/7 + 70.*40/60 + h100Wh[2] + a100Wmin[0]/60*3/7,
	}
	sum, wantSum := 0., 0.
	for tenant, wh := range wantWh {
		if got := energy[tenant] / 3600; !near(got, wh) {
			t.Errorf("energy of %s: %.6f Wh, want %.6f", tenant, got, wh)
		}
		sum += energy[tenant]
		wantSum += wh
	}
	if len(energy) != len(wantWh) {
		t.Errorf("energy split over %d tenants, want %d: %v", len(energy), len(wantWh), energy)
	}
	if fleetWh := total.EnergyKWh * 1000; !near(sum/3600, fleetWh) || !near(wantSum, a100Wh+h100Wh[0]+h100Wh[1]+h100Wh[2]) {
		t.Errorf("Σ energy over tenants and unallocated %.6f Wh (by hand %.6f), the fleet's %.6f Wh", sum/3600, wantSum, fleetWh)
	}
}

// TestFleetCSV prints the scenario's fleet report and reads it back: the header the README
// gives, one row per model, then __fleet__, the figures as the rows hold them.
func TestFleetCSV(t *testing.T) {
	sc := economics(t)
	var buf bytes.Buffer
	if err := fleet.WriteCSV(&buf, wantRows(sc)); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	const header = "group,window_start,window_end,capacity_gpu_hours,allocated_gpu_hours,active_gpu_hours,memory_efficiency,idle_memory_cost,revenue,list_revenue,operator_cost,margin,break_even_allocation_ratio,overhead_ratio,max_tenants_per_host,fragmented_slices,energy_kwh,currency"
	if got := strings.Join(recs[0], ","); !strings.HasPrefix(got, header+",") {
		t.Errorf("header %s\nwant it to start with %s", got, header)
	}
	if len(recs) != 4 || recs[1][0] != "A100-SXM4-40GB" || recs[3][0] != fleet.Total {
		t.Fatalf("rows %v", recs)
	}
	want := []string{"H100-SXM5-80GB", "2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z", "3.000000", "1.333333", "0.933333", "0.2500"}
	if got := recs[2][:len(want)]; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("H100 row starts %v, want %v", got, want)
	}
	if recs[2][14] != "6" || recs[1][15] != "1" || recs[2][17] != "USD" {
		t.Errorf("tenants per host, fragmented slices, currency: %v / %v", recs[2], recs[1])
	}
}
