package sim

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestSamplesMatchGroundTruth checks that what comes out of the nvml source's translation of
// the simulated NVML (GPM, memory, processes, the vGPU scheduler log) is exactly the scenario's
// ground truth: the reference scheduler model and the workloads.
func TestSamplesMatchGroundTruth(t *testing.T) {
	for _, path := range []string{
		"../../schemas/scenario/testdata/vgpu-timeslice.yaml",
		"../../schemas/scenario/testdata/vgpu-phase.yaml", // vGPUs alone with work, slices not dividing the tick
		"../../schemas/scenario/testdata/outage-coldstart.yaml",
		"../../schemas/scenario/testdata/share-timeslice.yaml", // replicas: per-process utilization and memory
		"../../deploy/demo/fleet.yaml",                         // vGPUs joining and leaving, steps, an outage on a node
		"../testdata/mig-nogpm.yaml",                           // MIG without GPM: activity unavailable, never served as 0
	} {
		t.Run(path, func(t *testing.T) {
			sc, err := scenario.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			src, err := New(sc, "", Options{})
			if err != nil {
				t.Fatal(err)
			}
			ref := map[*gpu]*refScheduler{}
			for _, n := range src.nodes {
				for _, g := range n.gpus {
					if g.sched != nil {
						ref[g] = newRefScheduler(len(g.instances), g.sched.timeslice, g.sched.switching)
					}
				}
			}
			checked, unavailable, shared := 0, 0, 0
			for k := 0; ; k++ {
				d := time.Duration(k) * sc.Interval
				if d >= sc.Duration {
					break
				}
				out, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string][]*pb.Sample{}
				for _, ns := range out {
					got[ns.Node] = ns.Samples
				}
				for _, n := range src.nodes {
					samples, up := got[n.name]
					if up == n.down(d) {
						t.Fatalf("%v node %s: sampled %v during outage %v", d, n.name, up, n.down(d))
					}
					i := 0
					for _, g := range n.gpus {
						var ticks []vgpuTick
						if r := ref[g]; r != nil {
							ticks = r.tick(d, sc.Interval, g.busy(d))
						}
						for m, inst := range g.instances {
							if !up {
								continue
							}
							s := samples[i]
							i++
							checked++
							a, attached := inst.attachedAt(d)
							if s.InstanceId != inst.id || s.TsNs != uint64(sc.Start.Add(d).UnixNano()) || s.Attached != attached ||
								s.Kind != inst.kind || s.Profile != inst.profile || s.MemTotalBytes != inst.memTotal ||
								s.SmCount != inst.sms || s.ComputeSlices != inst.slices || s.GpuSmCount != g.model.SMs ||
								s.GpuMemTotalBytes != g.model.MemoryBytes || s.Model != g.model.Name || s.GpuUuid != g.uuid {
								t.Fatalf("%v %s/%s: facts %+v", d, n.name, inst.id, s)
							}
							if wantReplicas := uint32(0); inst.kind == pb.Kind_KIND_SHARE {
								wantReplicas = uint32(len(g.instances))
								shared++
								if s.ShareReplicas != wantReplicas {
									t.Fatalf("%v %s/%s: share_replicas %d, want %d", d, n.name, inst.id, s.ShareReplicas, wantReplicas)
								}
							} else if s.ShareReplicas != 0 {
								t.Fatalf("%v %s/%s: share_replicas %d on a %s instance", d, n.name, inst.id, s.ShareReplicas, inst.kind)
							}
							wantMem := uint64(0)
							if attached {
								wantMem = uint64(a.Workload.Mem * float64(inst.memTotal))
							}
							if s.MemUsedBytes != wantMem {
								t.Fatalf("%v %s/%s: memory %d, want %d", d, n.name, inst.id, s.MemUsedBytes, wantMem)
							}
							if ticks != nil {
								tk := ticks[m]
								v := s.GetVgpu()
								if v.GetRunNs() != uint64(tk.run) || v.GetSwitchNs() != uint64(tk.switching) || !slices.Equal(v.GetWaitsNs(), tk.waits) ||
									s.SmActive != float64(tk.run)/float64(sc.Interval) {
									t.Fatalf("%v %s/%s: schedule run %d switch %d waits %v, want %d %d %v", d, n.name, inst.id,
										v.GetRunNs(), v.GetSwitchNs(), v.GetWaitsNs(), tk.run, tk.switching, tk.waits)
								}
							} else if unmeasured := g.noGPM && inst.kind == pb.Kind_KIND_MIG; s.SmActiveUnavailable != unmeasured {
								t.Fatalf("%v %s/%s: sm_active_unavailable %v, want %v", d, n.name, inst.id, s.SmActiveUnavailable, unmeasured)
							} else if unmeasured {
								unavailable++
								if s.SmActive != 0 {
									t.Fatalf("%v %s/%s: sm_active %v with activity unavailable", d, n.name, inst.id, s.SmActive)
								}
							} else if math.Abs(s.SmActive-inst.sm(d)) > 1e-12 {
								t.Fatalf("%v %s/%s: sm_active %v, want %v", d, n.name, inst.id, s.SmActive, inst.sm(d))
							}
						}
					}
					if up && i != len(samples) {
						t.Fatalf("%v node %s: %d samples, want %d", d, n.name, len(samples), i)
					}
				}
			}
			if checked == 0 {
				t.Fatal("no samples checked")
			}
			if strings.Contains(path, "share") && shared == 0 {
				t.Fatal("no share sample checked")
			}
			t.Logf("%d samples checked, %d with activity unavailable, %d of share instances", checked, unavailable, shared)
		})
	}
}
