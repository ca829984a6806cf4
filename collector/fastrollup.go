package collector

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Rollups in memory. Recomputing every touched second from the raw rows (rollup.go) is exact
// but took over 90 % of a flush: a FINAL read of the raw rows, an arrayJoin of the pieces and
// two sweeps per row. In the common case a batch's seconds have no earlier samples: its
// samples are the first of their instance, or they follow on from the samples this collector
// rolled up itself in its previous flushes. Then the rows are computed here, from the batch
// and what this collector remembers of the last second and minute it wrote per instance (the
// tail: the row of the last second, still open to the next flush's samples, and the minute's
// sum of the seconds before it), and only the seconds touched by samples it does not hold
// (late, duplicate, after a restart, or written by another collector) are recomputed from the
// raw rows in ClickHouse, and the minutes that hold them from samples_1s.
//
// What the collector remembers is checked against ClickHouse at every flush, before it is
// trusted: one query reads, per instance of the batch's nodes, the distinct seconds and the
// last second (with its samples) that samples_1s holds from the minute of the batch's first
// second on. Anything that differs from what this collector wrote (rows written by another
// replica, by an earlier process, or by a recomputation that found more samples) sends that
// instance's seconds up to ClickHouse's last one to the exact recomputation. So a restart, a
// rebalance or a redelivered batch recomputes what it must, and a collector that starts
// without memory reads the same as one that remembers.
//
// A row computed here holds the same numbers as the recomputation would: the same pieces
// (tables.RollupSeconds), the sums added in the same order (samples by ts_ns, seconds by
// time), and the same sample kept of copies of one key (the last received). A second whose
// pieces are not regular (tables.Regular: a clock step, a changed interval or metadata) is
// left to ClickHouse, whose sweep computes the union.

// tailState is what the collector wrote last for one instance.
type tailState struct {
	minute uint32 // the minute of last
	secs   uint32 // distinct seconds that samples_1s holds in minute, all written here
	last   uint32 // the last second written: the tail
	tail   rollRow
	lastTs uint64 // the last sample's ts_ns: the next flush's must come after it to join the tail
	// acc is the minute's seconds before last, summed in time order; accKnown is false where
	// the minute was recomputed in ClickHouse (then it is again, until the next minute).
	acc      rollRow
	accKnown bool
	used     time.Time
}

type instanceKey struct{ node, instance string }

// maxKeySpan is the most seconds one instance's samples of a batch may span to be rolled up
// in memory (a slice per second); wider ones (late data mixed with new) go to ClickHouse.
const maxKeySpan = 3600

// tailIdle is how long the collector remembers an instance it has not seen.
const tailIdle = 15 * time.Minute

// tailCheckQuery reads, per instance of the nodes and minute from the given second on, the
// distinct seconds and the last second with the samples of its fullest row.
const tailCheckQuery = `SELECT node, instance_id, toUInt32(toStartOfMinute(time)) AS m, toUInt32(uniqExact(time)),
    max(toUInt64(time) * 4294967296 + samples)
FROM samples_1s
WHERE node IN ? AND time >= toDateTime(?)
GROUP BY node, instance_id, m`

// keyRows is one instance's part of a batch.
type keyRows struct {
	key     instanceKey
	idx     []int32 // its samples, by ts_ns, one per ts_ns (the last received)
	first   uint32  // first second with a piece
	last    uint32  // last second with a piece
	firstTs uint64
	lastTs  uint64
	rows    []rollRow // by second - first; those without pieces are not rows
	exactTo uint32    // seconds <= exactTo are recomputed in ClickHouse (0: none)
	mode    int
}

const (
	modeFresh    = iota // nothing in samples_1s from the minute of first on
	modeContinue        // samples_1s holds what this collector wrote, nothing after its tail
	modeExact           // something else: seconds up to ClickHouse's last recomputed there
)

// rollupInMemory rolls up the batch's samples (already inserted): the seconds and minutes it
// can in memory, the others recomputed in ClickHouse. tails is updated only when all of it is
// stored.
func (c *Collector) rollupInMemory(ctx context.Context, s *sampleColumns) error {
	t0 := time.Now()
	groups := groupSamples(s)
	if len(groups) == 0 {
		return nil
	}
	// What samples_1s holds from the earliest minute on, read while the rows are computed as
	// if it held what the collector remembers (almost always so; otherwise computed again).
	nodes := map[string]struct{}{}
	from := uint32(0)
	for i, g := range groups {
		nodes[g.key.node] = struct{}{}
		if m := g.first - g.first%60; i == 0 || m < from {
			from = m
		}
	}
	type heldResult struct {
		held map[instanceKey][]heldMinute
		err  error
		took time.Duration
	}
	heldCh := make(chan heldResult, 1)
	go func() {
		start := time.Now()
		held, err := readHeld(ctx, c.conn, nodes, from)
		heldCh <- heldResult{held, err, time.Since(start)}
	}()
	merged := make([]bool, len(groups)) // built with the remembered tail's row
	for i, g := range groups {
		if g.last-g.first >= maxKeySpan {
			continue
		}
		st := c.tails[g.key]
		merged[i] = st != nil && st.last == g.first && g.firstTs > st.lastTs
		if merged[i] {
			g.build(s, st)
		} else {
			g.build(s, nil)
		}
	}
	res := <-heldCh
	if res.err != nil {
		return res.err
	}
	c.rollupStats.check += res.took
	held := res.held

	secCols, minCols := &c.rollupBufs[0], &c.rollupBufs[1]
	secCols.reset()
	minCols.reset()
	var exactSecs, exactMins touched
	newTails := make(map[instanceKey]*tailState, len(groups))
	for i, g := range groups {
		if g.last-g.first >= maxKeySpan {
			// Too wide to hold a row per second: all of it in ClickHouse.
			exactSecs.addNode(g.key.node)
			exactMins.addNode(g.key.node)
			for _, i := range g.idx {
				exactSecs.addSample(s.tsNs[i], s.intervalNs[i])
				exactMins.addSample(s.tsNs[i], s.intervalNs[i])
			}
			newTails[g.key] = nil
			continue
		}
		st := c.tails[g.key]
		g.decide(st, held[g.key])
		var tail *tailState
		if g.mode == modeContinue {
			tail = st
		}
		if merge := tail != nil && tail.last == g.first; merge != merged[i] {
			g.build(s, tail) // what samples_1s holds is not what the collector remembers
		}
		newTails[g.key] = g.emit(tail, held[g.key], secCols, minCols, &exactSecs, &exactMins)
	}
	t1 := time.Now()
	c.rollupStats.compute += t1.Sub(t0) - res.took

	// The rows computed here, both tables at once; then the recomputations, seconds before
	// the minutes that sum them.
	insertErr := make(chan error, 1)
	go func() {
		var err error
		if minCols.len() > 0 {
			if err = insertColumns(ctx, c.conn, tables.Samples1m, tables.RollupColumns, minCols.columns()); err != nil {
				err = fmt.Errorf("insert %d samples_1m rows: %w", minCols.len(), err)
			}
		}
		insertErr <- err
	}()
	var err error
	if secCols.len() > 0 {
		if err = insertColumns(ctx, c.conn, tables.Samples1s, tables.RollupColumns, secCols.columns()); err != nil {
			err = fmt.Errorf("insert %d samples_1s rows: %w", secCols.len(), err)
		}
	}
	if err1m := <-insertErr; err == nil {
		err = err1m
	}
	if err != nil {
		return err
	}
	t2 := time.Now()
	c.rollupStats.insert += t2.Sub(t1)
	if !exactSecs.empty() {
		if err := recomputeSeconds(ctx, c.conn, &exactSecs); err != nil {
			return err
		}
	}
	if !exactMins.empty() {
		if err := recomputeMinutes(ctx, c.conn, &exactMins); err != nil {
			return err
		}
	}
	c.rollupStats.recompute += time.Since(t2)
	c.rollupStats.memorySeconds += secCols.len()
	c.rollupStats.memoryMinutes += minCols.len()
	c.rollupStats.recomputedSeconds += len(exactSecs.seconds)
	c.rollupStats.recomputedMinutes += len(exactMins.seconds)
	c.log.Debug("rolled up", "instances", len(groups), "seconds_in_memory", secCols.len(), "minutes_in_memory", minCols.len(),
		"nodes_recomputed", len(exactSecs.nodes)+len(exactMins.nodes))

	now := time.Now()
	if c.tails == nil {
		c.tails = map[instanceKey]*tailState{}
	}
	for k, nt := range newTails {
		if nt == nil {
			delete(c.tails, k)
			continue
		}
		nt.used = now
		c.tails[k] = nt
	}
	c.flushes++
	if c.flushes%64 == 0 {
		for k, st := range c.tails {
			if now.Sub(st.used) > tailIdle {
				delete(c.tails, k)
			}
		}
	}
	return nil
}

// readHeld runs tailCheckQuery.
func readHeld(ctx context.Context, conn driver.Conn, nodes map[string]struct{}, from uint32) (map[instanceKey][]heldMinute, error) {
	set := clickhouse.GroupSet{Value: make([]any, 0, len(nodes))}
	for n := range nodes {
		set.Value = append(set.Value, n)
	}
	rows, err := conn.Query(ctx, tailCheckQuery, set, from)
	if err != nil {
		return nil, fmt.Errorf("read the last rollup rows of %d nodes: %w", len(nodes), err)
	}
	defer rows.Close()
	held := map[instanceKey][]heldMinute{}
	for rows.Next() {
		var k instanceKey
		var h heldMinute
		var top uint64
		if err := rows.Scan(&k.node, &k.instance, &h.minute, &h.secs, &top); err != nil {
			return nil, fmt.Errorf("read the last rollup rows: %w", err)
		}
		h.top, h.topN = uint32(top>>32), top&(1<<32-1)
		held[k] = append(held[k], h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the last rollup rows: %w", err)
	}
	return held, nil
}

// heldMinute is what samples_1s holds of one instance in one minute (tailCheckQuery).
type heldMinute struct {
	minute uint32
	secs   uint32 // distinct seconds
	top    uint32 // the last second
	topN   uint64 // its samples (of its fullest row)
}

// groupSamples splits the batch by instance, each part sorted by ts_ns with one sample per
// ts_ns: of copies the last received, the one ClickHouse keeps (FINAL keeps the last row of a
// key, and one insert writes the rows in the batch's order).
func groupSamples(s *sampleColumns) []*keyRows {
	index := map[instanceKey]*keyRows{}
	var out []*keyRows
	var last *keyRows
	for i := range s.tsNs {
		if last == nil || last.key.node != s.node[i] || last.key.instance != s.instanceID[i] {
			k := instanceKey{s.node[i], s.instanceID[i]}
			last = index[k]
			if last == nil {
				last = &keyRows{key: k}
				index[k] = last
				out = append(out, last)
			}
		}
		last.idx = append(last.idx, int32(i))
	}
	for _, g := range out {
		sorted := true
		for j := 1; j < len(g.idx); j++ {
			if s.tsNs[g.idx[j]] <= s.tsNs[g.idx[j-1]] {
				sorted = false
				break
			}
		}
		if !sorted {
			// Stable: of copies of one ts_ns the last received stays last.
			slices.SortStableFunc(g.idx, func(a, b int32) int {
				ta, tb := s.tsNs[a], s.tsNs[b]
				switch {
				case ta < tb:
					return -1
				case ta > tb:
					return 1
				}
				return 0
			})
			keep := g.idx[:0]
			for j, i := range g.idx {
				if j+1 < len(g.idx) && s.tsNs[g.idx[j+1]] == s.tsNs[i] {
					continue
				}
				keep = append(keep, i)
			}
			g.idx = keep
		}
		g.first = uint32(s.tsNs[g.idx[0]] / 1e9)
		g.firstTs, g.lastTs = s.tsNs[g.idx[0]], s.tsNs[g.idx[len(g.idx)-1]]
		for _, i := range g.idx {
			if l := uint32(pieceEnd(s.tsNs[i], s.intervalNs[i])); l > g.last {
				g.last = l
			}
		}
	}
	slices.SortFunc(out, func(a, b *keyRows) int {
		if a.key.node != b.key.node {
			if a.key.node < b.key.node {
				return -1
			}
			return 1
		}
		if a.key.instance < b.key.instance {
			return -1
		}
		if a.key.instance > b.key.instance {
			return 1
		}
		return 0
	})
	return out
}

// clampInterval is a sample's interval as the rollups take it (tables.MaxInterval).
func clampInterval(iv uint64) uint64 { return min(iv, maxInterval) }

// pieceEnd is the last second a sample covers part of.
func pieceEnd(ts, interval uint64) uint64 {
	iv := clampInterval(interval)
	if iv == 0 {
		return ts / 1e9
	}
	return (ts + iv - 1) / 1e9
}

// decide chooses how g's rows are computed from what the collector remembers (st, nil: none)
// and what samples_1s holds (held).
func (g *keyRows) decide(st *tailState, held []heldMinute) {
	firstMinute := g.first - g.first%60
	var after []heldMinute // from the minute of the batch's first second on
	for _, h := range held {
		if h.minute >= firstMinute {
			after = append(after, h)
		}
	}
	switch {
	case len(after) == 0:
		g.mode = modeFresh
	case st != nil && len(after) == 1 && after[0].minute == st.minute && after[0].secs == st.secs &&
		after[0].top == st.last && after[0].topN == st.tail.samples &&
		(g.first > st.last || g.first == st.last && g.firstTs > st.lastTs):
		g.mode = modeContinue
	default:
		g.mode = modeExact
		for _, h := range after {
			g.exactTo = max(g.exactTo, h.top)
		}
	}
}

// build computes g's samples_1s rows from its samples, the tail's row first where they join
// it (tail nil: none).
func (g *keyRows) build(s *sampleColumns, tail *tailState) {
	if n := int(g.last - g.first + 1); cap(g.rows) >= n {
		g.rows = g.rows[:n]
		clear(g.rows)
	} else {
		g.rows = make([]rollRow, n)
	}
	if tail != nil && tail.last == g.first {
		g.rows[0] = tail.tail.clone()
	}
	for _, i := range g.idx {
		ts := s.tsNs[i]
		iv := clampInterval(s.intervalNs[i])
		firstSec := ts / 1e9
		for sec := firstSec; sec <= (ts+iv-1)/1e9; sec++ {
			lo := max(ts, sec*1e9) - sec*1e9
			hi := min(ts+iv, (sec+1)*1e9) - sec*1e9
			r := &g.rows[uint32(sec)-g.first]
			r.time = uint32(sec)
			r.addPiece(s, int(i), lo, hi, iv, sec == firstSec)
		}
	}
}

// row is the row of second sec, nil if no sample has a piece in it.
func (g *keyRows) row(sec uint32) *rollRow {
	if r := &g.rows[sec-g.first]; r.pieces > 0 {
		return r
	}
	return nil
}

// memory is whether second sec's row is written from memory (it has one: a piece of a sample).
func (g *keyRows) memory(sec uint32) bool {
	if g.mode == modeExact && sec <= g.exactTo {
		return false
	}
	r := g.row(sec)
	return r != nil && !r.irregular
}

// emit appends g's rows computed in memory to secCols and minCols, adds what ClickHouse must
// recompute to exactSecs and exactMins, and returns the instance's tail once they are stored
// (nil: nothing to remember, the next flush checks against ClickHouse alone).
func (g *keyRows) emit(tail *tailState, held []heldMinute, secCols, minCols *rollupColumns, exactSecs, exactMins *touched) *tailState {
	node, inst := g.key.node, g.key.instance
	for sec := g.first; sec <= g.last; sec++ {
		r := g.row(sec)
		switch {
		case r == nil:
		case g.memory(sec):
			secCols.add(node, inst, r)
		default:
			exactSecs.addNode(node)
			exactSecs.addSecond(sec)
		}
	}
	heldSecs := func(minute uint32) uint32 {
		for _, h := range held {
			if h.minute == minute {
				return h.secs
			}
		}
		return 0
	}
	// Minutes, each the sum of its seconds in time order: those written before (acc), then
	// the batch's.
	var nt *tailState
	var rows []*rollRow
	for m := g.first - g.first%60; m <= g.last; m += 60 {
		var acc rollRow
		known := true
		var secs uint32 // distinct seconds held in the minute once these are stored
		switch {
		case g.mode == modeContinue && m == tail.minute:
			acc, known, secs = tail.acc.clone(), tail.accKnown, tail.secs
			if g.first > tail.last { // the tail is complete: it joins the sum first
				acc.addSecond(&tail.tail)
			}
		case g.mode == modeExact && m <= g.exactTo:
			known = false // earlier seconds of it are in ClickHouse only
		}
		rows = rows[:0]
		for sec := max(m, g.first); sec <= min(m+59, g.last); sec++ {
			r := g.row(sec)
			if r == nil {
				continue
			}
			if !g.memory(sec) {
				known = false
			}
			rows = append(rows, r)
			if !(g.mode == modeContinue && sec == tail.last) {
				secs++
			}
		}
		if len(rows) == 0 {
			continue
		}
		last := rows[len(rows)-1]
		var before rollRow
		if known {
			for _, r := range rows[:len(rows)-1] {
				acc.addSecond(r)
			}
			before = acc.clone()
			acc.addSecond(last)
			acc.time = m
			minCols.add(node, inst, &acc)
		} else {
			exactMins.addNode(node)
			exactMins.addSecond(m)
		}
		if last.time != g.last || !g.memory(g.last) {
			continue
		}
		nt = &tailState{minute: m, secs: secs, last: g.last, tail: last.clone(), lastTs: g.lastTs, acc: before, accKnown: known}
		if g.mode == modeExact && m <= g.exactTo {
			// The minute held seconds up to exactTo: the count is those and the batch's after
			// it, unless the batch wrote seconds before exactTo that may have been new.
			nt.secs = heldSecs(m)
			for sec := max(m, g.first); sec <= g.last; sec++ {
				switch r := g.row(sec); {
				case r == nil || sec == g.exactTo:
				case sec < g.exactTo:
					return nil
				default:
					nt.secs++
				}
			}
		}
	}
	return nt
}

// recomputeSeconds rewrites the samples_1s rows of the touched seconds of the touched nodes
// from the raw rows.
func recomputeSeconds(ctx context.Context, conn driver.Conn, t *touched) error {
	nodes := t.nodeSet()
	for _, r := range t.ranges(rollupGap) {
		if err := conn.Exec(ctx, rollupSecondsQuery, nodes, r.from, r.to, r.from, r.to); err != nil {
			return fmt.Errorf("recompute samples_1s for %d nodes, seconds %s: %w", len(nodes.Value), r, err)
		}
	}
	return nil
}

// recomputeMinutes rewrites the samples_1m rows of the touched minutes (their first seconds)
// of the touched nodes from samples_1s.
func recomputeMinutes(ctx context.Context, conn driver.Conn, t *touched) error {
	nodes := t.nodeSet()
	for _, r := range t.ranges(rollupGap) {
		minutes := secondRange{r.from - r.from%60, r.to - r.to%60 + 59}
		if err := conn.Exec(ctx, rollupMinutesQuery, nodes, minutes.from, minutes.to); err != nil {
			return fmt.Errorf("recompute samples_1m for %d nodes, seconds %s: %w", len(nodes.Value), minutes, err)
		}
	}
	return nil
}
