package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// Need is what right-sizing reads of an allocation (README.md, "Right-sizing"): its measured
// minutes' mean activity, its memory's high-water mark and its measured time.
type Need struct {
	// Minutes is, per measured allocation-minute (partial ones too), the time-weighted mean
	// sm_active of its measured samples over the billed time in it, in the instance's own
	// units (a MIG instance's of its SMs): the caller converts to whole-GPU units.
	Minutes []float64
	// MemUsedMax is the highest mem_used_bytes of the samples taken in the billed time (of
	// the rollups' rows in it: their mem_used_max_bytes).
	MemUsedMax uint64
	// Active is the measured time; ActiveNS the integral of sm_active over it (ns).
	Active   time.Duration
	ActiveNS float64
}

// needsByMinute sums per allocation the allocation-minutes of minutes (usageByMinute's
// subquery, from any source): the minutes' means, the highest memory, the measured time and
// the activity integral. The minutes are the same allocation-minutes the bill sums, so the
// needs are the same whatever the table, like the bill.
func needsByMinute(minutes string) string {
	return `
SELECT allocation_id, groupArrayIf(m_sm / m_active, m_active > 0), max(m_mem), toInt64(round(sum(m_active))), sum(m_sm)
FROM (` + minutes + `
)
GROUP BY allocation_id`
}

var needsQueries = map[Samples]string{
	RawSamples:   needsByMinute(rawMinutes),
	SecondRollup: needsByMinute(rollupAllocationMinutes(tables.Samples1s, time.Second)),
}

// ReadNeeds reads the needs of the billed allocations from the source, by allocation id, in
// the chunks Measure reads them in (an allocation with no sample in its billed time has none).
func ReadNeeds(ctx context.Context, conn Querier, src Samples, billed []billing.Billed) (map[string]Need, error) {
	q, err := src.queries()
	if err != nil {
		return nil, err
	}
	out := make(map[string]Need, len(billed))
	for _, chunk := range chunks(billed, q.rowsPerSecond) {
		span, args := usageArgs(q, chunk)
		query := needsQueries[src]
		if src == MinuteRollup {
			query, args = minuteNeeds(chunk, span, args)
		}
		err := chquery.Each(chunkContext(ctx, chunk), conn, query, args, func(scan func(...any) error) error {
			var (
				id     string
				n      Need
				active int64
			)
			if err := scan(&id, &n.Minutes, &n.MemUsedMax, &active, &n.ActiveNS); err != nil {
				return err
			}
			n.Active = time.Duration(active)
			out[id] = n
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read the needs of %d allocations from %s: %w", len(chunk), src, err)
		}
	}
	return out, nil
}

// maxNeedsBranches bounds the branches of minuteRollupNeeds: each repeats the chunk's targets
// in the query's text.
const maxNeedsBranches = 8

// minuteNeeds is the needs query of a chunk from samples_1m and its arguments (usageArgs'
// args rebound): the whole minutes read in up to maxNeedsBranches branches of whole UTC days
// over the chunk's span, the first open to the past and the last to the future.
func minuteNeeds(chunk []billing.Billed, span billing.Interval, args []any) (string, []any) {
	const day = int64(24 * time.Hour)
	first, last := chquery.FloorTo(span.Start-int64(maxSampleInterval), day), chquery.FloorTo(span.End, day)
	days := (last-first)/day + 1
	branches := int(min(days, maxNeedsBranches))
	if branches*chunkTextOf(chunk) > maxChunkText {
		branches = 1
	}
	per := (days + int64(branches) - 1) / int64(branches)
	dedup, table, rest := args[:6], args[6:6+len(allocationArgs(chunk))], args[6+len(allocationArgs(chunk)):]
	var out []any
	for i := range branches {
		lo, hi := first+int64(i)*per*day, first+int64(i+1)*per*day
		if i == 0 {
			lo = 0
		}
		if i == branches-1 {
			hi = math.MaxInt64
		}
		out = append(out, dedup...)
		out = append(out, chquery.DateTimeArg(lo), chquery.DateTimeArg(hi))
	}
	out = append(out, table...)
	out = append(out, rest...)
	return needsByMinute(minuteRollupNeeds(branches)), out
}

// chunkTextOf is the chunk's chunkText.
func chunkTextOf(chunk []billing.Billed) int {
	n := 0
	for _, b := range chunk {
		n += chunkText(b)
	}
	return n
}
