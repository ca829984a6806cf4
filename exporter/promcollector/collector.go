// Package promcollector is the exporter's Prometheus collector: a Sink that keeps a snapshot of
// the latest sample of every instance and GPU, served on /metrics. A scrape only reads the
// snapshot: it never calls into the source (NVML).
package promcollector

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Collector is a Sink and a prometheus.Collector over the snapshot of the latest samples.
//
// A scrape is the exporter's only work besides sampling, and it must stay cheap whatever the
// machine is doing: everything that depends only on which instances and GPUs exist (their
// label pairs, their order) is built when that set changes, in Write, so that Collect only
// reads the latest values into metrics carved from one allocation per scrape.
type Collector struct {
	// forget drops an instance or GPU that no Write has carried for this long (0: never): a MIG
	// layout or a vGPU that was destroyed must leave /metrics rather than stay as a frozen
	// series forever. Only Write forgets, so a stalled sampling loop keeps every series (and
	// their last_sample_timestamp ages, which is what the staleness alert reads).
	forget    time.Duration
	mu        sync.RWMutex
	instances map[key]*instance
	gpus      map[gpuKey]*gpu // from sources that read devices
	view      view
	// changed is set by Write when an instance or a GPU appeared or changed labels: the view is
	// rebuilt before Write returns.
	changed bool
	scratch sync.Pool // *textOut: AppendText's buffers, reused from scrape to scrape
}

type key struct{ node, instance string }

type gpuKey struct {
	node  string
	index uint32
}

// instance is the latest state of one instance and its label pairs.
type instance struct {
	key  key
	smp  *pb.Sample
	seen time.Time // the Write that carried smp

	// The sample fields its labels were built from, and the labels.
	gpuIndex             uint32
	uuid, model, profile string
	kind                 pb.Kind
	values               []string  // instanceLabels' values
	labels               *labelSet // instanceLabels
	gpuLabels            *labelSet // gpuLabels, from the sample
	gpuInfo              *labelSet // gpuLabels + sms, memory_bytes, from the sample
	gpuInfoSMs           uint32
	gpuInfoMemory        uint64
	vgpuInfo             *labelSet // instanceLabels + vm_id, vgpu_type
	vmID, vgpuType       string
	// info is instanceLabels + gpu_instance_id (MIG: its GPU instance id, from the GPU state;
	// empty where not known), the labels of slicemeter_instance_info.
	info          *labelSet
	gpuInstanceID string

	gpu      *gpu // the GPU state of its node and index, if any
	activity activityRef
	share    *shareGroup // a share instance's GPU and its replicas; nil for other kinds

	// vGPU counters, accumulated so that they keep increasing between scrapes.
	hasWaits            bool
	waitCount           uint64
	waitSum, runSeconds float64
}

// shareGroup is the share instances (replicas) of one GPU in the snapshot.
type shareGroup struct{ members []*instance }

// powerEstimate is in's part of its GPU's power: split among the replicas by their SM activity
// in the latest tick (equally while none is active), as Kepler splits a GPU's power among
// its processes; the parts sum to the GPU's power.
func (g *shareGroup) powerEstimate(in *instance) float64 {
	total := 0.0
	for _, m := range g.members {
		total += shareSM(m)
	}
	if total <= 0 {
		return in.smp.PowerWatts / float64(len(g.members))
	}
	return in.smp.PowerWatts * shareSM(in) / total
}

func shareSM(in *instance) float64 {
	if in.smp.SmActiveUnavailable {
		return 0
	}
	return in.smp.SmActive
}

// activityRef points at the instance's entry in its GPU's latest state; it is void once that
// state is replaced by one that does not list the instance.
type activityRef struct {
	gpu *gpu
	gen uint64
	i   int
}

// gpu is the latest state of one physical GPU and its label pairs.
type gpu struct {
	state     exporter.GPUState
	seen      time.Time // the Write that carried state
	gen       uint64    // counts the states written
	uuid      string
	model     string
	labels    *labelSet // gpuLabels
	eccLabels [2]*labelSet
	health    healthLabels
	// pciInfo is gpuLabels + pci_bus_id, the labels of slicemeter_gpu_pci_info; nil while the
	// source has not reported the bus id.
	pciInfo  *labelSet
	pciBusID string
}

// healthLabels are a GPU's label pairs of the health families with a second label, built with
// its gpuLabels (driverInfo also when the versions change).
type healthLabels struct {
	pcie, nvlink     [2]*labelSet // direction rx, tx
	remapped         [2]*labelSet // cause correctable, uncorrectable
	violation        [2]*labelSet // cause power, thermal
	reasons          [len(clocksEventReasons)]*labelSet
	driverInfo       *labelSet
	driver, cuda     string
	driverInfoValues []string // gpuLabels' values, for driverInfo
}

// view is the snapshot's series in the order the registry sorts them (by label values), so that
// sorting them at every scrape finds them already sorted.
type view struct {
	instances  []*instance // by instanceLabels' values
	infos      []*instance // by the info labels' values
	sampleGPUs []*instance // the first instance of each GPU, by gpuLabels' values
	gpus       []*gpu      // by gpuLabels' values
	nodes      []nodeCount
}

type nodeCount struct {
	labels *labelSet
	n      float64
}

var (
	instanceLabels = []string{"node", "gpu", "uuid", "model", "slice", "kind", "profile"}
	gpuLabels      = []string{"node", "gpu", "uuid", "model"}

	famInfo      = gauge("slicemeter_instance_info", "An instance (whole GPU, MIG or vGPU instance, time-sliced or MPS replica) that a tenant can hold. gpu_instance_id: a MIG instance's GPU instance id, empty where not known.", append(slices.Clip(instanceLabels), "gpu_instance_id"))
	famAttached  = gauge("slicemeter_instance_attached", "1 while a tenant's process or VM is attached to the instance.", instanceLabels)
	famSM        = gauge("slicemeter_instance_sm_active_ratio", "SM activity of the instance in the latest tick (vGPU: share of the GPU's time it ran).", instanceLabels)
	famMemUsed   = gauge("slicemeter_instance_memory_used_bytes", "Framebuffer used by the instance.", instanceLabels)
	famMemTotal  = gauge("slicemeter_instance_memory_total_bytes", "Framebuffer of the instance.", instanceLabels)
	famLastTS    = gauge("slicemeter_instance_last_sample_timestamp_seconds", "Wall clock of the instance's latest sample.", instanceLabels)
	famVRun      = counter("slicemeter_vgpu_run_seconds_total", "Time the vGPU ran on the physical GPU.", instanceLabels)
	famVWaits    = counter("slicemeter_vgpu_scheduling_waits_total", "Waits between the vGPU's run slices while it had work.", instanceLabels)
	famVWaitSum  = counter("slicemeter_vgpu_scheduling_wait_seconds_total", "Sum of the waits between the vGPU's run slices.", instanceLabels)
	famVSwitch   = gauge("slicemeter_gpu_vgpu_switch_ratio", "Share of the GPU's time spent switching between vGPUs in the latest tick.", gpuLabels)
	famGPUInfo   = gauge("slicemeter_gpu_info", "A physical GPU.", append(slices.Clip(gpuLabels), "sms", "memory_bytes"))
	famGPUPower  = gauge("slicemeter_gpu_power_watts", "Power draw of the physical GPU.", gpuLabels)
	famInstances = gauge("slicemeter_exporter_instances", "Instances in the snapshot.", []string{"node"})

	famGPUUp          = gauge("slicemeter_gpu_up", "1 if the GPU was read in the latest tick, 0 if it failed (XID, fallen off the bus, NVML errors).", gpuLabels)
	famGPUUtil        = gauge("slicemeter_gpu_utilization_ratio", "Mean of the driver's utilization samples in the latest tick.", gpuLabels)
	famGPUMemUsed     = gauge("slicemeter_gpu_memory_used_bytes", "Framebuffer used on the physical GPU.", gpuLabels)
	famGPUEnergy      = counter("slicemeter_gpu_energy_joules_total", "Energy the GPU consumed since the driver loaded.", gpuLabels)
	famGPUSMClock     = gauge("slicemeter_gpu_sm_clock_hertz", "SM clock.", gpuLabels)
	famGPUMemClock    = gauge("slicemeter_gpu_memory_clock_hertz", "Memory clock.", gpuLabels)
	famGPUTemp        = gauge("slicemeter_gpu_temperature_celsius", "GPU core temperature.", gpuLabels)
	famGPUThrottle    = gauge("slicemeter_gpu_clocks_event_reasons", "NVML clocks-event (throttle) reason bit mask; 0: none.", gpuLabels)
	famGPUECC         = counter("slicemeter_gpu_ecc_errors_total", "Volatile ECC errors since the driver loaded.", append(gpuLabels, "type"))
	famGPUXID         = counter("slicemeter_gpu_xid_errors_total", "XID errors seen since the exporter started.", gpuLabels)
	famGPULastXID     = gauge("slicemeter_gpu_last_xid", "The latest XID error code (0: none).", gpuLabels)
	famGPUActivity    = gauge("slicemeter_gpu_instance_activity_available", "1 if per-instance activity is measured (GPM, Hopper+); 0: MIG sm_active is unavailable and not served.", gpuLabels)
	famOccupancy      = gauge("slicemeter_instance_sm_occupancy_ratio", "SM occupancy of the instance (GPM).", instanceLabels)
	famTensor         = gauge("slicemeter_instance_tensor_active_ratio", "Share of time any tensor pipe was active (GPM).", instanceLabels)
	famDRAM           = gauge("slicemeter_instance_dram_bandwidth_ratio", "DRAM bandwidth utilization of the instance (GPM).", instanceLabels)
	famProcesses      = gauge("slicemeter_instance_processes", "Compute processes running on the instance.", instanceLabels)
	famVGPUDriverUtil = gauge("slicemeter_vgpu_driver_sm_utilization_ratio", "The driver's SM utilization of the vGPU (GetVgpuUtilization) in the latest tick it reported one.", instanceLabels)
	famVGPUInfo       = gauge("slicemeter_vgpu_info", "A vGPU instance: its VM and vGPU type.", append(append([]string{}, instanceLabels...), "vm_id", "vgpu_type"))

	// Health (exporter.Health): each family is served only for GPUs that report its fields.
	famGPUReason       = gauge("slicemeter_gpu_clocks_event_reason", "1 while the clocks are held down for the reason (NVML clocks-event reasons), else 0.", append(slices.Clip(gpuLabels), "reason"))
	famGPUPCIe         = counter("slicemeter_gpu_pcie_bytes_total", "PCIe traffic since the driver loaded.", append(slices.Clip(gpuLabels), "direction"))
	famGPUPCIeReplays  = counter("slicemeter_gpu_pcie_replays_total", "PCIe replays (retries) since the driver loaded.", gpuLabels)
	famGPUNVLink       = counter("slicemeter_gpu_nvlink_bytes_total", "NVLink traffic summed over the GPU's links.", append(slices.Clip(gpuLabels), "direction"))
	famGPUMemTemp      = gauge("slicemeter_gpu_memory_temperature_celsius", "Memory (HBM) temperature.", gpuLabels)
	famGPUMemFree      = gauge("slicemeter_gpu_memory_free_bytes", "Framebuffer free on the physical GPU.", gpuLabels)
	famGPUMemReserved  = gauge("slicemeter_gpu_memory_reserved_bytes", "Framebuffer reserved by the driver on the physical GPU.", gpuLabels)
	famGPUCopyUtil     = gauge("slicemeter_gpu_copy_utilization_ratio", "Memory controller (copy) utilization in the latest tick.", gpuLabels)
	famGPUEncoderUtil  = gauge("slicemeter_gpu_encoder_utilization_ratio", "Video encoder utilization in the latest tick.", gpuLabels)
	famGPUDecoderUtil  = gauge("slicemeter_gpu_decoder_utilization_ratio", "Video decoder utilization in the latest tick.", gpuLabels)
	famGPURemapped     = counter("slicemeter_gpu_remapped_rows_total", "Memory rows remapped, by the kind of error that caused it.", append(slices.Clip(gpuLabels), "cause"))
	famGPURemapPending = gauge("slicemeter_gpu_row_remap_pending", "1 while a row remap waits for a GPU reset.", gpuLabels)
	famGPURemapFailure = gauge("slicemeter_gpu_row_remap_failure", "1 if a row remap failed: the GPU needs service.", gpuLabels)
	famGPUViolation    = counter("slicemeter_gpu_violation_seconds_total", "Time the clocks were held down, by cause (power cap, temperature).", append(slices.Clip(gpuLabels), "cause"))
	famGPUDriverInfo   = gauge("slicemeter_gpu_driver_info", "The driver and CUDA versions the GPU runs under.", append(slices.Clip(gpuLabels), "driver_version", "cuda_version"))

	// The GPU's PCI address gets an info series of its own rather than a label on an existing
	// one: the label sets of served series stay as they are, and it is served wherever the bus
	// id is known (also while the GPU cannot be read: which slot fell off the bus is the point).
	famGPUPCIInfo = gauge("slicemeter_gpu_pci_info", "The GPU's PCI address (domain:bus:device.function, as dcgm-exporter's pci_bus_id), read when it was discovered.", append(slices.Clip(gpuLabels), "pci_bus_id"))
)

// famPowerEst is a share replica's estimated power (shareGroup.powerEstimate).
var famPowerEst = gauge("slicemeter_instance_power_estimate_watts", "An estimate of the power a time-sliced or MPS replica (kind share) draws: "+
	"its GPU's power split among the replicas by their SM activity in the latest tick (equally while none is active), as Kepler does; "+
	"NVML measures only the whole GPU. One series per replica, never per pod (join slicemeter_instance_pod_info); they sum to slicemeter_gpu_power_watts.", instanceLabels)

// clocksEventReasons are NVML's clocks-event reason bits (nvmlClocksEventReason*, nvml.h) and
// the reason label of each: one 0/1 series per reason, which PromQL can alert on; the bit mask
// stays in slicemeter_gpu_clocks_event_reasons.
var clocksEventReasons = [...]struct {
	bit  uint64
	name string
}{
	// In the order of the names, the order the registry sorts the series in.
	{0x2, "applications_clocks"},
	{0x100, "display_clocks"},
	{0x1, "gpu_idle"},
	{0x80, "hw_power_brake"},
	{0x8, "hw_slowdown"},
	{0x40, "hw_thermal"},
	{0x4, "sw_power_cap"},
	{0x20, "sw_thermal"},
	{0x10, "sync_boost"},
}

var _ exporter.Sink = (*Collector)(nil)
var _ prometheus.Collector = (*Collector)(nil)

// DefaultForget is how long an instance or GPU absent from every tick stays on /metrics.
const DefaultForget = 5 * time.Minute

// Options are the snapshot's optional parts; the zero value forgets after DefaultForget.
type Options struct {
	// Forget is how long an instance or GPU absent from every Write stays on /metrics
	// (0: DefaultForget; negative: forever).
	Forget time.Duration
}

// New returns an empty snapshot.
func New(opts Options) *Collector {
	forget := opts.Forget
	switch {
	case forget == 0:
		forget = DefaultForget
	case forget < 0:
		forget = 0 // never
	}
	return &Collector{forget: forget, instances: map[key]*instance{}, gpus: map[gpuKey]*gpu{}}
}

// Write replaces each instance's latest sample and each GPU's latest state at tick now, and
// forgets what has been absent for longer than the snapshot's forget period.
func (s *Collector) Write(_ context.Context, now time.Time, samples []exporter.NodeSamples) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Samples before GPU states: a state refers to its instances.
	for _, ns := range samples {
		for _, smp := range ns.Samples {
			s.writeSample(ns.Node, smp, now)
		}
	}
	for _, ns := range samples {
		for i := range ns.GPUs {
			s.writeGPU(ns.Node, &ns.GPUs[i], now)
		}
	}
	if s.forget > 0 {
		for k, in := range s.instances {
			if now.Sub(in.seen) > s.forget {
				delete(s.instances, k)
				s.changed = true
			}
		}
		for k, g := range s.gpus {
			if now.Sub(g.seen) > s.forget {
				delete(s.gpus, k)
				s.changed = true
			}
		}
	}
	if s.changed {
		s.rebuild()
		s.changed = false
	}
	return nil
}

func (s *Collector) writeSample(node string, smp *pb.Sample, now time.Time) {
	k := key{node, smp.InstanceId}
	in := s.instances[k]
	if in == nil {
		in = &instance{key: k}
		s.instances[k] = in
	}
	if in.labels == nil || in.gpuIndex != smp.GpuIndex || in.uuid != smp.GpuUuid || in.model != smp.Model ||
		in.kind != smp.Kind || in.profile != smp.Profile {
		in.gpuIndex, in.uuid, in.model, in.kind, in.profile = smp.GpuIndex, smp.GpuUuid, smp.Model, smp.Kind, smp.Profile
		gpuIndex := strconv.FormatUint(uint64(smp.GpuIndex), 10)
		in.values = []string{node, gpuIndex, smp.GpuUuid, smp.Model, smp.InstanceId, smp.Kind.Label(), smp.Profile}
		in.labels = newLabelSet(famAttached, in.values)
		in.gpuLabels = newLabelSet(famGPUPower, in.values[:len(gpuLabels)])
		in.gpuInfo, in.vgpuInfo = nil, nil
		in.info = newLabelSet(famInfo, append(slices.Clip(in.values), in.gpuInstanceID))
		s.changed = true
	}
	if in.gpuInfo == nil || in.gpuInfoSMs != smp.GpuSmCount || in.gpuInfoMemory != smp.GpuMemTotalBytes {
		in.gpuInfoSMs, in.gpuInfoMemory = smp.GpuSmCount, smp.GpuMemTotalBytes
		in.gpuInfo = newLabelSet(famGPUInfo, append(slices.Clip(in.values[:len(gpuLabels)]),
			strconv.FormatUint(uint64(smp.GpuSmCount), 10), strconv.FormatUint(smp.GpuMemTotalBytes, 10)))
	}
	in.smp, in.seen = smp, now
	if v := smp.Vgpu; v != nil {
		in.hasWaits = true
		in.runSeconds += float64(v.RunNs) / 1e9
		in.waitCount += uint64(len(v.WaitsNs))
		for _, x := range v.WaitsNs {
			in.waitSum += float64(x) / 1e9
		}
	}
}

func (s *Collector) writeGPU(node string, st *exporter.GPUState, now time.Time) {
	k := gpuKey{node, st.Index}
	g := s.gpus[k]
	if g == nil || g.labels == nil || g.uuid != st.UUID || g.model != st.Model {
		if g == nil {
			g = &gpu{}
			s.gpus[k] = g
		}
		g.uuid, g.model = st.UUID, st.Model
		values := []string{node, strconv.FormatUint(uint64(st.Index), 10), st.UUID, st.Model}
		g.labels = newLabelSet(famGPUUp, values)
		g.eccLabels[0] = newLabelSet(famGPUECC, append(slices.Clip(values), "corrected"))
		g.eccLabels[1] = newLabelSet(famGPUECC, append(slices.Clip(values), "uncorrected"))
		g.health = newHealthLabels(values)
		g.pciInfo, g.pciBusID = nil, ""
		s.changed = true
	}
	if st.PCIBusID != g.pciBusID {
		g.pciBusID, g.pciInfo = st.PCIBusID, nil
		if st.PCIBusID != "" {
			g.pciInfo = newLabelSet(famGPUPCIInfo, append(slices.Clip(g.health.driverInfoValues), st.PCIBusID))
		}
	}
	if h := &st.Health; h.Has(exporter.HealthVersions) && (g.health.driverInfo == nil || g.health.driver != h.DriverVersion || g.health.cuda != h.CUDAVersion) {
		g.health.driver, g.health.cuda = h.DriverVersion, h.CUDAVersion
		g.health.driverInfo = newLabelSet(famGPUDriverInfo, append(slices.Clip(g.health.driverInfoValues), h.DriverVersion, h.CUDAVersion))
	}
	g.state, g.seen = *st, now
	g.gen++
	for i, a := range st.Instances {
		in := s.instances[key{node, a.InstanceID}]
		if in == nil {
			continue // no sample of it yet
		}
		in.activity = activityRef{gpu: g, gen: g.gen, i: i}
		if id := gpuInstanceID(&a); id != in.gpuInstanceID {
			in.gpuInstanceID = id
			in.info = newLabelSet(famInfo, append(slices.Clip(in.values), id))
			s.changed = true
		}
		if in.vgpuInfo == nil || in.vmID != a.VMID || in.vgpuType != a.VGPUType {
			in.vmID, in.vgpuType = a.VMID, a.VGPUType
			in.vgpuInfo = newLabelSet(famVGPUInfo, append(slices.Clip(in.values), a.VMID, a.VGPUType))
		}
	}
}

func gpuInstanceID(a *exporter.InstanceActivity) string {
	if !a.HasGPUInstanceID {
		return ""
	}
	return strconv.FormatUint(uint64(a.GPUInstanceID), 10)
}

func newHealthLabels(values []string) healthLabels {
	with := func(d *family, v string) *labelSet {
		return newLabelSet(d, append(slices.Clip(values), v))
	}
	h := healthLabels{driverInfoValues: values}
	for i, dir := range []string{"rx", "tx"} {
		h.pcie[i], h.nvlink[i] = with(famGPUPCIe, dir), with(famGPUNVLink, dir)
	}
	for i, cause := range []string{"correctable", "uncorrectable"} {
		h.remapped[i] = with(famGPURemapped, cause)
	}
	for i, cause := range []string{"power", "thermal"} {
		h.violation[i] = with(famGPUViolation, cause)
	}
	for i, r := range clocksEventReasons {
		h.reasons[i] = with(famGPUReason, r.name)
	}
	return h
}

// rebuild orders the series as the registry will sort them and resolves the references
// between instances and GPUs.
func (s *Collector) rebuild() {
	v := view{instances: make([]*instance, 0, len(s.instances)), gpus: make([]*gpu, 0, len(s.gpus))}
	type sampleGPU struct{ node, uuid string }
	shares := map[sampleGPU]*shareGroup{}
	for _, in := range s.instances {
		in.gpu = s.gpus[gpuKey{in.key.node, in.gpuIndex}]
		in.share = nil
		if in.kind == pb.Kind_KIND_SHARE {
			k := sampleGPU{in.key.node, in.uuid}
			if shares[k] == nil {
				shares[k] = &shareGroup{}
			}
			in.share = shares[k]
			in.share.members = append(in.share.members, in)
		}
		v.instances = append(v.instances, in)
	}
	slices.SortFunc(v.instances, func(a, b *instance) int { return compareLabels(a.labels, b.labels) })
	v.infos = slices.Clone(v.instances)
	slices.SortFunc(v.infos, func(a, b *instance) int { return compareLabels(a.info, b.info) })
	seen := map[sampleGPU]bool{}
	perNode := map[string]int{}
	for _, in := range v.instances {
		perNode[in.key.node]++
		if k := (sampleGPU{in.key.node, in.uuid}); !seen[k] {
			seen[k] = true
			v.sampleGPUs = append(v.sampleGPUs, in)
		}
	}
	slices.SortFunc(v.sampleGPUs, func(a, b *instance) int { return compareLabels(a.gpuLabels, b.gpuLabels) })
	for _, g := range s.gpus {
		v.gpus = append(v.gpus, g)
	}
	slices.SortFunc(v.gpus, func(a, b *gpu) int { return compareLabels(a.labels, b.labels) })
	for node, n := range perNode {
		v.nodes = append(v.nodes, nodeCount{labels: newLabelSet(famInstances, []string{node}), n: float64(n)})
	}
	slices.SortFunc(v.nodes, func(a, b nodeCount) int { return compareLabels(a.labels, b.labels) })
	s.view = v
}

// compareLabels orders two series of one family as the registry does: by their label values,
// in the order of the (sorted) label names.
func compareLabels(x, y *labelSet) int {
	a, b := x.pairs, y.pairs
	for i := range min(len(a), len(b)) {
		if c := strings.Compare(a[i].GetValue(), b[i].GetValue()); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// Flush does nothing: the snapshot is always current.
func (s *Collector) Flush(context.Context) error { return nil }

// families are the snapshot's metric families, by name.
var families = indexed(famInfo, famAttached, famSM, famMemUsed, famMemTotal, famLastTS,
	famVRun, famVWaits, famVWaitSum, famVSwitch, famGPUInfo, famGPUPower, famPowerEst, famInstances,
	famGPUUp, famGPUUtil, famGPUMemUsed, famGPUEnergy, famGPUSMClock, famGPUMemClock, famGPUTemp,
	famGPUThrottle, famGPUECC, famGPUXID, famGPULastXID, famGPUActivity, famOccupancy, famTensor, famDRAM, famProcesses, famVGPUInfo, famVGPUDriverUtil,
	famGPUReason, famGPUPCIe, famGPUPCIeReplays, famGPUNVLink, famGPUMemTemp, famGPUMemFree, famGPUMemReserved,
	famGPUCopyUtil, famGPUEncoderUtil, famGPUDecoderUtil, famGPURemapped, famGPURemapPending, famGPURemapFailure,
	famGPUViolation, famGPUDriverInfo, famGPUPCIInfo)

// Describe sends the descriptors of every metric the snapshot can emit.
func (s *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range families {
		ch <- f.desc
	}
}

// Collect emits the latest values. It only reads the snapshot.
func (s *Collector) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := &s.view
	// At most 10 gauges and 3 counters per instance, 28 gauges and 13 counters per GPU: one
	// allocation of each for the scrape.
	s.emit(registryOut{ch: ch, m: newMetrics(10*len(v.instances)+28*len(v.gpus)+3*len(v.sampleGPUs)+len(v.nodes), 3*len(v.instances)+13*len(v.gpus))})
}

// emit sends every series of the snapshot to o; s.mu is held.
func (s *Collector) emit(o out) {
	v := &s.view
	for _, in := range v.infos {
		o.add(famInfo, 1, in.info)
	}
	for _, in := range v.instances {
		smp, ip := in.smp, in.labels
		o.add(famAttached, b2f(smp.Attached), ip)
		// Where activity cannot be measured (MIG without GPM) sm_active is not served: 0 would
		// read as an idle instance.
		if (in.gpu == nil || in.gpu.state.ActivityAvailable || in.kind != pb.Kind_KIND_MIG) && !smp.SmActiveUnavailable {
			o.add(famSM, smp.SmActive, ip)
		}
		o.add(famMemUsed, float64(smp.MemUsedBytes), ip)
		o.add(famMemTotal, float64(smp.MemTotalBytes), ip)
		o.add(famLastTS, float64(smp.TsNs)/1e9, ip)
		if in.share != nil {
			o.add(famPowerEst, in.share.powerEstimate(in), ip)
		}
		if in.hasWaits {
			o.add(famVRun, in.runSeconds, ip)
			o.add(famVWaits, float64(in.waitCount), ip)
			o.add(famVWaitSum, in.waitSum, ip)
		}
		collectActivity(o, in)
	}
	for _, in := range v.sampleGPUs {
		smp := in.smp
		o.add(famGPUInfo, 1, in.gpuInfo)
		o.add(famGPUPower, smp.PowerWatts, in.gpuLabels)
		if smp.Vgpu != nil {
			o.add(famVSwitch, float64(smp.Vgpu.SwitchNs)/float64(max(1, smp.IntervalNs)), in.gpuLabels)
		}
	}
	for _, g := range v.gpus {
		collectGPU(o, g)
	}
	collectHealthPairs(o, v.gpus)
	for _, n := range v.nodes {
		o.add(famInstances, n.n, n.labels)
	}
}

// collectActivity emits what the instance's GPU state says of it (GPM activity, processes,
// vGPU details), if the GPU's latest state lists it and the GPU was read.
func collectActivity(o out, in *instance) {
	ref := in.activity
	if ref.gpu == nil || ref.gen != ref.gpu.gen || ref.gpu.state.Failed {
		return
	}
	a := &ref.gpu.state.Instances[ref.i]
	if in.kind == pb.Kind_KIND_VGPU {
		o.add(famVGPUInfo, 1, in.vgpuInfo)
		if a.HasDriverSMUtil {
			o.add(famVGPUDriverUtil, a.DriverSMUtil, in.labels)
		}
		return
	}
	o.add(famProcesses, float64(a.Processes), in.labels)
	if a.HasGPM {
		o.add(famOccupancy, a.SMOccupancy, in.labels)
		o.add(famTensor, a.TensorRatio, in.labels)
		o.add(famDRAM, a.DRAMRatio, in.labels)
	}
}

// collectGPU emits a physical GPU's own figures.
func collectGPU(o out, g *gpu) {
	st, gp := &g.state, g.labels
	o.add(famGPUUp, b2f(!st.Failed), gp)
	o.add(famGPUXID, float64(st.XIDs), gp)
	o.add(famGPULastXID, float64(st.LastXID), gp)
	if g.pciInfo != nil {
		o.add(famGPUPCIInfo, 1, g.pciInfo)
	}
	if st.Failed {
		return // its figures are from no tick
	}
	o.add(famGPUUtil, st.Utilization, gp)
	o.add(famGPUMemUsed, float64(st.MemUsed), gp)
	o.add(famGPUEnergy, st.EnergyJ, gp)
	o.add(famGPUSMClock, st.SMClockHz, gp)
	o.add(famGPUMemClock, st.MemClockHz, gp)
	o.add(famGPUTemp, st.TempC, gp)
	o.add(famGPUThrottle, float64(st.ThrottleReasons), gp)
	o.add(famGPUECC, float64(st.ECCCorrected), g.eccLabels[0])
	o.add(famGPUECC, float64(st.ECCUncorrected), g.eccLabels[1])
	o.add(famGPUActivity, b2f(st.ActivityAvailable), gp)
	for i, r := range clocksEventReasons {
		o.add(famGPUReason, b2f(st.ThrottleReasons&r.bit != 0), g.health.reasons[i])
	}
	collectHealth(o, g)
}

// collectHealth emits the health fields the GPU reports; an unsupported one is left out rather
// than served as 0.
func collectHealth(o out, g *gpu) {
	h, gp := &g.state.Health, g.labels
	if h.Has(exporter.HealthPCIeReplays) {
		o.add(famGPUPCIeReplays, float64(h.PCIeReplays), gp)
	}
	if h.Has(exporter.HealthMemTemp) {
		o.add(famGPUMemTemp, h.MemTempC, gp)
	}
	if h.Has(exporter.HealthFB) {
		o.add(famGPUMemFree, float64(h.FBFree), gp)
	}
	if h.Has(exporter.HealthFBReserved) {
		o.add(famGPUMemReserved, float64(h.FBReserved), gp)
	}
	if h.Has(exporter.HealthCopyUtil) {
		o.add(famGPUCopyUtil, h.CopyUtil, gp)
	}
	if h.Has(exporter.HealthCodecUtil) {
		o.add(famGPUEncoderUtil, h.EncoderUtil, gp)
		o.add(famGPUDecoderUtil, h.DecoderUtil, gp)
	}
	if h.Has(exporter.HealthRemap) {
		o.add(famGPURemapPending, b2f(h.RemapPending), gp)
		o.add(famGPURemapFailure, b2f(h.RemapFailure), gp)
	}
}

// collectHealthPairs emits the health families whose second label (direction, cause) sorts
// before gpu: all GPUs' series of the first value, then of the second, as the registry sorts
// them. driver_info sorts by the versions first, which one node's GPUs share.
func collectHealthPairs(o out, gpus []*gpu) {
	for i := range 2 {
		for _, g := range gpus {
			h, hl := &g.state.Health, &g.health
			if g.state.Failed {
				continue
			}
			if h.Has(exporter.HealthPCIe) {
				o.add(famGPUPCIe, float64(pick(i, h.PCIeRxBytes, h.PCIeTxBytes)), hl.pcie[i])
			}
			if h.Has(exporter.HealthNVLink) {
				o.add(famGPUNVLink, float64(pick(i, h.NVLinkRxBytes, h.NVLinkTxBytes)), hl.nvlink[i])
			}
			if h.Has(exporter.HealthRemap) {
				o.add(famGPURemapped, float64(pick(i, h.RemappedCorrectable, h.RemappedUncorrectable)), hl.remapped[i])
			}
			if h.Has(exporter.HealthViolations) {
				o.add(famGPUViolation, float64(pick(i, h.PowerViolationNs, h.ThermalViolationNs))/1e9, hl.violation[i])
			}
		}
	}
	for _, g := range gpus {
		if !g.state.Failed && g.state.Health.Has(exporter.HealthVersions) && g.health.driverInfo != nil {
			o.add(famGPUDriverInfo, 1, g.health.driverInfo)
		}
	}
}

// pick returns a for 0 and b for 1.
func pick(i int, a, b uint64) uint64 {
	if i == 0 {
		return a
	}
	return b
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metrics carves a scrape's const metrics out of a few slices instead of allocating each
// metric, its value and its dto.Gauge apart: that was most of a scrape's allocations. The
// metrics are not reused: the registry keeps pointing into them until the scrape is written.
type metrics struct {
	gauges   []gaugeMetric
	counters []counterMetric
}

func newMetrics(gauges, counters int) *metrics {
	return &metrics{gauges: make([]gaugeMetric, 0, gauges), counters: make([]counterMetric, 0, counters)}
}

func (m *metrics) gauge(desc *prometheus.Desc, v float64, labels []*dto.LabelPair) prometheus.Metric {
	g := carve(&m.gauges)
	g.constMetric = constMetric{desc: desc, labels: labels, v: v}
	return g
}

func (m *metrics) counter(desc *prometheus.Desc, v float64, labels []*dto.LabelPair) prometheus.Metric {
	c := carve(&m.counters)
	c.constMetric = constMetric{desc: desc, labels: labels, v: v}
	return c
}

// carve returns the next element of *s. When s is full (more metrics than estimated) a new
// slice is started: the earlier elements stay where they are.
func carve[T any](s *[]T) *T {
	if len(*s) == cap(*s) {
		*s = make([]T, 0, 64)
	}
	*s = (*s)[:len(*s)+1]
	return &(*s)[len(*s)-1]
}

// constMetric is a const metric over label pairs built once per series.
type constMetric struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	v      float64
}

func (c *constMetric) Desc() *prometheus.Desc { return c.desc }

// gaugeMetric is a const gauge.
type gaugeMetric struct {
	constMetric
	out dto.Gauge
}

func (g *gaugeMetric) Write(out *dto.Metric) error {
	g.out.Value = &g.v
	out.Label, out.Gauge = g.labels, &g.out
	return nil
}

// counterMetric is a const counter.
type counterMetric struct {
	constMetric
	out dto.Counter
}

func (c *counterMetric) Write(out *dto.Metric) error {
	c.out.Value = &c.v
	out.Label, out.Counter = c.labels, &c.out
	return nil
}
