package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/fleet/fleetstore"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// TestComputeReadsFreshHoursOnly: over whole hours all rolled up, Compute reads no row of
// samples_1m and, of the stored minutes, only what the freshness check of attribution_hours
// reads, once for both of its readers (system.query_log of its queries alone); once a minute
// of an hour is recomputed, that hour's minutes are read (and its marker rows, to know that
// every minute of it is attributed).
func TestComputeReadsFreshHoursOnly(t *testing.T) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	start := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	generateMonth(ctx, t, conn, start, start.Add(6*time.Hour), 14)
	// One part per partition: no merge makes an hour of samples_1m stale behind the test's back.
	for _, table := range []string{"samples_1m", "attribution_minutes"} {
		if err := conn.Exec(ctx, "OPTIMIZE TABLE "+table+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	if err := stored.RollupHours(ctx, conn, start, start.Add(6*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := fleetstore.RollupFleetHours(ctx, conn, start, start.Add(6*time.Hour)); err != nil {
		t.Fatal(err)
	}
	book := &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100-SXM4-40GB": 1.6}, Tiers: map[string]float64{"pro": 1}}
	from, to := start.Add(time.Hour), start.Add(5*time.Hour)
	// queries runs Compute with its queries logged and returns their texts (those of an
	// earlier call left out: the log is by the second).
	seen := map[string]bool{}
	queries := func() []string {
		t.Helper()
		began := time.Now().Add(-time.Second)
		logged := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"log_queries": 1}))
		rows, err := fleet.Compute(logged, conn, book, fleet.Options{From: from, To: to, By: fleet.ByModel})
		if err != nil {
			t.Fatal(err)
		}
		if total := rows[len(rows)-1]; total.AllocatedGPUHours <= 0 || total.MaxTenantsPerHost == 0 {
			t.Fatalf("fleet row %+v: want the stored minutes' allocations", total)
		}
		if err := conn.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
			t.Fatal(err)
		}
		var out []string
		logs, err := conn.Query(ctx, `SELECT query_id, query FROM system.query_log
WHERE type = 2 AND event_time >= toDateTime(?) AND query NOT LIKE '%query_log%' AND query NOT LIKE '%FLUSH LOGS%'`, began.Unix())
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		for logs.Next() {
			var id, q string
			if err := logs.Scan(&id, &q); err != nil {
				t.Fatal(err)
			}
			if !seen[id] {
				seen[id] = true
				out = append(out, q)
			}
		}
		if err := logs.Err(); err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			t.Fatal("no query logged")
		}
		return out
	}
	reading := func(qs []string, table string) (n int, checks int) {
		for _, q := range qs {
			if strings.Contains(q, "FROM "+table+"\n") || strings.Contains(q, "FROM "+table+" ") {
				n++
				if strings.Contains(q, "max(computed_ns) AS c") {
					checks++
				}
			}
		}
		return n, checks
	}
	qs := queries()
	if n, _ := reading(qs, "samples_1m"); n > 0 {
		t.Errorf("fresh hours: %d queries read samples_1m; want none: %q", n, qs)
	}
	if n, checks := reading(qs, "attribution_minutes"); n != 1 || checks != 1 {
		t.Errorf("fresh hours: %d queries read attribution_minutes, %d of them the freshness check; want the check once: %q", n, checks, qs)
	}
	// A later pass of a minute of 02:00: that hour's stored minutes are read (by what is
	// billed and by the tenants per host), its samples_1m rows still not.
	err := conn.Exec(ctx, `INSERT INTO attribution_minutes (minute, tenant, allocation_id, tier, node, instance_id, requested_ns, started_ns,
    sliced, billed_ns, metered_ns, list_cost, cost, waste_cost, overhead_cost, efficiency_ns, cold_start_ns, cold_start_sla_ns,
    wait_ns, wait_count, currency, computed_ns)
SELECT minute, tenant, allocation_id, tier, node, instance_id, requested_ns, started_ns, sliced, billed_ns, metered_ns, list_cost, cost,
    waste_cost, overhead_cost, efficiency_ns, cold_start_ns, cold_start_sla_ns, wait_ns, wait_count, currency, toUInt64(2)
FROM attribution_minutes WHERE minute = toDateTime(?)`, start.Add(2*time.Hour+7*time.Minute).Unix())
	if err != nil {
		t.Fatal(err)
	}
	qs = queries()
	if n, _ := reading(qs, "samples_1m"); n > 0 {
		t.Errorf("a recomputed minute: %d queries read samples_1m; want none: %q", n, qs)
	}
	if n, checks := reading(qs, "attribution_minutes"); n != 4 || checks != 1 {
		t.Errorf("a recomputed minute: %d queries read attribution_minutes, %d of them the freshness check; want the check, its hour's markers (attributed?) and two reads of its hour: %q", n, checks, qs)
	}
}
