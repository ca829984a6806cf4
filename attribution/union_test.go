package attribution_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestMeteredUnion: metered time is the measure of the union of the samples' intervals, never
// their sum (attribution/README.md, "Definitions"), from every path. Ten minutes:
//
//   - gpu1 (whole A100, tenant step): 100 ms samples whose clock steps back 50 ms once a second,
//     so that each second has an 11th sample [s + 950 ms, s + 1050 ms) overlapping its
//     neighbours (and straddling the second, and at 59 s the minute). The exporter is down
//     [200 s, 230 s). The sum of the intervals (1.1 s a second) would hide the outage; the
//     union leaves 29.95 s of it unmetered (the last sample before it covers 50 ms of it).
//     The stepped samples run at sm 1, the others at 0.5: where two overlap, the instant
//     counts once at their mean.
//   - gpu0/mig0 (MIG 1g.5gb, tenant dup): 1 s samples at sm 0.9, then the samples of
//     [180 s, 300 s) again, same keys, received last, with a 500 ms interval and sm 0.1: the
//     last received wins, so 60 s are unmetered.
//   - gpu0/vgpu0 (vGPU, tenant vee): 100 ms samples with the same clock steps and a switch share.
//
// Allocations start and end inside minutes, on whole seconds. Raw samples, samples_1s,
// samples_1m and the stored minutes must agree to 1e-6 s and money, on the whole window and on
// every whole-minute sub-window, and the seconds must be the union's.
func TestMeteredUnion(t *testing.T) {
	t.Parallel()
	conn := newDatabase(t)
	ctx := context.Background()
	const window = 10 * time.Minute
	stepped := func(in instance, sm, steppedSM float64, down func(time.Duration) bool) []*pb.Sample {
		var out []*pb.Sample
		for s := time.Duration(0); s < window; s += time.Second {
			if down(s) {
				continue
			}
			for k := range 11 {
				at, v := s+time.Duration(k)*100*time.Millisecond, sm
				if k == 10 { // the clock stepped back 50 ms
					at, v = s+950*time.Millisecond, steppedSM
				}
				x := in.sample(at, 100*time.Millisecond, true, v)
				if in.Kind == pb.Kind_KIND_VGPU {
					x.Vgpu = &pb.VgpuSchedule{RunNs: 40_000_000, SwitchNs: 10_000_000, WaitsNs: []uint64{3_000_000}}
				}
				out = append(out, x)
			}
		}
		return out
	}
	outage := func(s time.Duration) bool { return s >= 200*time.Second && s < 230*time.Second }
	never := func(time.Duration) bool { return false }
	var first, dup []*pb.Sample
	for at := time.Duration(0); at < window; at += time.Second {
		first = append(first, migA100.sample(at, time.Second, true, 0.9))
		if at >= 180*time.Second && at < 300*time.Second {
			dup = append(dup, migA100.sample(at, 500*time.Millisecond, true, 0.1))
		}
	}
	insertSamples(t, conn, "node-a", append(stepped(wholeA100, 0.5, 1, outage), first...))
	insertSamples(t, conn, "node-a", dup)
	insertSamples(t, conn, "node-b", stepped(vgpu0, 0.2, 0.2, never))
	chtest.RollUp(t, conn)
	insertAllocations(t, conn, []allocationRow{
		{id: "s", tenant: "step", tier: "pro", node: "node-a", instance: wholeA100.id, requested: t0, started: t0.Add(30 * time.Second), ended: t0.Add(570 * time.Second), version: 1},
		{id: "d", tenant: "dup", tier: "pro", node: "node-a", instance: migA100.id, requested: t0, started: t0, version: 1},
		{id: "v", tenant: "vee", tier: "budget", node: "node-b", instance: vgpu0.id, requested: t0, started: t0.Add(45 * time.Second), ended: t0.Add(555 * time.Second), version: 1},
	})

	runner := service.NewRunner(conn, book, service.Passes{Backfill: window, MaxMinutes: 10, Samples: store.RawSamples}, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return t0.Add(window) })
	if _, err := runner.Once(ctx); err != nil {
		t.Fatal(err)
	}

	paths := reportPaths(ctx, conn, book)
	// The union's unmetered seconds of the whole window, by hand.
	wantUnmetered := map[string]float64{"step": 29.95, "dup": 60, "vee": 0}
	// The efficiency of step: each instant counts once, with the mean of the samples covering
	// it: a second is 0.9 s at 0.5 and 0.1 s covered by a stepped sample (1) and a regular one
	// (0.5), at 0.75.
	wantStep := 0.9*0.5 + 0.1*0.75
	for sub := range 11 * 10 / 2 { // every whole-minute window [i, j), the whole one first
		i, j := subWindow(sub, 10)
		from, to := t0.Add(time.Duration(i)*time.Minute), t0.Add(time.Duration(j)*time.Minute)
		var base report.Report
		for n, p := range paths {
			rep, err := p.compute(from, to)
			if err != nil {
				t.Fatalf("%s [%d, %d) min: %v", p.name, i, j, err)
			}
			if n == 0 {
				base = rep
				if errs := billing.CheckInvariants(rep); len(errs) > 0 {
					t.Errorf("%s [%d, %d) min: invariants: %v", p.name, i, j, errs)
				}
				continue
			}
			if d, _, _ := samePaths(base, rep); len(d) > 0 {
				t.Errorf("[%d, %d) min: %s disagrees with raw samples: %s", i, j, p.name, strings.Join(d, "; "))
			}
		}
		if sub != 0 {
			continue
		}
		for _, r := range base.Tenants {
			if w := wantUnmetered[r.Tenant]; math.Abs(r.Unmetered.Seconds()-w) > 1e-6 {
				t.Errorf("%s: unmetered %.6f s, want %.6f (the union's)", r.Tenant, r.Unmetered.Seconds(), w)
			}
			if r.Tenant == "step" && (r.Efficiency == nil || math.Abs(*r.Efficiency-wantStep) > 1e-3) {
				t.Errorf("step: efficiency %v, want %.9f (± the pieces cut at the billed ends)", *r.Efficiency, wantStep)
			}
			if r.Tenant == "dup" && (r.Efficiency == nil || math.Abs(*r.Efficiency-(480*0.9+60*0.1)/540) > 1e-9) {
				t.Errorf("dup: efficiency %v, want the received-last copies' %.9f", r.Efficiency, (480*0.9+60*0.1)/540)
			}
		}
		if len(base.Tenants) != 3 {
			t.Errorf("tenants %v, want dup, step, vee", base.Tenants)
		}
	}
}

// subWindow is the n-th whole-minute window [i, j) of [0, minutes), 0 ≤ n < minutes·(minutes+1)/2:
// the whole window first, then by start and length.
func subWindow(n, minutes int) (i, j int) {
	if n == 0 {
		return 0, minutes
	}
	var all [][2]int
	for i := range minutes {
		for j := i + 1; j <= minutes; j++ {
			if i != 0 || j != minutes {
				all = append(all, [2]int{i, j})
			}
		}
	}
	w := all[n-1]
	return w[0], w[1]
}

// TestSubWindow checks that subWindow lists every whole-minute window once.
func TestSubWindow(t *testing.T) {
	t.Parallel()
	var got []string
	for n := range 4 * 5 / 2 {
		i, j := subWindow(n, 4)
		got = append(got, fmt.Sprintf("%d-%d", i, j))
	}
	slices.Sort(got)
	want := []string{"0-1", "0-2", "0-3", "0-4", "1-2", "1-3", "1-4", "2-3", "2-4", "3-4"}
	if !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}
