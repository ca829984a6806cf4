package attribution_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestComputeUnmeasured: samples whose activity was not measured (sm_active_unavailable: a MIG
// instance on an A100, which has no GPM) are metered but leave efficiency and waste alone, from
// every sample source and from the stored minutes. Ten minutes of 1 s samples of one A100:
//
//	gpu0/mig0 (tenant nogpm): never measured (sm_active 0 on the wire, meaning nothing);
//	gpu0/mig1 (tenant mixed): unmeasured for the first 4 minutes, then measured at 0.4;
//	gpu0/mig2 (tenant outage): unmeasured, then 3 minutes of exporter outage, then measured at
//	0.8 for the last 3 minutes.
//
// Everything on whole minutes, so the per-minute rollup is exact too.
func TestComputeUnmeasured(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	ctx := context.Background()
	const window = 10 * time.Minute
	mig := func(id string) instance {
		in := migA100
		in.id = id
		return in
	}
	mig0, mig1, mig2 := mig("gpu0/mig0"), mig("gpu0/mig1"), mig("gpu0/mig2")
	var samples []*pb.Sample
	for at := time.Duration(0); at < window; at += time.Second {
		unmeasured := func(in instance) *pb.Sample {
			s := in.sample(at, time.Second, true, 0)
			s.SmActiveUnavailable = true
			return s
		}
		samples = append(samples, unmeasured(mig0))
		if at < 4*time.Minute {
			samples = append(samples, unmeasured(mig1))
		} else {
			samples = append(samples, mig1.sample(at, time.Second, true, 0.4))
		}
		switch {
		case at < 4*time.Minute:
			samples = append(samples, unmeasured(mig2))
		case at >= 7*time.Minute:
			samples = append(samples, mig2.sample(at, time.Second, true, 0.8))
		}
	}
	insertSamples(t, conn, "node-a", samples)
	chtest.RollUp(t, conn)
	insertAllocations(t, conn, []allocationRow{
		{id: "n", tenant: "nogpm", tier: "pro", node: "node-a", instance: mig0.id, requested: t0, started: t0, version: 1},
		{id: "m", tenant: "mixed", tier: "pro", node: "node-a", instance: mig1.id, requested: t0, started: t0, version: 1},
		{id: "o", tenant: "outage", tier: "budget", node: "node-a", instance: mig2.id, requested: t0, started: t0, version: 1},
	})

	// By hand: every allocation is a 1g.5gb (1/7 of an A100 at 1.60/h) for the ten minutes.
	migO := 1 - (14.0/108)/(1.0/7)
	list := 1.60 / 7 * window.Hours()
	f := func(v float64) *float64 { return &v }
	zero := time.Duration(0)
	row := func(r report.Row) report.Row {
		r.WindowStart, r.WindowEnd, r.Currency, r.Allocated, r.ListCost, r.JitterP99 = t0, t0.Add(window), "USD", window, list, &zero
		return r
	}
	want := report.Report{
		WindowStart: t0, WindowEnd: t0.Add(window), Currency: "USD",
		Tenants: []report.Row{
			// Measured 6 of 10 minutes at 0.4.
			row(report.Row{Tenant: "mixed", Tier: "pro", Cost: list, WasteCost: list * (1 - migO) * (6.0 / 10) * (1 - 0.4),
				OverheadCost: list * migO, Efficiency: f(0.4), ColdStartMax: &zero}),
			// Metered, never measured: no efficiency, no waste, nothing unmetered.
			row(report.Row{Tenant: "nogpm", Tier: "pro", Cost: list, OverheadCost: list * migO, ColdStartMax: &zero}),
			// 3 minutes unmetered, 4 unmeasured, 3 measured at 0.8.
			row(report.Row{Tenant: "outage", Tier: "budget", Cost: list * 0.7, WasteCost: list * 0.7 * (1 - migO) * (3.0 / 10) * (1 - 0.8),
				OverheadCost: list * 0.7 * migO, Efficiency: f(0.8), ColdStartMax: &zero, Unmetered: 3 * time.Minute}),
		},
		UnallocatedListCost: 1.60*window.Hours() - 3*list,
	}
	var wantCSV bytes.Buffer
	if err := want.WriteCSV(&wantCSV); err != nil {
		t.Fatal(err)
	}

	// The continuous service's stored minutes, from the raw samples.
	cfg := service.Passes{Backfill: window, MaxMinutes: 10, Samples: store.RawSamples}
	runner := service.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return t0.Add(window) })
	if _, err := runner.Once(ctx); err != nil {
		t.Fatal(err)
	}

	// The stored minutes hold money as Decimal(38, 12): each minute's amount is rounded to
	// 1e-12, so ten minutes' sums may differ from the exact figures by up to 10 × 0.5e-12.
	tests := []struct {
		name    string
		compute func() (report.Report, error)
		tol     float64
	}{
		{"samples", func() (report.Report, error) { return reportOf(ctx, conn, t0, t0.Add(window), book, store.RawSamples) }, 0},
		{"samples_1s", func() (report.Report, error) {
			return reportOf(ctx, conn, t0, t0.Add(window), book, store.SecondRollup)
		}, 0},
		{"samples_1m", func() (report.Report, error) {
			return reportOf(ctx, conn, t0, t0.Add(window), book, store.MinuteRollup)
		}, 0},
		{"attribution_minutes", func() (report.Report, error) { return stored.FromMinutes(ctx, conn, t0, t0.Add(window)) }, 1e-11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.compute()
			if err != nil {
				t.Fatal(err)
			}
			var gotCSV bytes.Buffer
			if err := got.WriteCSV(&gotCSV); err != nil {
				t.Fatal(err)
			}
			if gotCSV.String() != wantCSV.String() {
				t.Errorf("report:\n%s\nwant:\n%s", gotCSV.String(), wantCSV.String())
			}
			for i, g := range got.Tenants {
				if i >= len(want.Tenants) {
					break
				}
				w := want.Tenants[i]
				tol := max(tt.tol, 1e-12)
				if math.Abs(g.WasteCost-w.WasteCost) > tol || math.Abs(g.OverheadCost-w.OverheadCost) > tol {
					t.Errorf("%s: waste %.15f, overhead %.15f; want %.15f, %.15f", g.Tenant, g.WasteCost, g.OverheadCost, w.WasteCost, w.OverheadCost)
				}
			}
			if errs := billing.CheckInvariants(got); len(errs) > 0 {
				t.Errorf("invariants: %v", errs)
			}
		})
	}
}

// TestScenarioWithoutGPM runs exporter/testdata/mig-nogpm.yaml (A100s with gpm: false beside
// an H100 with GPM, a one-minute exporter outage) through the simulator: the MIG instances of
// the A100 are metered (all but the outage) and never measured, so they add no waste and no
// efficiency; the tenants' efficiency is their measured allocations' load.
func TestScenarioWithoutGPM(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("simulates ten minutes of a fleet")
	}
	ctx := context.Background()
	sc, err := scenario.Load(filepath.Join("..", "exporter", "testdata", "mig-nogpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := newDatabase(t)
	chtest.InsertScenario(t, conn, sc)
	chtest.RollUp(t, conn)
	book := sc.Book

	// Per allocation (scenarioAllocations' ids): billed, metered, and the load of its measured
	// time (-1: never measured). The outage [4m, 5m) falls in every allocation.
	type expect struct {
		billed, metered time.Duration
		load            float64
	}
	allocations := map[string]expect{
		"acme-0": {590 * time.Second, 530 * time.Second, -1},  // A100 without GPM, 3g.20gb
		"acme-1": {590 * time.Second, 530 * time.Second, 0.5}, // H100 with GPM, 3g.40gb
		"beta-0": {415 * time.Second, 355 * time.Second, -1},  // A100 without GPM, [65 s, 8 m)
		"beta-1": {595 * time.Second, 535 * time.Second, 0.7}, // whole A100: the driver's utilization
	}
	tenants := map[string]float64{"acme": 0.5, "beta": 0.7}
	for _, source := range []store.Samples{store.RawSamples, store.SecondRollup} {
		t.Run(source.String(), func(t *testing.T) {
			rep, lines, err := linesOf(ctx, conn, sc.Start, sc.End(), book, source)
			if err != nil {
				t.Fatal(err)
			}
			if len(lines) != len(allocations) {
				t.Fatalf("%d lines, want %d", len(lines), len(allocations))
			}
			for _, l := range lines {
				want := allocations[l.AllocationID]
				if l.Billed != want.billed || l.Metered != want.metered {
					t.Errorf("%s: billed %s, metered %s; want %s, %s", l.AllocationID, l.Billed, l.Metered, want.billed, want.metered)
				}
				o := l.OverheadCost / l.Cost
				switch {
				case want.load < 0 && (l.Active != 0 || l.WasteCost != 0):
					t.Errorf("%s (unmeasured): active %s, waste %g; want 0, 0", l.AllocationID, l.Active, l.WasteCost)
				case want.load >= 0 && (l.Active != l.Metered || math.Abs(l.Efficiency-want.load) > 1e-9):
					t.Errorf("%s (measured): active %s of %s metered, efficiency %.6f; want all metered, %.1f", l.AllocationID, l.Active, l.Metered, l.Efficiency, want.load)
				case want.load >= 0 && math.Abs(l.WasteCost-l.Cost*(1-o)*(l.Active.Seconds()/l.Billed.Seconds())*(1-want.load)) > 1e-12:
					t.Errorf("%s: waste %.9f", l.AllocationID, l.WasteCost)
				}
			}
			for _, row := range rep.Tenants {
				if row.Efficiency == nil || math.Abs(*row.Efficiency-tenants[row.Tenant]) > 1e-9 {
					t.Errorf("tenant %s: efficiency %v, want %.1f (its measured allocation's)", row.Tenant, row.Efficiency, tenants[row.Tenant])
				}
				if row.Unmetered != 2*time.Minute {
					t.Errorf("tenant %s: unmetered %s, want 2m (the outage, in both allocations)", row.Tenant, row.Unmetered)
				}
			}
			if errs := billing.CheckInvariants(rep); len(errs) > 0 {
				t.Errorf("invariants: %v", errs)
			}
		})
	}
}
