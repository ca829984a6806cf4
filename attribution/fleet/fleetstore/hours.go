package fleetstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// The hourly roll-up of what the fleet reads of samples_1m (fleet_hours, fleet_hour_gpus):
// the attribution service rolls up every whole hour a pass completes, and
// recent hours whose samples_1m parts changed since (RollupFleetHours); FleetInstances
// and FleetPresence read each whole hour whose latest roll-up still matches its
// sources (freshFleetHours) from it,
// and every other minute from samples_1m as before. A roll-up holds the sums the readers
// would take of the minutes, so the figures are the same whichever is read (to the rounding
// of Float64 sums taken in another order).
//
// Fresh means: the parts of samples_1m with rows of the hour say the same as when it was rolled
// up (sampleSources: their highest block number, the first and last row time within the hour).
// (The roll-up also records its stored minutes' latest pass and number, hourSources, which
// the tenants' energy split compared until it was dropped, migration 0059.) What FINAL reads
// of an hour changes only when rows of it are inserted (a late sample's recomputed row), mutated or dropped, each of which changes those; they are the
// parts' metadata (system.parts), so checking a month costs nothing next to reading it, where
// a count and hash of a month's rows of 1000 instances took 7 to 16 s under load.

// recheckHours is how far back a roll-up looks for hours whose samples_1m parts changed since
// they were rolled up: a day's partition keeps merging its parts for hours after its last
// write, and late samples land within a day.
const recheckHours = 48

// restaleHours is how many such hours one roll-up rolls up again (about a second each for
// 1000 instances): a pass must not stall on a day of them.
const restaleHours = 2

// samplePartsQuery lists the active parts of samples_1m (in this database: on a cluster, where
// samples_1m is Distributed, none, so that no hour is ever fresh) whose rows' times reach into
// [from, to) (seconds): the first and last row time, and the part's highest block number or
// mutation (data_version). An insert takes a block number higher than any before, and a merge
// keeps the highest of its parts, so the hour's highest is that of the last insert of rows of
// it (or of a part merged with such a part) and changes whenever rows are added to the hour.
var samplePartsQuery = `
SELECT toUInt64(toUInt32(min_time)), toUInt64(toUInt32(max_time)), greatest(toUInt64(max_block_number), data_version)
FROM system.parts
WHERE database = currentDatabase() AND table = '` + tables.Samples1m + `' AND active
    AND max_time >= toDateTime(?) AND min_time < toDateTime(?)`

// fleetRolledQuery is, per hour of [from, to) rolled up, its latest roll-up and what that
// was made from.
var fleetRolledQuery = `
SELECT hour, max(rolled_ns), argMax(sample_block, rolled_ns), argMax(sample_first, rolled_ns),
    argMax(sample_last, rolled_ns), argMax(source_ns, rolled_ns), argMax(source_minutes, rolled_ns)
FROM ` + tables.FleetHours + `
WHERE ` + chquery.HourWindow + `
GROUP BY hour`

// fleetSource is what an hour's fleet roll-up is made from.
type fleetSource struct {
	// Of the parts of samples_1m with rows of the hour (by their first and last row time): the
	// highest block number, and the first and last row time within the hour.
	block, first, last uint64
	minutes            stored.HourSource // of its stored minutes (attribution_minutes)
}

// sampleSources is, per whole hour (Unix seconds) of [from, to) with a part of samples_1m
// reaching into it, those parts' highest block number and first and last row time within the
// hour: rows added to the hour raise the first, rows dropped (a partition, a TTL) move the
// others; a merge that joins a part of the hour with a later one raises it too, the hour then
// reads as stale (its minutes are read) until it is rolled up again.
func sampleSources(ctx context.Context, conn chquery.Querier, from, to time.Time) (map[int64]fleetSource, error) {
	out := map[int64]fleetSource{}
	lo, hi := uint64(from.Unix()), uint64(to.Unix())
	err := chquery.Each(ctx, conn, samplePartsQuery, []any{from.Unix(), to.Unix()}, func(scan func(...any) error) error {
		var first, last, block uint64
		if err := scan(&first, &last, &block); err != nil {
			return err
		}
		for h := max(lo, first-first%3600); h <= last && h < hi; h += 3600 {
			s, ok := out[int64(h)]
			in, end := max(first, h), min(last, h+3599)
			if ok {
				in, end = min(in, s.first), max(end, s.last)
			}
			out[int64(h)] = fleetSource{block: max(block, s.block), first: in, last: end}
		}
		return nil
	})
	return out, err
}

// fleetSources is sampleSources with, if minutes, the sources of the hours' stored minutes.
func fleetSources(ctx context.Context, conn chquery.Querier, from, to time.Time, minutes bool) (map[int64]fleetSource, error) {
	out, err := sampleSources(ctx, conn, from, to)
	if err != nil || !minutes {
		return out, err
	}
	hours, err := stored.HourSources(ctx, conn, from, to)
	if err != nil {
		return nil, err
	}
	for h, s := range hours {
		x := out[h]
		x.minutes = s
		out[h] = x
	}
	return out, nil
}

// fleetRolled is, per hour of [from, to) rolled up, its latest roll-up's rolled_ns and sources.
func fleetRolled(ctx context.Context, conn chquery.Querier, from, to time.Time) (map[int64]uint64, map[int64]fleetSource, error) {
	ids, out := map[int64]uint64{}, map[int64]fleetSource{}
	err := chquery.Each(ctx, conn, fleetRolledQuery, []any{from.Unix(), to.Unix()}, func(scan func(...any) error) error {
		var (
			h  time.Time
			id uint64
			s  fleetSource
		)
		err := scan(&h, &id, &s.block, &s.first, &s.last, &s.minutes.Computed, &s.minutes.Minutes)
		ids[h.Unix()], out[h.Unix()] = id, s
		return err
	})
	return ids, out, err
}

// freshFleetHours is the set (Unix seconds) of the whole hours of [from, to) whose latest
// fleet roll-up was made from the samples_1m rows stored now.
func freshFleetHours(ctx context.Context, conn chquery.Querier, from, to time.Time) (map[int64]bool, error) {
	_, rolled, err := fleetRolled(ctx, conn, from, to)
	if err != nil || len(rolled) == 0 {
		return nil, err
	}
	now, err := fleetSources(ctx, conn, from, to, false)
	if err != nil {
		return nil, err
	}
	fresh := map[int64]bool{}
	for h, r := range rolled {
		r.minutes = stored.HourSource{} // recorded by the roll-up, read by none since the energy split went
		if s, ok := now[h]; ok && s == r {
			fresh[h] = true
		}
	}
	return fresh, nil
}

// span is a part of a window that the fleet reads: whole hours from their roll-ups
// (fleet_hours), or minutes from samples_1m.
type span struct {
	from, to time.Time
	hours    bool
}

// args are the arguments of the span's queries (from, to, from, to).
func (s span) args() []any {
	f, t := s.from.Unix(), s.to.Unix()
	return []any{f, t, f, t}
}

// fleetSpans cuts [from, to) (whole minutes) into runs of whole hours fresh for the fleet and
// of minutes, in time order, as spans does for the stored minutes.
func fleetSpans(ctx context.Context, conn chquery.Querier, from, to time.Time) ([]span, error) {
	first, last := from.Truncate(time.Hour), to.Truncate(time.Hour)
	if first.Before(from) {
		first = first.Add(time.Hour)
	}
	if !first.Before(last) {
		return []span{{from: from, to: to}}, nil
	}
	fresh, err := freshFleetHours(ctx, conn, first, last)
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

// latestFleetHours is the condition on a fleet roll-up table of the rows of the latest roll-up
// of each hour of [from, to) (arguments from, to, from, to): those with its hour's highest
// rolled_ns in fleet_hours, written last.
var latestFleetHours = chquery.HourWindow + ` AND (hour, rolled_ns) IN (
    SELECT hour, max(rolled_ns) FROM ` + tables.FleetHours + ` WHERE ` + chquery.HourWindow + ` GROUP BY hour)`

// fleetHourFactsQuery is, per instance with a roll-up row in the whole hours of [from, to),
// the facts of its latest one and the time of that: fleetFactsQuery over the roll-ups
// (arguments from, to, from, to). Without FINAL, as a roll-up written twice gives the same
// maxima.
var fleetHourFactsQuery = `
SELECT node, instance_id, argMax(gpu_uuid, last_time), argMax(model, last_time), argMax(kind, last_time),
    argMax(profile, last_time), argMax(compute_slices, last_time), argMax(sm_count, last_time),
    argMax(gpu_sm_count, last_time), argMax(mem_total_bytes, last_time), argMax(gpu_mem_total_bytes, last_time),
    argMax(share_replicas, last_time), max(last_time)
FROM ` + tables.FleetHours + `
WHERE ` + latestFleetHours + `
GROUP BY node, instance_id`

// fleetHourSumsQuery is fleetSumsQuery over the roll-ups of the whole hours of [from, to)
// (arguments from, to, from, to). FINAL keeps one row of a roll-up written twice, in key order
// (the key LIMIT 1 BY hour, node, instance_id would hash for every row); the condition keeps
// the same rows whether it applies before or after FINAL's merge, as a key's row of the
// highest rolled_ns is that of its hour's latest roll-up if it has one there. Apart
// from the facts: their argMax on FINAL's single stream took twice as long as the sums.
var fleetHourSumsQuery = `
SELECT node, instance_id, sum(covered_ns), sum(sm_active_ns), sum(mem_used_ns), sum(mem_held), sum(attached), sum(energy_j)
FROM ` + tables.Final(tables.FleetHours) + `
WHERE ` + latestFleetHours + `
GROUP BY node, instance_id`

// rollupFleetGPUsQuery is, per hour of a run of whole hours and GPU, the first and last
// sample's ts_ns of the hour's rows, as the presence reads them (arguments: rolled_ns, from and
// to in seconds).
var rollupFleetGPUsQuery = tables.Insert(tables.FleetHourGPUs, tables.FleetHourGPUColumns) + `
SELECT ` + chquery.HourOf("time") + ` AS h, node, gpu_uuid, model, min(toInt64(first_ns)), max(toInt64(last_ns)), toUInt64(?)
FROM ` + tables.Samples1m + `
PREWHERE time >= toDateTime(?) AND time < toDateTime(?)
GROUP BY h, node, gpu_uuid, model`

// perGPU is a query of rows per GPU and bucket (node, gpu_uuid, model, b, f, l) as one row per
// GPU with arrays of its buckets' (groupArray): a month of hours is 96,000 rows for 1000
// instances, whose scanning row by row was most of the presence's time in Go.
func perGPU(query string) string {
	return `
SELECT node, gpu_uuid, model, groupArray(b), groupArray(f), groupArray(l)
FROM (` + query + `
)
GROUP BY node, gpu_uuid, model`
}

// fleetGPUsHoursQuery is, per GPU and bucket of the given seconds (a whole number of hours), the
// first and last sample's ts_ns of the roll-ups of the whole hours of [from, to): the presence
// query over the roll-ups (arguments the bucket, from, to, from, to), perGPU. A roll-up written
// twice gives the same extremes: no LIMIT 1 BY.
var fleetGPUsHoursQuery = perGPU(`
    SELECT node, gpu_uuid, model, intDiv(toInt64(hour), toInt64(?)) AS b, min(first_ns) AS f, max(last_ns) AS l
    FROM ` + tables.FleetHourGPUs + `
    WHERE ` + latestFleetHours + `
    GROUP BY node, gpu_uuid, model, b`)

// fleetGPUsMinutesQuery is the presence query of samples_1m (presenceQueries) with each row's
// bucket, over rows of whole minutes in [from, to) (arguments: the bucket in seconds, from and
// to in seconds), perGPU.
var fleetGPUsMinutesQuery = perGPU(`
    SELECT node, gpu_uuid, model, intDiv(toInt64(time), toInt64(?)) AS b, min(toInt64(first_ns)) AS f, max(toInt64(last_ns)) AS l
    FROM ` + tables.Samples1m + `
    PREWHERE time >= toDateTime(?) AND time < toDateTime(?)
    GROUP BY node, gpu_uuid, model, b`)

// FleetPresence is store.ReadPresence of samples_1m (store.MinuteRollup) for the fleet: where the period
// is a whole number of hours, its buckets are too, and the whole hours fresh for the fleet
// are read from their roll-ups (fleet_hour_gpus), the rest from samples_1m; the same presence
// to the ns either way.
func FleetPresence(ctx context.Context, conn chquery.Querier, window billing.Interval, period time.Duration) (*store.Presence, error) {
	if err := store.CheckPresence(period); err != nil || period%time.Hour != 0 {
		return store.ReadPresence(ctx, conn, store.MinuteRollup, window, period)
	}
	if window.Start >= window.End {
		return nil, fmt.Errorf("read the presence of [%s, %s): expected the start before the end", billing.UTC(window.Start), billing.UTC(window.End))
	}
	bucket := int64(period)
	readFrom, readTo := chquery.FloorTo(window.Start-int64(period), bucket), window.End
	spans := map[billing.GPU][]billing.Span{}
	// Rows whose minute starts in [from, to) are those the presence query reads from whole minutes.
	from, to := billing.UTC(readFrom), billing.UTC(readTo).Truncate(time.Minute)
	if !billing.UTC(readTo).Equal(to) {
		return store.ReadPresence(ctx, conn, store.MinuteRollup, window, period)
	}
	by := map[billing.GPU]map[int64]billing.Span{} // per GPU and bucket
	parts, err := fleetSpans(ctx, conn, from, to)
	for _, sp := range parts {
		if err != nil {
			break
		}
		query, args := fleetGPUsMinutesQuery, []any{bucket / int64(time.Second), sp.from.Unix(), sp.to.Unix()}
		if sp.hours {
			query, args = fleetGPUsHoursQuery, append([]any{bucket / int64(time.Second)}, sp.args()...)
		}
		err = chquery.Each(ctx, conn, query, args, func(scan func(...any) error) error {
			var (
				g                 billing.GPU
				at, firsts, lasts []int64 // the buckets, their first and last ts_ns
			)
			if err := scan(&g.Node, &g.UUID, &g.Model, &at, &firsts, &lasts); err != nil {
				return err
			}
			if len(firsts) != len(at) || len(lasts) != len(at) {
				return fmt.Errorf("GPU %s/%s: %d buckets, %d first and %d last times", g.Node, g.UUID, len(at), len(firsts), len(lasts))
			}
			buckets := by[g]
			if buckets == nil {
				buckets = make(map[int64]billing.Span, len(at))
				by[g] = buckets
			}
			for i, b := range at {
				first, last := firsts[i], lasts[i]
				if s, ok := buckets[b]; ok {
					first, last = min(first, s.First), max(last, s.Last)
				}
				buckets[b] = billing.Span{First: first, Last: last}
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("read when the GPUs were sampled in [%s, %s) from %s and its hourly roll-up: %w",
			from.Format(time.RFC3339), to.Format(time.RFC3339), tables.Samples1m, err)
	}
	for g, buckets := range by {
		ss := make([]billing.Span, 0, len(buckets))
		for _, s := range buckets {
			ss = append(ss, s)
		}
		spans[g] = ss
	}
	for _, ss := range spans {
		slices.SortFunc(ss, func(a, b billing.Span) int { return cmp.Compare(a.First, b.First) })
	}
	return store.PresenceOf(period, store.MinuteRollup, bucket, readFrom, readTo, spans), nil
}

// rollupFleetHourQuery sums each hour's samples_1m rows of a run of whole hours per instance
// as fleetFactsQuery and fleetSumsQuery do (arguments: the first hour (seconds), rolled_ns, the
// arrays of the hours' sample_block, sample_first, sample_last, source_ns and source_minutes,
// one element per hour of the run, then from and to in seconds). The facts are those of the
// instance's latest row: FINAL keeps one of its versions, which all carry the same facts.
var rollupFleetHourQuery = tables.Insert(tables.FleetHours, tables.FleetHourColumns) + `
SELECT h, node, instance_id, r_last_time, r_gpu_uuid, r_model, r_kind, r_profile, r_compute_slices, r_sm_count, r_gpu_sm_count,
    r_mem_total_bytes, r_gpu_mem_total_bytes, r_share_replicas, r_covered_ns, r_sm_active_ns, r_mem_used_ns, r_mem_held, r_attached, r_energy_j,
    rolled, toUInt64(arrayElement(?, i)), toUInt64(arrayElement(?, i)), toUInt64(arrayElement(?, i)),
    toUInt64(arrayElement(?, i)), toUInt64(arrayElement(?, i))
FROM (
    SELECT ` + chquery.HourOf("time") + ` AS h, toUInt32(intDiv(toUInt32(h) - toUInt32(?), 3600) + 1) AS i, toUInt64(?) AS rolled,
        node, instance_id, max(time) AS r_last_time, argMax(gpu_uuid, time) AS r_gpu_uuid, argMax(model, time) AS r_model,
        argMax(kind, time) AS r_kind, argMax(profile, time) AS r_profile, argMax(compute_slices, time) AS r_compute_slices,
        argMax(sm_count, time) AS r_sm_count, argMax(gpu_sm_count, time) AS r_gpu_sm_count,
        argMax(mem_total_bytes, time) AS r_mem_total_bytes, argMax(gpu_mem_total_bytes, time) AS r_gpu_mem_total_bytes,
        argMax(share_replicas, time) AS r_share_replicas,
        ` + tables.List(fleetSumsAs) + `
    FROM ` + tables.Final(tables.Samples1m) + `
    PREWHERE time >= toDateTime(?) AND time < toDateTime(?)
    GROUP BY h, node, instance_id
)`

// rollupRun is the most hours one roll-up of the instances and GPUs reads at once. samples_1m
// is sorted by instance before time, so every granule of a day's partition holds rows of each
// of its hours: an hour read alone costs about as much as its day's partition, and so does a
// run of hours read at once.
const rollupRun = 6

// RollupFleetHours rolls up the fleet's reads of samples_1m for every whole UTC hour that
// [from, to) touches and that has ended by to, then for at most restaleHours of the
// recheckHours before, latest first, whose roll-up no longer matches the parts of samples_1m
// (late rows, a merge): the service calls it after each pass that stores minutes, beside
// RollupHours, so that a day made stale by one merge is rolled up again over a few passes, not
// in one. (A recomputed minute is stored by a pass, which rolls its hour up itself; an hour
// never rolled up, stored before migration 0049, is read from its minutes.) An hour is rolled
// up from what is stored when it runs, its sources read first, so that rows stored meanwhile
// make it stale rather than fresh, and its GPUs before its instances, so that an hour cut
// short between them is never read.
func RollupFleetHours(ctx context.Context, conn driver.Conn, from, to time.Time) error {
	last := to.Truncate(time.Hour)
	var order []int64
	touched := map[int64]bool{}
	for h := from.Truncate(time.Hour); h.Before(last); h = h.Add(time.Hour) {
		order = append(order, h.Unix())
		touched[h.Unix()] = true
	}
	since := last.Add(-recheckHours * time.Hour)
	_, rolled, err := fleetRolled(ctx, conn, since, last)
	var now map[int64]fleetSource
	if err == nil {
		now, err = sampleSources(ctx, conn, since, last)
	}
	if err != nil {
		return fmt.Errorf("read which hours of [%s, %s) of %s changed since rolled up: %w", since.Format(time.RFC3339), last.Format(time.RFC3339), tables.Samples1m, err)
	}
	var stale []int64
	for h, s := range now {
		if r, ok := rolled[h]; ok && !touched[h] && (r.block != s.block || r.first != s.first || r.last != s.last) {
			stale = append(stale, h)
		}
	}
	slices.Sort(stale)
	slices.Reverse(stale)
	stale = stale[:min(len(stale), restaleHours)]
	slices.Sort(stale)
	for _, run := range append(runs(order), runs(stale)...) {
		if err := rollupFleetRun(ctx, conn, run); err != nil {
			return err
		}
	}
	return nil
}

// runs cuts sorted hours (Unix seconds) into runs of consecutive ones of at most rollupRun.
func runs(hours []int64) [][]int64 {
	var out [][]int64
	for i, h := range hours {
		if n := len(out); i > 0 && h == hours[i-1]+3600 && len(out[n-1]) < rollupRun {
			out[n-1] = append(out[n-1], h)
			continue
		}
		out = append(out, []int64{h})
	}
	return out
}

// rollupFleetRun rolls up a run of consecutive hours (Unix seconds) at once, with a rolled_ns
// above their latest roll-ups' whatever the clock says.
func rollupFleetRun(ctx context.Context, conn driver.Conn, run []int64) error {
	first, end := time.Unix(run[0], 0).UTC(), time.Unix(run[len(run)-1]+3600, 0).UTC()
	sources, err := fleetSources(ctx, conn, first, end, true)
	var ids map[int64]uint64
	if err == nil {
		ids, _, err = fleetRolled(ctx, conn, first, end)
	}
	if err != nil {
		return fmt.Errorf("read what the hours [%s, %s) of %s were stored by: %w", first.Format(time.RFC3339), end.Format(time.RFC3339), tables.Samples1m, err)
	}
	rolled := uint64(time.Now().UnixNano())
	var blocks, firsts, lasts, computed, minutes []uint64
	some := false
	for _, h := range run {
		rolled = max(rolled, ids[h]+1)
		src := sources[h]
		// An hour without samples_1m rows gets none: nothing to read from it, and no roll-up is fresh.
		some = some || src.block != 0
		blocks, firsts, lasts = append(blocks, src.block), append(firsts, src.first), append(lasts, src.last)
		computed, minutes = append(computed, src.minutes.Computed), append(minutes, src.minutes.Minutes)
	}
	if !some {
		return nil
	}
	f, t := first.Unix(), end.Unix()
	if err := conn.Exec(ctx, rollupFleetGPUsQuery, rolled, f, t); err != nil {
		return fmt.Errorf("roll up the GPUs' presence of the hours [%s, %s): %w", first.Format(time.RFC3339), end.Format(time.RFC3339), err)
	}
	err = conn.Exec(ctx, rollupFleetHourQuery, blocks, firsts, lasts, computed, minutes, f, rolled, f, t)
	if err != nil {
		return fmt.Errorf("roll up the instances of the fleet of the hours [%s, %s): %w", first.Format(time.RFC3339), end.Format(time.RFC3339), err)
	}
	return nil
}
