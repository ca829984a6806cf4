package tables

// Every table is a ReplacingMergeTree, and merges run whenever ClickHouse likes: until then a
// row delivered twice, or recomputed, or replaced by a later version, is there twice. Readers
// deduplicate as they read, each table in its one way below.

// SampleKey is the key of a sample (samples' ORDER BY): a sample delivered twice is the same
// row twice, so "LIMIT 1 BY " + SampleKey, or FROM samples FINAL, keeps one.
const SampleKey = "node, instance_id, ts_ns"

// RollupKey is the key of a rollup row: samples_1m's ORDER BY, and samples_1s' columns of it
// (sorted by time first since migration 0048; a row is the same row whatever the order).
const RollupKey = "node, instance_id, time"

// FullestRollup keeps, of each rollup row recomputed several times, the one with the most
// samples: recomputations only ever see more raw rows, so that one is complete. It ends a
// SELECT from samples_1s or samples_1m.
const FullestRollup = "ORDER BY samples DESC\n    LIMIT 1 BY " + RollupKey

// Fullest is column of a rollup row's fullest version, in a query grouped by RollupKey.
func Fullest(column string) string { return "argMax(" + column + ", samples)" }

// Final is table read with FINAL, which collapses the rows of each key as it reads them and
// keeps the row LIMIT 1 BY SampleKey (samples) or FullestRollup (samples_1s, samples_1m:
// ReplacingMergeTree(samples)) keeps. It merges the parts it reads in key order, neither
// sorting nor holding the rows, so it suits reads of many rows, where LIMIT 1 BY sorts them all
// (~100 bytes of memory a row). Its conditions apply before the merge: they must be the same
// for every copy and version of a row (key columns, time), or it could keep an incomplete one.
func Final(table string) string { return table + " FINAL" }

// Measured is the condition on samples whose sm_active was measured: a MIG instance on a GPU
// without GPM reports sm_active_unavailable = 1, metered time but no activity.
const Measured = "sm_active_unavailable = 0"

// LatestAllocations is a subquery's text: per allocation_id, the columns of its highest
// version named cur_<column> (cur_version its version, cur_deleted whether that version is a
// deletion), the received version with the highest number winning. where filters the rows
// before they are grouped ("" for none); callers drop deleted ones with cur_deleted = 0.
func LatestAllocations(where string) string {
	q := `SELECT allocation_id,
        argMax(tenant, version) AS cur_tenant, argMax(tier, version) AS cur_tier,
        argMax(node, version) AS cur_node, argMax(instance_id, version) AS cur_instance_id,
        argMax(requested_ns, version) AS cur_requested_ns, argMax(started_ns, version) AS cur_started_ns,
        argMax(ended_ns, version) AS cur_ended_ns, max(version) AS cur_version, argMax(deleted, version) AS cur_deleted
    FROM allocations`
	if where != "" {
		q += "\n    WHERE " + where
	}
	return q + "\n    GROUP BY allocation_id"
}

// MinuteWindow is the condition on attribution_minutes of the minutes of [from, to), its
// arguments from and to in Unix seconds.
const MinuteWindow = "minute >= toDateTime(?) AND minute < toDateTime(?)"

// LatestPass is the condition on attribution_minutes that keeps, of each minute and node that
// window (a condition on minute) selects, only the rows of its latest pass (the highest
// computed_ns): an allocation deleted since an earlier pass has no row in it. The pass is per
// node because replicas that share the fleet by node store the nodes of one minute in passes
// of their own; every node with a row in a pass gets one in each later pass of the minute
// (its __unallocated__ row, a zero one when it has nothing left), and the empty node holds the
// minute's marker row. With MinuteWindow its arguments are from, to, from, to.
func LatestPass(window string) string {
	return window + `
    AND (minute, node, computed_ns) IN (
        SELECT minute, node, max(computed_ns) FROM attribution_minutes
        WHERE ` + window + `
        GROUP BY minute, node)`
}
