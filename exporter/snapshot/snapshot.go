// Package snapshot keeps the latest sample of every instance and serves it to Prometheus. A
// scrape only reads the snapshot: it never calls into the source (NVML).
package snapshot

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Snapshot is a Sink and a prometheus.Collector.
type Snapshot struct {
	mu     sync.RWMutex
	latest map[key]*pb.Sample
	gpus   map[gpuKey]exporter.GPUState // from sources that read devices
	labels *labelCache                  // label pairs of the series, built once rather than at every scrape
	// waits accumulates vGPU waits per instance so that the counters keep increasing between scrapes.
	waits map[key]*waitTotals
}

type key struct{ node, instance string }

type gpuKey struct {
	node  string
	index uint32
}

type waitTotals struct {
	count uint64
	sum   float64
	run   float64
}

var (
	instanceLabels = []string{"node", "gpu", "uuid", "model", "slice", "kind", "profile"}
	gpuLabels      = []string{"node", "gpu", "uuid", "model"}

	descInfo      = prometheus.NewDesc("slicemeter_instance_info", "An instance (whole GPU, MIG or vGPU instance) that a tenant can hold.", instanceLabels, nil)
	descAttached  = prometheus.NewDesc("slicemeter_instance_attached", "1 while a tenant's process or VM is attached to the instance.", instanceLabels, nil)
	descSM        = prometheus.NewDesc("slicemeter_instance_sm_active_ratio", "SM activity of the instance in the latest tick (vGPU: share of the GPU's time it ran).", instanceLabels, nil)
	descMemUsed   = prometheus.NewDesc("slicemeter_instance_memory_used_bytes", "Framebuffer used by the instance.", instanceLabels, nil)
	descMemTotal  = prometheus.NewDesc("slicemeter_instance_memory_total_bytes", "Framebuffer of the instance.", instanceLabels, nil)
	descLastTS    = prometheus.NewDesc("slicemeter_instance_last_sample_timestamp_seconds", "Wall clock of the instance's latest sample.", instanceLabels, nil)
	descVRun      = prometheus.NewDesc("slicemeter_vgpu_run_seconds_total", "Time the vGPU ran on the physical GPU.", instanceLabels, nil)
	descVWaits    = prometheus.NewDesc("slicemeter_vgpu_scheduling_waits_total", "Waits between the vGPU's run slices while it had work.", instanceLabels, nil)
	descVWaitSum  = prometheus.NewDesc("slicemeter_vgpu_scheduling_wait_seconds_total", "Sum of the waits between the vGPU's run slices.", instanceLabels, nil)
	descVSwitch   = prometheus.NewDesc("slicemeter_gpu_vgpu_switch_ratio", "Share of the GPU's time spent switching between vGPUs in the latest tick.", gpuLabels, nil)
	descGPUInfo   = prometheus.NewDesc("slicemeter_gpu_info", "A physical GPU.", append(gpuLabels, "sms", "memory_bytes"), nil)
	descGPUPower  = prometheus.NewDesc("slicemeter_gpu_power_watts", "Power draw of the physical GPU.", gpuLabels, nil)
	descInstances = prometheus.NewDesc("slicemeter_exporter_instances", "Instances in the snapshot.", []string{"node"}, nil)

	descGPUUp          = prometheus.NewDesc("slicemeter_gpu_up", "1 if the GPU was read in the latest tick, 0 if it failed (XID, fallen off the bus, NVML errors).", gpuLabels, nil)
	descGPUUtil        = prometheus.NewDesc("slicemeter_gpu_utilization_ratio", "Mean of the driver's utilization samples in the latest tick.", gpuLabels, nil)
	descGPUMemUsed     = prometheus.NewDesc("slicemeter_gpu_memory_used_bytes", "Framebuffer used on the physical GPU.", gpuLabels, nil)
	descGPUEnergy      = prometheus.NewDesc("slicemeter_gpu_energy_joules_total", "Energy the GPU consumed since the driver loaded.", gpuLabels, nil)
	descGPUSMClock     = prometheus.NewDesc("slicemeter_gpu_sm_clock_hertz", "SM clock.", gpuLabels, nil)
	descGPUMemClock    = prometheus.NewDesc("slicemeter_gpu_memory_clock_hertz", "Memory clock.", gpuLabels, nil)
	descGPUTemp        = prometheus.NewDesc("slicemeter_gpu_temperature_celsius", "GPU core temperature.", gpuLabels, nil)
	descGPUThrottle    = prometheus.NewDesc("slicemeter_gpu_clocks_event_reasons", "NVML clocks-event (throttle) reason bit mask; 0: none.", gpuLabels, nil)
	descGPUECC         = prometheus.NewDesc("slicemeter_gpu_ecc_errors_total", "Volatile ECC errors since the driver loaded.", append(gpuLabels, "type"), nil)
	descGPUXID         = prometheus.NewDesc("slicemeter_gpu_xid_errors_total", "XID errors seen since the exporter started.", gpuLabels, nil)
	descGPULastXID     = prometheus.NewDesc("slicemeter_gpu_last_xid", "The latest XID error code (0: none).", gpuLabels, nil)
	descGPUActivity    = prometheus.NewDesc("slicemeter_gpu_instance_activity_available", "1 if per-instance activity is measured (GPM, Hopper+); 0: MIG sm_active is unavailable and not served.", gpuLabels, nil)
	descOccupancy      = prometheus.NewDesc("slicemeter_instance_sm_occupancy_ratio", "SM occupancy of the instance (GPM).", instanceLabels, nil)
	descTensor         = prometheus.NewDesc("slicemeter_instance_tensor_active_ratio", "Share of time any tensor pipe was active (GPM).", instanceLabels, nil)
	descDRAM           = prometheus.NewDesc("slicemeter_instance_dram_bandwidth_ratio", "DRAM bandwidth utilization of the instance (GPM).", instanceLabels, nil)
	descProcesses      = prometheus.NewDesc("slicemeter_instance_processes", "Compute processes running on the instance.", instanceLabels, nil)
	descVGPUDriverUtil = prometheus.NewDesc("slicemeter_vgpu_driver_sm_utilization_ratio", "The driver's SM utilization of the vGPU (GetVgpuUtilization) in the latest tick it reported one.", instanceLabels, nil)
	descVGPUInfo       = prometheus.NewDesc("slicemeter_vgpu_info", "A vGPU instance: its VM and vGPU type.", append(append([]string{}, instanceLabels...), "vm_id", "vgpu_type"), nil)
)

var _ exporter.Sink = (*Snapshot)(nil)
var _ prometheus.Collector = (*Snapshot)(nil)

// New returns an empty snapshot.
func New() *Snapshot {
	return &Snapshot{latest: map[key]*pb.Sample{}, waits: map[key]*waitTotals{}, gpus: map[gpuKey]exporter.GPUState{},
		labels: &labelCache{m: map[string][]*dto.LabelPair{}}}
}

// Write replaces each instance's latest sample.
func (s *Snapshot) Write(_ context.Context, _ time.Time, samples []exporter.NodeSamples) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range samples {
		for _, g := range ns.GPUs {
			s.gpus[gpuKey{ns.Node, g.Index}] = g
		}
		for _, smp := range ns.Samples {
			k := key{ns.Node, smp.InstanceId}
			s.latest[k] = smp
			if v := smp.Vgpu; v != nil {
				w := s.waits[k]
				if w == nil {
					w = &waitTotals{}
					s.waits[k] = w
				}
				w.run += float64(v.RunNs) / 1e9
				w.count += uint64(len(v.WaitsNs))
				for _, x := range v.WaitsNs {
					w.sum += float64(x) / 1e9
				}
			}
		}
	}
	return nil
}

// Flush does nothing: the snapshot is always current.
func (s *Snapshot) Flush(context.Context) error { return nil }

// Describe sends the descriptors of every metric the snapshot can emit.
func (s *Snapshot) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descAttached, descSM, descMemUsed, descMemTotal, descLastTS,
		descVRun, descVWaits, descVWaitSum, descVSwitch, descGPUInfo, descGPUPower, descInstances,
		descGPUUp, descGPUUtil, descGPUMemUsed, descGPUEnergy, descGPUSMClock, descGPUMemClock, descGPUTemp,
		descGPUThrottle, descGPUECC, descGPUXID, descGPULastXID, descGPUActivity, descOccupancy, descTensor, descDRAM, descProcesses, descVGPUInfo, descVGPUDriverUtil} {
		ch <- d
	}
}

// Collect emits const metrics from the latest samples.
func (s *Snapshot) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	perNode := map[string]int{}
	gpus := map[[2]string]bool{}
	for k, smp := range s.latest {
		perNode[k.node]++
		gpu := strconv.FormatUint(uint64(smp.GpuIndex), 10)
		il := []string{k.node, gpu, smp.GpuUuid, smp.Model, smp.InstanceId, smp.Kind.Label(), smp.Profile}
		ip := s.labels.pairs(descInfo, il)
		ch <- fast(descInfo, false, 1, ip)
		ch <- fast(descAttached, false, b2f(smp.Attached), ip)
		if g, ok := s.gpus[gpuKey{k.node, smp.GpuIndex}]; !ok || g.ActivityAvailable || smp.Kind != pb.Kind_KIND_MIG {
			ch <- fast(descSM, false, smp.SmActive, ip)
		}
		ch <- fast(descMemUsed, false, float64(smp.MemUsedBytes), ip)
		ch <- fast(descMemTotal, false, float64(smp.MemTotalBytes), ip)
		ch <- fast(descLastTS, false, float64(smp.TsNs)/1e9, ip)
		gl := []string{k.node, gpu, smp.GpuUuid, smp.Model}
		if w := s.waits[k]; w != nil {
			ch <- fast(descVRun, true, w.run, ip)
			ch <- fast(descVWaits, true, float64(w.count), ip)
			ch <- fast(descVWaitSum, true, w.sum, ip)
		}
		gk := [2]string{k.node, smp.GpuUuid}
		if gpus[gk] {
			continue
		}
		gpus[gk] = true
		gp := s.labels.pairs(descGPUPower, gl)
		ch <- prometheus.MustNewConstMetric(descGPUInfo, prometheus.GaugeValue, 1,
			append(gl, strconv.FormatUint(uint64(smp.GpuSmCount), 10), strconv.FormatUint(smp.GpuMemTotalBytes, 10))...)
		ch <- fast(descGPUPower, false, smp.PowerWatts, gp)
		if smp.Vgpu != nil {
			ch <- fast(descVSwitch, false, float64(smp.Vgpu.SwitchNs)/float64(max(1, smp.IntervalNs)), gp)
		}
	}
	s.collectGPUs(ch)
	for node, n := range perNode {
		ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(n), node)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectGPUs emits the physical GPUs' own figures and the instances' GPM activity.
func (s *Snapshot) collectGPUs(ch chan<- prometheus.Metric) {
	for k, g := range s.gpus {
		gl := []string{k.node, strconv.FormatUint(uint64(g.Index), 10), g.UUID, g.Model}
		gp := s.labels.pairs(descGPUUp, gl)
		ch <- fast(descGPUUp, false, b2f(!g.Failed), gp)
		ch <- fast(descGPUXID, true, float64(g.XIDs), gp)
		ch <- fast(descGPULastXID, false, float64(g.LastXID), gp)
		if g.Failed {
			continue // its figures are from no tick
		}
		ch <- fast(descGPUUtil, false, g.Utilization, gp)
		ch <- fast(descGPUMemUsed, false, float64(g.MemUsed), gp)
		ch <- fast(descGPUEnergy, true, g.EnergyJ, gp)
		ch <- fast(descGPUSMClock, false, g.SMClockHz, gp)
		ch <- fast(descGPUMemClock, false, g.MemClockHz, gp)
		ch <- fast(descGPUTemp, false, g.TempC, gp)
		ch <- fast(descGPUThrottle, false, float64(g.ThrottleReasons), gp)
		ch <- prometheus.MustNewConstMetric(descGPUECC, prometheus.CounterValue, float64(g.ECCCorrected), append(gl, "corrected")...)
		ch <- prometheus.MustNewConstMetric(descGPUECC, prometheus.CounterValue, float64(g.ECCUncorrected), append(gl, "uncorrected")...)
		ch <- fast(descGPUActivity, false, b2f(g.ActivityAvailable), gp)
		for _, a := range g.Instances {
			smp := s.latest[key{k.node, a.InstanceID}]
			if smp == nil {
				continue
			}
			il := []string{k.node, gl[1], smp.GpuUuid, smp.Model, smp.InstanceId, smp.Kind.Label(), smp.Profile}
			ip := s.labels.pairs(descInfo, il)
			if smp.Kind == pb.Kind_KIND_VGPU {
				ch <- prometheus.MustNewConstMetric(descVGPUInfo, prometheus.GaugeValue, 1, append(il, a.VMID, a.VGPUType)...)
				if a.HasDriverSMUtil {
					ch <- fast(descVGPUDriverUtil, false, a.DriverSMUtil, ip)
				}
				continue
			}
			ch <- fast(descProcesses, false, float64(a.Processes), ip)
			if a.HasGPM {
				ch <- fast(descOccupancy, false, a.SMOccupancy, ip)
				ch <- fast(descTensor, false, a.TensorRatio, ip)
				ch <- fast(descDRAM, false, a.DRAMRatio, ip)
			}
		}
	}
}

// labelCache keeps the sorted label pairs of each label set: building them is most of what a
// scrape allocates, and they change only when an instance or a GPU does.
type labelCache struct {
	mu sync.Mutex
	m  map[string][]*dto.LabelPair
}

// pairs returns the label pairs of values for desc (every desc of one label set shares them).
func (c *labelCache) pairs(desc *prometheus.Desc, values []string) []*dto.LabelPair {
	k := strings.Join(values, "\xff")
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[k]; ok {
		return p
	}
	if len(c.m) > 4096 { // instances come and go: forget the old ones now and then
		clear(c.m)
	}
	p := prometheus.MakeLabelPairs(desc, values)
	c.m[k] = p
	return p
}

// fastMetric is a const metric over cached label pairs.
type fastMetric struct {
	desc    *prometheus.Desc
	counter bool
	v       float64
	labels  []*dto.LabelPair
}

func fast(desc *prometheus.Desc, counter bool, v float64, labels []*dto.LabelPair) prometheus.Metric {
	return &fastMetric{desc: desc, counter: counter, v: v, labels: labels}
}

func (m *fastMetric) Desc() *prometheus.Desc { return m.desc }

func (m *fastMetric) Write(out *dto.Metric) error {
	out.Label = m.labels
	v := m.v
	if m.counter {
		out.Counter = &dto.Counter{Value: &v}
	} else {
		out.Gauge = &dto.Gauge{Value: &v}
	}
	return nil
}
