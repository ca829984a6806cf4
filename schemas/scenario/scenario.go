// Package scenario loads and validates scenario files (format version 1): the simulator's input
// and the ground truth of the acceptance tests. See schemas/README.md, "Scenario files".
package scenario

import (
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// Scenario is a validated scenario file. Offsets are relative to Start.
type Scenario struct {
	Path     string
	Version  int
	Name     string
	Start    time.Time
	Duration time.Duration
	Interval time.Duration
	// Loop (YAML `loop: true`) repeats the window forever: the simulator runs until stopped, its
	// allocations, workloads and outages starting again every Duration. End stays the end of
	// the first repetition (the ground truth's window).
	Loop bool
	// UUIDs (YAML `ids: uuid`; default `ids: index`) makes the simulated exporter name
	// instances as on real hardware: GPU-, MIG- and vGPU UUIDs, replicas GPU-<uuid>::<n> (the
	// device ids of NVIDIA's Kubernetes device plugin), instead of gpuN/migM. The scenario's own
	// targets still name instances by index; they only drive the workloads.
	UUIDs bool
	// Book is the price book the scenario carries (its fields currency, prices, tiers, sla and
	// costs, read by pricebook.ParseFields). Its ColdStart names every tier: a tier the sla
	// section does not name has pricebook.DefaultColdStartSLA written in, as scenarios always
	// have had (the canonical hash of a scenario's book depends on it).
	Book    *pricebook.PriceBook
	Nodes   []Node
	Tenants []Tenant
}

// End is the end of the scenario's window.
func (s *Scenario) End() time.Time { return s.Start.Add(s.Duration) }

// Node is one GPU node and its exporter.
type Node struct {
	Name    string
	Outages []Outage
	GPUs    []GPU
}

// Outage is a time when the node's exporter is down: no samples in [From, To).
type Outage struct {
	From, To time.Duration
}

// GPU is one physical GPU, whole, split into MIG instances, or hosting vGPUs.
type GPU struct {
	Model string
	MIG   []string // MIG profiles, in instance index order
	VGPU  *VGPU
	// Share (YAML `share`) hands the GPU out as time-sliced or MPS replicas (Kubernetes device
	// ids GPU-<uuid>::<n>): instances of kind share, each billed 1/replicas.
	Share *Share
	// NoGPM (YAML `gpm: false`) simulates a GPU whose driver has no GPM, as before Hopper: its
	// MIG instances' activity cannot be measured, so their samples say sm_active_unavailable.
	// By default every simulated GPU has GPM, so that the scenario's workloads are observable.
	NoGPM bool
	// Faults are device faults the simulator injects (YAML `faults`), for the GPU-health signals.
	Faults []Fault
}

// Fault is a device fault on one GPU, active from At until Until (0: the end of the window; a
// looping scenario repeats it).
type Fault struct {
	Kind  FaultKind
	At    time.Duration
	Until time.Duration
	// Code and Count: an xid fault's XID code and how many such errors the GPU reports at At.
	Code  uint64
	Count int
}

// FaultKind is what goes wrong.
type FaultKind string

// The faults a scenario can inject.
const (
	// FaultRemapPending: a row was remapped for an uncorrectable error and the remap waits for a
	// GPU reset (remapped-uncorrectable rows +1 at At, pending until Until).
	FaultRemapPending FaultKind = "remap_pending"
	// FaultRemapFailure: a row could not be remapped (the GPU should be replaced).
	FaultRemapFailure FaultKind = "remap_failure"
	// FaultThermalThrottle: the GPU runs hot and its clocks are held down for temperature
	// (thermal violation time grows, the thermal clocks-event reasons are set).
	FaultThermalThrottle FaultKind = "thermal_throttle"
	// FaultPowerCap: the board is held at its power limit (power violation time grows, the
	// software power-cap clocks-event reason is set).
	FaultPowerCap FaultKind = "power_cap"
	// FaultXID: the GPU reports Count critical XID errors with code Code at At (NVML's event
	// set; Until is not used).
	FaultXID FaultKind = "xid"
	// FaultGPULost: the GPU has fallen off the bus: NVML answers GPU_IS_LOST for it from At until
	// Until, and its instances are not sampled meanwhile.
	FaultGPULost FaultKind = "gpu_lost"
)

// MaxXIDCount bounds an xid fault's count: a scenario is input, and each error is an event held
// in memory until the exporter reads it.
const MaxXIDCount = 10000

// FaultKinds lists the fault kinds, for messages.
func FaultKinds() []string {
	return []string{string(FaultRemapPending), string(FaultRemapFailure), string(FaultThermalThrottle), string(FaultPowerCap),
		string(FaultXID), string(FaultGPULost)}
}

// Active says whether the fault is on at offset d (d already reduced to the window).
func (f Fault) Active(d time.Duration) bool {
	return d >= f.At && (f.Until == 0 || d < f.Until)
}

// Kind says how the GPU is shared.
func (g GPU) Kind() string {
	switch {
	case len(g.MIG) > 0:
		return "mig"
	case g.VGPU != nil:
		return "vgpu"
	case g.Share != nil:
		return "share"
	default:
		return "gpu"
	}
}

// VGPU describes time-sliced vGPU instances on one GPU.
type VGPU struct {
	Profile   string
	Count     int
	Scheduler string // equal_share
	Timeslice time.Duration
	Switch    time.Duration
}

// Share describes a GPU shared as replicas: each replica's processes get the GPU's SMs in turn
// (time-slicing) or side by side (MPS); for the bill both are the same, 1/replicas each.
type Share struct {
	Mode     string // time_slicing or mps
	Replicas int
}

// ShareModes are the ways a GPU is shared as replicas.
var ShareModes = []string{"time_slicing", "mps"}

// Tenant holds allocations at one tier.
type Tenant struct {
	Name        string
	Tier        string
	Allocations []Allocation
}

// Allocation is one tenant's hold on one instance.
type Allocation struct {
	Target    Target
	Requested time.Duration
	Ready     time.Duration // started_at; billing starts
	End       time.Duration // ended_at
	Workload  Workload
}

// Target names an instance: node/gpuN[/migM|/vgpuM|/shareM].
type Target struct {
	Node     string
	GPU      int
	Kind     string // gpu, mig, vgpu, share
	Index    int    // MIG, vGPU or replica index; 0 for a whole GPU
	Raw      string
	Instance string // instance id as the simulator names it: gpuN, gpuN/migM, gpuN/vgpuM, gpuN/shareM
}

// Workload is the tenant's load on its instance while attached.
type Workload struct {
	Steps []Step // sorted by At; the first is at 0 (constant workloads have one step)
	Mem   float64
}

// Step sets the SM activity from At (offset from the scenario start) on.
type Step struct {
	At time.Duration
	SM float64
}

// SMAt is the workload's SM activity at offset t.
func (w Workload) SMAt(t time.Duration) float64 {
	sm := 0.0
	for _, s := range w.Steps {
		if s.At > t {
			break
		}
		sm = s.SM
	}
	return sm
}
