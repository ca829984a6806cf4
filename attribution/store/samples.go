package store

// Reading the per-second or per-minute rollup (samples_1s, samples_1m, written by the collector) instead of the raw
// samples: the same four questions (instances in the window, instances ever, usage and waits,
// first attached) asked of one row per (node, instance_id, second) instead of ~10. The
// complete row of a second is the one with the most samples (schemas/README.md).
//
// What changes at second granularity, all within the report's tolerances (README.md):
//   - a second's samples count for the billed time by the share of the second that lies in it
//     (exact for allocations on whole seconds, as schedulers report them);
//   - a vGPU's efficiency min(1, sm / (fraction × (1 − o))) is applied to the second's mean
//     sm_active and switch share, not sample by sample;
//   - the cold start is the first attached sample of the first second with one at or after
//     requested_at (off by less than a second only if requested_at falls inside a second in
//     which the instance was already attached before it).

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Samples says which table the sample aggregates are read from.
type Samples int

const (
	// RawSamples reads the samples table (exact to the sample; the default).
	RawSamples Samples = iota
	// SecondRollup reads samples_1s: ~10× fewer rows at 10 Hz, and what remains after the
	// raw samples' retention.
	SecondRollup
	// MinuteRollup reads samples_1m: 600× fewer rows than 10 Hz samples, for long windows.
	// Allocations that start or end inside a minute are counted by the share of the minute
	// they hold (exact when the minute is fully metered; their waits and mean load over that
	// minute are the instance's, which may include the previous holder's tail).
	MinuteRollup
)

func (s Samples) String() string {
	switch s {
	case SecondRollup:
		return tables.Samples1s
	case MinuteRollup:
		return tables.Samples1m
	}
	return tables.Samples
}

// sampleQueries are the queries that read sample aggregates, for one source.
type sampleQueries struct {
	instancesInWindow, instancesEver, usage, firstAttached string
	// firstAttachedSearch is one group of cold-start searches in firstAttached's {{searches}}.
	firstAttachedSearch string
	// rowsPerSecond is about how many rows a target has per second (raw samples at 10 Hz).
	rowsPerSecond float64
}

// ParseSamples is the source a flag names: raw, rollup-1s or rollup-1m.
func ParseSamples(name string) (Samples, error) {
	switch name {
	case "raw":
		return RawSamples, nil
	case "rollup-1s":
		return SecondRollup, nil
	case "rollup-1m":
		return MinuteRollup, nil
	}
	return 0, fmt.Errorf("sample source %q: expected raw, rollup-1s or rollup-1m", name)
}

// Check fails for a value that is none of the sources.
func (s Samples) Check() error {
	_, err := s.queries()
	return err
}

func (s Samples) queries() (sampleQueries, error) {
	q, ok := queriesOf[s]
	if !ok {
		return sampleQueries{}, fmt.Errorf("sample source %d: expected RawSamples or SecondRollup", s)
	}
	return q, nil
}

var queriesOf = map[Samples]sampleQueries{
	RawSamples:   {instancesInWindowQuery, instancesEverQuery, usageQuery, firstAttachedQuery, firstAttachedSearch, 10},
	SecondRollup: rollupQueries(tables.Samples1s, time.Second),
	MinuteRollup: rollupQueries(tables.Samples1m, time.Minute),
}

// rollupQueries are the rollup queries for a rollup table of rows step long.
func rollupQueries(table string, step time.Duration) sampleQueries {
	r := strings.NewReplacer("{{table}}", table, "{{step}}", strconv.FormatInt(int64(step), 10),
		"{{seconds}}", strconv.FormatInt(int64(step/time.Second), 10))
	return sampleQueries{r.Replace(rollupInstancesInWindowQuery), r.Replace(rollupInstancesEverQuery), r.Replace(rollupUsageQuery),
		r.Replace(rollupFirstAttachedQuery), r.Replace(rollupFirstAttachedSearch), 1 / step.Seconds()}
}

// rollupInstanceColumns are instanceColumns over a rollup: the latest row's facts.
//
// PREWHERE on time: the tables are sorted by (node, instance_id, time), so a time range alone
// prunes nothing; reading only the time column first skips the rest of every other row.
//
// In the queries below {{table}} is the rollup, {{step}} its row length in ns and {{seconds}}
// in seconds; a row [t, t + step) counts where it overlaps [start, end), by the share of it
// that overlaps (a float: covered ns × overlap ns would overflow Int64 for minutes).
const rollupInstanceColumns = `node, instance_id, gpu_uuid, model,
    argMax(kind, time), argMax(profile, time), argMax(compute_slices, time), argMax(sm_count, time),
    argMax(gpu_sm_count, time), argMax(mem_total_bytes, time), argMax(gpu_mem_total_bytes, time),
    toUInt64(max(time)) * 1000000000`

// A second [t, t + 1 s) overlaps [start, end) in ns.
const rollupInstancesInWindowQuery = `
SELECT ` + rollupInstanceColumns + `
FROM {{table}}
PREWHERE time >= toDateTime(?) - {{seconds}} AND time <= toDateTime(?)
WHERE toInt64(time) * 1000000000 + {{step}} > ? AND toInt64(time) * 1000000000 < ?
GROUP BY node, instance_id, gpu_uuid, model`

const rollupInstancesEverQuery = `
SELECT ` + rollupInstanceColumns + `
FROM {{table}}
WHERE (node, instance_id) IN (` + targetsTable + `)
GROUP BY node, instance_id, gpu_uuid, model`

// dedupSeconds ends a subquery that selects the complete row of each second of the chunk's
// targets; it follows "SELECT node, instance_id, toInt64(time) * 1000000000 AS t," and columns.
//
// tables.Final keeps, per (node, instance_id, time), the row with the most samples (the
// table is a ReplacingMergeTree(samples)), the row tables.FullestRollup keeps, whether or not
// the parts were merged; over a day it is 9× faster than FullestRollup's sort, and holds no
// rows. Its filters are on key columns only, the same for every version of a row, so
// filtering before the merge cannot pick an incomplete one.
var dedupSeconds = `
    FROM ` + tables.Final("{{table}}") + `
    PREWHERE time >= toDateTime(?) - {{seconds}} AND time <= toDateTime(?)
    WHERE toInt64(time) * 1000000000 + {{step}} > ? AND toInt64(time) * 1000000000 < ?
        AND (node, instance_id) IN (` + targetsTable + `)`

// rollupUsageQuery: a row's measured samples (active_samples, covering active_ns) are those
// whose activity was available; sm_active_sum sums only them. The waits are those of the rows
// that start in the billed time.
var rollupUsageQuery = `
SELECT allocation_id, toInt64(sum(metered)), toInt64(sum(active)), sum(efficiency * active), sum(o_sec * metered),
    tupleElement(sumMap(w, c), 1), tupleElement(sumMap(w, c), 2)
FROM (
    SELECT allocation_id,
        (least(t + {{step}}, billed_end) - greatest(t, billed_start)) / {{step}} AS share,
        covered * share AS metered,
        active_covered * share AS active,
        if(covered > 0, sw / covered, 0.) AS o_sec,
        if(n > 0, sm_sum / n, 0.) AS sm,
        if(sliced = 1, if(frac * (1. - o_sec) > 0., least(1., sm / (frac * (1. - o_sec))), 0.), sm) AS efficiency,
        if(sliced = 1 AND t >= billed_start, ws, emptyArrayUInt64()) AS w,
        if(sliced = 1 AND t >= billed_start, cs, emptyArrayUInt64()) AS c
    FROM (
        SELECT node, instance_id, toInt64(time) * 1000000000 AS t, toInt64(covered_ns) AS covered,
            toInt64(active_ns) AS active_covered, toInt64(active_samples) AS n, sm_active_sum AS sm_sum,
            toInt64(vgpu_switch_ns_sum) AS sw, wait_ns AS ws, wait_count AS cs` + dedupSeconds + `
    ) AS s ALL INNER JOIN (` + allocationsTable + `
    ) AS a USING (node, instance_id)
    WHERE t < billed_end AND t + {{step}} > billed_start
)
GROUP BY allocation_id`

// rollupFirstAttachedQuery is firstAttachedQuery over a rollup: a row's first_attached_ns is
// its first attached sample, inside the row's [time, time + step).
const rollupFirstAttachedQuery = `
SELECT allocation_id, min(first)
FROM ({{searches}}) AS s ALL INNER JOIN (` + searchTable + `
) AS a USING (node, instance_id)
WHERE first >= search_start AND first < search_end
GROUP BY allocation_id`

const rollupFirstAttachedSearch = `
    SELECT node, instance_id, toInt64(first_attached_ns) AS first
    FROM {{table}}
    PREWHERE time >= toDateTime(?) - {{seconds}} AND time <= toDateTime(?)
    WHERE first_attached_ns > 0 AND toInt64(time) * 1000000000 + {{step}} > ? AND toInt64(time) * 1000000000 < ?
        AND (node, instance_id) IN (` + targetsTable + `)`
