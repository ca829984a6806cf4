package fleet_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestFleetQueriesCurrentDialect runs every query of the fleet report, as sent,
// values bound, through chDB (current ClickHouse) after the migrations: they must run
// there as on 18.16 (where this test's database runs them first).
func TestFleetQueriesCurrentDialect(t *testing.T) {
	ctx := context.Background()
	recorder := &chtest.QueryRecorder{}
	conn := chtest.NewDatabase(t, slog.New(recorder))
	var samples []*pb.Sample
	for at := time.Duration(0); at < 2*time.Minute; at += time.Second {
		mig, whole := chtest.MigA100.Sample(at, time.Second, true, 0.5), chtest.WholeA100.Sample(at, time.Second, false, 0)
		mig.PowerWatts, whole.PowerWatts = 100, 60
		samples = append(samples, mig, whole)
	}
	chtest.InsertSamples(t, conn, "node-a", samples)
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{{ID: "m", Tenant: "a", Tier: "pro", Node: "node-a", Instance: chtest.MigA100.ID,
		Requested: chtest.T0, Started: chtest.T0, Version: 1}})
	chtest.RollUp(t, conn)
	book := chtest.Book()
	book.Costs = &pricebook.Costs{GPUHour: map[string]float64{"A100-SXM4-40GB": 0.5}, EnergyKWh: 0.1}
	runner := service.NewRunner(conn, book, service.Passes{Backfill: 2 * time.Minute, MaxMinutes: 2, Presence: time.Hour}, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return chtest.T0.Add(2*time.Minute + 30*time.Second) })
	if _, err := runner.Once(ctx); err != nil {
		t.Fatal(err)
	}

	before := len(recorder.Selects())
	rows, err := fleet.Compute(ctx, conn, book, fleet.Options{From: chtest.T0, To: chtest.T0.Add(2 * time.Minute), By: fleet.ByGPU})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[2].Group != fleet.Total || rows[2].CapacityGPUHours <= 0 || rows[2].Revenue <= 0 {
		t.Errorf("rows %+v: want two GPUs and the fleet, with capacity and revenue", rows)
	}
	queries := recorder.Selects()[before:]
	if len(queries) < 5 {
		t.Fatalf("recorded %d queries, want the presence, instances, energy, held and tenants per host: %q", len(queries), queries)
	}
	localtest.CheckQueriesWithChDB(t, "fleet.sql", queries)
}
