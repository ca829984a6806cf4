package collector

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Rollups are recomputed, not fed by materialized views: a view fires per inserted block, so a
// batch delivered again after a crash would be counted twice. A flush inserts its raw samples,
// then rewrites the complete rollup rows of every second (and minute) it touched, for the nodes
// it touched, from the deduplicated raw rows, and only then commits the Kafka offsets. A crash
// anywhere before the commit replays the batch, which recomputes the same rows again.
// Recomputations only ever see more raw rows, so the row with the most samples is the complete
// one (ReplacingMergeTree(samples); readers take it the same way; schemas/README.md).
//
// Samples whose sm_active was not measured (sm_active_unavailable = 1: a MIG instance on a GPU
// without GPM) count in samples and covered_ns, since the time was metered, but not in
// sm_active_sum, active_samples, active_ns or sm_active_ns: their sm_active of 0 would read as
// idle time.
//
// first_ns and last_ns are the row's first and last sample's ts_ns: attribution's capacity
// (a GPU present from each sample for the presence period) needs them to the ns.

// rollupSecondsQuery recomputes samples_1s for the nodes (a GroupSet) and the seconds
// [from, to] (UInt32 Unix seconds, bound twice: the samples read, from up to a whole interval
// before the first second, and the seconds written). FINAL keeps, of the copies of one sample
// key, the one received last, as every reader of samples does (tables.Final): a duplicate with
// conflicting values must give one bill whatever the table. Each sample counts in every second
// it covers part of, by that part (tables.RollupSeconds: covered time is a union).
var rollupSecondsQuery = tables.RollupSeconds(
	"node IN ? AND time >= toDateTime(?) - 60 AND time <= toDateTime(?)",
	"sec >= toDateTime(?) AND sec <= toDateTime(?)")

// rollupMinutesQuery recomputes samples_1m for the nodes and the minutes starting in
// [from, to] from the complete (most samples; of equals, the last written) samples_1s row of
// each second, the row attribution reads (tables.Final).
var rollupMinutesQuery = tables.RollupMinutes("node IN ? AND time >= toDateTime(?) AND time <= toDateTime(?)")

// touched records which nodes and seconds the pending samples cover, so that a flush
// recomputes only those rollup rows. Consecutive samples mostly share both, so add is a
// comparison, not a map write, on the hot path.
type touched struct {
	nodes    map[string]struct{}
	seconds  map[uint32]struct{}
	lastNode string
	lastSec  uint32
	any      bool // lastSec is valid
}

func (t *touched) addNode(node string) {
	if len(t.nodes) > 0 && node == t.lastNode {
		return
	}
	if t.nodes == nil {
		t.nodes = map[string]struct{}{}
	}
	t.nodes[node] = struct{}{}
	t.lastNode = node
}

func (t *touched) addSecond(sec uint32) {
	if t.any && sec == t.lastSec {
		return
	}
	if t.seconds == nil {
		t.seconds = map[uint32]struct{}{}
	}
	t.seconds[sec] = struct{}{}
	t.lastSec, t.any = sec, true
}

// addSample adds the seconds a sample covers part of, [ts, ts + interval): a rollup row holds
// the pieces of the samples inside its second, so a sample that spans seconds changes each.
func (t *touched) addSample(tsNs, intervalNs uint64) {
	first := tsNs / 1e9
	last := first
	if intervalNs > 0 {
		last = (tsNs + min(intervalNs, maxInterval) - 1) / 1e9
	}
	for s := first; s <= last; s++ {
		t.addSecond(uint32(s))
	}
}

// maxInterval is the longest interval a sample covers (tables.MaxInterval), in ns.
const maxInterval = 60e9

func (t *touched) empty() bool { return len(t.seconds) == 0 }

func (t *touched) reset() {
	clear(t.nodes)
	clear(t.seconds)
	t.any = false
}

// secondRange is an inclusive range of Unix seconds.
type secondRange struct{ from, to uint32 }

// ranges merges the touched seconds into inclusive ranges; seconds less than gap apart join
// one range, so that a flush sends a few queries, not one per second.
func (t *touched) ranges(gap uint32) []secondRange {
	secs := make([]uint32, 0, len(t.seconds))
	for s := range t.seconds {
		secs = append(secs, s)
	}
	slices.Sort(secs)
	var out []secondRange
	for _, s := range secs {
		if n := len(out); n > 0 && s-out[n-1].to <= gap {
			out[n-1].to = s
			continue
		}
		out = append(out, secondRange{s, s})
	}
	return out
}

func (t *touched) nodeSet() clickhouse.GroupSet {
	nodes := make([]string, 0, len(t.nodes))
	for n := range t.nodes {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	set := clickhouse.GroupSet{Value: make([]any, len(nodes))}
	for i, n := range nodes {
		set.Value[i] = n
	}
	return set
}

// rollupGap joins touched seconds closer than this into one recomputation.
const rollupGap = 60

// recomputeRollups rewrites the samples_1s rows of the touched seconds, then the samples_1m
// rows of their minutes, for the touched nodes.
func recomputeRollups(ctx context.Context, conn driver.Conn, t *touched) error {
	nodes := t.nodeSet()
	for _, r := range t.ranges(rollupGap) {
		if err := conn.Exec(ctx, rollupSecondsQuery, nodes, r.from, r.to, r.from, r.to); err != nil {
			return fmt.Errorf("recompute samples_1s for %d nodes, seconds %s: %w", len(nodes.Value), r, err)
		}
		minutes := secondRange{r.from - r.from%60, r.to - r.to%60 + 59}
		if err := conn.Exec(ctx, rollupMinutesQuery, nodes, minutes.from, minutes.to); err != nil {
			return fmt.Errorf("recompute samples_1m for %d nodes, seconds %s: %w", len(nodes.Value), minutes, err)
		}
	}
	return nil
}

func (r secondRange) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(uint64(r.from), 10))
	b.WriteString("..")
	b.WriteString(strconv.FormatUint(uint64(r.to), 10))
	return b.String()
}
