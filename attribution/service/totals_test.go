package service_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// The oracle the runner's tests check the stored minutes against: the bill's formulas
// written again in SQL, independently of the Go that reads the minutes back (FromMinutes),
// so that a mistake in either shows as a difference from Compute's report of the window.

// total is one tenant's sums over the stored minutes of a window.
type total struct {
	Tenant                                  string
	Billed, Metered                         time.Duration
	Active                                  time.Duration // measured: the metered time whose activity was known
	ListCost, Cost, WasteCost, OverheadCost float64
	EfficiencyNS                            float64 // Σ efficiency × measured (active) ns: over Active, not Metered
}

// latestRows selects, per minute of [from, to), the rows of its latest pass, one per
// allocation (a batch sent twice would repeat them), under the columns' names.
var latestRows = `
SELECT minute, tenant, allocation_id, any(billed_ns) AS billed_ns, any(metered_ns) AS metered_ns,
    any(active_ns) AS active_ns, any(list_cost) AS list_cost, any(cost) AS cost, any(overhead_cost) AS overhead_cost,
    any(efficiency_ns) AS efficiency_ns, any(overhead_ns) AS overhead_ns
FROM ` + tables.AttributionMinutes + `
WHERE ` + tables.LatestPass(tables.MinuteWindow) + `
GROUP BY minute, tenant, allocation_id`

// totalsQuery sums the minutes per allocation and charges each allocation its window's waste
// and overhead from the sums (billing.Charges, billing.TimeMean and the stored minutes' overhead rule), then sums per tenant. List cost
// and cost are Decimal sums; waste and overhead, products of a cost and ratios, are computed
// in Float64 (ClickHouse does not mix Decimal and Float64 arithmetic).
var totalsQuery = `
SELECT tenant, sum(b), sum(m), sum(lc), sum(c),
    sum(if(a > 0 AND b > 0, fc * (1. - o) * (a / b) * (1. - least(1., greatest(0., e / a))), 0.)), sum(fc * o), sum(e), sum(a)
FROM (
    SELECT tenant, b, m, a, lc, c, toFloat64(c) AS fc, e,
        if(m > 0, least(1., greatest(0., ons / m)), if(toFloat64(c) > 0., toFloat64(ocs) / toFloat64(c), 0.)) AS o
    FROM (
        SELECT tenant, allocation_id, sum(billed_ns) AS b, sum(metered_ns) AS m, sum(active_ns) AS a,
            sum(list_cost) AS lc, sum(cost) AS c, sum(efficiency_ns) AS e, sum(overhead_ns) AS ons, sum(overhead_cost) AS ocs
        FROM (` + latestRows + `)
        GROUP BY tenant, allocation_id
    )
)
GROUP BY tenant
ORDER BY tenant`

// storedTotals sums the stored minutes of [from, to) per tenant (the __unallocated__ row holds the
// unallocated list cost). Any window of whole minutes sums exactly what its minutes hold.
func storedTotals(ctx context.Context, conn driver.Conn, from, to time.Time) ([]total, error) {
	f, t := from.Unix(), to.Unix()
	rows, err := conn.Query(ctx, totalsQuery, f, t, f, t)
	if err != nil {
		return nil, fmt.Errorf("sum the attributed minutes of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	defer rows.Close()
	var out []total
	for rows.Next() {
		var (
			x              total
			billed         int64
			metered        int64
			active         int64
			listCost, cost decimal.Decimal
		)
		if err := rows.Scan(&x.Tenant, &billed, &metered, &listCost, &cost, &x.WasteCost, &x.OverheadCost, &x.EfficiencyNS, &active); err != nil {
			return nil, fmt.Errorf("read the sums of the attributed minutes: %w", err)
		}
		x.ListCost, x.Cost = listCost.InexactFloat64(), cost.InexactFloat64()
		x.Billed, x.Metered, x.Active = time.Duration(billed), time.Duration(metered), time.Duration(active)
		out = append(out, x)
	}
	return out, rows.Err()
}
