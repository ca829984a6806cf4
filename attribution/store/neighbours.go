package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
)

// The noisy-neighbour signal: on a time-sliced GPU a tenant waits while its co-tenants run.
// For every second in which one of a tenant's vGPUs waited (it had work and waited between run
// slices), each other vGPU of the same GPU that ran in that second is credited with its run
// time; its holder at that second is the neighbour. A tenant's top neighbour is the other
// tenant with the most credit in the window; its share is the part of its waited seconds in
// which another tenant ran. Seconds of samples delivered twice count twice in the credit: it
// ranks neighbours, it bills nothing. The rows come ordered by waited second, so that the
// share is counted without holding the window's seconds (a LEFT JOIN: a waited second in
// which no other vGPU ran has other ” and run 0).
const neighbourQuery = `
SELECT node, instance_id, sec, other, run
FROM (
    SELECT node, gpu_uuid, instance_id, toInt64(intDiv(ts_ns, 1000000000)) AS sec, sum(length(vgpu_waits_ns)) AS waited
    FROM samples
    WHERE kind = 'vgpu' AND time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?
    GROUP BY node, gpu_uuid, instance_id, sec
    HAVING waited > 0
) AS w ALL LEFT JOIN (
    SELECT node, gpu_uuid, instance_id AS other, toInt64(intDiv(ts_ns, 1000000000)) AS sec, toInt64(sum(vgpu_run_ns)) AS run
    FROM samples
    WHERE kind = 'vgpu' AND time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?
    GROUP BY node, gpu_uuid, other, sec
    HAVING run > 0
) AS o USING (node, gpu_uuid, sec)
WHERE other != instance_id
ORDER BY node, instance_id, sec`

// Neighbour is a tenant's noisy-neighbour signal over a window.
type Neighbour struct {
	// Name is the co-tenant that ran most while the tenant waited; "" when none did. It names
	// another tenant: only a caller who may read every tenant sees it (report.Report.Only).
	Name string
	// Share is the part of the seconds in which one of the tenant's vGPUs waited that a vGPU of
	// another tenant on the same GPU ran in (0..1): how much a co-tenant was in its way.
	Share float64
}

// NoisyNeighbours returns, per tenant with time-sliced allocations that waited in [from, to),
// its noisy-neighbour signal (see neighbourQuery).
func NoisyNeighbours(ctx context.Context, conn Querier, from, to time.Time) (map[string]Neighbour, error) {
	window := billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}
	allocs, err := ReadAllocations(ctx, conn, window)
	if err != nil {
		return nil, err
	}
	holders := map[billing.Target][]billing.Allocation{}
	for _, a := range allocs {
		holders[a.Target] = append(holders[a.Target], a)
	}
	holder := func(t billing.Target, ns int64) (billing.Allocation, bool) {
		for _, a := range holders[t] {
			if iv, ok := a.Billed(window); ok && ns >= iv.Start && ns < iv.End {
				return a, true
			}
		}
		return billing.Allocation{}, false
	}
	credit := map[string]map[string]int64{}                   // tenant → neighbour → run ns
	waited, crowded := map[string]int64{}, map[string]int64{} // tenant → seconds waited, of which with another tenant running
	// The waited second being read (rows come ordered by it): its tenant, and whether another
	// tenant ran in it.
	var (
		cur struct {
			node, instance string
			sec            int64
		}
		curTenant  string
		curCrowded bool
		curHeld    bool // cur's vGPU was allocated then
	)
	end := func() {
		if curHeld {
			waited[curTenant]++
			if curCrowded {
				crowded[curTenant]++
			}
		}
	}
	args := []any{chquery.Seconds(window.Start), chquery.Seconds(window.End), window.Start, window.End}
	err = chquery.Each(ctx, conn, neighbourQuery, append(args, args...), func(scan func(...any) error) error {
		var (
			node, instance, other string
			sec, run              int64
		)
		if err := scan(&node, &instance, &sec, &other, &run); err != nil {
			return err
		}
		if node != cur.node || instance != cur.instance || sec != cur.sec {
			end()
			cur.node, cur.instance, cur.sec, curCrowded = node, instance, sec, false
			waiter, ok := holder(billing.Target{Node: node, Instance: instance}, sec*int64(time.Second))
			curTenant, curHeld = waiter.Tenant, ok
		}
		if !curHeld || other == "" || run <= 0 {
			return nil
		}
		runner, ok := holder(billing.Target{Node: node, Instance: other}, sec*int64(time.Second))
		if !ok || runner.Tenant == curTenant {
			return nil
		}
		curCrowded = true
		if credit[curTenant] == nil {
			credit[curTenant] = map[string]int64{}
		}
		credit[curTenant][runner.Tenant] += run
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the vGPU waits and co-tenants' runs: %w", err)
	}
	end()
	out := map[string]Neighbour{}
	for tenant, by := range credit {
		names := make([]string, 0, len(by))
		for n := range by {
			names = append(names, n)
		}
		slices.Sort(names)
		best := names[0]
		for _, n := range names[1:] {
			if by[n] > by[best] {
				best = n
			}
		}
		out[tenant] = Neighbour{Name: best}
	}
	for tenant, n := range waited {
		nb := out[tenant]
		nb.Share = float64(crowded[tenant]) / float64(n)
		out[tenant] = nb
	}
	return out, nil
}
