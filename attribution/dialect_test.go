package attribution_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/allocation/eventcheck"
	"github.com/slicemeter/slicemeter/schemas/audit"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestCurrentClickHouseDialect runs every query Compute sends — as sent, values bound — through
// chDB (current ClickHouse) after the migrations: the SQL must run there as on 18.16.
func TestCurrentClickHouseDialect(t *testing.T) {
	t.Parallel()
	recorder := &chtest.QueryRecorder{}
	conn := newDatabaseLogged(t, slog.New(recorder))
	// One of each kind of allocation, and one whose target has no sample in the window, so that
	// every query runs.
	var samples []*pb.Sample
	for at := time.Duration(0); at < time.Minute; at += time.Second {
		v := vgpu0.sample(at, time.Second, true, 0.2)
		v.Vgpu.WaitsNs = []uint64{4_060_000}
		samples = append(samples, migA100.sample(at, time.Second, true, 0.5), v)
	}
	samples = append(samples, wholeA100.sample(-time.Hour, time.Second, true, 1))
	insertSamples(t, conn, "node-a", samples)
	insertAllocations(t, conn, []allocationRow{
		{id: "m", tenant: "a", tier: "pro", node: "node-a", instance: migA100.id, requested: t0, started: t0.Add(time.Second), version: 1},
		{id: "v", tenant: "b", tier: "pro", node: "node-a", instance: vgpu0.id, requested: t0, started: t0, version: 1},
		{id: "w", tenant: "c", tier: "pro", node: "node-a", instance: wholeA100.id, requested: t0, started: t0, version: 1},
	})
	if _, err := reportOf(context.Background(), conn, t0, t0.Add(time.Minute), book, store.RawSamples); err != nil {
		t.Fatal(err)
	}
	// The same from the per-second rollup, the allocation store's and the continuous attribution's queries.
	ctx := context.Background()
	chtest.RollUp(t, conn)
	for _, source := range []store.Samples{store.SecondRollup, store.MinuteRollup} {
		if _, err := reportOf(ctx, conn, t0, t0.Add(time.Minute), book, source); err != nil {
			t.Fatal(err)
		}
	}
	// A replica's share of the nodes: its reads carry the node filter (store.Nodes).
	for _, source := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
		res, err := attribution.Report(ctx, conn, book, attribution.Options{From: t0, To: t0.Add(time.Minute), Samples: source,
			Nodes: func(node string) bool { return node == "node-a" }})
		if err != nil || len(res.Report.Tenants) != 3 {
			t.Fatalf("%s, node-a's share: %d tenants, %v; want 3", source, len(res.Report.Tenants), err)
		}
	}
	allocStore := allocations.NewStore(conn)
	if _, err := allocStore.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, []allocation.Allocation{{ID: "x", Tenant: "d", Tier: "pro", Node: "node-a", Instance: "gpu9", RequestedAt: t0, StartedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := allocStore.List(ctx, "d", t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if entries, err := audit.List(ctx, conn, audit.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour), AllocationID: "x", Tenant: "d", Limit: 10}); err != nil || len(entries) != 1 {
		t.Fatalf("the audit trail of the Put: %d entries, %v; want 1", len(entries), err)
	}
	runner := service.NewRunner(conn, book, service.Passes{Backfill: 2 * time.Minute, MaxMinutes: 2}, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return t0.Add(2 * time.Minute) })
	for range 2 { // the second pass resumes from what the first stored
		if _, err := runner.Once(ctx); err != nil {
			t.Fatal(err)
		}
		runner = service.NewRunner(conn, book, service.Passes{Lookback: time.Minute, MaxMinutes: 2}, nil, slog.New(slog.DiscardHandler))
		runner.SetClock(func() time.Time { return t0.Add(2 * time.Minute) })
	}
	if _, err := stored.FromMinutes(ctx, conn, t0, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Two minutes of the hour are stored: the hourly stream reads them, then names the others.
	h := t0.Truncate(time.Hour)
	if err := stored.HourlyLines(ctx, conn, h, h.Add(time.Hour), func(time.Time, []billing.Line) error { return nil }); err == nil ||
		!errors.Is(err, stored.ErrNotAttributed) {
		t.Fatalf("hourly lines of a partly stored hour: %v", err)
	}
	if _, err := store.NoisyNeighbours(ctx, conn, t0, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := store.FleetModels(ctx, conn, t0); err != nil {
		t.Fatal(err)
	}

	queries := recorder.Selects()
	if len(queries) < 6 {
		t.Fatalf("recorded %d queries, want the 6 kinds Compute sends: %q", len(queries), queries)
	}
	localtest.CheckQueriesWithChDB(t, "compute.sql", queries)
}

// TestServiceQueriesCurrentDialect runs the queries of the GPUs' presence (every sample
// source) and of the Kafka events' overlap check, as sent, through chDB (current ClickHouse):
// they must run there as on 18.16.
func TestServiceQueriesCurrentDialect(t *testing.T) {
	t.Parallel()
	recorder := &chtest.QueryRecorder{}
	conn := newDatabaseLogged(t, slog.New(recorder))
	ctx := context.Background()
	insertSamples(t, conn, "node-a", []*pb.Sample{migA100.sample(0, time.Second, true, 0.5), wholeA100.sample(-30*time.Minute, time.Second, true, 1)})
	insertAllocations(t, conn, []allocationRow{{id: "m", tenant: "a", tier: "pro", node: "node-a", instance: migA100.id, requested: t0, started: t0, version: 1}})
	chtest.RollUp(t, conn)
	minute := billing.Interval{Start: t0.Add(time.Minute).UnixNano(), End: t0.Add(2 * time.Minute).UnixNano()}
	for _, source := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
		p, err := store.ReadPresence(ctx, conn, source, minute, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// Both GPUs were sampled within the hour before the minute, neither in it.
		if c, err := p.Capacity(minute); err != nil || len(c) != 2 {
			t.Errorf("%s: capacity %v, %v; want both GPUs", source, c, err)
		}
		if _, err := p.Capacity(billing.Interval{Start: minute.End, End: minute.End + int64(time.Minute)}); err == nil {
			t.Errorf("%s: the capacity of a minute past what the presence read", source)
		}
	}
	refused, _, err := eventcheck.Check(ctx, conn, []allocation.Event{{Allocation: allocation.Allocation{ID: "n", Tenant: "b", Tier: "pro",
		Node: "node-a", Instance: migA100.id, RequestedAt: t0, StartedAt: t0}, Version: 1}}, eventcheck.Options{})
	if err != nil || len(refused) != 1 {
		t.Fatalf("check an overlapping event: %v, %v", refused, err)
	}
	localtest.CheckQueriesWithChDB(t, "service.sql", recorder.Selects())
}
