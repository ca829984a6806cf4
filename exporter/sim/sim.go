// Package sim is the simulated NVML source: it turns a scenario into the samples an exporter on
// each of the scenario's nodes would take, tick by tick. The scenario is the ground truth; the
// attribution must recover it from these samples alone.
package sim

import (
	"context"
	"crypto/sha1"
	"fmt"
	"time"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/schemas/hardware"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Source simulates every node of a scenario (or one of them).
type Source struct {
	sc    *scenario.Scenario
	nodes []*node
}

var _ exporter.Source = (*Source)(nil)

type node struct {
	name    string
	outages []scenario.Outage
	gpus    []*gpu
}

type gpu struct {
	index     int
	uuid      string
	model     hardware.Model
	instances []*instance
	sched     *scheduler // vGPU GPUs only
}

type instance struct {
	id          string
	kind        pb.Kind
	profile     string
	slices      uint32
	sms         uint32
	memTotal    uint64
	allocations []scenario.Allocation // on this instance, in no particular order
}

// New builds the simulated fleet. nodeName selects one node; empty means all of them.
func New(sc *scenario.Scenario, nodeName string) (*Source, error) {
	s := &Source{sc: sc}
	for _, n := range sc.Nodes {
		if nodeName != "" && n.Name != nodeName {
			continue
		}
		nd := &node{name: n.Name, outages: n.Outages}
		for gi, g := range n.GPUs {
			model, ok := hardware.Lookup(g.Model)
			if !ok {
				return nil, fmt.Errorf("scenario %s: node %s gpu%d: unknown model %q", sc.Path, n.Name, gi, g.Model)
			}
			gp := &gpu{index: gi, uuid: uuid(sc.Name, n.Name, gi), model: model}
			switch g.Kind() {
			case "mig":
				for m, p := range g.MIG {
					prof := model.MIG[p]
					gp.instances = append(gp.instances, &instance{
						id: fmt.Sprintf("gpu%d/mig%d", gi, m), kind: pb.Kind_KIND_MIG, profile: p,
						slices: prof.ComputeSlices, sms: prof.SMs, memTotal: prof.MemoryBytes,
					})
				}
			case "vgpu":
				fb, err := hardware.VGPUFramebuffer(g.VGPU.Profile)
				if err != nil {
					return nil, fmt.Errorf("scenario %s: node %s gpu%d: %w", sc.Path, n.Name, gi, err)
				}
				for m := 0; m < g.VGPU.Count; m++ {
					gp.instances = append(gp.instances, &instance{
						id: fmt.Sprintf("gpu%d/vgpu%d", gi, m), kind: pb.Kind_KIND_VGPU, profile: g.VGPU.Profile,
						sms: model.SMs, memTotal: fb,
					})
				}
				gp.sched = newScheduler(g.VGPU.Count, g.VGPU.Timeslice, g.VGPU.Switch)
			default:
				gp.instances = []*instance{{
					id: fmt.Sprintf("gpu%d", gi), kind: pb.Kind_KIND_GPU, sms: model.SMs, memTotal: model.MemoryBytes,
				}}
			}
			nd.gpus = append(nd.gpus, gp)
		}
		s.nodes = append(s.nodes, nd)
	}
	if len(s.nodes) == 0 {
		return nil, fmt.Errorf("scenario %s has no node named %q", sc.Path, nodeName)
	}
	for _, t := range sc.Tenants {
		for _, a := range t.Allocations {
			if inst := s.find(a.Target); inst != nil {
				inst.allocations = append(inst.allocations, a)
			}
		}
	}
	return s, nil
}

func (s *Source) find(t scenario.Target) *instance {
	for _, n := range s.nodes {
		if n.name != t.Node {
			continue
		}
		for _, inst := range n.gpus[t.GPU].instances {
			if inst.id == t.Instance {
				return inst
			}
		}
	}
	return nil
}

// Nodes lists the simulated node names.
func (s *Source) Nodes() []string {
	names := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		names[i] = n.name
	}
	return names
}

// Instances counts the simulated instances (the samples of one tick without outages).
func (s *Source) Instances() int {
	n := 0
	for _, nd := range s.nodes {
		for _, g := range nd.gpus {
			n += len(g.instances)
		}
	}
	return n
}

// uuid derives a stable GPU UUID in NVML's format from the GPU's place in the scenario.
func uuid(scenarioName, nodeName string, index int) string {
	h := sha1.Sum([]byte(fmt.Sprintf("%s/%s/gpu%d", scenarioName, nodeName, index)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Read samples every instance of every node at tick t; a node in an outage yields nothing.
// Ticks must be read in increasing order (the vGPU scheduler carries state between ticks).
func (s *Source) Read(_ context.Context, t time.Time, interval time.Duration) ([]exporter.NodeSamples, error) {
	d := t.Sub(s.sc.Start)
	out := make([]exporter.NodeSamples, 0, len(s.nodes))
	for _, n := range s.nodes {
		if n.down(d) {
			// The scheduler keeps running while the exporter is down; it only stops being read.
			for _, g := range n.gpus {
				if g.sched != nil {
					g.sched.tick(d, interval, g.busy(d))
				}
			}
			continue
		}
		ns := exporter.NodeSamples{Node: n.name}
		for _, g := range n.gpus {
			ns.Samples = g.sample(ns.Samples, t, d, interval)
		}
		out = append(out, ns)
	}
	return out, nil
}

func (n *node) down(d time.Duration) bool {
	for _, o := range n.outages {
		if d >= o.From && d < o.To {
			return true
		}
	}
	return false
}

// attachedAt returns the allocation attached to the instance at offset d.
func (inst *instance) attachedAt(d time.Duration) (scenario.Allocation, bool) {
	for _, a := range inst.allocations {
		if d >= a.Ready && d < a.End {
			return a, true
		}
	}
	return scenario.Allocation{}, false
}

// busy says which vGPUs have work at offset d (version 1: sm 1 means always, 0 never).
func (g *gpu) busy(d time.Duration) []bool {
	b := make([]bool, len(g.instances))
	for i, inst := range g.instances {
		if a, ok := inst.attachedAt(d); ok && a.Workload.SMAt(d) >= 0.5 {
			b[i] = true
		}
	}
	return b
}

func (g *gpu) sample(dst []*pb.Sample, t time.Time, d, interval time.Duration) []*pb.Sample {
	var ticks []vgpuTick
	if g.sched != nil {
		ticks = g.sched.tick(d, interval, g.busy(d))
	}
	first := len(dst)
	gpuActivity := 0.0
	for i, inst := range g.instances {
		smp := &pb.Sample{
			TsNs:             uint64(t.UnixNano()),
			IntervalNs:       uint64(interval),
			GpuUuid:          g.uuid,
			GpuIndex:         uint32(g.index),
			Model:            g.model.Name,
			Kind:             inst.kind,
			InstanceId:       inst.id,
			Profile:          inst.profile,
			MemTotalBytes:    inst.memTotal,
			ComputeSlices:    inst.slices,
			SmCount:          inst.sms,
			GpuSmCount:       g.model.SMs,
			GpuMemTotalBytes: g.model.MemoryBytes,
		}
		a, attached := inst.attachedAt(d)
		smp.Attached = attached
		if attached {
			smp.MemUsedBytes = uint64(a.Workload.Mem * float64(inst.memTotal))
		}
		switch inst.kind {
		case pb.Kind_KIND_VGPU:
			tk := ticks[i]
			smp.Vgpu = &pb.VgpuSchedule{RunNs: uint64(tk.run), SwitchNs: uint64(tk.switching), WaitsNs: tk.waits}
			smp.SmActive = float64(tk.run) / float64(interval)
			gpuActivity += smp.SmActive
		default:
			if attached {
				smp.SmActive = a.Workload.SMAt(d)
			}
			gpuActivity += smp.SmActive * float64(inst.sms) / float64(g.model.SMs)
		}
		dst = append(dst, smp)
	}
	power := g.model.PowerIdleW + (g.model.PowerMaxW-g.model.PowerIdleW)*min(1, gpuActivity)
	for _, smp := range dst[first:] {
		smp.PowerWatts = power
	}
	return dst
}
