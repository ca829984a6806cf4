package billing

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// Line is one allocation's part of a window's report: everything a tenant's row sums.
type Line struct {
	AllocationID, Tenant, Tier, Node, Instance string
	Kind, Model, Profile                       string  // the instance's kind (gpu, mig, vgpu), GPU model and MIG or vGPU profile
	Fraction                                   float64 // billed fraction of the GPU
	Billed, Metered                            time.Duration
	Active                                     time.Duration // the measured part of Metered (sm_active available)
	ListCost, Cost, WasteCost, OverheadCost    float64
	Overhead                                   float64        // the overhead fraction o (vGPU: time-averaged over Metered)
	Efficiency                                 float64        // mean over the measured time; valid when Active > 0
	ColdStart                                  *time.Duration // nil: no attached sample found
	ColdStartSLA                               time.Duration  // the cold-start limit of its tier
	JitterP99                                  *time.Duration // time-sliced allocations with waits only
	Requested, Started                         time.Time
	TimeSliced                                 bool
	Waits                                      Histogram // vGPU waits (ns) → how many, in the billed time
	// MemUsedNS, MemNS and EnergyJ are Usage's: memory efficiency MemUsedNS / MemNS, energy in J.
	MemUsedNS, MemNS, EnergyJ float64
}

// tenant accumulates the results of one tenant's allocations.
type tenant struct {
	first      Line // by requested_at: its tier is the row's tier
	tiers      map[string]bool
	allocated  time.Duration
	active     time.Duration // measured metered time: what efficiency is a mean over
	unmetered  time.Duration
	listCost   float64
	cost       float64
	wasteCost  float64
	overhead   float64
	efficiency float64 // Σ efficiency × measured seconds
	waits      Histogram
	notSliced  bool // holds a MIG instance or a whole GPU
	coldStart  *time.Duration
	breaches   int
	// memUsedNS / memNS is the memory efficiency; energyJ the energy.
	memUsedNS, memNS, energyJ float64
}

func (t *tenant) add(l Line) {
	if len(t.tiers) == 0 || earlierLine(l, t.first) {
		t.first = l
	}
	t.tiers[l.Tier] = true
	t.allocated += l.Billed
	t.active += l.Active
	t.unmetered += l.Billed - l.Metered
	t.listCost += l.ListCost
	t.cost += l.Cost
	t.wasteCost += l.WasteCost
	t.overhead += l.OverheadCost
	t.efficiency += l.Efficiency * l.Active.Seconds()
	t.waits.add(l.Waits)
	t.memUsedNS, t.memNS, t.energyJ = t.memUsedNS+l.MemUsedNS, t.memNS+l.MemNS, t.energyJ+l.EnergyJ
	t.notSliced = t.notSliced || !l.TimeSliced
	if l.ColdStart != nil {
		if t.coldStart == nil || *l.ColdStart > *t.coldStart {
			t.coldStart = l.ColdStart
		}
		if *l.ColdStart > l.ColdStartSLA {
			t.breaches++
		}
	}
}

// earlier orders allocations by requested_at, then started_at, then id.
func earlier(a, b Allocation) bool {
	return order(a.Requested, b.Requested, a.Started, b.Started, a.ID, b.ID)
}

// earlierLine is earlier for the allocations of lines.
func earlierLine(a, b Line) bool {
	return order(a.Requested.UnixNano(), b.Requested.UnixNano(), a.Started.UnixNano(), b.Started.UnixNano(), a.AllocationID, b.AllocationID)
}

func order(requestedA, requestedB, startedA, startedB int64, idA, idB string) bool {
	if requestedA != requestedB {
		return requestedA < requestedB
	}
	if startedA != startedB {
		return startedA < startedB
	}
	return idA < idB
}

func (t *tenant) row(name string, window Interval, currency string) report.Row {
	row := report.Row{
		Tenant:            name,
		Tier:              t.first.Tier,
		WindowStart:       UTC(window.Start),
		WindowEnd:         UTC(window.End),
		Allocated:         t.allocated,
		ListCost:          t.listCost,
		Cost:              t.cost,
		WasteCost:         t.wasteCost,
		OverheadCost:      t.overhead,
		ColdStartMax:      t.coldStart,
		ColdStartBreaches: t.breaches,
		Unmetered:         t.unmetered,
		Currency:          currency,
		EnergyKWh:         report.KWh(t.energyJ),
	}
	// Memory efficiency: the time-weighted mean; empty when no memory was measured.
	if t.memNS > 0 {
		e := t.memUsedNS / t.memNS
		row.MemoryEfficiency = &e
	}
	// Efficiency: the mean weighted by measured seconds; empty when nothing was measured
	// (no metered time, or only samples whose activity is unavailable).
	if t.active > 0 {
		e := t.efficiency / t.active.Seconds()
		row.Efficiency = &e
	}
	// Jitter: the p99 of all waits of its time-sliced allocations; MIG and whole GPUs are not
	// time-sliced (0); only time-sliced allocations that never waited: not applicable.
	if p, ok := t.waits.P99(); ok {
		row.JitterP99 = &p
	} else if t.notSliced {
		zero := time.Duration(0)
		row.JitterP99 = &zero
	}
	return row
}

// TenantRows sums the allocations' lines per tenant, in the order of the tenants' names. The
// notes say which tenants held allocations at several tiers (their row shows the tier of their
// first allocation).
func TenantRows(lines []Line, window Interval, currency string) (rows []report.Row, notes []string) {
	tenants := map[string]*tenant{}
	for _, l := range lines {
		t := tenants[l.Tenant]
		if t == nil {
			t = &tenant{tiers: map[string]bool{}, waits: Histogram{}}
			tenants[l.Tenant] = t
		}
		t.add(l)
	}
	for _, name := range slices.Sorted(maps.Keys(tenants)) {
		t := tenants[name]
		rows = append(rows, t.row(name, window, currency))
		if len(t.tiers) > 1 {
			notes = append(notes, fmt.Sprintf("tenant %q has allocations at tiers %s: its row shows %q, the tier of its first allocation (%s); each allocation's cost uses its own tier",
				name, strings.Join(slices.Sorted(maps.Keys(t.tiers)), ", "), t.first.Tier, t.first.AllocationID))
		}
	}
	return rows, notes
}

// AllocationRows are the lines as the report's line items of the window, in the lines' order:
// each tenant's rows sum to its TenantRows row (allocated, unmetered and the money exactly,
// being the same sums in the same order).
func AllocationRows(lines []Line, window Interval, currency string) []report.AllocationRow {
	rows := make([]report.AllocationRow, 0, len(lines))
	for _, l := range lines {
		row := report.AllocationRow{
			Tenant: l.Tenant, AllocationID: l.AllocationID, Tier: l.Tier,
			WindowStart: UTC(window.Start), WindowEnd: UTC(window.End),
			Node: l.Node, Instance: l.Instance, Kind: l.Kind, Model: l.Model, Profile: l.Profile, Fraction: l.Fraction,
			Allocated: l.Billed, Measured: l.Active, Unmetered: l.Billed - l.Metered,
			ListCost: l.ListCost, Cost: l.Cost, WasteCost: l.WasteCost, OverheadCost: l.OverheadCost,
			Overhead: l.Overhead, JitterP99: l.JitterP99, ColdStart: l.ColdStart,
			ColdStartBreach: l.ColdStart != nil && *l.ColdStart > l.ColdStartSLA,
			Currency:        currency, Requested: l.Requested, Started: l.Started,
			EnergyJ: l.EnergyJ,
		}
		if l.MemNS > 0 {
			m := l.MemUsedNS / l.MemNS
			row.MemoryEfficiency = &m
		}
		if l.Active > 0 {
			e := l.Efficiency
			row.Efficiency = &e
		}
		// As in the tenant's row: MIG and whole GPUs are not time-sliced (0).
		if row.JitterP99 == nil && !l.TimeSliced {
			zero := time.Duration(0)
			row.JitterP99 = &zero
		}
		rows = append(rows, row)
	}
	return rows
}
