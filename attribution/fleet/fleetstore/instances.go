package fleetstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

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
	// EnergyJ is Σ its GPU's energy over the ticks of its samples (J: the energy counter's
	// increase, power × interval where the counter is missing; samples.energy_j): every
	// instance of a GPU carries the GPU's energy.
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
	{"sum(energy_j_sum)", "energy_j"},
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
func FleetInstances(ctx context.Context, conn chquery.Querier, from, to time.Time) ([]FleetInstance, error) {
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
