package attribution

// How the SQL is structured
//
// All SQL runs on ClickHouse 18.16 and on current ClickHouse: no DateTime64, no server-side
// parameters (clickhouse-go binds ? on the client), functions 18.16 has. Nothing relies on
// FINAL or on merges having happened:
//   - allocations: argMax(column, version) per allocation_id; deleted ones dropped after that.
//   - samples: a subquery GROUP BY (node, instance_id, ts_ns) with any() collapses rows that
//     were delivered more than once (at-least-once); min() and argMax() need no deduplication.
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
//  3. per chunk of allocations, three queries joining the deduplicated samples of their
//     targets with the chunk, grouped by allocation_id: usage (metered time, efficiency,
//     vGPU switch share), the vGPU waits as a histogram (ARRAY JOIN, GROUP BY wait) and the
//     first attached sample (cold start).
//
// The chunk travels inside the query as arrays (ARRAY JOIN of bound arrays gives an inline
// table), so each query is self-contained SQL text and sees exactly the allocations and
// billed intervals that Go clipped; chunks keep the text under ClickHouse's max_query_size.

import (
	"context"
	"fmt"
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
        toInt64(b_start) AS billed_start, toInt64(b_end) AS billed_end,
        toInt64(c_start) AS search_start, toInt64(c_end) AS search_end,
        frac, sliced
    FROM (SELECT ? AS ids, ? AS nodes, ? AS insts, ? AS b_starts, ? AS b_ends, ? AS c_starts, ? AS c_ends, ? AS fracs, ? AS sliced_flags)
    ARRAY JOIN ids AS allocation_id, nodes AS node, insts AS instance_id, b_starts AS b_start, b_ends AS b_end,
        c_starts AS c_start, c_ends AS c_end, fracs AS frac, sliced_flags AS sliced`

// dedupSamples ends a subquery that selects one row per (node, instance_id, ts_ns) of the
// chunk's targets in a time range; it follows "SELECT node, instance_id, toInt64(ts_ns) AS t,"
// and the aggregated columns.
const dedupSamples = `
    FROM samples
    WHERE time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?
        AND (node, instance_id) IN (` + targetsTable + `)
    GROUP BY node, instance_id, ts_ns`

// usageQuery: per allocation, the overlap of every sample with the billed interval, and the
// per-sample efficiency and vGPU switch share weighted by it.
const usageQuery = `
SELECT allocation_id, sum(overlap), sum(efficiency * overlap), sum(o_tick * overlap)
FROM (
    SELECT allocation_id,
        least(t + iv, billed_end) - greatest(t, billed_start) AS overlap,
        if(iv > 0, sw / iv, 0.) AS o_tick,
        if(sliced = 1, if(frac * (1. - o_tick) > 0., least(1., sm / (frac * (1. - o_tick))), 0.), sm) AS efficiency
    FROM (
        SELECT node, instance_id, toInt64(ts_ns) AS t,
            toInt64(any(interval_ns)) AS iv, any(sm_active) AS sm, toInt64(any(vgpu_switch_ns)) AS sw` + dedupSamples + `
    ) AS s ALL INNER JOIN (` + allocationsTable + `
    ) AS a USING (node, instance_id)
    WHERE t < billed_end AND t + iv > billed_start
)
GROUP BY allocation_id`

// waitsQuery: per allocation, the vGPU waits of the samples taken in its billed time, as a
// histogram (the p99 is computed in Go from it).
const waitsQuery = `
SELECT allocation_id, w, count()
FROM (
    SELECT allocation_id, waits
    FROM (
        SELECT node, instance_id, toInt64(ts_ns) AS t, any(vgpu_waits_ns) AS waits` + dedupSamples + `
    ) AS s ALL INNER JOIN (` + allocationsTable + `
    ) AS a USING (node, instance_id)
    WHERE sliced = 1 AND t >= billed_start AND t < billed_end
)
ARRAY JOIN waits AS w
GROUP BY allocation_id, w`

// firstAttachedQuery: per allocation, the first sample at or after requested_at in which its
// target is attached. min() needs no deduplication.
const firstAttachedQuery = `
SELECT allocation_id, min(t)
FROM (
    SELECT node, instance_id, toInt64(ts_ns) AS t
    FROM samples
    WHERE attached = 1 AND time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?
        AND (node, instance_id) IN (` + targetsTable + `)
) AS s ALL INNER JOIN (` + allocationsTable + `
) AS a USING (node, instance_id)
WHERE t >= search_start AND t < search_end
GROUP BY allocation_id`

// measured is what the per-chunk queries found for each allocation, by id.
type measured struct {
	usage         map[string]usage
	waits         map[string]histogram
	firstAttached map[string]int64
}

// measure runs the per-chunk queries over the billed allocations.
func measure(ctx context.Context, conn driver.Conn, q sampleQueries, billed []billedAllocation) (measured, error) {
	m := measured{usage: map[string]usage{}, waits: map[string]histogram{}, firstAttached: map[string]int64{}}
	for start := 0; start < len(billed); start += chunkSize {
		chunk := billed[start:min(start+chunkSize, len(billed))]
		if err := m.measureChunk(ctx, conn, q, chunk); err != nil {
			return measured{}, err
		}
	}
	return m, nil
}

func (m measured) measureChunk(ctx context.Context, conn driver.Conn, q sampleQueries, chunk []billedAllocation) error {
	var (
		targets []target
		seen    = map[target]bool{}
		samples = chunk[0].billed // the span of the chunk's billed intervals
		search  interval          // the span of its cold-start searches; empty if none
	)
	for _, b := range chunk {
		if !seen[b.target] {
			seen[b.target] = true
			targets = append(targets, b.target)
		}
		samples = interval{min(samples.start, b.billed.start), max(samples.end, b.billed.end)}
		if iv, ok := b.coldStartSearch(); ok {
			if search.end == 0 {
				search = iv
			}
			search = interval{min(search.start, iv.start), max(search.end, iv.end)}
		}
	}
	samples.start -= int64(maxSampleInterval)
	nodes, instances := targetArrays(targets)
	table := allocationArgs(chunk)
	sampleArgs := append([]any{seconds(samples.start), seconds(samples.end), samples.start, samples.end, nodes, instances}, table...)

	err := queryEach(ctx, conn, q.usage, sampleArgs, func(scan func(...any) error) error {
		var (
			id string
			u  usage
			ns int64
		)
		err := scan(&id, &ns, &u.efficiencyNS, &u.switchNS)
		u.metered = time.Duration(ns)
		m.usage[id] = u
		return err
	})
	if err != nil {
		return fmt.Errorf("read the usage of %d allocations: %w", len(chunk), err)
	}

	err = queryEach(ctx, conn, q.waits, sampleArgs, func(scan func(...any) error) error {
		var (
			id      string
			wait, n uint64
		)
		err := scan(&id, &wait, &n)
		if m.waits[id] == nil {
			m.waits[id] = histogram{}
		}
		m.waits[id][wait] += n
		return err
	})
	if err != nil {
		return fmt.Errorf("read the vGPU waits of %d allocations: %w", len(chunk), err)
	}

	if search.end == 0 {
		return nil // no allocation of the chunk has a requested_at
	}
	searchArgs := append([]any{seconds(search.start), seconds(search.end), search.start, search.end, nodes, instances}, table...)
	err = queryEach(ctx, conn, q.firstAttached, searchArgs, func(scan func(...any) error) error {
		var (
			id    string
			first int64
		)
		err := scan(&id, &first)
		m.firstAttached[id] = first
		return err
	})
	if err != nil {
		return fmt.Errorf("read the cold starts of %d allocations: %w", len(chunk), err)
	}
	return nil
}

// allocationArgs binds a chunk as the arrays of allocationsTable.
func allocationArgs(chunk []billedAllocation) []any {
	var (
		ids, nodes, instances                              []string
		billedStarts, billedEnds, searchStarts, searchEnds []int64
		fractions                                          []float64
		sliced                                             []bool
	)
	for _, b := range chunk {
		ids = append(ids, b.id)
		nodes = append(nodes, b.target.node)
		instances = append(instances, b.target.instance)
		billedStarts = append(billedStarts, b.billed.start)
		billedEnds = append(billedEnds, b.billed.end)
		search, ok := b.coldStartSearch()
		if !ok {
			search = interval{} // matches no sample
		}
		searchStarts = append(searchStarts, search.start)
		searchEnds = append(searchEnds, search.end)
		fractions = append(fractions, b.terms.fraction)
		sliced = append(sliced, b.terms.timeSliced)
	}
	return []any{ids, nodes, instances, billedStarts, billedEnds, searchStarts, searchEnds, fractions, sliced}
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
