package stored_test

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// TestMinutesPerNode: replicas store the nodes of one minute in passes of their own. The
// report from the stored minutes takes each node's latest pass (an older pass of another node
// still counts), counts the minute once however many passes and nodes it has, drops the rows
// of a node once a later pass gives it a zero row (Stale), and still reads minutes stored
// before the per-node rows (the whole unallocated list cost on the marker row). NodeEnds,
// StoredNodes, AllocationNodes and NextPass see what was stored. Every query runs through
// chDB (current ClickHouse) as on 18.16.
func TestMinutesPerNode(t *testing.T) {
	ctx := context.Background()
	recorder := &chtest.QueryRecorder{}
	conn := chtest.NewDatabase(t, slog.New(recorder))
	m0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	m1 := m0.Add(time.Minute)
	line := func(id, node string, list float64) billing.Line {
		return billing.Line{Tenant: "t-" + id, AllocationID: id, Tier: "pro", Node: node, Instance: "gpu0", Model: "H100", Fraction: 1,
			Requested: m0, Started: m0, Billed: time.Minute, Metered: time.Minute, ListCost: list, Cost: list, Waits: billing.Histogram{}}
	}
	minute := func(start time.Time, byNode map[string]float64, stale []string, lines ...billing.Line) stored.Minute {
		rep := report.Report{Currency: "USD", UnallocatedByNode: byNode}
		for _, v := range byNode {
			rep.UnallocatedListCost += v
		}
		return stored.Minute{Start: start, Report: rep, Lines: lines, Stale: stale}
	}
	pass := m0.Add(time.Hour)
	write := func(minutes ...stored.Minute) {
		t.Helper()
		pass = pass.Add(time.Second)
		if err := stored.WriteMinutes(ctx, conn, minutes, pass); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, from, to time.Time, unallocated float64, tenants ...string) {
		t.Helper()
		rep, err := stored.FromMinutes(ctx, conn, from, to)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		var got []string
		for _, r := range rep.Tenants {
			got = append(got, r.Tenant)
		}
		if !slices.Equal(got, tenants) || math.Abs(rep.UnallocatedListCost-unallocated) > 1e-9 {
			t.Errorf("%s: tenants %v, unallocated %.3f; want %v, %.3f", step, got, rep.UnallocatedListCost, tenants, unallocated)
		}
	}
	// Replica A (node-1) stores minute 0, then replica B (node-2) does.
	write(minute(m0, map[string]float64{"node-1": 1}, nil, line("x", "node-1", 0.5)))
	write(minute(m0, map[string]float64{"node-2": 2}, nil, line("y", "node-2", 0.25)))
	check("two replicas' passes", m0, m1, 3, "t-x", "t-y")
	// B recomputes node-2 without y; A's node-1 stays as A stored it.
	write(minute(m0, map[string]float64{"node-2": 2.25}, nil))
	check("node-2 recomputed", m0, m1, 3.25, "t-x")
	// x moved off node-1, which has nothing left: a zero row replaces its rows.
	write(minute(m0, map[string]float64{}, []string{"node-1"}))
	check("node-1 stale", m0, m1, 2.25)
	// A minute stored before the per-node rows: its marker holds the unallocated list cost.
	legacy := stored.Minute{Start: m1, Report: report.Report{Currency: "USD", UnallocatedListCost: 4}, Lines: []billing.Line{line("z", "node-1", 1)}}
	write(legacy)
	check("an old minute beside a new", m0, m1.Add(time.Minute), 6.25, "t-z")
	if _, err := stored.FromMinutes(ctx, conn, m0, m1.Add(2*time.Minute)); err == nil {
		t.Error("a window with a minute not stored: no error")
	}

	ends, first, err := stored.NodeEnds(ctx, conn, m0)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Equal(m0) || len(ends) != 2 || !ends["node-1"].Last.Equal(m1) || !ends["node-2"].Last.Equal(m0) || !ends["node-1"].Computed.Equal(pass) {
		t.Errorf("node ends %v, first %s", ends, first)
	}
	nodes, err := stored.StoredNodes(ctx, conn, m0, m1.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := nodes[m0.Unix()]; !slices.Equal(got, []string{"node-1", "node-2"}) || !slices.Equal(nodes[m1.Unix()], []string{"node-1"}) {
		t.Errorf("stored nodes %v", nodes)
	}
	// A pass that started before the latest stored gets a later version; a later one keeps its start.
	if v, err := stored.NextPass(ctx, conn, m0, m1, pass.Add(-time.Minute)); err != nil || !v.Equal(pass.Add(time.Nanosecond)) {
		t.Errorf("next pass after one stored at %s: %s, %v", pass, v, err)
	}
	if v, err := stored.NextPass(ctx, conn, m0, m1, pass.Add(time.Minute)); err != nil || !v.Equal(pass.Add(time.Minute)) {
		t.Errorf("next pass that started after the latest: %s, %v", v, err)
	}
	since := time.Now().UTC().Truncate(time.Second)
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{
		{ID: "m", Tenant: "t", Tier: "pro", Node: "node-1", Instance: "gpu0", Requested: m0, Started: m0, Version: 1},
		{ID: "m", Tenant: "t", Tier: "pro", Node: "node-2", Instance: "gpu0", Requested: m0, Started: m0, Version: 2},
	})
	if nodes, err := stored.AllocationNodes(ctx, conn, since); err != nil || len(nodes) != 1 || !slices.Equal(slices.Sorted(slices.Values(nodes["m"])), []string{"node-1", "node-2"}) {
		t.Errorf("nodes of a moved allocation: %v, %v", nodes, err)
	}
	localtest.CheckQueriesWithChDB(t, "shards.sql", recorder.Selects())
}
