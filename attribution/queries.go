package attribution

// How the SQL is structured
//
// All SQL runs on ClickHouse 18.16 and on current ClickHouse: no DateTime64, no server-side
// parameters (clickhouse-go binds ? on the client), functions 18.16 has. Nothing relies on
// merges having happened:
//   - allocations: argMax(column, version) per allocation_id; deleted ones dropped after that.
//   - samples: FROM samples FINAL collapses, as it reads, the rows that were delivered more
//     than once (at-least-once; the table is a ReplacingMergeTree by (node, instance_id,
//     ts_ns)); min() and argMax() need no deduplication. FINAL merges the parts it reads in
//     key order: no sort, no hash table of every sample, unlike GROUP BY ts_ns (which needed
//     about 100 bytes of memory a sample and 4 GB for a day of a few hundred instances).
//     Its filters (node, instance_id, ts_ns and time, which is ts_ns in seconds) are the same
//     for every copy of a sample, so filtering before the merge is sound.
//
// Joined subqueries carry aliases (current ClickHouse requires them) and join with
// ALL INNER JOIN ... USING, the form 18.16 knows.
//
// A report takes a few grouped queries, not one per allocation:
//  1. the allocations' current state, those billed in the window (Go clips them);
//  2. every instance seen in the window, grouped by (node, instance_id, gpu_uuid, model): the
//     facts that price an allocation (kind, profile, slices, SMs, framebuffer) and the GPUs of
//     the capacity; targets without a sample in the window get their latest facts from a
//     second query of the same shape over all time;
//  3. per chunk of allocations, two queries joining the deduplicated samples of their
//     targets with the chunk, grouped by allocation_id: usage (metered and measured time,
//     efficiency, vGPU switch share, and the vGPU waits as a histogram by sumMap) and the
//     first attached sample (cold start), searched first in the quarter hour after
//     requested_at, target by target, and only then further.
//
// The chunk travels inside the query as arrays (ARRAY JOIN of bound arrays gives an inline
// table), so each query is self-contained SQL text and sees exactly the allocations and
// billed intervals that Go clipped; chunks keep the text under ClickHouse's max_query_size.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/pricebook"
)

// chunkSize bounds the allocations per query: each adds a few hundred bytes of query text and
// ClickHouse parses at most max_query_size (256 KiB by default).
const chunkSize = 400

// maxSampleInterval is how far before a billed interval a sample may start and still cover
// part of it.
const maxSampleInterval = time.Minute

const allocationsQuery = `
SELECT allocation_id, cur_tenant, cur_tier, cur_node, cur_instance_id, cur_requested_ns, cur_started_ns, cur_ended_ns
FROM (
    SELECT allocation_id,
        argMax(tenant, version) AS cur_tenant,
        argMax(tier, version) AS cur_tier,
        argMax(node, version) AS cur_node,
        argMax(instance_id, version) AS cur_instance_id,
        argMax(requested_ns, version) AS cur_requested_ns,
        argMax(started_ns, version) AS cur_started_ns,
        argMax(ended_ns, version) AS cur_ended_ns,
        argMax(deleted, version) AS cur_deleted
    FROM allocations
    GROUP BY allocation_id
)
WHERE cur_deleted = 0 AND cur_started_ns > 0 AND cur_started_ns < ? AND (cur_ended_ns = 0 OR cur_ended_ns > ?)
ORDER BY allocation_id`

// readAllocations returns the current state of every allocation billed in the window.
func readAllocations(ctx context.Context, conn driver.Conn, window interval) ([]allocation, error) {
	var out []allocation
	err := queryEach(ctx, conn, allocationsQuery, []any{window.end, window.start}, func(scan func(...any) error) error {
		var a allocation
		err := scan(&a.id, &a.tenant, &a.tier, &a.target.node, &a.target.instance, &a.requested, &a.started, &a.ended)
		out = append(out, a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read allocations: %w", err)
	}
	return out, nil
}

// instanceColumns are the facts of an instance, from its latest sample.
const instanceColumns = `node, instance_id, gpu_uuid, model,
    argMax(kind, ts_ns), argMax(profile, ts_ns), argMax(compute_slices, ts_ns), argMax(sm_count, ts_ns),
    argMax(gpu_sm_count, ts_ns), argMax(mem_total_bytes, ts_ns), argMax(gpu_mem_total_bytes, ts_ns),
    max(ts_ns)`

const instancesInWindowQuery = `
SELECT ` + instanceColumns + `
FROM samples
WHERE time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?
GROUP BY node, instance_id, gpu_uuid, model`

const instancesEverQuery = `
SELECT ` + instanceColumns + `
FROM samples
WHERE (node, instance_id) IN (` + targetsTable + `)
GROUP BY node, instance_id, gpu_uuid, model`

// targetsTable is a set of targets, bound as two arrays.
const targetsTable = `SELECT tn, ti FROM (SELECT ? AS tns, ? AS tis) ARRAY JOIN tns AS tn, tis AS ti`

// gpu is one physical GPU: the unit of capacity.
type gpu struct{ node, uuid, model string }

// fleet is what the samples of a window say about the instances.
type fleet struct {
	instances map[target]pricebook.Instance
	latest    map[target]int64 // ts of the sample the facts come from
	gpus      map[gpu]bool
}

func newFleet() *fleet {
	return &fleet{instances: map[target]pricebook.Instance{}, latest: map[target]int64{}, gpus: map[gpu]bool{}}
}

// readInstancesInWindow reads every instance (and so every GPU) with a sample in the window.
func readInstancesInWindow(ctx context.Context, conn driver.Conn, q sampleQueries, window interval) (*fleet, error) {
	f := newFleet()
	err := f.read(ctx, conn, q.instancesInWindow, seconds(window.start), seconds(window.end), window.start, window.end)
	if err != nil {
		return nil, fmt.Errorf("read the instances sampled in the window: %w", err)
	}
	return f, nil
}

// readInstancesEver reads the latest facts of targets with no sample in the window (an
// allocation billed through an exporter outage still has to be priced), chunkSize at a time.
func readInstancesEver(ctx context.Context, conn driver.Conn, q sampleQueries, targets []target) (*fleet, error) {
	f := newFleet()
	for start := 0; start < len(targets); start += chunkSize {
		nodes, instances := targetArrays(targets[start:min(start+chunkSize, len(targets))])
		if err := f.read(ctx, conn, q.instancesEver, nodes, instances); err != nil {
			return nil, fmt.Errorf("read the latest samples of %d targets not sampled in the window: %w", len(targets), err)
		}
	}
	return f, nil
}

func (f *fleet) read(ctx context.Context, conn driver.Conn, query string, args ...any) error {
	return queryEach(ctx, conn, query, args, func(scan func(...any) error) error {
		var (
			t      target
			g      gpu
			in     pricebook.Instance
			latest uint64
		)
		if err := scan(&t.node, &t.instance, &g.uuid, &in.Model, &in.Kind, &in.Profile, &in.ComputeSlices,
			&in.SMCount, &in.GPUSMCount, &in.MemTotalBytes, &in.GPUMemTotalBytes, &latest); err != nil {
			return err
		}
		g.node, g.model = t.node, in.Model
		f.gpus[g] = true
		// An instance seen on two GPUs in the window (a GPU replaced): its latest facts win.
		if prev, ok := f.latest[t]; !ok || int64(latest) > prev {
			f.instances[t], f.latest[t] = in, int64(latest)
		}
		return nil
	})
}

// billedAllocation is an allocation with what the per-chunk queries need.
type billedAllocation struct {
	allocation
	billed interval
	terms  terms
}

// coldStartSearch is where the first attached sample is looked for: from requested_at up to
// the end of the allocation or of the window, whichever is first. ok is false when there is
// no requested_at to measure from.
func (b billedAllocation) coldStartSearch() (iv interval, ok bool) {
	iv = interval{b.requested, b.billed.end}
	return iv, b.requested > 0 && iv.end > iv.start
}

// allocationsTable is a chunk of billed allocations as an inline table.
const allocationsTable = `
    SELECT allocation_id, node, instance_id,
        toInt64(b_start) AS billed_start, toInt64(b_end) AS billed_end, frac, sliced
    FROM (SELECT ? AS ids, ? AS nodes, ? AS insts, ? AS b_starts, ? AS b_ends, ? AS fracs, ? AS sliced_flags)
    ARRAY JOIN ids AS allocation_id, nodes AS node, insts AS instance_id, b_starts AS b_start, b_ends AS b_end,
        fracs AS frac, sliced_flags AS sliced`

// dedupSamples ends a subquery that selects one row per (node, instance_id, ts_ns) of the
// chunk's targets in a time range; it follows "SELECT node, instance_id, toInt64(ts_ns) AS t,"
// and the columns.
const dedupSamples = `
    FROM samples FINAL
    PREWHERE time >= toDateTime(?) AND time <= toDateTime(?)
    WHERE ts_ns >= ? AND ts_ns < ? AND (node, instance_id) IN (` + targetsTable + `)`

// usageQuery: per allocation, the overlap of every sample with the billed interval, the part
// of it whose activity was measured, the per-sample efficiency (measured samples only) and vGPU
// switch share weighted by it, and the vGPU waits of the samples taken in its billed time as a
// histogram (wait → count; the p99 is computed in Go from it). One pass over the samples
// answers all of it.
const usageQuery = `
SELECT allocation_id, sum(overlap), sum(active), sum(efficiency * active), sum(o_tick * overlap),
    tupleElement(sumMap(ws, cs), 1), tupleElement(sumMap(ws, cs), 2)
FROM (
    SELECT allocation_id,
        least(t + iv, billed_end) - greatest(t, billed_start) AS overlap,
        if(unavailable = 0, overlap, toInt64(0)) AS active,
        if(iv > 0, sw / iv, 0.) AS o_tick,
        if(sliced = 1, if(frac * (1. - o_tick) > 0., least(1., sm / (frac * (1. - o_tick))), 0.), sm) AS efficiency,
        if(sliced = 1 AND t >= billed_start, waits, emptyArrayUInt64()) AS ws,
        arrayMap(w -> toUInt64(1), ws) AS cs
    FROM (
        SELECT node, instance_id, toInt64(ts_ns) AS t,
            toInt64(interval_ns) AS iv, sm_active AS sm, toInt64(vgpu_switch_ns) AS sw,
            sm_active_unavailable AS unavailable, vgpu_waits_ns AS waits` + dedupSamples + `
    ) AS s ALL INNER JOIN (` + allocationsTable + `
    ) AS a USING (node, instance_id)
    WHERE t < billed_end AND t + iv > billed_start
)
GROUP BY allocation_id`

// firstAttachedQuery: per allocation, the first sample in its cold-start search range in
// which its target is attached. min() needs no deduplication.
//
// {{searches}} is one firstAttachedSearch per group of searches that lie close in time,
// joined by UNION ALL: each reads its own targets over its own time range, so that the primary
// key (node, instance_id, ts_ns) selects only the granules of its searches. A single range
// around all of a chunk's searches would read, for every target, everything between the
// earliest requested_at of the chunk and now; a condition per allocation (OR) prunes as well
// but costs every row read hundreds of comparisons.
const firstAttachedQuery = `
SELECT allocation_id, min(t)
FROM ({{searches}}) AS s ALL INNER JOIN (` + searchTable + `
) AS a USING (node, instance_id)
WHERE t >= search_start AND t < search_end
GROUP BY allocation_id`

// firstAttachedSearch reads the attached samples of a group's targets in the group's range,
// bound as seconds (partitions), ns (the key) and the targets' arrays.
const firstAttachedSearch = `
    SELECT node, instance_id, toInt64(ts_ns) AS t
    FROM samples
    PREWHERE time >= toDateTime(?) AND time <= toDateTime(?)
    WHERE attached = 1 AND ts_ns >= ? AND ts_ns < ? AND (node, instance_id) IN (` + targetsTable + `)`

// searchTable is a chunk's cold-start searches as an inline table.
const searchTable = `
    SELECT allocation_id, node, instance_id, toInt64(c_start) AS search_start, toInt64(c_end) AS search_end
    FROM (SELECT ? AS ids, ? AS nodes, ? AS insts, ? AS c_starts, ? AS c_ends)
    ARRAY JOIN ids AS allocation_id, nodes AS node, insts AS instance_id, c_starts AS c_start, c_ends AS c_end`

// coldStartSpan is how much after requested_at the first search for an allocation's first
// attached sample covers. It is found there almost always (a cold start longer than this is
// a breach of any SLA); only the allocations without one are searched again, over the rest
// of their range. The answer is the same (the first of a prefix is the first of the whole);
// what changes is that an allocation running for days costs a few granules, not its days.
const coldStartSpan = 15 * time.Minute

// searchGroupSpan bounds how far apart the starts of the searches of one group may be: a
// group reads each of its targets over the whole group's range, about a granule or two of
// samples_1s (8192 s a granule) when its ranges are short.
const searchGroupSpan = time.Hour

// measured is what the per-chunk queries found for each allocation, by id.
type measured struct {
	usage         map[string]usage
	waits         map[string]histogram
	firstAttached map[string]int64
}

// maxChunkRows bounds the sample rows a chunk's usage query deduplicates (it sorts or groups
// them all, about 100 bytes a row): a day of samples_1s for 400 targets, 35M rows, is close to
// the server's default 4 GB limit per query; 8M rows stay near 1 GB.
const maxChunkRows = 8_000_000

// measure runs the per-chunk queries over the billed allocations. A chunk holds at most
// chunkSize allocations, and fewer when the window is long: about maxChunkRows sample rows of
// its targets over the span of its billed intervals.
func measure(ctx context.Context, conn driver.Conn, q sampleQueries, billed []billedAllocation) (measured, error) {
	m := measured{usage: map[string]usage{}, waits: map[string]histogram{}, firstAttached: map[string]int64{}}
	for _, chunk := range chunks(billed, q.rowsPerSecond) {
		if err := m.measureChunk(ctx, conn, q, chunk); err != nil {
			return measured{}, err
		}
	}
	return m, nil
}

// chunks splits the billed allocations, in order, into chunks of at most chunkSize and about
// maxChunkRows rows (rowsPerSecond of each target over the span of the chunk's billed
// intervals); an allocation alone over the budget is a chunk of its own.
func chunks(billed []billedAllocation, rowsPerSecond float64) [][]billedAllocation {
	var out [][]billedAllocation
	for start := 0; start < len(billed); {
		end, span := start+1, billed[start].billed
		for end < len(billed) && end-start < chunkSize {
			next := interval{min(span.start, billed[end].billed.start), max(span.end, billed[end].billed.end)}
			if float64(end-start+1)*next.duration().Seconds()*rowsPerSecond > maxChunkRows {
				break
			}
			end, span = end+1, next
		}
		out = append(out, billed[start:end])
		start = end
	}
	return out
}

func (m measured) measureChunk(ctx context.Context, conn driver.Conn, q sampleQueries, chunk []billedAllocation) error {
	var (
		targets []target
		seen    = map[target]bool{}
		samples = chunk[0].billed // the span of the chunk's billed intervals
	)
	for _, b := range chunk {
		if !seen[b.target] {
			seen[b.target] = true
			targets = append(targets, b.target)
		}
		samples = interval{min(samples.start, b.billed.start), max(samples.end, b.billed.end)}
	}
	samples.start -= int64(maxSampleInterval)
	nodes, instances := targetArrays(targets)
	table := allocationArgs(chunk)
	sampleArgs := append([]any{seconds(samples.start), seconds(samples.end), samples.start, samples.end, nodes, instances}, table...)

	err := queryEach(ctx, conn, q.usage, sampleArgs, func(scan func(...any) error) error {
		var (
			id              string
			u               usage
			metered, active int64
			waits, counts   []uint64
		)
		if err := scan(&id, &metered, &active, &u.efficiencyNS, &u.switchNS, &waits, &counts); err != nil {
			return err
		}
		u.metered, u.active = time.Duration(metered), time.Duration(active)
		m.usage[id] = u
		if len(waits) > 0 {
			h := histogram{}
			for i, w := range waits {
				h[w] += counts[i]
			}
			m.waits[id] = h
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the usage of %d allocations: %w", len(chunk), err)
	}

	return m.findFirstAttached(ctx, conn, q, chunk)
}

// findFirstAttached finds the first attached sample of each allocation of the chunk: first in
// the coldStartSpan after requested_at, then, for those without one, in the rest of the range.
func (m measured) findFirstAttached(ctx context.Context, conn driver.Conn, q sampleQueries, chunk []billedAllocation) error {
	phases := []func(b billedAllocation) (interval, bool){
		func(b billedAllocation) (interval, bool) {
			iv, ok := b.coldStartSearch()
			iv.end = min(iv.end, iv.start+int64(coldStartSpan))
			return iv, ok
		},
		func(b billedAllocation) (interval, bool) {
			iv, ok := b.coldStartSearch()
			_, found := m.firstAttached[b.id]
			iv.start += int64(coldStartSpan)
			return iv, ok && !found && iv.end > iv.start
		},
	}
	for _, search := range phases {
		var searches []coldStartSearch
		for _, b := range chunk {
			if iv, ok := search(b); ok {
				searches = append(searches, coldStartSearch{b.id, b.target, iv})
			}
		}
		if len(searches) == 0 {
			continue
		}
		query, args := firstAttachedArgs(q, searches)
		err := queryEach(ctx, conn, query, args, func(scan func(...any) error) error {
			var (
				id    string
				first int64
			)
			err := scan(&id, &first)
			m.firstAttached[id] = first
			return err
		})
		if err != nil {
			return fmt.Errorf("read the cold starts of %d allocations: %w", len(searches), err)
		}
	}
	return nil
}

// coldStartSearch is one allocation's search for its first attached sample.
type coldStartSearch struct {
	id     string
	target target
	iv     interval
}

// firstAttachedArgs builds the first-attached query of the searches and binds it: the searches
// in groups whose starts lie within searchGroupSpan of each other, one UNION ALL branch each.
func firstAttachedArgs(q sampleQueries, searches []coldStartSearch) (string, []any) {
	slices.SortFunc(searches, func(a, b coldStartSearch) int { return cmp.Compare(a.iv.start, b.iv.start) })
	var (
		branches                 []string
		args                     []any
		ids, nodes, instances    []string
		searchStarts, searchEnds []int64
	)
	for start := 0; start < len(searches); {
		group := interval{searches[start].iv.start, searches[start].iv.end}
		end := start
		for end < len(searches) && searches[end].iv.start < group.start+int64(searchGroupSpan) {
			group.end = max(group.end, searches[end].iv.end)
			end++
		}
		var (
			targets []target
			seen    = map[target]bool{}
		)
		for _, s := range searches[start:end] {
			if !seen[s.target] {
				seen[s.target] = true
				targets = append(targets, s.target)
			}
		}
		tn, ti := targetArrays(targets)
		branches = append(branches, q.firstAttachedSearch)
		args = append(args, seconds(group.start), seconds(group.end), group.start, group.end, tn, ti)
		start = end
	}
	for _, s := range searches {
		ids, nodes, instances = append(ids, s.id), append(nodes, s.target.node), append(instances, s.target.instance)
		searchStarts, searchEnds = append(searchStarts, s.iv.start), append(searchEnds, s.iv.end)
	}
	query := strings.Replace(q.firstAttached, "{{searches}}", strings.Join(branches, "\n    UNION ALL"), 1)
	return query, append(args, ids, nodes, instances, searchStarts, searchEnds)
}

// allocationArgs binds a chunk as the arrays of allocationsTable.
func allocationArgs(chunk []billedAllocation) []any {
	var (
		ids, nodes, instances    []string
		billedStarts, billedEnds []int64
		fractions                []float64
		sliced                   []bool
	)
	for _, b := range chunk {
		ids = append(ids, b.id)
		nodes = append(nodes, b.target.node)
		instances = append(instances, b.target.instance)
		billedStarts = append(billedStarts, b.billed.start)
		billedEnds = append(billedEnds, b.billed.end)
		fractions = append(fractions, b.terms.fraction)
		sliced = append(sliced, b.terms.timeSliced)
	}
	return []any{ids, nodes, instances, billedStarts, billedEnds, fractions, sliced}
}

func targetArrays(targets []target) (nodes, instances []string) {
	for _, t := range targets {
		nodes = append(nodes, t.node)
		instances = append(instances, t.instance)
	}
	return nodes, instances
}

// seconds is the whole second of a ns timestamp: the samples' time column, for partition pruning.
func seconds(ns int64) int64 { return ns / int64(time.Second) }

// queryEach runs a query and calls each for every row it returns.
func queryEach(ctx context.Context, conn driver.Conn, query string, args []any, each func(scan func(...any) error) error) error {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
