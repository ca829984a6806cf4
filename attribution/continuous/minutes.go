// Package continuous attributes every closed minute of every allocation as it closes, stores
// the result in ClickHouse (table attribution_minutes: tenant × allocation × minute) and
// recomputes the minutes that late samples or allocations touch, within a lookback.
package continuous

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/report"
)

// Minute is one attributed minute: the window's report and its allocations' lines.
type Minute struct {
	Start  time.Time
	Report report.Report
	Lines  []attribution.Line
}

const insertMinutes = `INSERT INTO attribution_minutes (minute, tenant, allocation_id, tier, node, instance_id,
    requested_ns, started_ns, sliced, billed_ns, metered_ns, active_ns, list_cost, cost, waste_cost, overhead_cost, efficiency_ns,
    cold_start_ns, cold_start_sla_ns, wait_ns, wait_count, currency, computed_ns)`

// writeMinutes stores the minutes as one pass (computed_ns), in one batch.
func writeMinutes(ctx context.Context, conn driver.Conn, minutes []Minute, computed time.Time) error {
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
WHERE ` + attribution.LatestPass + `
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

// lastMinute is the start of the latest minute stored, zero when none.
func lastMinute(ctx context.Context, conn driver.Conn) (time.Time, error) {
	var n uint64
	var last time.Time
	if err := conn.QueryRow(ctx, `SELECT count(), max(minute) FROM attribution_minutes`).Scan(&n, &last); err != nil {
		return time.Time{}, fmt.Errorf("read the latest attributed minute: %w", err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return last.UTC(), nil
}

// received is an allocation version as the allocations table received it.
type received struct {
	id      string
	version uint64
	started time.Time
	at      time.Time // received, whole seconds
}

// receivedSince lists the allocation versions received at or after since (whole seconds).
func receivedSince(ctx context.Context, conn driver.Conn, since time.Time) ([]received, error) {
	rows, err := conn.Query(ctx, `SELECT allocation_id, version, started_ns, received FROM allocations WHERE received >= toDateTime(?)`, since.Unix())
	if err != nil {
		return nil, fmt.Errorf("read the allocations received since %s: %w", since.Format(time.RFC3339), err)
	}
	defer rows.Close()
	var out []received
	for rows.Next() {
		var (
			r       received
			started int64
		)
		if err := rows.Scan(&r.id, &r.version, &started, &r.at); err != nil {
			return nil, fmt.Errorf("read the allocations received since %s: %w", since.Format(time.RFC3339), err)
		}
		r.started = time.Unix(0, started).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// lastReceived is when the allocations table received its latest row, zero when empty.
func lastReceived(ctx context.Context, conn driver.Conn) (time.Time, error) {
	var n uint64
	var last time.Time
	if err := conn.QueryRow(ctx, `SELECT count(), max(received) FROM allocations`).Scan(&n, &last); err != nil {
		return time.Time{}, fmt.Errorf("read when the latest allocation was received: %w", err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return last.UTC(), nil
}

// lastComputed is when the latest stored pass ran, zero when none.
func lastComputed(ctx context.Context, conn driver.Conn) (time.Time, error) {
	var n, last uint64
	if err := conn.QueryRow(ctx, `SELECT count(), max(computed_ns) FROM attribution_minutes`).Scan(&n, &last); err != nil {
		return time.Time{}, fmt.Errorf("read when the latest minutes were stored: %w", err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, int64(last)).UTC(), nil
}
