package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
)

// The noisy-neighbour signal: on a time-sliced GPU a tenant waits while its co-tenants run.
// For every second in which one of a tenant's vGPUs waited (it had work and waited between run
// slices), each other vGPU of the same GPU that ran in that second is credited with its run
// time; its holder at that second is the neighbour. A tenant's top neighbour is the other
// tenant with the most credit in the window. Seconds of samples delivered twice count twice:
// it ranks neighbours, it bills nothing.
const neighbourQuery = `
SELECT node, instance_id, sec, other, run
FROM (
    SELECT node, gpu_uuid, instance_id, toInt64(intDiv(ts_ns, 1000000000)) AS sec, sum(length(vgpu_waits_ns)) AS waited
    FROM samples
    WHERE kind = 'vgpu' AND time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?
    GROUP BY node, gpu_uuid, instance_id, sec
    HAVING waited > 0
) AS w ALL INNER JOIN (
    SELECT node, gpu_uuid, instance_id AS other, toInt64(intDiv(ts_ns, 1000000000)) AS sec, toInt64(sum(vgpu_run_ns)) AS run
    FROM samples
    WHERE kind = 'vgpu' AND time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?
    GROUP BY node, gpu_uuid, other, sec
    HAVING run > 0
) AS o USING (node, gpu_uuid, sec)
WHERE other != instance_id`

// NoisyNeighbours returns, per tenant with time-sliced allocations that waited in [from, to),
// the co-tenant whose activity coincided most with its waits (see neighbourQuery).
func NoisyNeighbours(ctx context.Context, conn Querier, from, to time.Time) (map[string]string, error) {
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
	credit := map[string]map[string]int64{} // tenant → neighbour → run ns
	args := []any{seconds(window.Start), seconds(window.End), window.Start, window.End}
	err = queryEach(ctx, conn, neighbourQuery, append(args, args...), func(scan func(...any) error) error {
		var (
			node, instance, other string
			sec, run              int64
		)
		if err := scan(&node, &instance, &sec, &other, &run); err != nil {
			return err
		}
		at := sec * int64(time.Second)
		waiter, ok := holder(billing.Target{Node: node, Instance: instance}, at)
		if !ok {
			return nil
		}
		runner, ok := holder(billing.Target{Node: node, Instance: other}, at)
		if !ok || runner.Tenant == waiter.Tenant {
			return nil
		}
		if credit[waiter.Tenant] == nil {
			credit[waiter.Tenant] = map[string]int64{}
		}
		credit[waiter.Tenant][runner.Tenant] += run
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the vGPU waits and co-tenants' runs: %w", err)
	}
	top := map[string]string{}
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
		top[tenant] = best
	}
	return top, nil
}
