package period_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// BenchmarkPeriod closes February 2026 (28 days) of SLICEMETER_BENCH_INSTANCES MIG instances
// (default 56), one allocation each for the whole month, ten tenants, from the stored minutes
// as the attribution service stores them (one row per allocation and minute plus the
// unallocated row, the rows attribution/bench_test.go generates), and reads it back:
//
//   - close: the month's report from the stored minutes, rendered and stored (with the
//     corrections of nothing: no period is closed before it);
//   - show: the closed month's report read back (`period show`);
//   - recompute: the month's report computed again from the stored minutes.
//
// The scale, 1000 instances (40.3M stored rows):
//
//	SLICEMETER_BENCH_INSTANCES=1000 go test -run '^$' -bench Period -benchtime 1x -timeout 60m ./attribution/period/
//
// The stored minutes are read a day at a time (stored.FromMinutes): a month's latest-pass GROUP
// BY per minute and allocation in one query needs more than the test server's 4 GB
// max_memory_usage from 250 instances on.
func BenchmarkPeriod(b *testing.B) {
	instances := 56
	if v, err := strconv.Atoi(os.Getenv("SLICEMETER_BENCH_INSTANCES")); err == nil && v > 0 {
		instances = v
	}
	ctx := context.Background()
	conn := chtest.NewDatabase(b, nil)
	feb := period.Month{Year: 2026, Month: time.February}
	start, end := feb.Bounds(time.UTC)
	minutes := int(end.Sub(start) / time.Minute)
	began := time.Now()
	stored := fmt.Sprintf(`INSERT INTO attribution_minutes (minute, tenant, allocation_id, tier, node, instance_id,
    requested_ns, started_ns, sliced, billed_ns, metered_ns, list_cost, cost, waste_cost, overhead_cost, efficiency_ns,
    cold_start_ns, cold_start_sla_ns, wait_ns, wait_count, currency, computed_ns)
SELECT toDateTime(%d + m * 60), if(inst < %d, concat('tenant-', toString(inst %% 10)), '__unallocated__'),
    if(inst < %d, concat('a', toString(inst)), ''), 'pro', '', '', toInt64(%d), toInt64(%d), toUInt8(0),
    toInt64(60000000000), toInt64(60000000000), 1.6 / 7 / 60, 1.6 / 7 / 60, 0.01, 0.002, 27e9, toInt64(0), toInt64(30000000000),
    emptyArrayUInt64(), emptyArrayUInt64(), 'USD', toUInt64(1)
FROM (SELECT number %% %d AS m, intDiv(number, %d) AS inst FROM system.numbers LIMIT %d)`,
		start.Unix(), instances, instances, start.UnixNano(), start.UnixNano(), minutes, minutes, (instances+1)*minutes)
	if err := conn.Exec(ctx, stored); err != nil {
		b.Fatalf("generate attribution_minutes: %v", err)
	}
	b.Logf("%d instances × %d minutes: %d stored rows, generated in %s", instances, minutes, (instances+1)*minutes, time.Since(began).Round(time.Millisecond))
	closer := period.Closer{Conn: conn, Book: chtest.Book(), Options: attribution.Options{FromMinutes: true}}
	now := end.Add(72 * time.Hour)
	check := func(b *testing.B, p period.Closed) {
		if p.Period != feb || len(p.Report) == 0 || !p.Cost.IsPositive() {
			b.Fatalf("closed %+v", p)
		}
	}

	b.Run("close", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			for _, t := range []string{tables.BillingPeriods, tables.BillingPeriodLines} {
				if err := conn.Exec(ctx, "TRUNCATE TABLE "+t); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			p, err := closer.Close(ctx, feb, now)
			if err != nil {
				b.Fatal(err)
			}
			check(b, p)
		}
		p, _, err := period.Get(ctx, conn, feb)
		if err != nil {
			b.Fatal(err)
		}
		var onDisk uint64
		if err := conn.QueryRow(ctx, `SELECT sum(bytes_on_disk) FROM system.parts WHERE database = currentDatabase() AND active
    AND table IN ('billing_periods', 'billing_period_lines')`).Scan(&onDisk); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(p.Report)), "report-bytes")
		b.ReportMetric(float64(onDisk), "stored-bytes")
	})
	b.Run("show", func(b *testing.B) {
		for b.Loop() {
			p, ok, err := period.Get(ctx, conn, feb)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			check(b, p)
		}
	})
	b.Run("recompute", func(b *testing.B) {
		for b.Loop() {
			res, err := attribution.Report(ctx, conn, chtest.Book(), attribution.Options{From: start, To: end, Now: now, FromMinutes: true})
			if err != nil || len(res.Report.Tenants) != min(10, instances) {
				b.Fatalf("recompute: %d tenants, %v", len(res.Report.Tenants), err)
			}
		}
	})
}
