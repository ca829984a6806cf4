package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// maxSampleInterval is how far before a billed interval a sample may start and still cover
// part of it.
const maxSampleInterval = time.Minute

// allocationsTable is a chunk of billed allocations as an inline table, bound as packed arrays
// (store.go); the billed fractions as the distinct values (few: one a profile) and each
// allocation's index among them (1-based), so that each is bound as a literal, as ever.
const allocationsTable = `
    SELECT allocation_id, node, instance_id,
        toInt64(b_start) AS billed_start, toInt64(b_end) AS billed_end, frac, sliced
    FROM (SELECT ` + chquery.StringArray + ` AS ids, ` + chquery.StringArray + ` AS nodes, ` + chquery.StringArray + ` AS insts,
        ` + chquery.IntArray + ` AS b_starts, ` + chquery.IntArray + ` AS b_ends, ? AS frac_values,
        arrayMap(x -> frac_values[toUInt32(x)], splitByChar(',', ?)) AS fracs,
        arrayMap(x -> toUInt8(x), splitByChar(',', ?)) AS sliced_flags)
    ARRAY JOIN ids AS allocation_id, nodes AS node, insts AS instance_id, b_starts AS b_start, b_ends AS b_end,
        fracs AS frac, sliced_flags AS sliced`

// dedupSamples ends a subquery that selects one row per sample (tables.SampleKey, read with
// tables.Final) of the chunk's targets in a time range; it follows
// "SELECT node, instance_id, toInt64(ts_ns) AS t," and the columns.
var dedupSamples = `
    FROM ` + tables.Final(tables.Samples) + `
    PREWHERE time >= toDateTime(?) AND time <= toDateTime(?)
    WHERE ts_ns >= ? AND ts_ns < ? AND (node, instance_id) IN (` + chquery.TargetsTable + `)`

// usageQuery: per allocation, the time its samples cover in the billed interval (the measure
// of their union, never the sum: attribution/README.md, "Definitions"), the part covered by samples whose
// activity was measured, the efficiency and vGPU switch share, and the vGPU waits of the
// samples taken in its billed time as a histogram (wait → count; the p99 is computed in Go
// from it). One pass over the samples answers all of it.
//
// Each sample's part of the billed time is cut at the UTC minutes it spans (at most two: an
// interval is at most tables.MaxInterval), and each allocation-minute sweeps its pieces
// (tables.Coverage, tables.Sweep): the unions of all and of the measured pieces, and the integrals over them of
// the mean switch share and mean sm_active of the samples covering each instant (where samples
// overlap, each instant counts once). The rollups hold the same unions and integrals per
// second, and both are additive over disjoint slices of time, so every path sums the same
// numbers per minute (usageByMinute). The waits count in the piece in which the sample was taken.
var usageQuery = usageByMinute(rawMinutes)

// rawMinutes is the allocation-minutes of usageQuery from the raw samples; m_mem is the highest
// memory used of the samples taken in the minute within the billed time (right-sizing's memory
// need, NeedsQuery), which the bill does not read.
var rawMinutes = `
        SELECT allocation_id, minute, sliced AS m_sliced, frac AS m_frac,
            toFloat64(u_union) AS m_overlap, toFloat64(a_union) AS m_active, a_integral AS m_sm, u_integral AS m_switch,
            m_ws, m_cs, m_mem
        FROM (
            SELECT *,
                ` + tables.Coverage("u", "los", "his", "os", "u_len", "u_weighted", "regular") + `,
                ` + tables.Coverage("a", "alos", "ahis", "sms", "a_len", "a_weighted", "regular") + `
            FROM (
                SELECT allocation_id, minute, any(sliced) AS sliced, any(frac) AS frac,
                    groupArray(lo) AS los, groupArray(hi) AS his, groupArray(o_tick) AS os,
                    groupArrayIf(lo, measured) AS alos, groupArrayIf(hi, measured) AS ahis, groupArrayIf(sm, measured) AS sms,
                    tupleElement(sumMap(ws, cs), 1) AS m_ws, tupleElement(sumMap(ws, cs), 2) AS m_cs,
                    sum(hi - lo) AS u_len, sum(o_tick * (hi - lo)) AS u_weighted,
                    sumIf(hi - lo, measured) AS a_len, sumIf(sm * (hi - lo), measured) AS a_weighted,
                    ` + tables.Regular + ` AS regular, max(mem_taken) AS m_mem
                FROM (
                    SELECT allocation_id, sliced, frac, sm, measured, o_tick, t, iv, mem,
                        greatest(t, billed_start) AS b_lo, least(t + iv, billed_end) AS b_hi,
                        intDiv(b_lo, 60000000000) AS first_minute,
                        arrayJoin(if(intDiv(b_hi - 1, 60000000000) = first_minute, [first_minute], [first_minute, first_minute + 1])) AS minute,
                        greatest(b_lo, minute * 60000000000) - minute * 60000000000 AS lo,
                        least(b_hi, (minute + 1) * 60000000000) - minute * 60000000000 AS hi,
                        if(sliced = 1 AND t >= billed_start AND minute = first_minute, waits, emptyArrayUInt64()) AS ws,
                        arrayMap(w -> toUInt64(1), ws) AS cs,
                        if(t >= billed_start AND minute = first_minute, mem, toUInt64(0)) AS mem_taken
                    FROM (
                        SELECT node, instance_id, toInt64(ts_ns) AS t, mem_used_bytes AS mem,
                            toInt64(least(interval_ns, ` + tables.MaxInterval + `)) AS iv, sm_active AS sm,
                            if(iv > 0, vgpu_switch_ns / iv, 0.) AS o_tick,
                            ` + tables.Measured + ` AS measured, vgpu_waits_ns AS waits` + dedupSamples + `
                    ) AS s ALL INNER JOIN (` + allocationsTable + `
                    ) AS a USING (node, instance_id)
                    WHERE t < billed_end AND t + iv > billed_start
                )
                WHERE hi > lo
                GROUP BY allocation_id, minute
            )
        )`

// usageByMinute sums per allocation the allocation-minutes of minutes (a subquery with one row
// per allocation and UTC minute: allocation_id, m_sliced, m_frac (billed fraction), m_overlap
// and m_active (the covered and the measured time in the billed time, ns), m_sm (the integral
// of sm_active over the measured time) and m_switch (that of the switch share over the
// covered time), m_ws and m_cs (waits histogram)). A vGPU's efficiency in a minute is
// min(1, m_sm / (fraction·(1 − o)·m_active)), o = m_switch / m_overlap the minute's switch
// share: clipping each 100 ms tick would turn the scheduler's phase noise into waste. Sums of
// the minutes are the same whatever the table.
func usageByMinute(minutes string) string {
	return `
SELECT allocation_id, toInt64(round(sum(m_overlap))), toInt64(round(sum(m_active))),
    sum(if(m_sliced = 1, if(m_den > 0., least(1., m_sm / m_den), 0.) * m_active, m_sm)), sum(m_switch),
    tupleElement(sumMap(m_ws, m_cs), 1), tupleElement(sumMap(m_ws, m_cs), 2)
FROM (
    SELECT allocation_id, m_sliced, m_active, m_sm, m_switch, m_ws, m_cs, m_overlap,
        m_frac * (m_active - if(m_overlap > 0., m_switch / m_overlap, 0.) * m_active) AS m_den
    FROM (` + minutes + `
    )
)
GROUP BY allocation_id`
}

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
    FROM ` + tables.Samples + `
    PREWHERE time >= toDateTime(?) AND time <= toDateTime(?)
    WHERE attached = 1 AND ts_ns >= ? AND ts_ns < ? AND (node, instance_id) IN (` + chquery.TargetsTable + `)`

// searchTable is a chunk's cold-start searches as an inline table.
const searchTable = `
    SELECT allocation_id, node, instance_id, toInt64(c_start) AS search_start, toInt64(c_end) AS search_end
    FROM (SELECT ` + chquery.StringArray + ` AS ids, ` + chquery.StringArray + ` AS nodes, ` + chquery.StringArray + ` AS insts,
        ` + chquery.IntArray + ` AS c_starts, ` + chquery.IntArray + ` AS c_ends)
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

// maxChunkRows bounds the sample rows a chunk's usage query deduplicates (it sorts or groups
// them all, about 100 bytes a row): a day of samples_1s for 400 targets, 35M rows, is close to
// the server's default 4 GB limit per query; 8M rows stay near 1 GB.
const maxChunkRows = 8_000_000

// A chunk's queries read every row of its time span, whatever its targets: samples_1s is
// sorted by time first (migration 0048), so that a minute reads only that minute, and a chunk
// of a few targets reads the whole fleet's rows of the span. So chunks are as large as the
// other bounds allow: maxChunkRows, and the query text, which holds the chunk's arrays
// (maxChunkText, read with max_query_size chunkQuerySize instead of the default 256 KiB).
// A minute of 50,000 instances is one chunk: as three of 20,000, each read most of the
// minute's granules (14.2M rows read, 35 s under load, against 9.8M and 28 s; BenchmarkMinute).
const (
	maxChunkAllocations = 100_000
	maxChunkText        = 64 << 20
	chunkQuerySize      = 2 * maxChunkText
)

// chunkText bounds the query text an allocation adds to its chunk's queries: its strings in
// the allocations and the targets (or searches) arrays, and its numbers, quoted and separated,
// once more for samples_1m's leg of partial minutes.
func chunkText(b billing.Billed) int {
	return 2 * (2*(len(b.ID)+len(b.Target.Node)+len(b.Target.Instance)) + 128)
}

// chunkContext is ctx for the queries of a chunk: with max_query_size raised when the chunk's
// text may be over the default. It replaces the settings ctx may carry (clickhouse.Context;
// no caller sets any).
func chunkContext(ctx context.Context, chunk []billing.Billed) context.Context {
	if len(chunk) <= chquery.ChunkSize {
		return ctx
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_query_size": chunkQuerySize}))
}

// Measure runs the per-chunk queries over the billed allocations, reading the source. A chunk
// holds at most maxChunkAllocations allocations and maxChunkText of query text, and fewer when
// the window is long: about maxChunkRows sample rows of its targets over the span of its
// billed intervals.
//
// known, if not nil, answers the cold-start searches it remembers and is told the answers
// found (ColdStarts).
func Measure(ctx context.Context, conn Querier, src Samples, billed []billing.Billed, known *ColdStarts) (billing.Measured, error) {
	q, err := src.queries()
	if err != nil {
		return billing.Measured{}, err
	}
	m := measured{Usage: map[string]billing.Usage{}, Waits: map[string]billing.Histogram{}, FirstAttached: map[string]int64{}}
	for _, chunk := range chunks(billed, q.rowsPerSecond) {
		if err := m.measureChunk(ctx, conn, src, q, chunk, known); err != nil {
			return billing.Measured{}, err
		}
	}
	return billing.Measured(m), nil
}

// measured is what the per-chunk queries found so far.
type measured billing.Measured

// chunks splits the billed allocations, in order, into chunks of at most maxChunkAllocations,
// maxChunkText (chunkText) and about maxChunkRows rows (rowsPerSecond of each target over the
// span of the chunk's billed intervals); an allocation alone over a budget is a chunk of its own.
func chunks(billed []billing.Billed, rowsPerSecond float64) [][]billing.Billed {
	var out [][]billing.Billed
	for start := 0; start < len(billed); {
		end, span, text := start+1, billed[start].Billed, chunkText(billed[start])
		for end < len(billed) && end-start < maxChunkAllocations {
			next := billing.Interval{Start: min(span.Start, billed[end].Billed.Start), End: max(span.End, billed[end].Billed.End)}
			if float64(end-start+1)*next.Duration().Seconds()*rowsPerSecond > maxChunkRows || text+chunkText(billed[end]) > maxChunkText {
				break
			}
			end, span, text = end+1, next, text+chunkText(billed[end])
		}
		out = append(out, billed[start:end])
		start = end
	}
	return out
}

// distinct is the targets, once each, in order of first appearance.
func distinct[T any](items []T, target func(T) billing.Target) []billing.Target {
	var (
		targets []billing.Target
		seen    = map[billing.Target]bool{}
	)
	for _, it := range items {
		if t := target(it); !seen[t] {
			seen[t] = true
			targets = append(targets, t)
		}
	}
	return targets
}

func (m measured) measureChunk(ctx context.Context, conn Querier, src Samples, q sampleQueries, chunk []billing.Billed, known *ColdStarts) error {
	ctx = chunkContext(ctx, chunk)
	span, sampleArgs := usageArgs(q, chunk)

	// The memory and energy are read beside the usage, on another connection: the extra query
	// then costs a pass next to nothing of its time.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mem map[string]memEnergy
	memDone := make(chan error, 1)
	go func() {
		var err error
		mem, err = readMemEnergy(ctx, conn, src, chunk, span)
		memDone <- err
	}()
	err := chquery.Each(ctx, conn, q.usage, sampleArgs, func(scan func(...any) error) error {
		var (
			id              string
			u               billing.Usage
			metered, active int64
			waits, counts   []uint64
		)
		if err := scan(&id, &metered, &active, &u.EfficiencyNS, &u.SwitchNS, &waits, &counts); err != nil {
			return err
		}
		u.Metered, u.Active = time.Duration(metered), time.Duration(active)
		m.Usage[id] = u
		if len(waits) > 0 {
			m.Waits[id] = histogram(waits, counts)
		}
		return nil
	})
	if err != nil {
		cancel()
		<-memDone
		return fmt.Errorf("read the usage of %d allocations: %w", len(chunk), err)
	}
	if err := <-memDone; err != nil {
		return err
	}
	for id, x := range mem {
		u := m.Usage[id]
		u.MemUsedNS, u.MemNS, u.EnergyJ = x.used, x.weighed, x.energy
		m.Usage[id] = u
	}

	return m.findFirstAttached(ctx, conn, q, chunk, known)
}

// usageArgs are the arguments of a chunk's usage query (and of its needs query, which reads
// the same allocation-minutes), and the span of the chunk's billed intervals.
func usageArgs(q sampleQueries, chunk []billing.Billed) (span billing.Interval, args []any) {
	span = chunk[0].Billed
	for _, b := range chunk {
		span = billing.Interval{Start: min(span.Start, b.Billed.Start), End: max(span.End, b.Billed.End)}
	}
	samples := span
	samples.Start -= int64(maxSampleInterval)
	nodes, instances := chquery.TargetArrays(distinct(chunk, func(b billing.Billed) billing.Target { return b.Target }))
	table := allocationArgs(chunk)
	args = append([]any{chquery.Seconds(samples.Start), chquery.Seconds(samples.End), samples.Start, samples.End, nodes, instances}, table...)
	if q.partialMinutes {
		pn, pi, pm := partialMinutes(chunk)
		args = append(args, chquery.Seconds(samples.Start), chquery.Seconds(samples.End), pn, pi, pm,
			samples.Start, samples.End, nodes, instances)
		args = append(args, table...)
	}
	return span, args
}

// partialMinutes are the minutes (Unix seconds / 60) of each allocation's target in which its
// billed time starts or ends inside the minute, as the arrays of partialMinutesTable.
func partialMinutes(chunk []billing.Billed) (nodes, instances, minutes string) {
	n, i, m := partialMinuteArrays(chunk)
	return chquery.PackStrings(n), chquery.PackStrings(i), chquery.PackInts(m)
}

func partialMinuteArrays(chunk []billing.Billed) (nodes, instances []string, minutes []uint32) {
	const minute = int64(time.Minute)
	add := func(t billing.Target, ns int64) {
		nodes, instances, minutes = append(nodes, t.Node), append(instances, t.Instance), append(minutes, uint32(ns/minute))
	}
	for _, b := range chunk {
		if b.Billed.Start%minute != 0 {
			add(b.Target, b.Billed.Start)
		}
		if b.Billed.End%minute != 0 && (b.Billed.End/minute != b.Billed.Start/minute || b.Billed.Start%minute == 0) {
			add(b.Target, b.Billed.End)
		}
	}
	if len(nodes) == 0 { // an empty IN set: ClickHouse needs the arrays' type
		nodes, instances, minutes = []string{""}, []string{""}, []uint32{0}
	}
	return nodes, instances, minutes
}

// histogram is the waits of sumMap's two arrays (lengths, counts).
func histogram(waits, counts []uint64) billing.Histogram {
	h := billing.Histogram{}
	for i, w := range waits {
		h[w] += counts[i]
	}
	return h
}

// findFirstAttached finds the first attached sample of each allocation of the chunk: first in
// the coldStartSpan after requested_at, then, for those without one, in the rest of the range.
// Those known remembers are not searched; it is told the others found.
func (m measured) findFirstAttached(ctx context.Context, conn Querier, q sampleQueries, chunk []billing.Billed, known *ColdStarts) error {
	remembered := map[string]bool{}
	for _, b := range chunk {
		if first, ok := known.lookup(b); ok {
			m.FirstAttached[b.ID], remembered[b.ID] = first, true
		}
	}
	phases := []func(b billing.Billed) (billing.Interval, bool){
		func(b billing.Billed) (billing.Interval, bool) {
			iv, ok := b.ColdStartSearch()
			iv.End = min(iv.End, iv.Start+int64(coldStartSpan))
			return iv, ok && !remembered[b.ID]
		},
		func(b billing.Billed) (billing.Interval, bool) {
			iv, ok := b.ColdStartSearch()
			_, found := m.FirstAttached[b.ID]
			iv.Start += int64(coldStartSpan)
			return iv, ok && !found && iv.End > iv.Start
		},
	}
	for _, search := range phases {
		var searches []coldStartSearch
		for _, b := range chunk {
			if iv, ok := search(b); ok {
				searches = append(searches, coldStartSearch{b.ID, b.Target, iv})
			}
		}
		if len(searches) == 0 {
			continue
		}
		if q.byMinutes {
			var err error
			if searches, err = m.firstAttachedByMinutes(ctx, conn, searches); err != nil {
				return fmt.Errorf("read the cold starts of %d allocations: %w", len(searches), err)
			}
			if len(searches) == 0 {
				continue
			}
		}
		query, args := firstAttachedArgs(q, searches)
		err := chquery.Each(ctx, conn, query, args, func(scan func(...any) error) error {
			var (
				id    string
				first int64
			)
			if err := scan(&id, &first); err != nil {
				return err
			}
			if prev, ok := m.FirstAttached[id]; !ok || first < prev {
				m.FirstAttached[id] = first
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read the cold starts of %d allocations: %w", len(searches), err)
		}
	}
	if known != nil {
		for _, b := range chunk {
			if first, ok := m.FirstAttached[b.ID]; ok && !remembered[b.ID] {
				known.remember(b, first)
			}
		}
	}
	return nil
}

// firstAttachedByMinutes answers the searches from samples_1m (coldStartMinutesQuery) and
// returns what is left to read per second: for each search whose first minute has an attached
// sample before its start, that minute from the search's start on. The first attached sample
// is then the earlier of the two.
func (m measured) firstAttachedByMinutes(ctx context.Context, conn Querier, searches []coldStartSearch) ([]coldStartSearch, error) {
	// One read of samples_1m (sorted by node first) over all the searches' range: each target's
	// rows in it, a few a search.
	span := searches[0].iv
	for _, s := range searches {
		span = billing.Interval{Start: min(span.Start, s.iv.Start), End: max(span.End, s.iv.End)}
	}
	tn, ti := chquery.TargetArrays(distinct(searches, func(s coldStartSearch) billing.Target { return s.target }))
	args := append([]any{chquery.Seconds(span.Start), chquery.Seconds(span.End), span.Start, span.End, tn, ti}, searchArgs(searches)...)
	straddling := map[string]bool{}
	err := chquery.Each(ctx, conn, coldStartMinutesQuery, args, func(scan func(...any) error) error {
		var (
			id        string
			found     int64
			straddles bool
		)
		if err := scan(&id, &found, &straddles); err != nil {
			return err
		}
		if found > 0 {
			m.FirstAttached[id] = found
		}
		straddling[id] = straddles
		return nil
	})
	if err != nil {
		return nil, err
	}
	var rest []coldStartSearch
	for _, s := range searches {
		if !straddling[s.id] {
			continue
		}
		const minute = int64(time.Minute)
		s.iv.End = min(s.iv.End, chquery.FloorTo(s.iv.Start, minute)+minute)
		rest = append(rest, s)
	}
	return rest, nil
}

// coldStartSearch is one allocation's search for its first attached sample.
type coldStartSearch struct {
	id     string
	target billing.Target
	iv     billing.Interval
}

// firstAttachedArgs builds the first-attached query of the searches and binds it: the searches
// in groups whose starts lie within searchGroupSpan of each other, one UNION ALL branch each.
func firstAttachedArgs(q sampleQueries, searches []coldStartSearch) (string, []any) {
	slices.SortFunc(searches, func(a, b coldStartSearch) int { return cmp.Compare(a.iv.Start, b.iv.Start) })
	var (
		branches []string
		args     []any
	)
	for start := 0; start < len(searches); {
		group := searches[start].iv
		end := start
		for end < len(searches) && searches[end].iv.Start < group.Start+int64(searchGroupSpan) {
			group.End = max(group.End, searches[end].iv.End)
			end++
		}
		tn, ti := chquery.TargetArrays(distinct(searches[start:end], func(s coldStartSearch) billing.Target { return s.target }))
		branches = append(branches, q.firstAttachedSearch)
		args = append(args, chquery.Seconds(group.Start), chquery.Seconds(group.End), group.Start, group.End, tn, ti)
		start = end
	}
	query := strings.Replace(q.firstAttached, "{{searches}}", strings.Join(branches, "\n    UNION ALL"), 1)
	return query, append(args, searchArgs(searches)...)
}

// searchArgs binds the searches as the arrays of searchTable.
func searchArgs(searches []coldStartSearch) []any {
	var (
		ids, nodes, instances    []string
		searchStarts, searchEnds []int64
	)
	for _, s := range searches {
		ids, nodes, instances = append(ids, s.id), append(nodes, s.target.Node), append(instances, s.target.Instance)
		searchStarts, searchEnds = append(searchStarts, s.iv.Start), append(searchEnds, s.iv.End)
	}
	return []any{chquery.PackStrings(ids), chquery.PackStrings(nodes), chquery.PackStrings(instances), chquery.PackInts(searchStarts), chquery.PackInts(searchEnds)}
}

// allocationArgs binds a chunk as the arrays of allocationsTable.
func allocationArgs(chunk []billing.Billed) []any {
	var (
		ids, nodes, instances    []string
		billedStarts, billedEnds []int64
		fractions                []float64
		fractionOf               []int
		sliced                   []int
		index                    = map[float64]int{}
	)
	for _, b := range chunk {
		ids = append(ids, b.ID)
		nodes = append(nodes, b.Target.Node)
		instances = append(instances, b.Target.Instance)
		billedStarts = append(billedStarts, b.Billed.Start)
		billedEnds = append(billedEnds, b.Billed.End)
		i, ok := index[b.Terms.Fraction]
		if !ok {
			fractions = append(fractions, b.Terms.Fraction)
			i = len(fractions)
			index[b.Terms.Fraction] = i
		}
		fractionOf = append(fractionOf, i)
		s := 0
		if b.Terms.TimeSliced {
			s = 1
		}
		sliced = append(sliced, s)
	}
	return []any{chquery.PackStrings(ids), chquery.PackStrings(nodes), chquery.PackStrings(instances), chquery.PackInts(billedStarts), chquery.PackInts(billedEnds),
		fractions, chquery.PackInts(fractionOf), chquery.PackInts(sliced)}
}
