package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// TestFleetGauges attributes fleet-economics.yaml's hour and serves its fleet report as
// gauges: node-a's six tenants against the limit of five, the A100's stranded slice, the
// ratios and the H100s' negative margin (the figures by hand are attribution/fleet's test's).
func TestFleetGauges(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("simulates an hour of a fleet into ClickHouse")
	}
	ctx := context.Background()
	sc, err := scenario.Load(filepath.Join("..", "fleet", "testdata", "fleet-economics.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := chtest.NewDatabase(t, nil)
	chtest.InsertScenario(t, conn, sc)
	chtest.RollUp(t, conn)
	book := sc.Book
	runner := NewRunner(conn, book, Passes{Delay: 30 * time.Second, Lookback: time.Hour, Backfill: time.Hour, MaxRecompute: time.Hour,
		MaxMinutes: 120, Presence: time.Hour, Samples: store.SecondRollup}, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return sc.End().Add(30 * time.Second) })
	if _, err := runner.Once(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := newFleetMetrics(reg, 5)
	if err := m.update(ctx, conn, book, sc.Start, sc.End(), time.Hour); err != nil {
		t.Fatal(err)
	}
	allocated := (5./7 + 4./3) / 4
	h100Margin := 2.48 - (3 + 0.798*0.2) // revenue − (3 GPU-hours at 1.00 + 0.798 kWh at 0.20)
	want := `
# HELP slicemeter_fleet_tenants_per_host The most tenants billed on the node within one minute of the trailing window (the blast radius of its failure).
# TYPE slicemeter_fleet_tenants_per_host gauge
slicemeter_fleet_tenants_per_host{node="node-a"} 6
# HELP slicemeter_fleet_tenants_per_host_limit --fleet.max-tenants-per-host: the most tenants one host should carry.
# TYPE slicemeter_fleet_tenants_per_host_limit gauge
slicemeter_fleet_tenants_per_host_limit 5
# HELP slicemeter_fleet_fragmented_slices MIG compute slices free in the trailing window that the largest profile held on the model cannot use.
# TYPE slicemeter_fleet_fragmented_slices gauge
slicemeter_fleet_fragmented_slices{model="A100-SXM4-40GB"} 1
slicemeter_fleet_fragmented_slices{model="H100-SXM5-80GB"} 0
slicemeter_fleet_fragmented_slices{model="__fleet__"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "slicemeter_fleet_tenants_per_host", "slicemeter_fleet_tenants_per_host_limit",
		"slicemeter_fleet_fragmented_slices"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				if l.GetName() == "model" {
					key += "/" + l.GetValue()
				}
			}
			got[key] = mt.GetGauge().GetValue()
		}
	}
	for key, v := range map[string]float64{
		"slicemeter_fleet_allocation_ratio/__fleet__":             allocated,
		"slicemeter_fleet_margin/H100-SXM5-80GB":                  h100Margin,
		"slicemeter_fleet_memory_efficiency_ratio/H100-SXM5-80GB": 0.25,
		"slicemeter_fleet_overhead_ratio/H100-SXM5-80GB":          0,
	} {
		if g, ok := got[key]; !ok || g < v-1e-6 || g > v+1e-6 {
			t.Errorf("%s = %v (served: %v), want %v", key, g, ok, v)
		}
	}

	// A trailing window that starts before the first minute attributed is cut to the
	// attributed minutes: the same gauges, no error.
	if err := m.update(ctx, conn, book, sc.Start.Add(-10*time.Minute), sc.End(), time.Hour); err != nil {
		t.Fatalf("a window starting 10 minutes before the first attributed: %v", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "slicemeter_fleet_tenants_per_host", "slicemeter_fleet_fragmented_slices"); err != nil {
		t.Errorf("the window cut to its attributed minutes: %v", err)
	}
	if n := testutil.ToFloat64(m.errors); n != 0 {
		t.Errorf("slicemeter_fleet_errors_total %v, want 0", n)
	}
}
