package fleet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/dashboards"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// TestDashboardAgreesWithFleet: the Fleet economics dashboard's hourly GPU-hours, summed over
// the scenario's hour, are what `slicemeter fleet` reports for it: allocated (billed × billed
// fraction of the stored minutes, not the time a process was attached) and active, the same
// definitions.
func TestDashboardAgreesWithFleet(t *testing.T) {
	ctx := context.Background()
	sc, book, conn := economicsAttributed(t)
	// A later pass of node-a's minute 5 bills nothing there (its allocations found ended, say),
	// while the samples still show their processes attached: what is billed counts, not what
	// has a process.
	cols := make([]string, len(tables.AttributionMinuteColumns))
	for i, c := range tables.AttributionMinuteColumns {
		cols[i] = map[string]string{"billed_ns": "toInt64(0)", "computed_ns": "computed_ns + 1"}[c]
		if cols[i] == "" {
			cols[i] = c
		}
	}
	if err := conn.Exec(ctx, tables.Insert(tables.AttributionMinutes, tables.AttributionMinuteColumns)+`
SELECT `+strings.Join(cols, ", ")+` FROM attribution_minutes WHERE minute = toDateTime(?) AND node = 'node-a'`, sc.Start.Add(5*time.Minute).Unix()); err != nil {
		t.Fatal(err)
	}
	rows, err := fleet.Compute(ctx, conn, book, fleet.Options{From: sc.Start, To: sc.End(), By: fleet.ByModel})
	if err != nil {
		t.Fatal(err)
	}
	total := rows[len(rows)-1]
	const panel = "Sampled, allocated and active GPU-hours per hour"
	sql := ""
	all, err := dashboards.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range all {
		for _, q := range dashboards.Queries(g.Dashboard) {
			if q.Dashboard == "slicemeter-fleet-economics" && q.Panel == panel {
				sql = q.Text
			}
		}
	}
	if sql == "" {
		t.Fatalf("no panel %q on the Fleet economics dashboard", panel)
	}
	// $__timeFilter(col) over the scenario's hour, its end excluded as the fleet window's is.
	for {
		i := strings.Index(sql, "$__timeFilter(")
		if i < 0 {
			break
		}
		j := strings.Index(sql[i:], ")")
		col := sql[i+len("$__timeFilter(") : i+j]
		sql = sql[:i] + fmt.Sprintf("%s >= toDateTime(%d) AND %s < toDateTime(%d)", col, sc.Start.Unix(), col, sc.End().Unix()) + sql[i+j+1:]
	}
	var (
		at                                time.Time
		sampled, allocated, active, a, ac float64
		n                                 int
	)
	res, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	defer res.Close()
	for res.Next() {
		var s float64
		if err := res.Scan(&at, &s, &a, &ac); err != nil {
			t.Fatal(err)
		}
		sampled, allocated, active, n = sampled+s, allocated+a, active+ac, n+1
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 1 || !near(allocated, total.AllocatedGPUHours) || !near(active, total.ActiveGPUHours) {
		t.Errorf("the dashboard's %d hour(s): allocated %.6f, active %.6f GPU-hours; slicemeter fleet's: %.6f, %.6f",
			n, allocated, active, total.AllocatedGPUHours, total.ActiveGPUHours)
	}
	// Four GPUs sampled all hour: the capacity too, here (presence adds nothing within it).
	if !near(sampled, total.CapacityGPUHours) {
		t.Errorf("sampled %.6f GPU-hours, capacity %.6f", sampled, total.CapacityGPUHours)
	}
}
