package store

// Per allocation, its memory efficiency and energy (attribution/README.md, "The tenant report"), with the
// fleet's definitions (attribution/fleet, attribution/README.md "Fleet economics"): per UTC minute of an instance,
// its GPU's energy is the sum of the energy of the samples taken in the minute (each sample's
// the increase of the GPU's energy counter over its tick, or its power × interval where the
// counter is missing: samples.energy_j, schemas/energy), and its memory the mean of memory
// used / memory of the instance of those samples; an allocation gets them for the share of the
// minute it is billed (and the energy by its billed fraction). Every source sums the same
// per-minute figures: the rollups hold per row the sums of the samples taken in it and the
// union of the pieces inside it, both additive over the rows of a minute, and the raw samples
// are cut at the minutes the same way.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// instanceMinutesRaw is, per target and UTC minute (Unix seconds / 60) in [?, ?), the sums
// over its raw samples (deduplicated, dedupSamples' arguments first) that a samples_1m row
// holds: energy (J) and memory used summed over the samples taken in it (e, mu, n of them),
// the instance's memory (mt), and the union of the samples' pieces in it (cov, ns).
var instanceMinutesRaw = `
    SELECT node, instance_id, minute, e, n, toFloat64(u_union) AS cov, mu, mt
    FROM (
        SELECT *, ` + tables.Coverage("u", "los", "his", "os", "u_len", "u_weighted", "regular") + `
        FROM (
            SELECT node, instance_id, minute, sumIf(ej, taken) AS e, countIf(taken) AS n, sumIf(mem, taken) AS mu,
                any(mt0) AS mt, groupArray(lo) AS los, groupArray(hi) AS his, groupArray(0.) AS os,
                sum(hi - lo) AS u_len, 0. AS u_weighted, ` + tables.Regular + ` AS regular
            FROM (
                SELECT node, instance_id, t, iv, ej, mem, mt0, intDiv(t, 60000000000) AS first_minute,
                    arrayJoin(if(intDiv(t + iv - 1, 60000000000) = first_minute, [first_minute], [first_minute, first_minute + 1])) AS minute,
                    greatest(t, minute * 60000000000) - minute * 60000000000 AS lo,
                    least(t + iv, (minute + 1) * 60000000000) - minute * 60000000000 AS hi,
                    minute = first_minute AS taken
                FROM (
                    SELECT node, instance_id, toInt64(ts_ns) AS t, toInt64(least(interval_ns, ` + tables.MaxInterval + `)) AS iv,
                        energy_j AS ej, toFloat64(mem_used_bytes) AS mem, mem_total_bytes AS mt0` + dedupSamples + `
                )
                WHERE iv > 0 AND minute >= ? AND minute < ?
            )
            GROUP BY node, instance_id, minute
        )
    )`

// instanceMinutesRollup is instanceMinutesRaw's sums from a rollup's complete rows ({{table}},
// tables.Final), the rows of [?, ?) (Unix seconds), for the targets: all PREWHERE, on key
// columns only (as dedupSeconds), so that other targets' rows cost their key columns only.
const instanceMinutesRollup = `
    SELECT node, instance_id, toInt64(intDiv(toUInt32(time), 60)) AS minute, sum(energy_j_sum) AS e, sum(samples) AS n,
        toFloat64(sum(covered_ns)) AS cov, sum(mem_used_bytes_sum) AS mu, any(mem_total_bytes) AS mt
    FROM {{table}} FINAL
    PREWHERE time >= toDateTime(?) AND time < toDateTime(?) AND (node, instance_id) IN (` + chquery.TargetsTable + `)
    GROUP BY node, instance_id, minute`

// memEnergyQuery sums {{minutes}} (one of the above) over each allocation's billed minutes:
// the GPU's energy in the minute (J) × billed fraction × the share of the minute billed, and the memory used /
// memory of the instance × covered time × that share, over the time so weighted where the
// instance's memory is known. The allocations' arguments (allocationsTable) follow the
// minutes'.
const memEnergyQuery = `
SELECT allocation_id, sum(e * frac * b), sum(if(n > 0 AND mt > 0, mu / n / mt, 0.) * cov * b),
    sum(if(mt > 0, cov * b, 0.))
FROM (
    SELECT allocation_id, e, n, cov, mu, mt, frac,
        (least(billed_end, (minute + 1) * 60000000000) - greatest(billed_start, minute * 60000000000)) / 60e9 AS b
    FROM ({{minutes}}
    ) AS s ALL INNER JOIN (` + allocationsTable + `
    ) AS a USING (node, instance_id)
    WHERE minute * 60000000000 < billed_end AND (minute + 1) * 60000000000 > billed_start
)
GROUP BY allocation_id`

// memEnergyQueries are memEnergyQuery per source.
var memEnergyQueries = map[Samples]string{
	RawSamples:   strings.Replace(memEnergyQuery, "{{minutes}}", instanceMinutesRaw, 1),
	SecondRollup: strings.Replace(memEnergyQuery, "{{minutes}}", strings.Replace(instanceMinutesRollup, "{{table}}", tables.Samples1s, 1), 1),
	MinuteRollup: strings.Replace(memEnergyQuery, "{{minutes}}", strings.Replace(instanceMinutesRollup, "{{table}}", tables.Samples1m, 1), 1),
}

// memEnergy is an allocation's memory and energy sums (billing.Usage's MemUsedNS, MemNS, EnergyJ).
type memEnergy struct{ used, weighed, energy float64 }

// readMemEnergy reads the memory and energy sums of the chunk's allocations, by id, from the
// whole UTC minutes around their billed intervals (span), read from src.
func readMemEnergy(ctx context.Context, conn Querier, src Samples, chunk []billing.Billed, span billing.Interval) (map[string]memEnergy, error) {
	query, ok := memEnergyQueries[src]
	if !ok {
		return nil, fmt.Errorf("sample source %d: expected RawSamples, SecondRollup or MinuteRollup", src)
	}
	const minute = int64(time.Minute)
	first, end := chquery.FloorTo(span.Start, minute), chquery.FloorTo(span.End+minute-1, minute)
	nodes, instances := chquery.TargetArrays(distinct(chunk, func(b billing.Billed) billing.Target { return b.Target }))
	var args []any
	if src == RawSamples {
		// Samples taken up to tables.MaxInterval before the first minute cover part of it.
		from := first - minute
		args = []any{chquery.Seconds(from), chquery.Seconds(end), from, end, nodes, instances, first / minute, end / minute}
	} else {
		args = []any{first / int64(time.Second), end / int64(time.Second), nodes, instances}
	}
	args = append(args, allocationArgs(chunk)...)
	out := make(map[string]memEnergy, len(chunk))
	err := chquery.Each(ctx, conn, query, args, func(scan func(...any) error) error {
		var (
			id string
			x  memEnergy
		)
		err := scan(&id, &x.energy, &x.used, &x.weighed)
		out[id] = x
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the memory and energy of %d allocations: %w", len(chunk), err)
	}
	return out, nil
}
