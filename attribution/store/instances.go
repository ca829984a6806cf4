package store

import (
	"context"
	"fmt"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
)

// instanceColumns are the facts of an instance, from its latest sample.
const instanceColumns = `node, instance_id, gpu_uuid, model,
    argMax(kind, ts_ns), argMax(profile, ts_ns), argMax(compute_slices, ts_ns), argMax(sm_count, ts_ns),
    argMax(gpu_sm_count, ts_ns), argMax(mem_total_bytes, ts_ns), argMax(gpu_mem_total_bytes, ts_ns),
    max(ts_ns), argMax(share_replicas, ts_ns)`

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

// ReadInstancesInWindow reads every instance with a sample in the window (the GPUs' capacity is
// the presence's: Presence.Capacity).
func ReadInstancesInWindow(ctx context.Context, conn Querier, src Samples, window billing.Interval) (*billing.Fleet, error) {
	q, err := src.queries()
	if err != nil {
		return nil, err
	}
	f := billing.NewFleet()
	err = readFleet(ctx, conn, f, q.instancesInWindow, seconds(window.Start), seconds(window.End), window.Start, window.End)
	if err != nil {
		return nil, fmt.Errorf("read the instances sampled in the window: %w", err)
	}
	return f, nil
}

// ReadInstancesEver reads the latest facts of targets with no sample in the window (an
// allocation billed through an exporter outage still has to be priced), chunkSize at a time.
func ReadInstancesEver(ctx context.Context, conn Querier, src Samples, targets []billing.Target) (*billing.Fleet, error) {
	q, err := src.queries()
	if err != nil {
		return nil, err
	}
	f := billing.NewFleet()
	for start := 0; start < len(targets); start += chunkSize {
		nodes, instances := targetArrays(targets[start:min(start+chunkSize, len(targets))])
		if err := readFleet(ctx, conn, f, q.instancesEver, nodes, instances); err != nil {
			return nil, fmt.Errorf("read the latest samples of %d targets not sampled in the window: %w", len(targets), err)
		}
	}
	return f, nil
}

// readFleet adds to f the instances a query of instanceColumns returns.
func readFleet(ctx context.Context, conn Querier, f *billing.Fleet, query string, args ...any) error {
	return queryEach(ctx, conn, query, args, func(scan func(...any) error) error {
		var (
			t      billing.Target
			gpu    string
			in     pricebook.Instance
			latest uint64
		)
		if err := scan(&t.Node, &t.Instance, &gpu, &in.Model, &in.Kind, &in.Profile, &in.ComputeSlices,
			&in.SMCount, &in.GPUSMCount, &in.MemTotalBytes, &in.GPUMemTotalBytes, &latest, &in.ShareReplicas); err != nil {
			return err
		}
		f.Add(t, in, int64(latest))
		return nil
	})
}
