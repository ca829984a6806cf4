package store

// Reading the per-second or per-minute rollup (samples_1s, samples_1m, written by the collector) instead of the raw
// samples: the same four questions (instances in the window, instances ever, usage and waits,
// first attached) asked of one row per (node, instance_id, second) instead of ~10. The
// complete row of a second is the one with the most samples (schemas/README.md).
//
// What changes at second granularity, all within the report's tolerances (attribution/README.md, "The tenant report"):
//   - a second's samples count for the billed time by the share of the second that lies in it
//     (exact for allocations on whole seconds, as schedulers report them);
//   - nothing else: a row holds the pieces of the samples inside its second, with their
//     unions and integrals (tables.RollupSeconds), so that the sums per minute are those of
//     the raw samples;
//   - the cold start is the first attached sample of the first second with one at or after
//     requested_at (off by less than a second only if requested_at falls inside a second in
//     which the instance was already attached before it).

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
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
	// The minutes in which an allocation starts or ends inside are read from samples_1s, so
	// that its report is the per-second rollup's.
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
	// partialMinutes: usage reads an allocation's partial minutes from samples_1s, a second
	// leg that is bound to the chunk's partial minutes after the first's arguments.
	partialMinutes bool
	// byMinutes: the cold starts are searched in samples_1m first (coldStartMinutesQuery), and
	// in this source only in the minute a search starts inside of (samples_1s, sorted by time
	// first, would read every instance over each search's range).
	byMinutes bool
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
	RawSamples:   {instancesInWindowQuery, instancesEverQuery, usageQuery, firstAttachedQuery, firstAttachedSearch, 10, false, false},
	SecondRollup: secondRollupQueries(),
	MinuteRollup: rollupQueries(tables.Samples1m, time.Minute),
}

// rollupQueries are the rollup queries for a rollup table of rows step long.
func rollupQueries(table string, step time.Duration) sampleQueries {
	r := strings.NewReplacer("{{table}}", table, "{{step}}", strconv.FormatInt(int64(step), 10),
		"{{seconds}}", strconv.FormatInt(int64(step/time.Second), 10))
	return sampleQueries{r.Replace(rollupInstancesInWindowQuery), r.Replace(rollupInstancesEverQuery), rollupUsage(table, step),
		r.Replace(rollupFirstAttachedQuery), r.Replace(rollupFirstAttachedSearch), 1 / step.Seconds(), step >= time.Minute, false}
}

func secondRollupQueries() sampleQueries {
	q := rollupQueries(tables.Samples1s, time.Second)
	q.byMinutes = true
	return q
}

// rollupInstanceColumns are instanceColumns over a rollup: the latest row's facts.
//
// PREWHERE on time: samples_1s is sorted by (time, node, instance_id) (migration 0048), so a
// time range reads only its granules; samples_1m by (node, instance_id, time), where a time
// range alone prunes only whole days, and reading only the time column first skips the rest
// of every other row.
//
// In the queries below {{table}} is the rollup, {{step}} its row length in ns and {{seconds}}
// in seconds; a row [t, t + step) counts where it overlaps [start, end), by the share of it
// that overlaps (a float: covered ns × overlap ns would overflow Int64 for minutes).
const rollupInstanceColumns = `node, instance_id, gpu_uuid, model,
    argMax(kind, time), argMax(profile, time), argMax(compute_slices, time), argMax(sm_count, time),
    argMax(gpu_sm_count, time), argMax(mem_total_bytes, time), argMax(gpu_mem_total_bytes, time),
    toUInt64(max(time)) * 1000000000, argMax(share_replicas, time)`

// A second [t, t + 1 s) overlaps [start, end) in ns; {{nodes}} is the condition on the node
// (Nodes.clause), left in the text by rollupQueries.
const rollupInstancesInWindowQuery = `
SELECT ` + rollupInstanceColumns + `
FROM {{table}}
PREWHERE time >= toDateTime(?) - {{seconds}} AND time <= toDateTime(?){{nodes}}
WHERE toInt64(time) * 1000000000 + {{step}} > ? AND toInt64(time) * 1000000000 < ? AND samples > 0
GROUP BY node, instance_id, gpu_uuid, model`

// rollupInstancesEverQuery: as rollupInstancesInWindowQuery, the rows with a sample taken in
// them (samples > 0), as raw samples count by ts: a row only covered by a sample taken in an
// earlier one does not say that the instance was there then.
const rollupInstancesEverQuery = `
SELECT ` + rollupInstanceColumns + `
FROM {{table}}
WHERE (node, instance_id) IN (` + chquery.TargetsTable + `) AND samples > 0
GROUP BY node, instance_id, gpu_uuid, model`

// dedupSeconds ends a subquery that selects the complete row of each second of the chunk's
// targets; it follows "SELECT node, instance_id, toInt64(time) * 1000000000 AS t," and columns.
//
// tables.Final keeps, per (node, instance_id, time), the row with the most samples (the
// table is a ReplacingMergeTree(samples)), the row tables.FullestRollup keeps, whether or not
// the parts were merged; over a day it is 9× faster than FullestRollup's sort, and holds no
// rows. Its filters are on key columns only, the same for every version of a row, so
// filtering before the merge cannot pick an incomplete one.
//
// All of it is PREWHERE, the chunk's targets too: samples_1s is sorted by time first, so a
// minute's granules hold every node's rows, and a chunk (or a replica's share of the nodes)
// reads the other targets' key columns only, not their measures and waits.
//
// The span bound starts maxSampleInterval before the chunk's billed time (Measure: a raw
// sample covers up to that much after its ts); a rollup row covers its own [t, t + step) only,
// so the rollups are read from maxSampleInterval later: a minute of samples_1s reads 61 s of
// rows, not 121 s.
var dedupSeconds = `
    FROM ` + tables.Final("{{table}}") + `
    PREWHERE time >= toDateTime(?) + {{lookback}} - {{seconds}} AND time <= toDateTime(?)
        AND toInt64(time) * 1000000000 + {{step}} > ? + {{lookbackns}} AND toInt64(time) * 1000000000 < ?
        AND (node, instance_id) IN (` + chquery.TargetsTable + `)`

// rollupUsageRows is the rows of usageByMinute's minutes from a rollup. A row holds the pieces
// of the samples inside its [t, t + step) (tables.RollupSeconds): covered_ns and active_ns are
// their unions, all and measured, sm_active_ns and switch_ns the integrals of the mean
// sm_active and switch share over them; a row counts for the billed time by the share of it
// that lies there. The waits are those of the rows that start in the billed time. {{dedup}} is
// the FROM of the rows (dedupSeconds, or dedupPartialSeconds), {{only}} a further condition on
// which rows count.
const rollupUsageRows = `
        SELECT allocation_id, intDiv(t, 60000000000) AS minute, sliced, frac,
            (least(t + {{step}}, billed_end) - greatest(t, billed_start)) / {{step}} AS share,
            covered * share AS r_overlap, active_covered * share AS r_active,
            sm_ns * share AS r_sm, sw_ns * share AS r_switch,
            if(sliced = 1 AND t >= billed_start, w, emptyArrayUInt64()) AS ws,
            if(sliced = 1 AND t >= billed_start, c, emptyArrayUInt64()) AS cs,
            if(t >= billed_start, mem_max, toUInt64(0)) AS r_mem
        FROM (
            SELECT node, instance_id, toInt64(time) * 1000000000 AS t, toInt64(covered_ns) AS covered,
                toInt64(active_ns) AS active_covered, sm_active_ns AS sm_ns, switch_ns AS sw_ns,
                wait_ns AS w, wait_count AS c, mem_used_max_bytes AS mem_max{{dedup}}
        ) AS s ALL INNER JOIN (` + allocationsTable + `
        ) AS a USING (node, instance_id)
        WHERE t < billed_end AND t + {{step}} > billed_start{{only}}`

// rollupMinutes groups rollupUsageRows (one or two legs) into usageByMinute's minutes.
func rollupMinutes(rows string) string {
	return `
        SELECT allocation_id, minute, any(sliced) AS m_sliced, any(frac) AS m_frac,
            sum(r_overlap) AS m_overlap, sum(r_active) AS m_active, sum(r_sm) AS m_sm, sum(r_switch) AS m_switch,
            tupleElement(sumMap(ws, cs), 1) AS m_ws, tupleElement(sumMap(ws, cs), 2) AS m_cs, max(r_mem) AS m_mem
        FROM (` + rows + `
        )
        GROUP BY allocation_id, minute`
}

// dedupPartialSeconds is dedupSeconds over samples_1s limited to the partial minutes of the
// chunk's allocations (partialMinutesTable, minutes as Unix seconds / 60): the per-minute rollup
// cannot say which part of a minute an allocation held, so those minutes are read per second.
var dedupPartialSeconds = `
    FROM ` + tables.Final(tables.Samples1s) + `
    PREWHERE time >= toDateTime(?) + {{lookback}} - 1 AND time <= toDateTime(?)
        AND (node, instance_id, intDiv(toUInt32(time), 60)) IN (` + partialMinutesTable + `)
    WHERE toInt64(time) * 1000000000 + 1000000000 > ? + {{lookbackns}} AND toInt64(time) * 1000000000 < ?
        AND (node, instance_id) IN (` + chquery.TargetsTable + `)`

// partialMinutesTable is the minutes (Unix seconds / 60) of targets that some allocation of a
// chunk holds only in part, bound packed (store.go). The minutes are UInt32 (a literal [0], a
// chunk with none, would be UInt8): with samples_1s sorted by time first, the IN's index
// analysis requires the set's types to be those of the left side.
const partialMinutesTable = `SELECT pn, pi, toUInt32(pm0) FROM (SELECT ` + chquery.StringArray + ` AS pns, ` + chquery.StringArray + ` AS pis, ` + chquery.UintArray + ` AS pms)
    ARRAY JOIN pns AS pn, pis AS pi, pms AS pm0`

// minuteOf is the UTC minute (ns) of a row's start t, in SQL.
const minuteOf = "intDiv(t, 60000000000) * 60000000000"

// rollupUsage is usageByMinute over a rollup of rows step long. samples_1m counts only the
// minutes an allocation holds whole and reads the others from samples_1s, so that its report
// is the per-second rollup's (one bill whatever the path).
func rollupUsage(table string, step time.Duration) string {
	return usageByMinute(rollupAllocationMinutes(table, step))
}

// rollupAllocationMinutes is the allocation-minutes of rollupUsage (usageByMinute's and
// needsByMinute's subquery) from a rollup of rows step long.
func rollupAllocationMinutes(table string, step time.Duration) string {
	if step < time.Minute {
		return rollupMinutes(rollupLeg(table, step, dedupSeconds, ""))
	}
	return rollupMinutes(wholeMinutesLeg() + "\n        UNION ALL" + partialMinutesLeg())
}

// rollupLeg is rollupUsageRows over a rollup of rows step long, its rows read by dedup and
// kept by only.
func rollupLeg(table string, step time.Duration, dedup, only string) string {
	rows := strings.NewReplacer("{{dedup}}", dedup, "{{only}}", only).Replace(rollupUsageRows)
	return strings.NewReplacer("{{table}}", table, "{{step}}", strconv.FormatInt(int64(step), 10),
		"{{seconds}}", strconv.FormatInt(int64(step/time.Second), 10),
		"{{lookback}}", strconv.FormatInt(int64(maxSampleInterval/time.Second), 10),
		"{{lookbackns}}", strconv.FormatInt(int64(maxSampleInterval), 10)).Replace(rows)
}

// wholeMinutesLeg is samples_1m's rows of the minutes an allocation holds whole;
// partialMinutesLeg samples_1s's of the others (bound in this order).
func wholeMinutesLeg() string {
	return rollupLeg(tables.Samples1m, time.Minute, dedupSeconds, " AND t >= billed_start AND t + {{step}} <= billed_end")
}

func partialMinutesLeg() string {
	return rollupLeg(tables.Samples1s, time.Second, dedupPartialSeconds,
		" AND ("+minuteOf+" < billed_start OR "+minuteOf+" + 60000000000 > billed_end)")
}

// minuteRollupNeeds is needsByMinute's allocation-minutes from samples_1m: a row of a minute an
// allocation holds whole already is that allocation-minute (one row per target and minute), so
// only the partial minutes, from samples_1s, are grouped by minute. The GROUP BY of a week of a
// large fleet's allocation-minutes is what the report's usage pays and the needs need not.
//
// The whole minutes' rows are read with FINAL in branches stretches of time (UNION ALL of
// wholeMinuteBranch, bound by needsArgs): ClickHouse 18.16 merges a FINAL read in one thread,
// most of the time of the needs over a week (8.6 s of 10.6 s for 1000 instances,
// BenchmarkAdvise), and runs a UNION ALL's branches in parallel. The rows FINAL keeps are the
// same: the copies of a row share its time, so they fall in one branch; and the branches are
// days, samples_1m's partitions, so that each reads only its own parts.
func minuteRollupNeeds(branches int) string {
	legs := make([]string, branches)
	for i := range legs {
		legs[i] = wholeMinuteBranch
	}
	return `
        SELECT allocation_id, r_sm AS m_sm, r_active AS m_active, r_mem AS m_mem
        FROM (
            SELECT allocation_id, (least(t + 60000000000, billed_end) - greatest(t, billed_start)) / 60000000000 AS share,
                active_covered * share AS r_active, sm_ns * share AS r_sm,
                if(t >= billed_start, mem_max, toUInt64(0)) AS r_mem
            FROM (` + strings.Join(legs, "\n            UNION ALL") + `
            ) AS s ALL INNER JOIN (` + allocationsTable + `
            ) AS a USING (node, instance_id)
            WHERE t < billed_end AND t + 60000000000 > billed_start AND t >= billed_start AND t + 60000000000 <= billed_end
        )
        UNION ALL
        SELECT allocation_id, m_sm, m_active, m_mem
        FROM (` + rollupMinutes(partialMinutesLeg()) + `
        )`
}

// wholeMinuteBranch is one branch of minuteRollupNeeds' whole minutes: dedupSeconds over
// samples_1m (its arguments), within [?, ?) seconds.
var wholeMinuteBranch = `
            SELECT node, instance_id, toInt64(time) * 1000000000 AS t, toInt64(active_ns) AS active_covered,
                sm_active_ns AS sm_ns, mem_used_max_bytes AS mem_max` + strings.NewReplacer("{{table}}", tables.Samples1m,
	"{{step}}", "60000000000", "{{seconds}}", "60",
	"{{lookback}}", strconv.FormatInt(int64(maxSampleInterval/time.Second), 10),
	"{{lookbackns}}", strconv.FormatInt(int64(maxSampleInterval), 10)).Replace(dedupSeconds) + `
        AND time >= toDateTime(?) AND time < toDateTime(?)`

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
        AND (node, instance_id) IN (` + chquery.TargetsTable + `)`

// coldStartMinutesQuery is, per search of a chunk (searchTable; its arguments are those of one
// rollupFirstAttachedSearch branch, then the search table's), the first attached sample at or
// after search_start in the samples_1m rows that overlap the search, their first_attached_ns
// being the minimum of their seconds': the answer wherever a minute's minimum lies within the
// search, which is every minute after the one search_start falls in. straddles says whether
// that minute has an attached sample before search_start, so that a later one of it would not
// show: only then is that minute read from samples_1s. found is 0 when none.
var coldStartMinutesQuery = `
SELECT allocation_id, minIf(first, first >= search_start AND first < search_end) AS found,
    countIf(first < search_start) > 0 AS straddles
FROM (
    SELECT node, instance_id, toInt64(first_attached_ns) AS first, toInt64(time) * 1000000000 AS t
    FROM ` + tables.Samples1m + `
    PREWHERE time >= toDateTime(?) - 60 AND time <= toDateTime(?)
    WHERE first_attached_ns > 0 AND toInt64(time) * 1000000000 + 60000000000 > ? AND toInt64(time) * 1000000000 < ?
        AND (node, instance_id) IN (` + chquery.TargetsTable + `)
) AS s ALL INNER JOIN (` + searchTable + `
) AS a USING (node, instance_id)
WHERE t < search_end AND t + 60000000000 > search_start
GROUP BY allocation_id`
