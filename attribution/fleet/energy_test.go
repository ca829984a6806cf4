package fleet_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/fleet"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestTenantEnergyFromCounter: an A100 whose power reading says 200 W throughout while its
// energy counter says 100 W for the first half of each minute and 300 W for the second (the
// power changes mid-minute, between the readings), whose counter is reset by a driver reload
// once and cannot be read for ten ticks. The GPU's energy is the counter's increase per tick,
// 200 W × the tick only where the counter is missing (the first tick, the ten, and the first
// after them, which has no previous reading); each tenant gets it by the billed fraction of
// the instance it holds in the minutes it holds it, the same from the raw samples, samples_1s
// and samples_1m, and what no tenant holds is unallocated: the fleet's energy is the sum.
func TestTenantEnergyFromCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ClickHouse")
	}
	ctx := context.Background()
	book := economics(t).Book
	conn := chtest.NewDatabase(t, nil)
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	const ticks = 180 // three minutes at 1 s

	var (
		samples []*pb.Sample
		minuteJ [3]float64 // the GPU's energy per minute, by hand
		counter = uint64(9_000_000)
		last    uint64 // the exporter's previous reading (0: none)
	)
	for i := range ticks {
		watts := 100.
		if i%60 >= 30 {
			watts = 300
		}
		counter += uint64(watts * 1000) // mJ in 1 s
		reading, joules := counter, watts
		switch {
		case i == 0: // no previous reading
			joules = 200
		case i == 70: // the driver reloaded within the tick: 40 J counted since
			counter = 40_000
			reading, joules = counter, 40
		case i >= 100 && i < 110: // not readable
			reading, joules = 0, 200
		case i == 110: // the first reading after them has no previous one
			joules = 200
		}
		minuteJ[i/60] += joules
		for _, inst := range []struct {
			id, profile  string
			slices, sms  uint32
			memTotalByte uint64
		}{{"gpu0/mig0", "3g.20gb", 3, 42, 20 << 30}, {"gpu0/mig1", "2g.10gb", 2, 28, 10 << 30}} {
			samples = append(samples, &pb.Sample{
				TsNs: uint64(start.Add(time.Duration(i) * time.Second).UnixNano()), IntervalNs: uint64(time.Second),
				GpuUuid: "GPU-e", Model: "A100-SXM4-40GB", Kind: pb.Kind_KIND_MIG, InstanceId: inst.id, Profile: inst.profile,
				Attached: true, SmActive: 0.5, MemUsedBytes: 1 << 30, MemTotalBytes: inst.memTotalByte, PowerWatts: 200,
				ComputeSlices: inst.slices, SmCount: inst.sms, GpuSmCount: 108, GpuMemTotalBytes: 40 << 30,
				EnergyMj: reading, EnergyPrevMj: last, EnergyUnavailable: reading == 0,
			})
		}
		last = reading
	}
	chtest.InsertSamples(t, conn, "node-e", samples)
	chtest.RollUp(t, conn)
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{
		{ID: "a1", Tenant: "acme", Tier: "pro", Node: "node-e", Instance: "gpu0/mig0", Requested: start, Started: start, Ended: start.Add(3 * time.Minute), Version: 1},
		{ID: "a2", Tenant: "beta", Tier: "pro", Node: "node-e", Instance: "gpu0/mig1", Requested: start.Add(time.Minute), Started: start.Add(time.Minute), Ended: start.Add(2 * time.Minute), Version: 1},
	})
	gpuJ := minuteJ[0] + minuteJ[1] + minuteJ[2]
	want := map[string]float64{"acme": gpuJ * 3 / 7, "beta": minuteJ[1] * 2 / 7}
	want[report.Unallocated] = gpuJ - want["acme"] - want["beta"]
	// Against mean power × time, every tenant would get 200 W's worth: the counter must differ.
	if want["acme"] == 200*ticks*3./7 {
		t.Fatal("the counter's energy is the power's: the test checks nothing")
	}

	end := start.Add(3 * time.Minute)
	// The attribution service's minutes, which the fleet's revenue reads.
	runner := service.NewRunner(conn, book, service.Passes{Delay: 30 * time.Second, Lookback: time.Hour, Backfill: time.Hour,
		MaxRecompute: time.Hour, MaxMinutes: 120, Presence: time.Hour, Samples: store.SecondRollup}, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return end.Add(30 * time.Second) })
	if p, err := runner.Once(ctx); err != nil || !p.Done.Equal(end) {
		t.Fatalf("attributing the three minutes: %+v, %v", p, err)
	}
	for _, src := range []struct {
		name string
		o    attribution.Options
	}{
		{"raw samples", attribution.Options{Samples: store.RawSamples}},
		{"samples_1s", attribution.Options{Samples: store.SecondRollup}},
		{"samples_1m", attribution.Options{Samples: store.MinuteRollup}},
		{"stored minutes", attribution.Options{FromMinutes: true}},
	} {
		o := src.o
		o.From, o.To, o.Now, o.Lines = start, end, end.Add(time.Hour), true
		res, err := attribution.Report(ctx, conn, book, o)
		if err != nil {
			t.Fatal(err)
		}
		byTenant := map[string]float64{}
		for _, l := range res.Lines {
			byTenant[l.Tenant] += l.EnergyJ
		}
		for _, tenant := range []string{"acme", "beta"} {
			if got := byTenant[tenant]; !relNear(got, want[tenant]) {
				t.Errorf("%s: energy of %s %.9f J, want %.9f J (by billed fraction of the counter's increase)", src.name, tenant, got, want[tenant])
			}
		}
	}

	rows, err := fleet.Compute(ctx, conn, book, fleet.Options{From: start, To: end, By: fleet.ByModel})
	if err != nil {
		t.Fatal(err)
	}
	total := rows[len(rows)-1]
	if got := total.EnergyKWh * 3.6e6; !relNear(got, gpuJ) {
		t.Errorf("the fleet's energy %.9f J, want the GPU's %.9f J", got, gpuJ)
	}
	if got := total.EnergyKWh*3.6e6 - want["acme"] - want["beta"]; !relNear(got, want[report.Unallocated]) {
		t.Errorf("unallocated energy %.9f J, want %.9f J", got, want[report.Unallocated])
	}
}
