package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// instanceColumns are the facts of an instance, from its latest sample.
const instanceColumns = `node, instance_id, gpu_uuid, model,
    argMax(kind, ts_ns), argMax(profile, ts_ns), argMax(compute_slices, ts_ns), argMax(sm_count, ts_ns),
    argMax(gpu_sm_count, ts_ns), argMax(mem_total_bytes, ts_ns), argMax(gpu_mem_total_bytes, ts_ns),
    max(ts_ns), argMax(share_replicas, ts_ns)`

const instancesInWindowQuery = `
SELECT ` + instanceColumns + `
FROM samples
WHERE time >= toDateTime(?) AND time <= toDateTime(?) AND ts_ns >= ? AND ts_ns < ?{{nodes}}
GROUP BY node, instance_id, gpu_uuid, model`

const instancesEverQuery = `
SELECT ` + instanceColumns + `
FROM samples
WHERE (node, instance_id) IN (` + chquery.TargetsTable + `)
GROUP BY node, instance_id, gpu_uuid, model`

// ReadInstancesInWindow reads every instance of the nodes with a sample in the window (the
// GPUs' capacity is the presence's: Presence.Capacity).
func ReadInstancesInWindow(ctx context.Context, conn Querier, src Samples, window billing.Interval, nodes Nodes) (*billing.Fleet, error) {
	q, err := src.queries()
	if err != nil {
		return nil, err
	}
	f := billing.NewFleet()
	if nodes.none() {
		return f, nil
	}
	// The query's {{nodes}} follows its first two arguments (the rollups': in the PREWHERE, so
	// that the other nodes' rows are skipped before their columns are read) or its four (raw).
	clause, arg := nodes.clause()
	args := []any{chquery.Seconds(window.Start), chquery.Seconds(window.End), window.Start, window.End}
	at := 2
	if src == RawSamples {
		at = 4
	}
	args = slices.Concat(args[:at], arg, args[at:])
	err = readFleet(ctx, conn, f, strings.ReplaceAll(q.instancesInWindow, "{{nodes}}", clause), args...)
	if err != nil {
		return nil, fmt.Errorf("read the instances sampled in the window: %w", err)
	}
	return f, nil
}

// ReadInstancesEver reads the latest facts of targets with no sample in the window (an
// allocation billed through an exporter outage still has to be priced), chquery.ChunkSize at a time.
//
// samples_1s is sorted by time first (migration 0048), so a read of a target's whole history
// would read the whole table: the latest minute of each target with a sample is found in
// samples_1m (sorted by node first), and samples_1s is read over those minutes only
// (latestSeconds). A target samples_1m does not know can only have rows in samples_1s before
// samples_1m's oldest row (its retention shorter than samples_1s'), and is read there: with the
// usual retentions, nothing is read for a target never sampled.
func ReadInstancesEver(ctx context.Context, conn Querier, src Samples, targets []billing.Target) (*billing.Fleet, error) {
	q, err := src.queries()
	if err != nil {
		return nil, err
	}
	f := billing.NewFleet()
	query := q.instancesEver
	if src == SecondRollup {
		if targets, err = latestSeconds(ctx, conn, f, targets); err != nil {
			return nil, fmt.Errorf("read the latest samples of %d targets not sampled in the window: %w", len(targets), err)
		}
		query = secondsBeforeMinutesQuery
	}
	for start := 0; start < len(targets); start += chquery.ChunkSize {
		nodes, instances := chquery.TargetArrays(targets[start:min(start+chquery.ChunkSize, len(targets))])
		if err := readFleet(ctx, conn, f, query, nodes, instances); err != nil {
			return nil, fmt.Errorf("read the latest samples of %d targets not sampled in the window: %w", len(targets), err)
		}
	}
	return f, nil
}

// readFleet adds to f the instances a query of instanceColumns returns.
func readFleet(ctx context.Context, conn Querier, f *billing.Fleet, query string, args ...any) error {
	return chquery.Each(ctx, conn, query, args, func(scan func(...any) error) error {
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

// latestMinuteQuery is the latest minute (Unix seconds) of each target with a sample taken in
// it, from samples_1m. Its rows with samples > 0 are the minutes holding a samples_1s row with
// samples > 0 (the collector rolls samples_1m up from samples_1s in the same flush).
const latestMinuteQuery = `
SELECT node, instance_id, toInt64(max(time))
FROM ` + tables.Samples1m + `
WHERE (node, instance_id) IN (` + chquery.TargetsTable + `) AND samples > 0
GROUP BY node, instance_id`

// latestSecondsQuery is rollupInstancesInWindowQuery's columns over samples_1s for some targets
// and a range of whole minutes (Unix seconds, [from, to)).
var latestSecondsQuery = strings.ReplaceAll(`
SELECT `+rollupInstanceColumns+`
FROM {{table}}
PREWHERE time >= toDateTime(?) AND time < toDateTime(?)
WHERE (node, instance_id) IN (`+chquery.TargetsTable+`) AND samples > 0
GROUP BY node, instance_id, gpu_uuid, model`, "{{table}}", tables.Samples1s)

// secondsBeforeMinutesQuery is rollupInstancesEverQuery over the samples_1s rows older than
// samples_1m's oldest (all of them when samples_1m is empty).
var secondsBeforeMinutesQuery = strings.ReplaceAll(`
SELECT `+rollupInstanceColumns+`
FROM {{table}}
PREWHERE time < (SELECT if(count() > 0, min(time), toDateTime(4294967295)) FROM `+tables.Samples1m+`)
WHERE (node, instance_id) IN (`+chquery.TargetsTable+`) AND samples > 0
GROUP BY node, instance_id, gpu_uuid, model`, "{{table}}", tables.Samples1s)

// latestGroupSpan bounds how far apart the latest minutes of the targets read in one query of
// latestSecondsQuery may be: the query reads the whole fleet's rows between them.
const latestGroupSpan = 10 * time.Minute

// latestSeconds adds to f the latest facts from samples_1s of the targets that samples_1m
// knows, reading samples_1s only over their latest minutes, and returns the other targets.
func latestSeconds(ctx context.Context, conn Querier, f *billing.Fleet, targets []billing.Target) ([]billing.Target, error) {
	type latest struct {
		target billing.Target
		minute int64
	}
	var found []latest
	seen := map[billing.Target]bool{}
	for start := 0; start < len(targets); start += chquery.ChunkSize {
		nodes, instances := chquery.TargetArrays(targets[start:min(start+chquery.ChunkSize, len(targets))])
		err := chquery.Each(ctx, conn, latestMinuteQuery, []any{nodes, instances}, func(scan func(...any) error) error {
			var l latest
			if err := scan(&l.target.Node, &l.target.Instance, &l.minute); err != nil {
				return err
			}
			found, seen[l.target] = append(found, l), true
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read their latest minutes from %s: %w", tables.Samples1m, err)
		}
	}
	slices.SortFunc(found, func(a, b latest) int { return cmp.Compare(a.minute, b.minute) })
	span := int64(latestGroupSpan / time.Second)
	for start := 0; start < len(found); {
		end := start
		var group []billing.Target
		for end < len(found) && found[end].minute < found[start].minute+span && end-start < chquery.ChunkSize {
			group = append(group, found[end].target)
			end++
		}
		nodes, instances := chquery.TargetArrays(group)
		if err := readFleet(ctx, conn, f, latestSecondsQuery, found[start].minute, found[end-1].minute+60, nodes, instances); err != nil {
			return nil, fmt.Errorf("read their latest minutes from %s: %w", tables.Samples1s, err)
		}
		start = end
	}
	var rest []billing.Target
	for _, t := range targets {
		if !seen[t] {
			rest = append(rest, t)
		}
	}
	return rest, nil
}
