package attribution_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/continuous"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestContinuousMinutesSumToReports attributes an hour of a scenario minute by minute into
// ClickHouse, then checks that the stored minutes of any window sum to the report computed
// for that window directly, and that an allocation arriving late is attributed once it
// arrives.
func TestContinuousMinutesSumToReports(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates an hour of a fleet into ClickHouse")
	}
	ctx := context.Background()
	sc, err := scenario.Load(filepath.Join("..", "schemas", "scenario", "testdata", "mig-basic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := newDatabase(t)
	simulate(t, sc, func(node string, samples []*pb.Sample) { insertSamples(t, conn, node, samples) })
	insertAllocations(t, conn, scenarioAllocations(sc))
	book := pricebook.FromScenario(sc)

	clock := sc.End().Add(30 * time.Second)
	cfg := continuous.Config{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 24 * time.Hour, MaxMinutes: 120}
	runner := continuous.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return clock })
	p, err := runner.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fresh != 60 || !p.From.Equal(sc.Start) || !p.To.Equal(sc.End()) {
		t.Fatalf("first pass %+v: want the scenario's 60 minutes", p)
	}
	checkSums(t, conn, book, sc.Start, sc.End())
	checkSums(t, conn, book, sc.Start.Add(10*time.Minute), sc.Start.Add(41*time.Minute))
	if _, err := attribution.FromMinutes(ctx, conn, sc.Start, sc.End().Add(5*time.Minute)); err == nil || !strings.Contains(err.Error(), "5 of its 65 minutes are not attributed yet") {
		t.Errorf("a window beyond the attributed minutes: %v", err)
	}

	// A minute later: the lookback is recomputed, nothing new is closed.
	clock = clock.Add(time.Minute)
	if p, err = runner.Once(ctx); err != nil || p.Fresh != 1 || p.Recomputed != 9 {
		t.Fatalf("second pass %+v, %v: want the 10 minutes of the lookback: 9 recomputed and 1 fresh", p, err)
	}

	// An allocation that arrives late, for minutes long past the lookback, still attributes
	// the samples already stored.
	insertAllocations(t, conn, []allocationRow{{id: "late-1", tenant: "late", tier: "budget", node: "node-a", instance: "gpu0/mig3",
		requested: sc.Start.Add(5 * time.Minute), started: sc.Start.Add(5 * time.Minute), ended: sc.Start.Add(50 * time.Minute), version: 1}})
	clock = clock.Add(time.Minute)
	if p, err = runner.Once(ctx); err != nil || !p.From.Equal(sc.Start.Add(5*time.Minute)) {
		t.Fatalf("pass after a late allocation %+v, %v: want it to start at the allocation's start", p, err)
	}
	totals := checkSums(t, conn, book, sc.Start, sc.End())
	if totals["late"].Cost <= 0 {
		t.Errorf("the late allocation has no cost in the stored minutes: %+v", totals["late"])
	}
}

// checkSums compares the stored minutes of [from, to) with Compute's report of the window.
func checkSums(t *testing.T, c driver.Conn, book *pricebook.PriceBook, from, to time.Time) map[string]continuous.Total {
	t.Helper()
	ctx := context.Background()
	rep, err := attribution.Compute(ctx, c, from, to, book)
	if err != nil {
		t.Fatal(err)
	}
	if errs := attribution.CheckInvariants(rep); len(errs) > 0 {
		t.Errorf("invariants: %v", errs)
	}
	totals, err := continuous.Totals(ctx, c, from, to)
	if err != nil {
		t.Fatal(err)
	}
	byTenant := map[string]continuous.Total{}
	for _, x := range totals {
		byTenant[x.Tenant] = x
	}
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > attribution.Tolerance {
			t.Errorf("[%s, %s) %s: minutes sum to %.9f, the window's report says %.9f", from.Format(time.RFC3339), to.Format(time.RFC3339), what, got, want)
		}
	}
	for _, row := range rep.Tenants {
		x := byTenant[row.Tenant]
		near(row.Tenant+" list_cost", x.ListCost, row.ListCost)
		near(row.Tenant+" cost", x.Cost, row.Cost)
		near(row.Tenant+" waste_cost", x.WasteCost, row.WasteCost)
		near(row.Tenant+" overhead_cost", x.OverheadCost, row.OverheadCost)
		if x.Billed != row.Allocated || x.Billed-x.Metered != row.Unmetered {
			t.Errorf("%s: minutes billed %s metered %s; report allocated %s unmetered %s", row.Tenant, x.Billed, x.Metered, row.Allocated, row.Unmetered)
		}
		if row.Efficiency != nil && x.Metered > 0 {
			near(row.Tenant+" efficiency", x.EfficiencyNS/float64(x.Metered), *row.Efficiency)
		}
	}
	near("unallocated", byTenant[report.Unallocated].ListCost, rep.UnallocatedListCost)
	// The whole report, from the stored minutes alone.
	fromMinutes, err := attribution.FromMinutes(ctx, c, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if errs := attribution.CheckInvariants(fromMinutes); len(errs) > 0 {
		t.Errorf("invariants of the report from minutes: %v", errs)
	}
	var want, got bytes.Buffer
	if err := rep.WriteCSV(&want); err != nil {
		t.Fatal(err)
	}
	if err := fromMinutes.WriteCSV(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("[%s, %s) from the stored minutes:\n%s\nfrom the samples:\n%s", from.Format(time.RFC3339), to.Format(time.RFC3339), got.String(), want.String())
	}
	if len(byTenant) != len(rep.Tenants)+1 {
		t.Errorf("minutes have tenants %v, the report %d tenants", byTenant, len(rep.Tenants))
	}
	return byTenant
}
