package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// The hourly roll-up of what the fleet reads of samples_1m (fleet_hours, fleet_hour_tenants):
// the attribution service rolls up every whole hour a pass completes, and every recent hour
// whose sources have changed since (RollupFleetHours); FleetInstances and TenantEnergy read
// each whole hour whose latest roll-up still matches its sources (freshFleetHours) from it,
// and every other minute from samples_1m as before. A roll-up holds the sums the readers
// would take of the minutes, so the figures are the same whichever is read (to the rounding
// of Float64 sums taken in another order).
//
// Fresh means: the hour's samples_1m rows (every version, unmerged ones included) are as many
// as when it was rolled up and their hashes sum to the same, and, for the energy split, its
// stored minutes have the same latest pass and number (hourSources). Rows are only ever
// added to samples_1m (a late sample's recomputed row, the same row written again by a
// flush) or merged away, so a changed hour changes its count or its hash sum; reading the
// count and hash of a month's rows costs a fraction of the FINAL read of their sums. A merge
// also changes them without changing what FINAL reads: the hour then reads as stale (its
// minutes are read, the same figures, slower) until the service rolls it up again.

// recheckHours is how far back a roll-up looks for hours whose sources changed since they
// were rolled up: a day's partition of samples_1m keeps merging its rows' versions for hours
// after its last write, and late samples land within a day.
const recheckHours = 48

// sampleRowHash is the hash of one samples_1m row over its key and every column the fleet
// reads of it: rows that differ in any of these hash apart.
const sampleRowHash = `cityHash64(node, instance_id, time, samples, covered_ns, sm_active_ns, mem_used_bytes_sum,
        mem_total_bytes, power_watts_sum, attached_sum, gpu_uuid, model, kind, profile, compute_slices, sm_count,
        gpu_sm_count, gpu_mem_total_bytes, share_replicas)`

// sampleSourcesQuery is, per UTC hour of samples_1m in [from, to) (seconds), the number of
// its rows and the sum of their hashes (UInt64, wrapping).
var sampleSourcesQuery = `
SELECT ` + hourOf("time") + ` AS h, count(), sum(` + sampleRowHash + `)
FROM ` + tables.Samples1m + `
PREWHERE time >= toDateTime(?) AND time < toDateTime(?)
GROUP BY h`

// fleetRolledQuery is, per hour of [from, to) rolled up, its latest roll-up and what that
// was made from.
var fleetRolledQuery = `
SELECT hour, max(rolled_ns), argMax(sample_rows, rolled_ns), argMax(sample_hash, rolled_ns),
    argMax(source_ns, rolled_ns), argMax(source_minutes, rolled_ns)
FROM ` + tables.FleetHours + `
WHERE ` + hourWindow + `
GROUP BY hour`

// fleetSource is what an hour's fleet roll-up is made from.
type fleetSource struct {
	rows, hash uint64     // of its samples_1m rows
	minutes    hourSource // of its stored minutes (attribution_minutes)
}

// sampleSources is, per hour (Unix seconds) of [from, to) with samples_1m rows, their count
// and hash sum.
func sampleSources(ctx context.Context, conn Querier, from, to time.Time) (map[int64]fleetSource, error) {
	out := map[int64]fleetSource{}
	err := queryEach(ctx, conn, sampleSourcesQuery, []any{from.Unix(), to.Unix()}, func(scan func(...any) error) error {
		var (
			h time.Time
			s fleetSource
		)
		err := scan(&h, &s.rows, &s.hash)
		out[h.Unix()] = s
		return err
	})
	return out, err
}

// fleetSources is sampleSources with, if minutes, the sources of the hours' stored minutes.
func fleetSources(ctx context.Context, conn Querier, from, to time.Time, minutes bool) (map[int64]fleetSource, error) {
	out, err := sampleSources(ctx, conn, from, to)
	if err != nil || !minutes {
		return out, err
	}
	stored, err := hourSources(ctx, conn, hourSourcesQuery, from, to)
	if err != nil {
		return nil, err
	}
	for h, s := range stored {
		x := out[h]
		x.minutes = s
		out[h] = x
	}
	return out, nil
}

// fleetRolled is, per hour of [from, to) rolled up, its latest roll-up's rolled_ns and sources.
func fleetRolled(ctx context.Context, conn Querier, from, to time.Time) (map[int64]uint64, map[int64]fleetSource, error) {
	ids, out := map[int64]uint64{}, map[int64]fleetSource{}
	err := queryEach(ctx, conn, fleetRolledQuery, []any{from.Unix(), to.Unix()}, func(scan func(...any) error) error {
		var (
			h  time.Time
			id uint64
			s  fleetSource
		)
		err := scan(&h, &id, &s.rows, &s.hash, &s.minutes.computed, &s.minutes.minutes)
		ids[h.Unix()], out[h.Unix()] = id, s
		return err
	})
	return ids, out, err
}

// freshFleetHours is the set (Unix seconds) of the whole hours of [from, to) whose latest
// fleet roll-up was made from the samples_1m rows stored now and, if minutes, from the stored
// minutes stored now.
func freshFleetHours(ctx context.Context, conn Querier, from, to time.Time, minutes bool) (map[int64]bool, error) {
	_, rolled, err := fleetRolled(ctx, conn, from, to)
	if err != nil || len(rolled) == 0 {
		return nil, err
	}
	now, err := fleetSources(ctx, conn, from, to, minutes)
	if err != nil {
		return nil, err
	}
	fresh := map[int64]bool{}
	for h, r := range rolled {
		if !minutes {
			r.minutes = hourSource{}
		}
		if s, ok := now[h]; ok && s == r {
			fresh[h] = true
		}
	}
	return fresh, nil
}

// fleetSpans cuts [from, to) (whole minutes) into runs of whole hours fresh for the fleet (and,
// if minutes, for the energy split) and of minutes, in time order, as spans does for the
// stored minutes.
func fleetSpans(ctx context.Context, conn Querier, from, to time.Time, minutes bool) ([]span, error) {
	first, last := from.Truncate(time.Hour), to.Truncate(time.Hour)
	if first.Before(from) {
		first = first.Add(time.Hour)
	}
	if !first.Before(last) {
		return []span{{from: from, to: to}}, nil
	}
	fresh, err := freshFleetHours(ctx, conn, first, last, minutes)
	if err != nil {
		return nil, fmt.Errorf("read which hours of [%s, %s) of %s are rolled up: %w", first.Format(time.RFC3339), last.Format(time.RFC3339), tables.Samples1m, err)
	}
	out := []span{{from: from, to: first}}
	for h := first; h.Before(last); h = h.Add(time.Hour) {
		out = append(out, span{from: h, to: h.Add(time.Hour), hours: fresh[h.Unix()]})
	}
	out = append(out, span{from: last, to: to})
	// Join neighbours of one kind, dropping the empty edges.
	var joined []span
	for _, s := range out {
		if !s.from.Before(s.to) {
			continue
		}
		if n := len(joined); n > 0 && joined[n-1].hours == s.hours {
			joined[n-1].to = s.to
			continue
		}
		joined = append(joined, s)
	}
	return joined, nil
}

// latestFleetRows is table's rows of the latest fleet roll-up of each hour of [from, to)
// (arguments from, to, from, to), one per key (a roll-up written twice counted once).
func latestFleetRows(table string, columns []string, key string) string {
	return `
    SELECT ` + tables.List(columns) + `
    FROM ` + table + `
    WHERE ` + hourWindow + ` AND (hour, rolled_ns) IN (
        SELECT hour, max(rolled_ns) FROM ` + tables.FleetHours + ` WHERE ` + hourWindow + ` GROUP BY hour)
    LIMIT 1 BY ` + key
}

// fleetHoursQuery is, per instance with a roll-up row in the whole hours of [from, to), the
// facts of its latest one, the time of that, and its sums: fleetFactsQuery and fleetSumsQuery
// over the roll-ups (arguments from, to, from, to).
var fleetHoursQuery = `
SELECT node, instance_id, argMax(gpu_uuid, last_time), argMax(model, last_time), argMax(kind, last_time),
    argMax(profile, last_time), argMax(compute_slices, last_time), argMax(sm_count, last_time),
    argMax(gpu_sm_count, last_time), argMax(mem_total_bytes, last_time), argMax(gpu_mem_total_bytes, last_time),
    argMax(share_replicas, last_time), max(last_time),
    sum(covered_ns), sum(sm_active_ns), sum(mem_used_ns), sum(mem_held), sum(attached), sum(energy_j)
FROM (` + latestFleetRows(tables.FleetHours, tables.FleetHourColumns, "hour, node, instance_id") + `
)
GROUP BY node, instance_id`

// tenantEnergyHoursQuery is tenantEnergyQuery over the roll-ups of whole hours (arguments
// from, to, from, to).
var tenantEnergyHoursQuery = `
SELECT node, instance_id, tenant, sum(energy_j)
FROM (` + latestFleetRows(tables.FleetHourTenants, tables.FleetHourTenantColumns, "hour, node, instance_id, tenant") + `
)
GROUP BY node, instance_id, tenant`

// rollupFleetHourQuery sums the hour's samples_1m rows per instance as fleetFactsQuery and
// fleetSumsQuery do (arguments: the hour, rolled_ns, sample_rows, sample_hash, source_ns,
// source_minutes, then from and to in seconds). The facts are those of the instance's latest
// row: FINAL keeps one of its versions, which all carry the same facts.
var rollupFleetHourQuery = tables.Insert(tables.FleetHours, tables.FleetHourColumns) + `
SELECT toDateTime(?), node, instance_id, max(time), argMax(gpu_uuid, time), argMax(model, time), argMax(kind, time),
    argMax(profile, time), argMax(compute_slices, time), argMax(sm_count, time), argMax(gpu_sm_count, time),
    argMax(mem_total_bytes, time), argMax(gpu_mem_total_bytes, time), argMax(share_replicas, time),
    ` + fleetSums + `,
    toUInt64(?), toUInt64(?), toUInt64(?), toUInt64(?), toUInt64(?)
FROM ` + tables.Final(tables.Samples1m) + `
PREWHERE time >= toDateTime(?) AND time < toDateTime(?)
GROUP BY node, instance_id`

// rollupFleetTenantsQuery is tenantEnergyQuery over one hour, written with its roll-up's
// rolled_ns (arguments: the hour, rolled_ns, then tenantEnergyQuery's).
var rollupFleetTenantsQuery = tables.Insert(tables.FleetHourTenants, tables.FleetHourTenantColumns) + `
SELECT toDateTime(?), node, instance_id, tenant, sum(j * b / 60e9), toUInt64(?)
FROM ` + tenantEnergySource + `
GROUP BY node, instance_id, tenant`

// RollupFleetHours rolls up the fleet's reads of samples_1m for every whole UTC hour that
// [from, to) touches and that has ended by to, and, when there is such an hour, every other
// hour of the recheckHours before whose roll-up no longer matches its sources (or that has
// none): the service calls it after storing a pass's minutes, beside RollupHours. An hour is
// rolled up from what is stored when it runs, its sources read first, so that rows stored
// meanwhile make it stale rather than fresh, and its tenants' energy before its instances, so
// that an hour cut short between the two is never read.
func RollupFleetHours(ctx context.Context, conn driver.Conn, from, to time.Time) error {
	last := to.Truncate(time.Hour)
	hours := map[int64]bool{}
	for h := from.Truncate(time.Hour); h.Before(last); h = h.Add(time.Hour) {
		hours[h.Unix()] = true
	}
	if len(hours) == 0 {
		return nil
	}
	since := last.Add(-recheckHours * time.Hour)
	ids, rolled, err := fleetRolled(ctx, conn, since, last)
	if err == nil {
		var now map[int64]fleetSource
		now, err = fleetSources(ctx, conn, since, last, true)
		for h, s := range now {
			if r, ok := rolled[h]; s.rows > 0 && (!ok || r != s) {
				hours[h] = true
			}
		}
	}
	if err != nil {
		return fmt.Errorf("read which hours of [%s, %s) of %s changed since rolled up: %w", since.Format(time.RFC3339), last.Format(time.RFC3339), tables.Samples1m, err)
	}
	order := make([]int64, 0, len(hours))
	for h := range hours {
		order = append(order, h)
	}
	slices.Sort(order)
	for _, h := range order {
		if err := rollupFleetHour(ctx, conn, time.Unix(h, 0).UTC(), ids[h]); err != nil {
			return err
		}
	}
	return nil
}

// rollupFleetHour rolls up one hour; prev is its latest roll-up's rolled_ns if known (0: read
// it), which the new one must exceed whatever the clock says.
func rollupFleetHour(ctx context.Context, conn driver.Conn, h time.Time, prev uint64) error {
	end := h.Add(time.Hour)
	sources, err := fleetSources(ctx, conn, h, end, true)
	if err == nil && prev == 0 {
		var ids map[int64]uint64
		ids, _, err = fleetRolled(ctx, conn, h, end)
		prev = ids[h.Unix()]
	}
	if err != nil {
		return fmt.Errorf("read what the hour %s of %s was stored by: %w", h.Format(time.RFC3339), tables.Samples1m, err)
	}
	src, ok := sources[h.Unix()]
	if !ok || src.rows == 0 {
		return nil // no samples_1m rows: nothing to read from it, and no roll-up is fresh
	}
	rolled := max(uint64(time.Now().UnixNano()), prev+1)
	f, t := h.Unix(), end.Unix()
	if err := conn.Exec(ctx, rollupFleetTenantsQuery, f, rolled, f, t, f, t, f, t); err != nil {
		return fmt.Errorf("roll up the tenants' energy of the hour %s: %w", h.Format(time.RFC3339), err)
	}
	err = conn.Exec(ctx, rollupFleetHourQuery, f, rolled, src.rows, src.hash, src.minutes.computed, src.minutes.minutes, f, t)
	if err != nil {
		return fmt.Errorf("roll up the instances of the fleet of the hour %s: %w", h.Format(time.RFC3339), err)
	}
	return nil
}

// sortHeld sorts by node, instance and tenant.
func sortHeld(hs []Held) {
	slices.SortFunc(hs, func(a, b Held) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.Tenant, b.Tenant))
	})
}
