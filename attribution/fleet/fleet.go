// Package fleet is the operator's view of the fleet as a business (`slicemeter fleet`,
// GET /api/v1/fleet, the attribution service's fleet gauges): per GPU model, node or GPU over
// a window of whole minutes, capacity, allocated and active GPU-hours, memory efficiency,
// revenue against the operator's costs, the overhead ratio, the blast radius of a host and
// MIG fragmentation, and energy (attribution/README.md, "Fleet economics").
//
// It reads what is stored, never the raw samples: the per-minute rollup (samples_1m) for the
// instances, their activity, memory and power and the GPUs' presence, and the attribution
// service's stored minutes for what each tenant is billed, each whole hour from its hourly
// roll-up while that is fresh (attribution_hours, fleet_hours: the same figures). Compute
// reads them; Build turns them into rows, so that the figures' definitions are tested without
// ClickHouse.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/fleet/fleetstore"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/hardware"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Total is the group of the row that sums the whole fleet, after the groups'.
const Total = "__fleet__"

// OverheadTarget is the virtualization overhead the seeds allow (the alerts' threshold).
const OverheadTarget = 0.03

// DefaultMaxTenantsPerHost is the seeds' limit on the tenants one host may carry.
const DefaultMaxTenantsPerHost = 5

// By is how the rows group the fleet.
type By string

// The groupings.
const (
	ByModel By = "model"
	ByNode  By = "node"
	ByGPU   By = "gpu"
)

// ParseBy checks a grouping's name.
func ParseBy(s string) (By, error) {
	switch b := By(s); b {
	case ByModel, ByNode, ByGPU:
		return b, nil
	}
	return "", fmt.Errorf("grouping %q: expected model, node or gpu", s)
}

// Row is one group's figures over the window. Ratios and costs that cannot be computed (no
// capacity, no allocation, no costs in the price book) are nil and print empty.
type Row struct {
	Group                    string    `json:"group"`
	WindowStart              time.Time `json:"window_start"`
	WindowEnd                time.Time `json:"window_end"`
	CapacityGPUHours         float64   `json:"capacity_gpu_hours"`
	AllocatedGPUHours        float64   `json:"allocated_gpu_hours"`
	ActiveGPUHours           float64   `json:"active_gpu_hours"`
	AllocationRatio          *float64  `json:"allocation_ratio"`
	ActiveRatio              *float64  `json:"active_ratio"`
	MemoryEfficiency         *float64  `json:"memory_efficiency"`
	IdleMemoryCost           float64   `json:"idle_memory_cost"`
	Revenue                  float64   `json:"revenue"`
	ListRevenue              float64   `json:"list_revenue"`
	OperatorCost             *float64  `json:"operator_cost"`
	Margin                   *float64  `json:"margin"`
	BreakEvenAllocationRatio *float64  `json:"break_even_allocation_ratio"`
	OverheadRatio            *float64  `json:"overhead_ratio"`
	MaxTenantsPerHost        int       `json:"max_tenants_per_host"`
	TenantLimit              int       `json:"tenant_limit"`
	FragmentedSlices         int       `json:"fragmented_slices"`
	EnergyKWh                float64   `json:"energy_kwh"`
	Currency                 string    `json:"currency"`
}

// Inputs are what the store holds for a window: Compute reads them, Build uses them.
type Inputs struct {
	From, To  time.Time
	Instances []fleetstore.FleetInstance
	// Capacity is each GPU's presence in the window (billing.Present).
	Capacity map[billing.GPU][]billing.Interval
	Energy   map[billing.GPU]float64 // J
	Held     []stored.Held
	// TenantsPerHost is, per node, the most tenants billed on it within one minute.
	TenantsPerHost map[string]int
}

// Options say which rows of which window Compute builds.
type Options struct {
	From, To time.Time // whole minutes
	By       By
	// Presence is the presence period (attribution.DefaultPresence if zero): the service's.
	Presence time.Duration
	// TenantLimit is the most tenants a host should carry (DefaultMaxTenantsPerHost if zero).
	TenantLimit int
}

// CheckWindow refuses a window that is not whole minutes, start before end, with both edges in
// 2000-01-01..2106-02-07 (validate.CheckTime): Read converts them to nanoseconds, and
// counts its hours, only after this.
func CheckWindow(from, to time.Time) error {
	for _, e := range []struct {
		name string
		t    time.Time
	}{{"from", from}, {"to", to}} {
		if r := validate.CheckTime(e.name, e.t.UTC().Format(time.RFC3339Nano), e.t); r != nil {
			return fmt.Errorf("fleet window: %w", r)
		}
	}
	if !from.Before(to) || !from.Equal(from.Truncate(time.Minute)) || !to.Equal(to.Truncate(time.Minute)) {
		return fmt.Errorf("fleet window [%s, %s): expected whole minutes, the start before the end",
			from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Horizon is where a fleet report of [from, to) can end: the earlier of to and the last whole
// minute before ready (the moment whose minutes the attribution service has had time to
// attribute: now less its delay). A report stops there instead of failing on minutes that have
// not happened, as the tenant report stops at now; clamped says whether it did. A window that
// starts at or after that minute has nothing to report: an error naming fromName.
func Horizon(fromName string, from, to, ready time.Time) (end time.Time, clamped bool, err error) {
	last := ready.Truncate(time.Minute)
	if !last.Before(to) {
		return to, false, nil
	}
	if !last.After(from) {
		return to, false, fmt.Errorf("%s %s: the window starts after %s, the last minute that can be attributed by now: expected a window that has begun",
			fromName, from.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339))
	}
	return last, true, nil
}

// CountHours is how many UTC hours [from, to) touches, counted from its edges: what a fleet
// report of it reads is one roll-up per whole hour and the minutes of the hours at its edges,
// so a caller bounds its cost by this before reading anything.
func CountHours(from, to time.Time) int {
	if !from.Before(to) {
		return 0
	}
	const hour = int64(time.Hour / time.Second)
	first := from.Unix() / hour
	if from.Unix() < 0 && from.Unix()%hour != 0 {
		first--
	}
	last := to.Unix() / hour // the hour of to's last instant, to excluded
	if to.Unix() < 0 && to.Unix()%hour != 0 {
		last--
	}
	if to.Unix()%hour == 0 && to.Nanosecond() == 0 {
		last--
	}
	return int(last - first + 1)
}

// Read reads the inputs of a window of whole minutes. It refuses a window whose minutes are
// not all attributed (a *stored.NotAttributedError, stored.ErrNotAttributed): its capacity comes
// from the rollup, but what is billed there from the stored minutes, so revenue and margin
// would be short without a sign of it.
func Read(ctx context.Context, conn store.Querier, from, to time.Time, presence time.Duration) (*Inputs, error) {
	if err := CheckWindow(from, to); err != nil {
		return nil, err
	}
	if presence == 0 {
		presence = time.Hour
	}
	in := &Inputs{From: from.UTC(), To: to.UTC()}
	window := billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}
	// The reads are independent, and each (FINAL) runs on one thread of the server: at once,
	// they take about as long as the longest. What is billed and the tenants per host check
	// which hours of attribution_hours are fresh once, for both.
	err := parallel(
		func() error {
			p, err := fleetstore.FleetPresence(ctx, conn, window, presence)
			if err == nil {
				in.Capacity, err = p.Capacity(window)
			}
			return err
		},
		func() (err error) { in.Instances, err = fleetstore.FleetInstances(ctx, conn, from, to); return err },
		func() error {
			hours, err := stored.ReadStoredHours(ctx, conn, from, to)
			if err != nil {
				return fmt.Errorf("read which hours of the stored minutes of the fleet window are rolled up: %w", err)
			}
			return parallel(
				func() error { return hours.CheckAttributed(ctx, conn) },
				func() (err error) { in.Held, err = hours.Held(ctx, conn); return err },
				func() (err error) { in.TenantsPerHost, err = hours.TenantsPerHost(ctx, conn); return err },
			)
		},
	)
	if err != nil {
		return nil, err
	}
	in.Energy = Energy(in.Instances)
	return in, nil
}

// parallel runs the reads at once and joins their errors.
func parallel(reads ...func() error) error {
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = read()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Energy is each GPU's energy (J): the energy of the ticks of its instance sampled longest
// (every instance of a GPU carries the GPU's energy counter's increase, and they are sampled
// together).
func Energy(instances []fleetstore.FleetInstance) map[billing.GPU]float64 {
	longest := map[billing.GPU]fleetstore.FleetInstance{}
	for _, x := range instances {
		if l, ok := longest[x.GPU]; !ok || x.Covered > l.Covered || x.Covered == l.Covered && x.Instance < l.Instance {
			longest[x.GPU] = x
		}
	}
	out := make(map[billing.GPU]float64, len(longest))
	for g, x := range longest {
		out[g] = x.EnergyJ
	}
	return out
}

// Compute reads a window's inputs and builds its rows.
func Compute(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, opts Options) ([]Row, error) {
	in, err := Read(ctx, conn, opts.From, opts.To, opts.Presence)
	if err != nil {
		return nil, err
	}
	return Build(in, book, opts.By, opts.TenantLimit), nil
}

// sums accumulate one group. Money is summed as Decimal at the money columns' scale
// (stored.Money), as the tenant report sums it: Σ revenue is Σ tenants' cost exactly.
type sums struct {
	capacityNS, allocatedNS, activeNS   float64 // GPU-ns
	coveredNS, memUsedNS                float64
	idleMemory, revenue, list, overhead decimal.Decimal
	gpuHourCost                         decimal.Decimal
	energyJ                             float64
	maxTenants, fragmented              int
}

// money is an amount at the money columns' scale; NaN and ±Inf (no price or cost can give
// them: the price book refuses them) count 0.
func money(f float64) decimal.Decimal {
	d, err := stored.Money(f)
	if err != nil {
		return decimal.Decimal{}
	}
	return d
}

// instanceKey is an instance of a node.
type instanceKey = billing.Target

// Build computes the rows of the inputs, one per group in name order, then the Total row.
func Build(in *Inputs, book *pricebook.PriceBook, by By, limit int) []Row {
	if limit == 0 {
		limit = DefaultMaxTenantsPerHost
	}
	groupOf := func(g billing.GPU) string {
		switch by {
		case ByNode:
			return g.Node
		case ByGPU:
			return g.Node + "/" + g.UUID
		default:
			return g.Model
		}
	}
	groups := map[string]*sums{}
	get := func(g billing.GPU) []*sums {
		name := groupOf(g)
		if groups[name] == nil {
			groups[name] = &sums{}
		}
		if groups[Total] == nil {
			groups[Total] = &sums{}
		}
		return []*sums{groups[name], groups[Total]}
	}
	var costs pricebook.Costs
	if book.Costs != nil {
		costs = *book.Costs
	}
	for g, ivs := range in.Capacity {
		var ns int64
		for _, iv := range ivs {
			ns += iv.End - iv.Start
		}
		for _, s := range get(g) {
			s.capacityNS += float64(ns)
			s.gpuHourCost = s.gpuHourCost.Add(money(costs.GPUHour[g.Model] * float64(ns) / float64(time.Hour)))
		}
	}
	for g, j := range in.Energy {
		for _, s := range get(g) {
			s.energyJ += j
		}
	}
	instances := map[instanceKey]fleetstore.FleetInstance{}
	for _, x := range in.Instances {
		instances[x.Target] = x
		for _, s := range get(x.GPU) {
			s.activeNS += x.ActiveNS * smShare(x.Facts)
			s.coveredNS += float64(x.Covered)
			s.memUsedNS += x.MemUsedNS
		}
	}
	// What each instance is billed, and which MIG slices are held, per GPU.
	held := map[billing.GPU]uint32{}
	largest := map[string]uint32{} // model → most slices of a MIG profile held
	tenantsOn := map[billing.GPU]bool{}
	for _, h := range in.Held {
		x, ok := instances[h.Target]
		if !ok {
			// Billed but without a rollup row in the window (an exporter down all along):
			// its GPU is unknown; it counts in the node's group and the fleet's.
			x.GPU = billing.GPU{Node: h.Node, UUID: "unknown", Model: "unknown"}
		}
		frac, err := pricebook.BilledFraction(x.Facts)
		if err != nil {
			frac = 0
		}
		memEff := 0.
		if x.Attached > 0 {
			memEff = x.MemHeld / float64(x.Attached)
		}
		idle := h.Cost.Sub(h.Cost.Mul(decimal.NewFromFloat(min(1, memEff)))).Round(stored.MoneyScale)
		for _, s := range get(x.GPU) {
			s.allocatedNS += frac * float64(h.Billed)
			s.revenue = s.revenue.Add(h.Cost)
			s.list = s.list.Add(h.ListCost)
			s.overhead = s.overhead.Add(h.OverheadCost)
			s.idleMemory = s.idleMemory.Add(idle)
		}
		tenantsOn[x.GPU] = true
		if x.Facts.Kind == "mig" && h.Billed > 0 {
			held[x.GPU] += x.Facts.ComputeSlices
			largest[x.GPU.Model] = max(largest[x.GPU.Model], x.Facts.ComputeSlices)
		}
	}
	// Blast radius: a group's hosts' most tenants.
	counted := map[string]map[string]bool{} // group → nodes counted
	note := func(g billing.GPU) {
		for _, name := range []string{groupOf(g), Total} {
			if counted[name] == nil {
				counted[name] = map[string]bool{}
			}
			if !counted[name][g.Node] {
				counted[name][g.Node] = true
				s := groups[name]
				s.maxTenants = max(s.maxTenants, in.TenantsPerHost[g.Node])
			}
		}
	}
	for g := range in.Capacity {
		note(g)
	}
	for g := range tenantsOn {
		note(g)
	}
	// Fragmentation: a MIG GPU's free slices that no instance of the largest profile held on
	// its model could use.
	seen := map[billing.GPU]bool{}
	for _, x := range in.Instances {
		if x.Facts.Kind != "mig" || seen[x.GPU] {
			continue
		}
		seen[x.GPU] = true
		free := hardware.MaxComputeSlices - min(hardware.MaxComputeSlices, held[x.GPU])
		if l := largest[x.GPU.Model]; l > 0 {
			for _, s := range get(x.GPU) {
				s.fragmented += int(free % l)
			}
		}
	}
	names := make([]string, 0, len(groups))
	for name := range groups {
		if name != Total {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if groups[Total] == nil {
		groups[Total] = &sums{}
	}
	names = append(names, Total)
	rows := make([]Row, 0, len(names))
	for _, name := range names {
		rows = append(rows, groups[name].row(name, in, book, limit))
	}
	return rows
}

// smShare is how much of its GPU an instance's SMs are: a MIG instance's activity counts in
// whole-GPU units by its SMs; a whole GPU's and a vGPU's already are.
func smShare(in pricebook.Instance) float64 {
	if in.Kind == "mig" && in.GPUSMCount > 0 {
		return float64(in.SMCount) / float64(in.GPUSMCount)
	}
	return 1
}

func ratio(a, b float64) *float64 {
	if b <= 0 {
		return nil
	}
	r := a / b
	return &r
}

func (s *sums) row(name string, in *Inputs, book *pricebook.PriceBook, limit int) Row {
	hour := float64(time.Hour)
	revenue, list := s.revenue.InexactFloat64(), s.list.InexactFloat64()
	r := Row{
		Group: name, WindowStart: in.From, WindowEnd: in.To,
		CapacityGPUHours: s.capacityNS / hour, AllocatedGPUHours: s.allocatedNS / hour, ActiveGPUHours: s.activeNS / hour,
		MemoryEfficiency: ratio(s.memUsedNS, s.coveredNS), IdleMemoryCost: s.idleMemory.InexactFloat64(),
		Revenue: revenue, ListRevenue: list, OverheadRatio: ratio(s.overhead.InexactFloat64(), revenue),
		MaxTenantsPerHost: s.maxTenants, TenantLimit: limit, FragmentedSlices: s.fragmented,
		EnergyKWh: s.energyJ / 3.6e6, Currency: book.Currency,
	}
	r.AllocationRatio = ratio(s.allocatedNS, s.capacityNS)
	r.ActiveRatio = ratio(s.activeNS, s.capacityNS)
	if book.Costs != nil {
		operator := s.gpuHourCost.Add(money(r.EnergyKWh * book.Costs.EnergyKWh))
		cost, margin := operator.InexactFloat64(), s.revenue.Sub(operator).InexactFloat64()
		r.OperatorCost, r.Margin = &cost, &margin
		// The allocation ratio at which the list revenue of an allocated GPU-hour pays the
		// operator's cost of the capacity.
		if s.allocatedNS > 0 && list > 0 && s.capacityNS > 0 {
			perHour := list / r.AllocatedGPUHours
			r.BreakEvenAllocationRatio = ratio(cost/perHour, r.CapacityGPUHours)
		}
	}
	return r
}
