package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// FleetModels returns the GPU models sampled since the time, sorted.
func FleetModels(ctx context.Context, conn Querier, since time.Time) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT DISTINCT model FROM samples WHERE time >= toDateTime(?) ORDER BY model`, since.Unix())
	if err != nil {
		return nil, fmt.Errorf("read the GPU models sampled since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, fmt.Errorf("read the GPU models sampled: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// fleetTiersQuery: the tiers of the allocations (current versions, not deleted) billed at or
// after its argument (ns).
var fleetTiersQuery = `
SELECT DISTINCT cur_tier
FROM (` + tables.LatestAllocations("") + `)
WHERE cur_deleted = 0 AND cur_started_ns > 0 AND (cur_ended_ns = 0 OR cur_ended_ns > ?)
ORDER BY cur_tier`

// FleetTiers returns the tiers of the allocations billed since the time, sorted.
func FleetTiers(ctx context.Context, conn Querier, since time.Time) ([]string, error) {
	var out []string
	err := chquery.Each(ctx, conn, fleetTiersQuery, []any{since.UnixNano()}, func(scan func(...any) error) error {
		var tier string
		err := scan(&tier)
		out = append(out, tier)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the tiers of the allocations billed since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	return out, nil
}

// FleetInstance is what the per-minute rollup says about one instance over a window of whole
// minutes: its facts (the latest row's) and the sums the fleet report needs.
type FleetInstance struct {
	billing.Target
	GPU      billing.GPU
	Facts    pricebook.Instance
	Covered  time.Duration // the union of its samples' intervals
	ActiveNS float64       // Σ sm_active × covered (ns): its own SMs' activity
	// MemUsedNS is Σ mean memory used / memory of the instance × covered (ns): the
	// time-weighted memory efficiency is MemUsedNS / Covered.
	MemUsedNS float64
	// MemHeld is Σ over its samples of memory used / memory of the instance, Attached the
	// number of its samples with a tenant on it: memory is used only while a tenant's process
	// is, so MemHeld / Attached is the memory efficiency of the time it was held.
	MemHeld  float64
	Attached uint64
	// EnergyJ is Σ its GPU's mean power × the time its samples cover (J): every instance of a
	// GPU reports the GPU's power.
	EnergyJ float64
}

// fleetFactsQuery reads, per instance with a rollup row in [from, to) (seconds, twice), its
// latest facts and the time of its latest row. Without FINAL: every version of a row carries
// the same facts.
var fleetFactsQuery = `
SELECT node, instance_id, argMax(gpu_uuid, time), argMax(model, time), argMax(kind, time), argMax(profile, time),
    argMax(compute_slices, time), argMax(sm_count, time), argMax(gpu_sm_count, time), argMax(mem_total_bytes, time),
    argMax(gpu_mem_total_bytes, time), argMax(share_replicas, time), max(time)
FROM ` + tables.Samples1m + `
PREWHERE time >= toDateTime(?) AND time < toDateTime(?)
GROUP BY node, instance_id`

// fleetSumList are the sums the fleet takes of an instance's rollup rows: the covered time,
// the activity, the memory and the energy, each with the name of its fleet_hours column.
// Memory per row is its samples' mean over the instance's memory.
var fleetSumList = [][2]string{
	{"sum(covered_ns)", "covered_ns"},
	{"sum(sm_active_ns)", "sm_active_ns"},
	{"sum(if(samples > 0 AND mem_total_bytes > 0, mem_used_bytes_sum / samples / mem_total_bytes, 0.) * covered_ns)", "mem_used_ns"},
	{"sum(if(mem_total_bytes > 0, mem_used_bytes_sum / mem_total_bytes, 0.))", "mem_held"},
	{"sum(attached_sum)", "attached"},
	{"sum(if(samples > 0, power_watts_sum / samples, 0.) * covered_ns / 1e9)", "energy_j"},
}

// fleetSums and fleetSumsAs are fleetSumList's sums, bare and named r_ and the column's name
// (an alias named as a column it reads would be cyclic).
var fleetSums, fleetSumsAs = func() (string, []string) {
	var sums, named []string
	for _, s := range fleetSumList {
		sums, named = append(sums, s[0]), append(named, s[0]+" AS r_"+s[1])
	}
	return strings.Join(sums, ", "), named
}()

// fleetSumsQuery sums fleetSums per instance over its rows' fullest versions (tables.Final)
// in [from, to).
var fleetSumsQuery = `
SELECT node, instance_id, ` + fleetSums + `
FROM ` + tables.Final(tables.Samples1m) + `
PREWHERE time >= toDateTime(?) AND time < toDateTime(?)
GROUP BY node, instance_id`

// FleetInstances reads every instance with a per-minute rollup row in [from, to), sorted by
// node and instance: fresh whole hours from their roll-ups (fleet_hours), the other minutes
// from samples_1m, each instance's facts those of its latest row.
func FleetInstances(ctx context.Context, conn Querier, from, to time.Time) ([]FleetInstance, error) {
	byTarget := map[billing.Target]*FleetInstance{}
	latest := map[billing.Target]time.Time{}
	// facts notes an instance's facts as of its latest row at last.
	facts := func(x *FleetInstance, last time.Time) *FleetInstance {
		s := byTarget[x.Target]
		if s == nil {
			s = &FleetInstance{Target: x.Target}
			byTarget[x.Target] = s
		}
		if l, ok := latest[x.Target]; !ok || last.After(l) {
			s.GPU, s.Facts, latest[x.Target] = billing.GPU{UUID: x.GPU.UUID, Node: x.Node, Model: x.Facts.Model}, x.Facts, last
		}
		return s
	}
	add := func(to *FleetInstance, covered uint64, s FleetInstance) {
		to.Covered += time.Duration(covered)
		to.ActiveNS += s.ActiveNS
		to.MemUsedNS += s.MemUsedNS
		to.MemHeld += s.MemHeld
		to.Attached += s.Attached
		to.EnergyJ += s.EnergyJ
	}
	scanFacts := func(scan func(...any) error, x *FleetInstance, last *time.Time) error {
		return scan(&x.Node, &x.Instance, &x.GPU.UUID, &x.Facts.Model, &x.Facts.Kind, &x.Facts.Profile, &x.Facts.ComputeSlices,
			&x.Facts.SMCount, &x.Facts.GPUSMCount, &x.Facts.MemTotalBytes, &x.Facts.GPUMemTotalBytes, &x.Facts.ShareReplicas, last)
	}
	parts, err := fleetSpans(ctx, conn, from, to)
	for _, sp := range parts {
		if err != nil {
			break
		}
		args := []any{sp.from.Unix(), sp.to.Unix()}
		// The instances of the span (with a row of any version), then their sums.
		factsQuery, sumsQuery := fleetFactsQuery, fleetSumsQuery
		if sp.hours {
			factsQuery, sumsQuery, args = fleetHourFactsQuery, fleetHourSumsQuery, sp.args()
		}
		in := map[billing.Target]*FleetInstance{}
		err = chquery.Each(ctx, conn, factsQuery, args, func(scan func(...any) error) error {
			var (
				x    FleetInstance
				last time.Time
			)
			err := scanFacts(scan, &x, &last)
			in[x.Target] = facts(&x, last)
			return err
		})
		if err == nil {
			err = chquery.Each(ctx, conn, sumsQuery, args, func(scan func(...any) error) error {
				var (
					t       billing.Target
					covered uint64
					s       FleetInstance
				)
				if err := scan(&t.Node, &t.Instance, &covered, &s.ActiveNS, &s.MemUsedNS, &s.MemHeld, &s.Attached, &s.EnergyJ); err != nil {
					return err
				}
				if x := in[t]; x != nil {
					add(x, covered, s)
				}
				return nil
			})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read the instances of the fleet in [%s, %s) from %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), tables.Samples1m, err)
	}
	out := make([]FleetInstance, 0, len(byTarget))
	for _, x := range byTarget {
		out = append(out, *x)
	}
	slices.SortFunc(out, func(a, b FleetInstance) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Instance, b.Instance))
	})
	return out, nil
}

// Held is what the stored minutes of a window bill one tenant on one instance: money as the
// exact Decimal sums of the stored amounts, so that sums of them over the fleet are the tenant
// report's to the money columns' scale.
type Held struct {
	billing.Target
	Tenant                       string
	Billed                       time.Duration
	ListCost, Cost, OverheadCost decimal.Decimal
}

// heldQuery sums the latest pass of each minute of [from, to) per instance and tenant (its
// arguments: from, to, from, to). FINAL collapses a row stored twice (a batch sent again) as it
// reads, in key order, where a GROUP BY per minute and allocation would hash every row of the
// window; its condition (the minute's latest pass) is the same for every copy of a row.
var heldQuery = `
SELECT node, instance_id, tenant, sum(billed_ns), sum(list_cost), sum(cost), sum(overhead_cost)
FROM ` + tables.Final(tables.AttributionMinutes) + `
WHERE ` + tables.LatestPass(tables.MinuteWindow) + ` AND tenant != '` + report.Unallocated + `'
GROUP BY node, instance_id, tenant
ORDER BY node, instance_id, tenant`

// heldHoursQuery is heldQuery over the latest roll-ups of whole hours (arguments from, to,
// from, to). FINAL keeps one row of a roll-up written twice, as it reads in key order
// (hour, tenant, allocation_id: a stored minute's allocation has one target), where LIMIT 1
// BY hashed every row of the window (3 times slower for a month of 1000 instances). Whether
// the condition applies before or after FINAL's merge, the same rows are kept: a key's
// fullest row (highest source_ns) is that of its hour's latest roll-up if it has one there.
var heldHoursQuery = `
SELECT node, instance_id, tenant, sum(billed_ns), sum(list_cost), sum(cost), sum(overhead_cost)
FROM ` + tables.Final(tables.AttributionHours) + `
WHERE ` + hourWindow + ` AND tenant != '` + report.Unallocated + `' AND (hour, source_ns) IN (
    SELECT hour, max(source_ns) FROM ` + tables.AttributionHours + ` WHERE ` + hourWindow + ` GROUP BY hour)
GROUP BY node, instance_id, tenant`

// StoredHours is how the readers of one window's stored minutes read them: its whole hours
// fresh in attribution_hours from their roll-ups, the other minutes from attribution_minutes.
// Which hours are fresh is read once for every reader of the window (the check reads the
// window's stored minutes' computed_ns, a large part of a fresh month's reads).
type StoredHours struct {
	from, to time.Time
	spans    []span
}

// ReadStoredHours reads which whole hours of [from, to) (whole minutes) are fresh.
func ReadStoredHours(ctx context.Context, conn Querier, from, to time.Time) (*StoredHours, error) {
	sp, err := spans(ctx, conn, from, to)
	if err != nil {
		return nil, err
	}
	return &StoredHours{from: from, to: to, spans: sp}, nil
}

// HeldInstances sums the stored minutes of [from, to) per instance and tenant (StoredHours.Held).
func HeldInstances(ctx context.Context, conn Querier, from, to time.Time) ([]Held, error) {
	h, err := ReadStoredHours(ctx, conn, from, to)
	if err != nil {
		return nil, fmt.Errorf("sum the stored minutes of [%s, %s) per instance and tenant: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return h.Held(ctx, conn)
}

// Held sums the stored minutes of the window per instance and tenant: fresh whole hours from
// their roll-ups, the other minutes from attribution_minutes, money summed as Decimal across
// the parts.
func (h *StoredHours) Held(ctx context.Context, conn Querier) ([]Held, error) {
	type key struct{ node, instance, tenant string }
	type sums struct {
		billed            int64
		lc, c, overheadCs decimal.Decimal
	}
	by := map[key]*sums{}
	var err error
	for _, sp := range h.spans {
		query := heldQuery
		if sp.hours {
			query = heldHoursQuery
		}
		err = chquery.Each(ctx, conn, query, sp.args(), func(scan func(...any) error) error {
			var (
				k key
				x sums
			)
			if err := scan(&k.node, &k.instance, &k.tenant, &x.billed, &x.lc, &x.c, &x.overheadCs); err != nil {
				return err
			}
			s := by[k]
			if s == nil {
				s = &sums{}
				by[k] = s
			}
			s.billed += x.billed
			s.lc, s.c, s.overheadCs = s.lc.Add(x.lc), s.c.Add(x.c), s.overheadCs.Add(x.overheadCs)
			return nil
		})
		if err != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sum the stored minutes of [%s, %s) per instance and tenant: %w", h.from.Format(time.RFC3339), h.to.Format(time.RFC3339), err)
	}
	out := make([]Held, 0, len(by))
	for k, s := range by {
		out = append(out, Held{Target: billing.Target{Node: k.node, Instance: k.instance}, Tenant: k.tenant, Billed: time.Duration(s.billed),
			ListCost: s.lc, Cost: s.c, OverheadCost: s.overheadCs})
	}
	sortHeld(out)
	return out, nil
}

// tenantsPerHostQuery is, per node, the most tenants billed on it in one minute of [from, to)
// (arguments from, to, from, to).
var tenantsPerHostQuery = `
SELECT node, max(n)
FROM (
    SELECT node, minute, uniqExact(tenant) AS n
    FROM ` + tables.AttributionMinutes + `
    WHERE ` + tables.LatestPass(tables.MinuteWindow) + ` AND tenant != '` + report.Unallocated + `' AND billed_ns > 0
    GROUP BY node, minute
)
GROUP BY node`

// TenantsPerHost is, per node, the most tenants the stored minutes of [from, to) bill on it
// within one minute (StoredHours.TenantsPerHost).
func TenantsPerHost(ctx context.Context, conn Querier, from, to time.Time) (map[string]int, error) {
	h, err := ReadStoredHours(ctx, conn, from, to)
	if err != nil {
		return nil, fmt.Errorf("count the tenants per host in the stored minutes of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return h.TenantsPerHost(ctx, conn)
}

// TenantsPerHost is, per node, the most tenants the window's stored minutes bill on it within
// one minute: how many tenants one host failure would take down. Fresh whole hours come from
// their roll-ups' maxima.
func (h *StoredHours) TenantsPerHost(ctx context.Context, conn Querier) (map[string]int, error) {
	out := map[string]int{}
	var err error
	for _, sp := range h.spans {
		query := tenantsPerHostQuery
		if sp.hours {
			query = hostsHoursQuery
		}
		err = chquery.Each(ctx, conn, query, sp.args(), func(scan func(...any) error) error {
			var (
				node string
				n    uint64
			)
			err := scan(&node, &n)
			out[node] = max(out[node], int(n))
			return err
		})
		if err != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("count the tenants per host in the stored minutes of [%s, %s): %w", h.from.Format(time.RFC3339), h.to.Format(time.RFC3339), err)
	}
	return out, nil
}
