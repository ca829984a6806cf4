package attribution

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// result is everything the report needs about one allocation.
type result struct {
	alloc      allocation
	line       line
	timeSliced bool
	waits      histogram      // its vGPU waits in the billed time; empty if none
	coldStart  *time.Duration // nil: no attached sample found
	sla        time.Duration  // the cold-start limit of its tier
}

// tenant accumulates the results of one tenant's allocations.
type tenant struct {
	first      allocation // by requested_at: its tier is the row's tier
	tiers      map[string]bool
	allocated  time.Duration
	active     time.Duration // measured metered time: what efficiency is a mean over
	unmetered  time.Duration
	listCost   float64
	cost       float64
	wasteCost  float64
	overhead   float64
	efficiency float64 // Σ efficiency × measured seconds
	waits      histogram
	notSliced  bool // holds a MIG instance or a whole GPU
	coldStart  *time.Duration
	breaches   int
}

func (t *tenant) add(r result) {
	if len(t.tiers) == 0 || earlier(r.alloc, t.first) {
		t.first = r.alloc
	}
	t.tiers[r.alloc.tier] = true
	l := r.line
	t.allocated += l.billed
	t.active += l.active
	t.unmetered += l.billed - l.metered
	t.listCost += l.listCost
	t.cost += l.cost
	t.wasteCost += l.wasteCost
	t.overhead += l.overheadCost
	t.efficiency += l.efficiency * l.active.Seconds()
	t.waits.add(r.waits)
	t.notSliced = t.notSliced || !r.timeSliced
	if r.coldStart != nil {
		if t.coldStart == nil || *r.coldStart > *t.coldStart {
			t.coldStart = r.coldStart
		}
		if *r.coldStart > r.sla {
			t.breaches++
		}
	}
}

// earlier orders allocations by requested_at, then started_at, then id.
func earlier(a, b allocation) bool {
	if a.requested != b.requested {
		return a.requested < b.requested
	}
	if a.started != b.started {
		return a.started < b.started
	}
	return a.id < b.id
}

func (t *tenant) row(name string, window interval, currency string) report.Row {
	row := report.Row{
		Tenant:            name,
		Tier:              t.first.tier,
		WindowStart:       time.Unix(0, window.start).UTC(),
		WindowEnd:         time.Unix(0, window.end).UTC(),
		Allocated:         t.allocated,
		ListCost:          t.listCost,
		Cost:              t.cost,
		WasteCost:         t.wasteCost,
		OverheadCost:      t.overhead,
		ColdStartMax:      t.coldStart,
		ColdStartBreaches: t.breaches,
		Unmetered:         t.unmetered,
		Currency:          currency,
	}
	// Efficiency: the mean weighted by measured seconds; empty when nothing was measured
	// (no metered time, or only samples whose activity is unavailable).
	if t.active > 0 {
		e := t.efficiency / t.active.Seconds()
		row.Efficiency = &e
	}
	// Jitter: the p99 of all waits of its time-sliced allocations; MIG and whole GPUs are not
	// time-sliced (0); only time-sliced allocations that never waited: not applicable.
	if p, ok := t.waits.p99(); ok {
		row.JitterP99 = &p
	} else if t.notSliced {
		zero := time.Duration(0)
		row.JitterP99 = &zero
	}
	return row
}

// tenantRows sums the allocations' results per tenant. The notes say which tenants held
// allocations at several tiers (their row shows the tier of their first allocation).
func tenantRows(results []result, window interval, currency string) (rows []report.Row, notes []string) {
	tenants := map[string]*tenant{}
	for _, r := range results {
		t := tenants[r.alloc.tenant]
		if t == nil {
			t = &tenant{tiers: map[string]bool{}, waits: histogram{}}
			tenants[r.alloc.tenant] = t
		}
		t.add(r)
	}
	for _, name := range slices.Sorted(maps.Keys(tenants)) {
		t := tenants[name]
		rows = append(rows, t.row(name, window, currency))
		if len(t.tiers) > 1 {
			notes = append(notes, fmt.Sprintf("tenant %q has allocations at tiers %s: its row shows %q, the tier of its first allocation (%s); each allocation's cost uses its own tier",
				name, strings.Join(slices.Sorted(maps.Keys(t.tiers)), ", "), t.first.tier, t.first.id))
		}
	}
	return rows, notes
}
