package chtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
)

// RandomMinute is a minute of n allocations of five tenants with random amounts.
func RandomMinute(r *rand.Rand, m, requested time.Time, n int) stored.Minute {
	var lines []billing.Line
	for i := range n {
		billed := time.Duration(r.IntN(60)+1) * time.Second
		metered := time.Duration(r.Int64N(int64(billed) + 1))
		active := time.Duration(r.Int64N(int64(metered) + 1))
		l := billing.Line{
			Tenant: fmt.Sprintf("tenant-%d", i%5), AllocationID: fmt.Sprintf("a%d", i), Tier: "pro",
			Node: fmt.Sprintf("node-%d", i%2), Instance: fmt.Sprintf("gpu0/mig%d", i), Model: "A100-SXM4-40GB", Profile: "1g.5gb",
			Fraction: 1. / 7, Billed: billed, Metered: metered, Active: active,
			ListCost: r.Float64() / 60, Overhead: r.Float64() / 10, Efficiency: r.Float64(),
			ColdStartSLA: 30 * time.Second, Requested: requested, Started: requested, TimeSliced: i == 5,
		}
		l.Cost = l.ListCost * 0.9
		l.WasteCost, l.OverheadCost = l.Cost*r.Float64()/2, l.Cost*l.Overhead
		if r.IntN(3) == 0 {
			d := time.Duration(r.IntN(40)) * time.Second
			l.ColdStart = &d
		}
		if l.TimeSliced {
			l.Waits = billing.Histogram{uint64(r.IntN(4)+1) * 1e6: uint64(r.IntN(9) + 1), 8e6: 1}
		}
		lines = append(lines, l)
	}
	return stored.Minute{Start: m, Report: report.Report{Currency: "USD", UnallocatedListCost: r.Float64()}, Lines: lines}
}

// WriteRandomMinutes stores the minutes [start, start+n) of three allocations with random
// amounts (RandomMinute, seeded by seed) in conn's attribution_minutes.
func WriteRandomMinutes(ctx context.Context, t testing.TB, conn driver.Conn, seed uint64, start time.Time, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var minutes []stored.Minute
	for i := range n {
		m := start.Add(time.Duration(i) * time.Minute)
		minutes = append(minutes, RandomMinute(r, m, start, 3))
	}
	if err := stored.WriteMinutes(ctx, conn, minutes, start.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
}
