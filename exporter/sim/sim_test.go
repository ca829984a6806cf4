package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func load(t *testing.T, name string) (*scenario.Scenario, *Source) {
	t.Helper()
	sc, err := scenario.Load("../../schemas/scenario/testdata/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(sc, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sc, src
}

// run reads every tick of the scenario and hands each instance's samples to fn.
func run(t *testing.T, sc *scenario.Scenario, src *Source, fn func(d time.Duration, s *pb.Sample)) {
	t.Helper()
	for n := 0; ; n++ {
		d := time.Duration(n) * sc.Interval
		if d >= sc.Duration {
			return
		}
		out, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range out {
			for _, s := range ns.Samples {
				fn(d, s)
			}
		}
	}
}

func TestVGPUScheduler(t *testing.T) {
	sc, src := load(t, "vgpu-timeslice")
	type acc struct {
		n                 int
		run, sw, waitsSum float64
		waits             int
		minWait, maxWait  uint64
	}
	got := map[string]*acc{}
	run(t, sc, src, func(d time.Duration, s *pb.Sample) {
		if d < 20*time.Second {
			if s.Vgpu.RunNs != 0 || s.Vgpu.SwitchNs != 0 || len(s.Vgpu.WaitsNs) != 0 {
				t.Fatalf("%v %s: scheduled before any vGPU had work: %+v", d, s.InstanceId, s.Vgpu)
			}
			return
		}
		a := got[s.InstanceId]
		if a == nil {
			a = &acc{minWait: math.MaxUint64}
			got[s.InstanceId] = a
		}
		a.n++
		a.run += float64(s.Vgpu.RunNs)
		a.sw += float64(s.Vgpu.SwitchNs)
		for _, w := range s.Vgpu.WaitsNs {
			a.waits++
			a.waitsSum += float64(w)
			a.minWait = min(a.minWait, w)
			a.maxWait = max(a.maxWait, w)
		}
	})
	tick := float64(sc.Interval)
	for _, id := range []string{"gpu0/vgpu0", "gpu0/vgpu1", "gpu0/vgpu2"} {
		a := got[id]
		if share := a.run / (float64(a.n) * tick); math.Abs(share-2.0/6.06) > 1e-4 {
			t.Errorf("%s: run share %.6f, want %.6f", id, share, 2.0/6.06)
		}
		if sw := a.sw / (float64(a.n) * tick); math.Abs(sw-0.06/6.06) > 1e-5 {
			t.Errorf("%s: switch share %.6f, want %.6f", id, sw, 0.06/6.06)
		}
		if a.minWait != 4060000 || a.maxWait != 4060000 {
			t.Errorf("%s: waits in [%d, %d] ns, want all 4060000", id, a.minWait, a.maxWait)
		}
		// One wait per run after the first: the whole window has (3600-20)s / 6.06ms runs.
		if want := int(math.Floor(3580 / 0.00606)); a.waits < want-2 || a.waits > want+1 {
			t.Errorf("%s: %d waits, want about %d", id, a.waits, want)
		}
	}
	if idle := got["gpu0/vgpu3"]; idle.run != 0 || idle.waits != 0 {
		t.Errorf("idle vGPU ran: %+v", idle)
	}
}

func TestMIGAttachAndOutage(t *testing.T) {
	sc, src := load(t, "outage-coldstart")
	firstAttached := map[string]time.Duration{}
	count := map[string]int{}
	run(t, sc, src, func(d time.Duration, s *pb.Sample) {
		if d >= 10*time.Minute && d < 12*time.Minute {
			t.Fatalf("sample during the outage at %v", d)
		}
		count[s.InstanceId]++
		if _, ok := firstAttached[s.InstanceId]; !ok && s.Attached {
			firstAttached[s.InstanceId] = d
		}
		if s.InstanceId == "gpu0/mig0" && s.Attached && s.SmActive != 0.3 {
			t.Fatalf("slowco sm_active %v", s.SmActive)
		}
		if s.Kind == pb.Kind_KIND_MIG && (s.ComputeSlices != 3 || s.SmCount != 42 || s.GpuSmCount != 108) {
			t.Fatalf("MIG facts wrong: %+v", s)
		}
	})
	want := map[string]time.Duration{"gpu0/mig0": 45 * time.Second, "gpu0/mig1": 5*time.Minute + 10*time.Second, "gpu1": 2 * time.Minute}
	for id, d := range want {
		if firstAttached[id] != d {
			t.Errorf("%s first attached at %v, want %v", id, firstAttached[id], d)
		}
		if count[id] != 36000-1200 {
			t.Errorf("%s: %d samples, want %d", id, count[id], 36000-1200)
		}
	}
}

func TestUUIDStable(t *testing.T) {
	a, b := uuid("s", "n", 0), uuid("s", "n", 1)
	if a == b || a != uuid("s", "n", 0) || len(a) != len("GPU-")+36 {
		t.Errorf("uuids %q %q", a, b)
	}
}

func BenchmarkRead(b *testing.B) {
	sc, err := scenario.Load("../../schemas/scenario/testdata/vgpu-timeslice.yaml")
	if err != nil {
		b.Fatal(err)
	}
	src, err := New(sc, "", Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d := time.Duration(i%36000) * sc.Interval
		if _, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval); err != nil {
			b.Fatal(err)
		}
	}
}
