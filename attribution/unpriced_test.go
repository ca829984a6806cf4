package attribution_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/internal/usage"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// unpricedFleet writes ten minutes of 1 s samples of node-a (an A100 with MIG instances
// gpu0/mig0 and gpu0/mig1, a whole A100 gpu1), tenant acme on gpu0/mig0 (pro) and bolt on gpu1
// (budget): the bill that a bad input beside it must leave alone.
func unpricedFleet(t *testing.T) driver.Conn {
	t.Helper()
	conn := newDatabase(t)
	mig1 := migA100
	mig1.id = "gpu0/mig1"
	var samples []*pb.Sample
	for at := time.Duration(0); at < 10*time.Minute; at += time.Second {
		samples = append(samples, migA100.sample(at, time.Second, true, 0.5), mig1.sample(at, time.Second, true, 0.3),
			wholeA100.sample(at, time.Second, true, 0.25))
	}
	insertSamples(t, conn, "node-a", samples)
	insertAllocations(t, conn, []allocationRow{
		{id: "acme-1", tenant: "acme", tier: "pro", node: "node-a", instance: migA100.id, requested: t0, started: t0, version: 1},
		{id: "bolt-1", tenant: "bolt", tier: "budget", node: "node-a", instance: wholeA100.id, requested: t0, started: t0.Add(time.Minute), version: 1},
	})
	return conn
}

// TestReportUnpriced: what the price book cannot price (one sample of a GPU model without a
// price, with an allocation on it; an allocation at a tier the book lacks) is attributed as
// unpriced: the report succeeds, every other tenant's row and the capacity are those of the
// same data without the bad input, the report says what was left out (Unpriced, a note, the
// JSON's notes), from every sample source and, minute by minute, through the service's stored
// minutes.
func TestReportUnpriced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const window = 10 * time.Minute
	sources := []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup}

	// The bill without any bad input, per source.
	clean := unpricedFleet(t)
	chtest.RollUp(t, clean)
	want := map[store.Samples]report.Report{}
	for _, src := range sources {
		rep, err := reportOf(ctx, clean, t0, t0.Add(window), book, src)
		if err != nil {
			t.Fatal(err)
		}
		want[src] = rep
	}

	tests := []struct {
		name string
		bad  func(t *testing.T, conn driver.Conn)
		want []report.Unpriced
	}{
		{
			name: "one sample of a GPU model without a price",
			bad: func(t *testing.T, conn driver.Conn) {
				b200 := chtest.Instance{GPUUUID: "GPU-z", Model: "B200", ID: "gpu7", Kind: pb.Kind_KIND_GPU, SMs: 148, GPUSMs: 148, Mem: 180 << 30, GPUMem: 180 << 30}
				chtest.InsertSamples(t, conn, "node-a", []*pb.Sample{b200.Sample(3*time.Minute+500*time.Millisecond, time.Second, true, 0.9)})
				insertAllocations(t, conn, []allocationRow{
					{id: "zed-1", tenant: "zed", tier: "pro", node: "node-a", instance: "gpu7", requested: t0, started: t0.Add(2 * time.Minute), version: 1},
				})
			},
			// Capacity from its one sample to the window's end (within the presence period).
			want: []report.Unpriced{{Kind: report.UnpricedModel, Name: "B200", GPUs: 1, GPUTime: window - 3*time.Minute - 500*time.Millisecond, Allocations: 1,
				Tenants: []string{"zed"}, Allocated: 8 * time.Minute}},
		},
		{
			name: "an allocation at an unknown tier",
			bad: func(t *testing.T, conn driver.Conn) {
				insertAllocations(t, conn, []allocationRow{
					{id: "gil-1", tenant: "gil", tier: "gold", node: "node-a", instance: "gpu0/mig1", requested: t0, started: t0.Add(4 * time.Minute), version: 1},
				})
			},
			want: []report.Unpriced{{Kind: report.UnpricedTier, Name: "gold", Allocations: 1, Tenants: []string{"gil"}, Allocated: 6 * time.Minute}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := unpricedFleet(t)
			tt.bad(t, conn)
			chtest.RollUp(t, conn)
			for _, src := range sources {
				res, err := attribution.Report(ctx, conn, book, attribution.Options{From: t0, To: t0.Add(window), Samples: src})
				if err != nil {
					t.Fatalf("%s: %v", src, err)
				}
				checkUnpriced(t, src.String(), res.Report, want[src], tt.want)
			}

			// The service attributes every minute (the unpriced GPU present from its one
			// sample on, as in the window's report) and the stored minutes sum to the same
			// bill.
			runner := service.NewRunner(conn, book, service.Passes{Backfill: window, MaxMinutes: 10, Samples: store.RawSamples, Presence: time.Hour}, nil, slog.New(slog.DiscardHandler))
			runner.SetClock(func() time.Time { return t0.Add(window) })
			p, err := runner.Once(ctx)
			if err != nil || p.Fresh != 10 || len(p.Failed) > 0 {
				t.Fatalf("service pass: %+v, %v; want 10 fresh minutes", p, err)
			}
			got, err := stored.FromMinutes(ctx, conn, t0, t0.Add(window))
			if err != nil {
				t.Fatal(err)
			}
			if g, w := csvOf(t, got), csvOf(t, want[store.RawSamples]); g != w {
				t.Errorf("from the stored minutes:\n%s\nwant (without the bad input):\n%s", g, w)
			}
		})
	}
}

// checkUnpriced checks a report with something unpriced against the report of the same data
// without it.
func checkUnpriced(t *testing.T, name string, got, clean report.Report, want []report.Unpriced) {
	t.Helper()
	if g, w := csvOf(t, got), csvOf(t, clean); g != w {
		t.Errorf("%s: report:\n%s\nwant (without the bad input):\n%s", name, g, w)
	}
	if math.Abs(got.CapacityListCost-clean.CapacityListCost) > 1e-12 {
		t.Errorf("%s: capacity %.9f, want %.9f: an unpriced GPU is not capacity", name, got.CapacityListCost, clean.CapacityListCost)
	}
	if errs := billing.CheckInvariants(got); len(errs) > 0 {
		t.Errorf("%s: invariants: %v", name, errs)
	}
	if !slices.EqualFunc(got.Unpriced, want, func(a, b report.Unpriced) bool {
		return a.Kind == b.Kind && a.Name == b.Name && a.GPUs == b.GPUs && a.GPUTime == b.GPUTime &&
			a.Allocations == b.Allocations && slices.Equal(a.Tenants, b.Tenants) && a.Allocated == b.Allocated
	}) {
		t.Errorf("%s: unpriced %+v, want %+v", name, got.Unpriced, want)
	}
	for _, u := range want {
		if !slices.Contains(got.Notes, u.Note()) {
			t.Errorf("%s: notes %q lack %q", name, got.Notes, u.Note())
		}
	}
	var js bytes.Buffer
	if err := got.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"notes": [`) || !strings.Contains(js.String(), `unpriced: `) {
		t.Errorf("%s: JSON report without the unpriced notes:\n%s", name, js.String())
	}
}

func csvOf(t *testing.T, r report.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCheckFleetPriced: the operator's check names every GPU model sampled and every tier of
// the allocations billed in its lookback that the price book lacks, as a usage error; a tier
// of an allocation that ended before the lookback, or was deleted, is not the fleet's.
func TestCheckFleetPriced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := unpricedFleet(t)
	since := time.Since(t0) + time.Hour
	if err := attribution.CheckFleetPriced(ctx, conn, book, since); err != nil {
		t.Fatalf("a priced fleet: %v", err)
	}
	b200 := chtest.Instance{GPUUUID: "GPU-z", Model: "B200", ID: "gpu7", Kind: pb.Kind_KIND_GPU, SMs: 148, GPUSMs: 148, Mem: 180 << 30, GPUMem: 180 << 30}
	chtest.InsertSamples(t, conn, "node-a", []*pb.Sample{b200.Sample(0, time.Second, true, 0.9)})
	insertAllocations(t, conn, []allocationRow{
		{id: "gil-1", tenant: "gil", tier: "gold", node: "node-a", instance: "gpu0/mig1", requested: t0, started: t0, version: 1},
		{id: "old-1", tenant: "old", tier: "bronze", node: "node-a", instance: "gpu0/mig1", requested: t0.Add(-3 * time.Hour), started: t0.Add(-3 * time.Hour), ended: t0.Add(-2 * time.Hour), version: 1},
		{id: "del-1", tenant: "del", tier: "silver", node: "node-a", instance: "gpu0/mig1", requested: t0, started: t0, version: 1},
		{id: "del-1", tenant: "del", tier: "silver", node: "node-a", instance: "gpu0/mig1", requested: t0, started: t0, version: 2, deleted: true},
	})
	err := attribution.CheckFleetPriced(ctx, conn, book, since)
	if !usage.Is(err) || !strings.Contains(err.Error(), `["B200"]`) || !strings.Contains(err.Error(), `["gold"]`) ||
		strings.Contains(err.Error(), "bronze") || strings.Contains(err.Error(), "silver") {
		t.Errorf("got %v; want a usage error naming B200 and gold alone", err)
	}
}
