package stored_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// TestEfficiencyIsTheGoDefinition: tables.Efficiency, the SQL the dashboards sum stored
// minutes with, gives on ClickHouse what billing.TimeMean gives of the same sums, per
// allocation, for minutes of any efficiency (0 and 1 included) and measured time (none
// included), and so what a report from the stored minutes says.
func TestEfficiencyIsTheGoDefinition(t *testing.T) {
	if testing.Short() {
		t.Skip("writes stored minutes into ClickHouse")
	}
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(24, 1))
	const allocations = 6
	var (
		minutes       []stored.Minute
		effNS, active [allocations]float64
	)
	for m := range 30 {
		var lines []billing.Line
		for i := range allocations {
			l := billing.Line{Tenant: "t", AllocationID: fmt.Sprintf("a%d", i), Billed: time.Minute, Metered: time.Minute,
				Requested: start, Started: start, Model: "A100-SXM4-40GB", Efficiency: r.Float64(),
				Active: time.Duration(r.Int64N(int64(time.Minute) + 1))}
			switch {
			case i == 0: // never measured
				l.Active, l.Efficiency = 0, 0
			case i == 1: // fully busy
				l.Efficiency = 1
			case i == 2 && m%2 == 0: // idle half the minutes
				l.Efficiency = 0
			case i == 3 && m%3 == 0: // some minutes unmeasured
				l.Active, l.Efficiency = 0, 0
			}
			effNS[i] += l.Efficiency * float64(l.Active)
			active[i] += float64(l.Active)
			lines = append(lines, l)
		}
		minutes = append(minutes, stored.Minute{Start: start.Add(time.Duration(m) * time.Minute), Report: report.Report{Currency: "USD"}, Lines: lines})
	}
	if err := stored.WriteMinutes(ctx, conn, minutes, start.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT allocation_id, `+tables.Efficiency+` FROM `+tables.AttributionMinutes+
		` WHERE tenant = 't' GROUP BY allocation_id ORDER BY allocation_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for ; rows.Next(); n++ {
		var (
			id  string
			got float64
		)
		if err := rows.Scan(&id, &got); err != nil {
			t.Fatal(err)
		}
		want := billing.TimeMean(effNS[n], time.Duration(active[n]))
		if id != fmt.Sprintf("a%d", n) || math.Abs(got-want) > 1e-12 || got < 0 || got > 1 {
			t.Errorf("%s: tables.Efficiency %v, billing.TimeMean of its sums %v", id, got, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != allocations {
		t.Fatalf("%d allocations read, %d written", n, allocations)
	}
	_, lines, err := stored.FromMinutesLines(ctx, conn, start, start.Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		var i int
		if _, err := fmt.Sscanf(l.AllocationID, "a%d", &i); err != nil {
			t.Fatal(err)
		}
		if want := billing.TimeMean(effNS[i], time.Duration(active[i])); math.Abs(l.Efficiency-want) > 1e-12 {
			t.Errorf("%s: efficiency from stored minutes %v, billing.TimeMean of its sums %v", l.AllocationID, l.Efficiency, want)
		}
	}
}
