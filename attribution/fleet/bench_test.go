package fleet_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/fleet/fleetstore"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// BenchmarkFleetMonth: `slicemeter fleet` over February (28 days) from what is stored, for
// SLICEMETER_BENCH_INSTANCES MIG instances (default 56; the target is 1000 in ≤ 2 s):
// 1g.5gb instances of A100s (7 per GPU, 8 GPUs per node), each held by one of ten tenants all
// month; samples_1m holds one row per instance and minute, attribution_minutes one per
// allocation and minute and the unallocated row, all generated inside ClickHouse. Sub-benchmarks
// minutes/*: samples_1m read minute by minute (no fleet roll-up yet); hours/*: after
// fleetstore.RollupFleetHours, as the service leaves it.
//
//	SLICEMETER_BENCH_INSTANCES=1000 go test -run '^$' -bench FleetMonth -benchtime 1x -timeout 60m ./attribution/fleet/
func BenchmarkFleetMonth(b *testing.B) {
	instances := 56
	if v, err := strconv.Atoi(os.Getenv("SLICEMETER_BENCH_INSTANCES")); err == nil && v > 0 {
		instances = v
	}
	ctx := context.Background()
	conn := chtest.NewDatabase(b, nil)
	start := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, 1, 0)
	minutes := int(end.Sub(start) / time.Minute)
	began := time.Now()
	generateMonth(ctx, b, conn, start, end, instances)
	b.Logf("%d instances × %d minutes: %d samples_1m and %d stored minute rows, generated in %s",
		instances, minutes, instances*minutes, (instances+1)*minutes, time.Since(began).Round(time.Millisecond))
	// The attribution service rolls up every hour after storing its minutes (stored.RollupHours).
	began = time.Now()
	if err := stored.RollupHours(ctx, conn, start, end); err != nil {
		b.Fatalf("roll up the stored minutes by hour: %v", err)
	}
	b.Logf("rolled up by hour in %s", time.Since(began).Round(time.Millisecond))
	book := &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100-SXM4-40GB": 1.6}, Tiers: map[string]float64{"pro": 1},
		Costs: &pricebook.Costs{GPUHour: map[string]float64{"A100-SXM4-40GB": 0.5}, EnergyKWh: 0.2}}
	window := billing.Interval{Start: start.UnixNano(), End: end.UnixNano()}
	reads := []struct {
		name string
		read func() error
	}{
		{"presence", func() error { _, err := fleetstore.FleetPresence(ctx, conn, window, time.Hour); return err }},
		{"instances", func() error { _, err := fleetstore.FleetInstances(ctx, conn, start, end); return err }},
		{"held", func() error { _, err := stored.HeldInstances(ctx, conn, start, end); return err }},
		{"tenants-per-host", func() error { _, err := stored.TenantsPerHost(ctx, conn, start, end); return err }},
	}
	// Each read alone, one after the other: which one the month's time is.
	readEach := func(b *testing.B) {
		for b.Loop() {
			for _, r := range reads {
				began := time.Now()
				if err := r.read(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(began).Seconds(), r.name+"-s")
			}
		}
	}
	compute := func(by fleet.By) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				rows, err := fleet.Compute(ctx, conn, book, fleet.Options{From: start, To: end, By: by})
				if err != nil {
					b.Fatal(err)
				}
				total := rows[len(rows)-1]
				if total.Group != fleet.Total || total.AllocatedGPUHours <= 0 || total.Revenue <= 0 || total.MaxTenantsPerHost == 0 {
					b.Fatalf("fleet row %+v", total)
				}
			}
		}
	}
	// Before the fleet's roll-up, samples_1m is read minute by minute (what a month of
	// changed hours would cost); SLICEMETER_BENCH_MINUTES=0 skips it.
	if os.Getenv("SLICEMETER_BENCH_MINUTES") != "0" {
		b.Run("minutes/reads", readEach)
		b.Run("minutes/model", compute(fleet.ByModel))
	}
	// The service rolls up the fleet's reads of samples_1m beside the stored hours
	// (fleetstore.RollupFleetHours), in runs of up to 6 hours.
	began = time.Now()
	if err := fleetstore.RollupFleetHours(ctx, conn, start, end); err != nil {
		b.Fatalf("roll up samples_1m by hour: %v", err)
	}
	b.Logf("fleet rolled up by hour in %s (%s an hour)", time.Since(began).Round(time.Millisecond),
		(time.Since(began) / time.Duration(minutes/60)).Round(time.Millisecond))
	b.Run("hours/reads", readEach)
	for _, by := range []fleet.By{fleet.ByModel, fleet.ByGPU} {
		b.Run("hours/"+string(by), compute(by))
	}
}

// generateMonth writes [start, end) of the bench's fleet of instances into samples_1m and
// attribution_minutes, inside ClickHouse.
func generateMonth(ctx context.Context, tb testing.TB, conn driver.Conn, start, end time.Time, instances int) {
	minutes := int(end.Sub(start) / time.Minute)
	const facts = `concat('node-', toString(intDiv(inst, 56))), concat('GPU-', toString(intDiv(inst, 7))),
        toUInt32(intDiv(inst, 7) % 8), 'A100-SXM4-40GB', 'mig',
        concat('gpu', toString(intDiv(inst, 7) % 8), '/mig', toString(inst % 7)), '1g.5gb'`
	// A day at a time: one INSERT of the month outlasts the driver's read timeout on a loaded
	// machine.
	const day = 24 * 60
	for first := 0; first < minutes; first += day {
		rollup := fmt.Sprintf(`INSERT INTO samples_1m (node, gpu_uuid, gpu_index, model, kind, instance_id, profile, time,
    compute_slices, sm_count, gpu_sm_count, mem_total_bytes, gpu_mem_total_bytes, interval_ns,
    samples, covered_ns, sm_active_sum, attached_sum, vgpu_switch_ns_sum, vgpu_run_ns_sum,
    first_attached_ns, mem_used_bytes_sum, power_watts_sum, wait_ns, wait_count, first_ns, last_ns, sm_active_ns)
SELECT %s, toDateTime(intDiv(ts, 1000000000)),
    toUInt32(1), toUInt32(14), toUInt32(108), toUInt64(5368709120), toUInt64(42949672960), toUInt64(1000000000),
    toUInt64(60), toUInt64(60000000000), 30., toUInt64(60), toUInt64(0), toUInt64(0),
    ts, 60 * 2684354560., 60 * 200., emptyArrayUInt64(), emptyArrayUInt64(), ts, ts + 59000000000, 3e10
FROM (SELECT %d + number %% %d AS m, intDiv(number, %d) AS inst, toUInt64(%d + m * 60000000000) AS ts FROM system.numbers LIMIT %d)`,
			facts, first, day, day, start.UnixNano(), instances*day)
		if err := conn.Exec(ctx, rollup); err != nil {
			tb.Fatalf("generate samples_1m: %v", err)
		}
		insertMinutes := fmt.Sprintf(`INSERT INTO attribution_minutes (minute, tenant, allocation_id, tier, node, instance_id,
    requested_ns, started_ns, sliced, billed_ns, metered_ns, list_cost, cost, waste_cost, overhead_cost, efficiency_ns,
    cold_start_ns, cold_start_sla_ns, wait_ns, wait_count, currency, computed_ns)
SELECT toDateTime(%d + m * 60), if(inst < %d, concat('tenant-', toString(inst %% 10)), '__unallocated__'),
    if(inst < %d, concat('a', toString(inst)), ''), 'pro',
    if(inst < %d, concat('node-', toString(intDiv(inst, 56))), ''),
    if(inst < %d, concat('gpu', toString(intDiv(inst, 7) %% 8), '/mig', toString(inst %% 7)), ''),
    toInt64(%d), toInt64(%d), toUInt8(0),
    toInt64(60000000000), toInt64(60000000000), 1.6 / 7 / 60, 1.6 / 7 / 60, 0.01, 0.002, 27e9, toInt64(0), toInt64(30000000000),
    emptyArrayUInt64(), emptyArrayUInt64(), 'USD', toUInt64(1)
FROM (SELECT %d + number %% %d AS m, intDiv(number, %d) AS inst FROM system.numbers LIMIT %d)`,
			start.Unix(), instances, instances, instances, instances, start.UnixNano(), start.UnixNano(), first, day, day, (instances+1)*day)
		if err := conn.Exec(ctx, insertMinutes); err != nil {
			tb.Fatalf("generate attribution_minutes: %v", err)
		}
	}
}
