package stored

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// What the stored minutes of a window bill per instance and per host, for the fleet report
// (attribution/fleet), read as the other readers of long windows read them (StoredHours).

// Held is what the stored minutes of a window bill one tenant on one instance: money as the
// exact Decimal sums of the stored amounts, so that sums of them over the fleet are the tenant
// report's to the money columns' scale.
type Held struct {
	billing.Target
	Tenant                       string
	Billed                       time.Duration
	ListCost, Cost, OverheadCost decimal.Decimal
}

// heldQuery sums the latest pass of each minute of [from, to) per instance and tenant (its
// arguments: from, to, from, to). FINAL collapses a row stored twice (a batch sent again) as it
// reads, in key order, where a GROUP BY per minute and allocation would hash every row of the
// window; its condition (the minute's latest pass) is the same for every copy of a row.
var heldQuery = `
SELECT node, instance_id, tenant, sum(billed_ns), sum(list_cost), sum(cost), sum(overhead_cost)
FROM ` + tables.Final(tables.AttributionMinutes) + `
WHERE ` + tables.LatestPass(tables.MinuteWindow) + ` AND tenant != '` + report.Unallocated + `'
GROUP BY node, instance_id, tenant
ORDER BY node, instance_id, tenant`

// heldHoursQuery is heldQuery over the latest roll-ups of whole hours (arguments from, to,
// from, to). FINAL keeps one row of a roll-up written twice, as it reads in key order
// (hour, tenant, allocation_id: a stored minute's allocation has one target), where LIMIT 1
// BY hashed every row of the window (3 times slower for a month of 1000 instances). Whether
// the condition applies before or after FINAL's merge, the same rows are kept: a key's
// fullest row (highest source_ns) is that of its hour's latest roll-up if it has one there.
var heldHoursQuery = `
SELECT node, instance_id, tenant, sum(billed_ns), sum(list_cost), sum(cost), sum(overhead_cost)
FROM ` + tables.Final(tables.AttributionHours) + `
WHERE ` + chquery.HourWindow + ` AND tenant != '` + report.Unallocated + `' AND (hour, source_ns) IN (
    SELECT hour, max(source_ns) FROM ` + tables.AttributionHours + ` WHERE ` + chquery.HourWindow + ` GROUP BY hour)
GROUP BY node, instance_id, tenant`

// StoredHours is how the readers of one window's stored minutes read them: its whole hours
// fresh in attribution_hours from their roll-ups, the other minutes from attribution_minutes.
// Which hours are fresh is read once for every reader of the window (the check reads the
// window's stored minutes' computed_ns, a large part of a fresh month's reads).
type StoredHours struct {
	from, to time.Time
	spans    []span
}

// ReadStoredHours reads which whole hours of [from, to) (whole minutes) are fresh.
func ReadStoredHours(ctx context.Context, conn Querier, from, to time.Time) (*StoredHours, error) {
	sp, err := spans(ctx, conn, from, to)
	if err != nil {
		return nil, err
	}
	return &StoredHours{from: from, to: to, spans: sp}, nil
}

// HeldInstances sums the stored minutes of [from, to) per instance and tenant (StoredHours.Held).
func HeldInstances(ctx context.Context, conn Querier, from, to time.Time) ([]Held, error) {
	h, err := ReadStoredHours(ctx, conn, from, to)
	if err != nil {
		return nil, fmt.Errorf("sum the stored minutes of [%s, %s) per instance and tenant: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return h.Held(ctx, conn)
}

// Held sums the stored minutes of the window per instance and tenant: fresh whole hours from
// their roll-ups, the other minutes from attribution_minutes, money summed as Decimal across
// the parts.
func (h *StoredHours) Held(ctx context.Context, conn Querier) ([]Held, error) {
	type key struct{ node, instance, tenant string }
	type sums struct {
		billed            int64
		lc, c, overheadCs decimal.Decimal
	}
	by := map[key]*sums{}
	var err error
	for _, sp := range h.spans {
		query := heldQuery
		if sp.hours {
			query = heldHoursQuery
		}
		err = chquery.Each(ctx, conn, query, sp.args(), func(scan func(...any) error) error {
			var (
				k key
				x sums
			)
			if err := scan(&k.node, &k.instance, &k.tenant, &x.billed, &x.lc, &x.c, &x.overheadCs); err != nil {
				return err
			}
			s := by[k]
			if s == nil {
				s = &sums{}
				by[k] = s
			}
			s.billed += x.billed
			s.lc, s.c, s.overheadCs = s.lc.Add(x.lc), s.c.Add(x.c), s.overheadCs.Add(x.overheadCs)
			return nil
		})
		if err != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sum the stored minutes of [%s, %s) per instance and tenant: %w", h.from.Format(time.RFC3339), h.to.Format(time.RFC3339), err)
	}
	out := make([]Held, 0, len(by))
	for k, s := range by {
		out = append(out, Held{Target: billing.Target{Node: k.node, Instance: k.instance}, Tenant: k.tenant, Billed: time.Duration(s.billed),
			ListCost: s.lc, Cost: s.c, OverheadCost: s.overheadCs})
	}
	sortHeld(out)
	return out, nil
}

// tenantsPerHostQuery is, per node, the most tenants billed on it in one minute of [from, to)
// (arguments from, to, from, to).
var tenantsPerHostQuery = `
SELECT node, max(n)
FROM (
    SELECT node, minute, uniqExact(tenant) AS n
    FROM ` + tables.AttributionMinutes + `
    WHERE ` + tables.LatestPass(tables.MinuteWindow) + ` AND tenant != '` + report.Unallocated + `' AND billed_ns > 0
    GROUP BY node, minute
)
GROUP BY node`

// TenantsPerHost is, per node, the most tenants the stored minutes of [from, to) bill on it
// within one minute (StoredHours.TenantsPerHost).
func TenantsPerHost(ctx context.Context, conn Querier, from, to time.Time) (map[string]int, error) {
	h, err := ReadStoredHours(ctx, conn, from, to)
	if err != nil {
		return nil, fmt.Errorf("count the tenants per host in the stored minutes of [%s, %s): %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return h.TenantsPerHost(ctx, conn)
}

// TenantsPerHost is, per node, the most tenants the window's stored minutes bill on it within
// one minute: how many tenants one host failure would take down. Fresh whole hours come from
// their roll-ups' maxima.
func (h *StoredHours) TenantsPerHost(ctx context.Context, conn Querier) (map[string]int, error) {
	out := map[string]int{}
	var err error
	for _, sp := range h.spans {
		query := tenantsPerHostQuery
		if sp.hours {
			query = hostsHoursQuery
		}
		err = chquery.Each(ctx, conn, query, sp.args(), func(scan func(...any) error) error {
			var (
				node string
				n    uint64
			)
			err := scan(&node, &n)
			out[node] = max(out[node], int(n))
			return err
		})
		if err != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("count the tenants per host in the stored minutes of [%s, %s): %w", h.from.Format(time.RFC3339), h.to.Format(time.RFC3339), err)
	}
	return out, nil
}

// sortHeld sorts by node, instance and tenant.
func sortHeld(hs []Held) {
	slices.SortFunc(hs, func(a, b Held) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.Tenant, b.Tenant))
	})
}
