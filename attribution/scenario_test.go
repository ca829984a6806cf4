package attribution_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestScenarios runs the public scenarios through the simulator into ClickHouse and checks that
// Compute recovers each scenario's expected report from the samples and allocations alone.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates an hour of a fleet per scenario")
	}
	for _, name := range []string{"mig-basic", "outage-coldstart", "vgpu-timeslice"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "schemas", "scenario", "testdata")
			sc, err := scenario.Load(filepath.Join(dir, name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, name+".expected.csv"))
			if err != nil {
				t.Fatal(err)
			}
			conn := newDatabase(t)
			simulate(t, sc, func(node string, samples []*pb.Sample) { insertSamples(t, conn, node, samples) })
			insertAllocations(t, conn, scenarioAllocations(sc))

			r, err := attribution.Compute(context.Background(), conn, sc.Start, sc.End(), pricebook.FromScenario(sc))
			if err != nil {
				t.Fatal(err)
			}
			if errs := attribution.CheckInvariants(r); len(errs) > 0 {
				t.Errorf("invariants: %v", errs)
			}
			var got bytes.Buffer
			if err := r.WriteCSV(&got); err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				t.Errorf("report:\n%s\nwant:\n%s", got.String(), want)
			}
		})
	}
}

// simulate reads every tick of the scenario and hands over the samples node by node, in
// batches of about a minute of ticks.
func simulate(t *testing.T, sc *scenario.Scenario, write func(node string, samples []*pb.Sample)) {
	t.Helper()
	src, err := sim.New(sc, "")
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string][]*pb.Sample{}
	flush := func() {
		for node, samples := range pending {
			write(node, samples)
		}
		clear(pending)
	}
	for n := 0; ; n++ {
		d := time.Duration(n) * sc.Interval
		if d >= sc.Duration {
			break
		}
		out, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range out {
			pending[ns.Node] = append(pending[ns.Node], ns.Samples...)
		}
		if n%600 == 599 {
			flush()
		}
	}
	flush()
}

// scenarioAllocations are the scenario's allocations as the allocations table holds them.
func scenarioAllocations(sc *scenario.Scenario) []allocationRow {
	var rows []allocationRow
	for _, tn := range sc.Tenants {
		for i, a := range tn.Allocations {
			rows = append(rows, allocationRow{
				id: fmt.Sprintf("%s-%d", tn.Name, i), tenant: tn.Name, tier: tn.Tier,
				node: a.Target.Node, instance: a.Target.Instance,
				requested: sc.Start.Add(a.Requested), started: sc.Start.Add(a.Ready), ended: sc.Start.Add(a.End),
				version: 1,
			})
		}
	}
	return rows
}
