package attribution

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// minutesQuery sums, per allocation, the stored minutes of [from, to) as the service last
// attributed each (the rows of the minute's highest computed_ns; see migration 0020).
const minutesQuery = `
SELECT tenant, allocation_id, any(tier), any(requested_ns), any(started_ns), max(sliced),
    sum(billed_ns), sum(metered_ns), sum(active_ns), sum(list_cost), sum(cost), sum(waste_cost), sum(overhead_cost),
    sum(efficiency_ns), max(cold_start_ns), any(cold_start_sla_ns), any(currency),
    tupleElement(sumMap(wait_ns, wait_count), 1), tupleElement(sumMap(wait_ns, wait_count), 2), uniqExact(minute)
FROM (
    SELECT minute, tenant, allocation_id, any(tier) AS tier, any(requested_ns) AS requested_ns, any(started_ns) AS started_ns,
        any(sliced) AS sliced, any(billed_ns) AS billed_ns, any(metered_ns) AS metered_ns, any(active_ns) AS active_ns,
        any(list_cost) AS list_cost,
        any(cost) AS cost, any(waste_cost) AS waste_cost, any(overhead_cost) AS overhead_cost, any(efficiency_ns) AS efficiency_ns,
        any(cold_start_ns) AS cold_start_ns, any(cold_start_sla_ns) AS cold_start_sla_ns, any(currency) AS currency,
        any(wait_ns) AS wait_ns, any(wait_count) AS wait_count
    FROM attribution_minutes
    WHERE ` + LatestPass + `
    GROUP BY minute, tenant, allocation_id
)
GROUP BY tenant, allocation_id`

// LatestPass is the condition on attribution_minutes that keeps, of each minute of
// [from, to), only the rows of its latest pass (the highest computed_ns): an allocation deleted
// since an earlier pass has no row in it. Its arguments are from, to, from, to (Unix seconds).
const LatestPass = `minute >= toDateTime(?) AND minute < toDateTime(?)
    AND (minute, computed_ns) IN (
        SELECT minute, max(computed_ns) FROM attribution_minutes
        WHERE minute >= toDateTime(?) AND minute < toDateTime(?)
        GROUP BY minute)`

// FromMinutes is the report of [from, to), whole minutes, built from the minutes the
// attribution service stored (table attribution_minutes) instead of from the samples: money
// and seconds are sums of the minutes, efficiency their mean weighted by measured time
// (Σ efficiency_ns / Σ active_ns: minutes without a measured sample do not count), jitter the
// p99 of their summed wait histograms, cold start the largest known. It equals Compute's
// report of the window (within float rounding) once every minute of it is attributed, and
// fails naming how many are not.
func FromMinutes(ctx context.Context, conn driver.Conn, from, to time.Time) (report.Report, error) {
	if !from.Before(to) || !from.Equal(from.Truncate(time.Minute)) || !to.Equal(to.Truncate(time.Minute)) {
		return report.Report{}, fmt.Errorf("report window [%s, %s) from stored minutes: expected whole minutes, start before end",
			from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	window := interval{from.UnixNano(), to.UnixNano()}
	f, t := from.Unix(), to.Unix()
	var (
		results     []result
		currency    string
		unallocated float64
		minutes     uint64
	)
	err := queryEach(ctx, conn, minutesQuery, []any{f, t, f, t}, func(scan func(...any) error) error {
		var (
			r                                       result
			sliced                                  uint8
			billed, metered, active, coldStart, sla int64
			listCost, cost, waste, overhead, effNS  float64
			rowCurrency                             string
			waits, counts                           []uint64
			n                                       uint64
		)
		err := scan(&r.alloc.tenant, &r.alloc.id, &r.alloc.tier, &r.alloc.requested, &r.alloc.started, &sliced,
			&billed, &metered, &active, &listCost, &cost, &waste, &overhead, &effNS, &coldStart, &sla, &rowCurrency, &waits, &counts, &n)
		if err != nil {
			return err
		}
		currency = rowCurrency
		if r.alloc.tenant == report.Unallocated {
			unallocated, minutes = listCost, n
			return nil
		}
		r.line = line{billed: time.Duration(billed), metered: time.Duration(metered), active: time.Duration(active),
			listCost: listCost, cost: cost, wasteCost: waste, overheadCost: overhead}
		if active > 0 {
			r.line.efficiency = effNS / float64(active)
		}
		r.timeSliced, r.sla = sliced == 1, time.Duration(sla)
		if coldStart >= 0 {
			d := time.Duration(coldStart)
			r.coldStart = &d
		}
		r.waits = histogram{}
		for i, w := range waits {
			r.waits[w] += counts[i]
		}
		results = append(results, r)
		return nil
	})
	if err != nil {
		return report.Report{}, fmt.Errorf("read the stored minutes of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	if want := uint64(to.Sub(from) / time.Minute); minutes != want {
		return report.Report{}, fmt.Errorf("report [%s, %s) from stored minutes: %d of its %d minutes are not attributed yet",
			from.Format(time.RFC3339), to.Format(time.RFC3339), want-minutes, want)
	}
	rows, notes := tenantRows(results, window, currency)
	capacity := unallocated
	for _, row := range rows {
		capacity += row.ListCost
	}
	return report.Report{
		WindowStart: from.UTC(), WindowEnd: to.UTC(), Currency: currency, Tenants: rows,
		UnallocatedListCost: unallocated, CapacityListCost: capacity, Notes: notes,
	}, nil
}
