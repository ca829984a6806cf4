// The fleet model: the scenario's nodes, GPUs and instances, what is attached to them and
// what that makes them do at any offset into the scenario. The simulated NVML (nvml.go) reads it.

package sim

import (
	"crypto/sha1"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/schemas/hardware"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

type node struct {
	name    string
	outages []scenario.Outage
	period  time.Duration // a looping scenario's duration: the model repeats every period; 0: no loop
	gpus    []*gpu
	world   *world
	src     *nvmlsource.Source // nil while the node's exporter is down (it restarts afterwards)
}

type gpu struct {
	index     int
	uuid      string
	model     hardware.Model
	instances []*instance
	sched     *scheduler // vGPU GPUs only
	noGPM     bool       // the driver answers that GPM is unsupported (pre-Hopper)
	period    time.Duration
	health    healthState

	// What the simulated driver has recorded.
	utilLog  []nvml.Sample                   // utilization samples, one per tick
	energyMJ uint64                          // total energy counter
	slices   []runSlice                      // vGPU runs of the current tick
	schedLog []nvml.VgpuSchedulerLogEntry_v2 // the latest schedLogSize entries
	// schedNext: entries of the current tick not yet written (their run ends after the time
	// the log was last read at).
	schedNext []nvml.VgpuSchedulerLogEntry_v2
	runTotal  []time.Duration // per vGPU
	preempt   []time.Duration // per vGPU, cumulative switch time
	// energyExact is the integral of the power model (mJ), which energyMJ reads rounded down:
	// the rounding never accumulates, so the counter's increase over any run of ticks is
	// power × time to within 1 mJ, as a real counter's is.
	energyExact float64
}

type instance struct {
	id          string // as the scenario names it: gpuN, gpuN/migM, gpuN/vgpuM, gpuN/shareM
	uuid        string // as NVML (MIG, vGPU) or the device plugin (GPU-<uuid>::<n>) names it
	kind        pb.Kind
	profile     string
	slices      uint32
	sms         uint32
	memTotal    uint64
	allocations []scenario.Allocation // on this instance, in no particular order
	period      time.Duration         // as node.period
	pid         uint32                // share: the process of the replica's tenant while attached
}

// SharePID is the simulated process id of the tenant on replica m of the node's GPU gi
// (distinct on a node), for whatever maps processes to replicas in place of the simulator's
// own Shares (a Kubernetes test's cgroup reader).
func SharePID(gi, m int) uint32 { return uint32(10000 + 100*gi + m) }

// newNode builds the model of one node of the scenario: its GPUs and their instances.
func newNode(sc *scenario.Scenario, n scenario.Node) (*node, error) {
	nd := &node{name: n.Name, outages: n.Outages}
	if sc.Loop {
		nd.period = sc.Duration
	}
	for gi, g := range n.GPUs {
		model, ok := hardware.Lookup(g.Model)
		if !ok {
			return nil, fmt.Errorf("scenario %s: node %s gpu%d: unknown model %q", sc.Path, n.Name, gi, g.Model)
		}
		gp := &gpu{index: gi, uuid: uuid(sc.Name, n.Name, gi), model: model, noGPM: g.NoGPM, period: nd.period,
			health: healthState{caps: capsOf(model), faults: g.Faults, faultOn: make([]bool, len(g.Faults))}}
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
			gp.runTotal = make([]time.Duration, g.VGPU.Count)
			gp.preempt = make([]time.Duration, g.VGPU.Count)
		case "share":
			for m := 0; m < g.Share.Replicas; m++ {
				gp.instances = append(gp.instances, &instance{
					id: fmt.Sprintf("gpu%d/share%d", gi, m), kind: pb.Kind_KIND_SHARE, sms: model.SMs,
					memTotal: model.MemoryBytes / uint64(g.Share.Replicas), pid: SharePID(gi, m),
				})
			}
		default:
			gp.instances = []*instance{{
				id: fmt.Sprintf("gpu%d", gi), kind: pb.Kind_KIND_GPU, sms: model.SMs, memTotal: model.MemoryBytes,
			}}
		}
		for m, inst := range gp.instances {
			inst.period = nd.period
			switch inst.kind {
			case pb.Kind_KIND_GPU:
				inst.uuid = gp.uuid
			case pb.Kind_KIND_MIG:
				inst.uuid = derivedUUID("MIG", gp.uuid, inst.id)
			case pb.Kind_KIND_VGPU:
				inst.uuid = derivedUUID("", gp.uuid, inst.id)
			case pb.Kind_KIND_SHARE:
				inst.uuid = fmt.Sprintf("%s::%d", gp.uuid, m)
			}
		}
		nd.gpus = append(nd.gpus, gp)
	}
	return nd, nil
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

// UUIDs maps each instance of the scenario, by target (node/gpuN[/migM|/vgpuM|/shareM]), to
// the id its samples carry with `ids: uuid`: what a test serving the kubelet's PodResources API
// hands out as device ids, so that the allocations it makes join the simulated samples.
func UUIDs(sc *scenario.Scenario) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range sc.Nodes {
		nd, err := newNode(sc, n)
		if err != nil {
			return nil, err
		}
		for _, g := range nd.gpus {
			for _, inst := range g.instances {
				out[n.Name+"/"+inst.id] = inst.uuid
			}
		}
	}
	return out, nil
}

// uuid derives a stable GPU UUID in NVML's format from the GPU's place in the scenario.
func uuid(scenarioName, nodeName string, index int) string {
	h := sha1.Sum([]byte(fmt.Sprintf("%s/%s/gpu%d", scenarioName, nodeName, index)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// inPeriod is offset d into the scenario's window: a looping scenario's model repeats every
// period, while the simulated clock (timestamps, counters, the vGPU scheduler) runs on.
func inPeriod(d, period time.Duration) time.Duration {
	if period <= 0 {
		return d
	}
	return d % period
}

func (n *node) down(d time.Duration) bool {
	d = inPeriod(d, n.period)
	for _, o := range n.outages {
		if d >= o.From && d < o.To {
			return true
		}
	}
	return false
}

// attachedAt returns the allocation attached to the instance at offset d.
func (inst *instance) attachedAt(d time.Duration) (*scenario.Allocation, bool) {
	d = inPeriod(d, inst.period)
	// By index: the ticks ask this several times per instance, and an Allocation is big to copy.
	for i := range inst.allocations {
		if a := &inst.allocations[i]; d >= a.Ready && d < a.End {
			return a, true
		}
	}
	return nil, false
}

// busy says which vGPUs have work at offset d (version 1: sm 1 means always, 0 never).
func (g *gpu) busy(d time.Duration) []bool {
	b := make([]bool, len(g.instances))
	for i, inst := range g.instances {
		if a, ok := inst.attachedAt(d); ok && a.Workload.SMAt(inPeriod(d, inst.period)) >= 0.5 {
			b[i] = true
		}
	}
	return b
}

// memUsed is what an instance holds at offset d.
func (inst *instance) memUsed(d time.Duration) uint64 {
	if a, ok := inst.attachedAt(d); ok {
		return uint64(a.Workload.Mem * float64(inst.memTotal))
	}
	return 0
}

// sm is an instance's SM activity at offset d (MIG, whole GPU: the workload; vGPU: its run share).
func (inst *instance) sm(d time.Duration) float64 {
	if a, ok := inst.attachedAt(d); ok {
		return a.Workload.SMAt(inPeriod(d, inst.period))
	}
	return 0
}

// activity is the GPU's SM activity at offset d: SMs weighted for MIG, run time for vGPU.
func (g *gpu) activity(d time.Duration) float64 {
	act := 0.0
	if g.sched != nil {
		for _, b := range g.busy(d) {
			if b {
				return 1 // the equal-share scheduler keeps the GPU busy while any vGPU has work
			}
		}
		return 0
	}
	for _, inst := range g.instances {
		act += inst.sm(d) * float64(inst.sms) / float64(g.model.SMs)
	}
	return act
}

func (g *gpu) power(d time.Duration) float64 {
	return g.model.PowerIdleW + (g.model.PowerMaxW-g.model.PowerIdleW)*min(1, g.activity(d))
}

func (g *gpu) memUsed(d time.Duration) uint64 {
	var used uint64
	for _, inst := range g.instances {
		used += inst.memUsed(d)
	}
	return used
}

// hasVGPUs says whether a GPU of the node hosts vGPUs (it has a scheduler log to read).
func (n *node) hasVGPUs() bool {
	for _, g := range n.gpus {
		if g.sched != nil {
			return true
		}
	}
	return false
}
