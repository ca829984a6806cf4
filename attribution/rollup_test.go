package attribution_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/store"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// TestRollupKeepsCompleteRows: a rollup row written before all of its samples arrived (fewer
// samples, another load) loses to the complete row of the same second or minute, even when it
// is inserted after it, unmerged: the report from the rollup is the report without it.
func TestRollupKeepsCompleteRows(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	ctx := context.Background()
	const window = 2 * time.Minute
	var samples []*pb.Sample
	for at := time.Duration(0); at < window; at += 100 * time.Millisecond {
		samples = append(samples, migA100.sample(at, 100*time.Millisecond, true, 0.5))
	}
	insertSamples(t, conn, "node-a", samples)
	chtest.RollUp(t, conn)
	insertAllocations(t, conn, []allocationRow{
		{id: "a", tenant: "acme", tier: "pro", node: "node-a", instance: migA100.id, requested: t0, started: t0, version: 1},
	})
	for _, tt := range []struct {
		source store.Samples
		table  string
		fewer  int // samples the partial row lacks
	}{
		{store.SecondRollup, "samples_1s", 5},
		{store.MinuteRollup, "samples_1m", 300},
	} {
		t.Run(tt.table, func(t *testing.T) {
			csv := func() string {
				t.Helper()
				rep, err := reportOf(ctx, conn, t0, t0.Add(window), book, tt.source)
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				if err := rep.WriteCSV(&b); err != nil {
					t.Fatal(err)
				}
				return b.String()
			}
			complete := csv()
			err := conn.Exec(ctx, tables.Insert(tt.table, tables.RollupColumns)+fmt.Sprintf(`
SELECT time, node, instance_id, gpu_uuid, gpu_index, model, kind, profile, compute_slices, sm_count,
    gpu_sm_count, mem_total_bytes, gpu_mem_total_bytes, interval_ns, samples - %[2]d, intDiv(covered_ns, 2), 0., attached_sum,
    vgpu_switch_ns_sum, vgpu_run_ns_sum, first_attached_ns, mem_used_bytes_sum, power_watts_sum, wait_ns, wait_count,
    active_samples - %[2]d, intDiv(active_ns, 2), first_ns, last_ns, 0., 0., share_replicas, 0, 0., 0
FROM %[1]s`, tt.table, tt.fewer))
			if err != nil {
				t.Fatalf("insert the partial rows: %v", err)
			}
			if got := csv(); got != complete {
				t.Errorf("with partial rows:\n%s\nwant, as without them:\n%s", got, complete)
			}
		})
	}
}
