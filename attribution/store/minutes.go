package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/report"
)

// Both sides of attribution_minutes (tenant × allocation × minute, one row set per pass):
// the attribution service writes every closed minute it attributes (WriteMinutes), reports
// sum them back (FromMinutes, Totals).

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
func FromMinutes(ctx context.Context, conn Querier, from, to time.Time) (report.Report, error) {
	if !from.Before(to) || !from.Equal(from.Truncate(time.Minute)) || !to.Equal(to.Truncate(time.Minute)) {
		return report.Report{}, fmt.Errorf("report window [%s, %s) from stored minutes: expected whole minutes, start before end",
			from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	window := billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}
	f, t := from.Unix(), to.Unix()
	var (
		lines       []billing.Line
		currency    string
		unallocated float64
		minutes     uint64
	)
	err := queryEach(ctx, conn, minutesQuery, []any{f, t, f, t}, func(scan func(...any) error) error {
		var (
			l                                       billing.Line
			sliced                                  uint8
			requested, started                      int64
			billed, metered, active, coldStart, sla int64
			listCost, effNS                         float64
			rowCurrency                             string
			waits, counts                           []uint64
			n                                       uint64
		)
		err := scan(&l.Tenant, &l.AllocationID, &l.Tier, &requested, &started, &sliced,
			&billed, &metered, &active, &listCost, &l.Cost, &l.WasteCost, &l.OverheadCost, &effNS, &coldStart, &sla, &rowCurrency, &waits, &counts, &n)
		if err != nil {
			return err
		}
		currency = rowCurrency
		if l.Tenant == report.Unallocated {
			unallocated, minutes = listCost, n
			return nil
		}
		l.Requested, l.Started = billing.UTC(requested), billing.UTC(started)
		l.Billed, l.Metered, l.Active, l.ListCost = time.Duration(billed), time.Duration(metered), time.Duration(active), listCost
		if active > 0 {
			l.Efficiency = effNS / float64(active)
		}
		l.TimeSliced, l.ColdStartSLA = sliced == 1, time.Duration(sla)
		if coldStart >= 0 {
			d := time.Duration(coldStart)
			l.ColdStart = &d
		}
		l.Waits = histogram(waits, counts)
		lines = append(lines, l)
		return nil
	})
	if err != nil {
		return report.Report{}, fmt.Errorf("read the stored minutes of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	if want := uint64(to.Sub(from) / time.Minute); minutes != want {
		return report.Report{}, fmt.Errorf("report [%s, %s) from stored minutes: %d of its %d minutes are not attributed yet",
			from.Format(time.RFC3339), to.Format(time.RFC3339), want-minutes, want)
	}
	rows, notes := billing.TenantRows(lines, window, currency)
	capacity := unallocated
	for _, row := range rows {
		capacity += row.ListCost
	}
	return report.Report{
		WindowStart: from.UTC(), WindowEnd: to.UTC(), Currency: currency, Tenants: rows,
		UnallocatedListCost: unallocated, CapacityListCost: capacity, Notes: notes,
	}, nil
}

// Minute is one attributed minute: the window's report and its allocations' lines.
type Minute struct {
	Start  time.Time
	Report report.Report
	Lines  []billing.Line
}

const insertMinutes = `INSERT INTO attribution_minutes (minute, tenant, allocation_id, tier, node, instance_id,
    requested_ns, started_ns, sliced, billed_ns, metered_ns, active_ns, list_cost, cost, waste_cost, overhead_cost, efficiency_ns,
    cold_start_ns, cold_start_sla_ns, wait_ns, wait_count, currency, computed_ns)`

// WriteMinutes stores the minutes as one pass (computed_ns), in one batch.
func WriteMinutes(ctx context.Context, conn driver.Conn, minutes []Minute, computed time.Time) error {
	batch, err := conn.PrepareBatch(ctx, insertMinutes)
	if err != nil {
		return fmt.Errorf("prepare the insert of attributed minutes: %w", err)
	}
	version := uint64(computed.UnixNano())
	for _, m := range minutes {
		for _, l := range m.Lines {
			coldStart := int64(-1)
			if l.ColdStart != nil {
				coldStart = int64(*l.ColdStart)
			}
			var sliced uint8
			if l.TimeSliced {
				sliced = 1
			}
			waits, counts := []uint64{}, []uint64{}
			for w, n := range l.Waits {
				waits, counts = append(waits, w), append(counts, n)
			}
			err := batch.Append(m.Start, l.Tenant, l.AllocationID, l.Tier, l.Node, l.Instance, l.Requested.UnixNano(), l.Started.UnixNano(),
				sliced, int64(l.Billed), int64(l.Metered), int64(l.Active), l.ListCost, l.Cost, l.WasteCost, l.OverheadCost, l.Efficiency*float64(l.Active),
				coldStart, int64(l.ColdStartSLA), waits, counts, m.Report.Currency, version)
			if err != nil {
				_ = batch.Abort()
				return fmt.Errorf("append minute %s of allocation %s: %w", m.Start.Format(time.RFC3339), l.AllocationID, err)
			}
		}
		// The unallocated row is written even when no tenant held anything: the minute is
		// then known to be attributed (and its capacity is in it).
		err := batch.Append(m.Start, report.Unallocated, "", "", "", "", int64(0), int64(0), uint8(0), int64(0), int64(0), int64(0),
			m.Report.UnallocatedListCost, 0., 0., 0., 0., int64(-1), int64(0), []uint64{}, []uint64{}, m.Report.Currency, version)
		if err != nil {
			_ = batch.Abort()
			return fmt.Errorf("append minute %s of the unallocated capacity: %w", m.Start.Format(time.RFC3339), err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d attributed minutes: %w", len(minutes), err)
	}
	return nil
}

// Total is one tenant's sums over the stored minutes of a window.
type Total struct {
	Tenant                                  string
	Billed, Metered                         time.Duration
	ListCost, Cost, WasteCost, OverheadCost float64
	EfficiencyNS                            float64 // Σ efficiency × measured (active) ns
}

// latestRows selects, per minute of [from, to), the rows of its latest pass, one per
// allocation (a batch sent twice would repeat them).
const latestRows = `
SELECT minute, tenant, allocation_id, any(billed_ns) AS b, any(metered_ns) AS m, any(list_cost) AS l, any(cost) AS c,
    any(waste_cost) AS w, any(overhead_cost) AS o, any(efficiency_ns) AS e
FROM attribution_minutes
WHERE ` + LatestPass + `
GROUP BY minute, tenant, allocation_id`

const totalsQuery = `
SELECT tenant, sum(b), sum(m), sum(l), sum(c), sum(w), sum(o), sum(e)
FROM (` + latestRows + `)
GROUP BY tenant
ORDER BY tenant`

// Totals sums the stored minutes of [from, to) per tenant (the __unallocated__ row holds the
// unallocated list cost). Any window of whole minutes sums exactly what its minutes hold.
func Totals(ctx context.Context, conn driver.Conn, from, to time.Time) ([]Total, error) {
	f, t := from.Unix(), to.Unix()
	rows, err := conn.Query(ctx, totalsQuery, f, t, f, t)
	if err != nil {
		return nil, fmt.Errorf("sum the attributed minutes of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	defer rows.Close()
	var out []Total
	for rows.Next() {
		var (
			x       Total
			billed  int64
			metered int64
		)
		if err := rows.Scan(&x.Tenant, &billed, &metered, &x.ListCost, &x.Cost, &x.WasteCost, &x.OverheadCost, &x.EfficiencyNS); err != nil {
			return nil, fmt.Errorf("read the sums of the attributed minutes: %w", err)
		}
		x.Billed, x.Metered = time.Duration(billed), time.Duration(metered)
		out = append(out, x)
	}
	return out, rows.Err()
}

// LastMinute is the start of the latest minute stored, zero when none.
func LastMinute(ctx context.Context, conn driver.Conn) (time.Time, error) {
	return latest(ctx, conn, `SELECT count(), max(minute) FROM attribution_minutes`, "the latest attributed minute")
}

// LastComputed is when the latest stored pass ran, zero when none.
func LastComputed(ctx context.Context, conn driver.Conn) (time.Time, error) {
	var n, last uint64
	if err := conn.QueryRow(ctx, `SELECT count(), max(computed_ns) FROM attribution_minutes`).Scan(&n, &last); err != nil {
		return time.Time{}, fmt.Errorf("read when the latest minutes were stored: %w", err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, int64(last)).UTC(), nil
}
