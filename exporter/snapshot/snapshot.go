// Package snapshot keeps the latest sample of every instance and serves it to Prometheus. A
// scrape only reads the snapshot: it never calls into the source (NVML).
package snapshot

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Snapshot is a Sink and a prometheus.Collector.
type Snapshot struct {
	mu     sync.RWMutex
	latest map[key]*pb.Sample
	// waits accumulates vGPU waits per instance so that the counters keep increasing between scrapes.
	waits map[key]*waitTotals
}

type key struct{ node, instance string }

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
)

var _ exporter.Sink = (*Snapshot)(nil)
var _ prometheus.Collector = (*Snapshot)(nil)

// New returns an empty snapshot.
func New() *Snapshot {
	return &Snapshot{latest: map[key]*pb.Sample{}, waits: map[key]*waitTotals{}}
}

// Write replaces each instance's latest sample.
func (s *Snapshot) Write(_ context.Context, _ time.Time, samples []exporter.NodeSamples) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range samples {
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
		descVRun, descVWaits, descVWaitSum, descVSwitch, descGPUInfo, descGPUPower, descInstances} {
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
		ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, il...)
		ch <- prometheus.MustNewConstMetric(descAttached, prometheus.GaugeValue, b2f(smp.Attached), il...)
		ch <- prometheus.MustNewConstMetric(descSM, prometheus.GaugeValue, smp.SmActive, il...)
		ch <- prometheus.MustNewConstMetric(descMemUsed, prometheus.GaugeValue, float64(smp.MemUsedBytes), il...)
		ch <- prometheus.MustNewConstMetric(descMemTotal, prometheus.GaugeValue, float64(smp.MemTotalBytes), il...)
		ch <- prometheus.MustNewConstMetric(descLastTS, prometheus.GaugeValue, float64(smp.TsNs)/1e9, il...)
		gl := []string{k.node, gpu, smp.GpuUuid, smp.Model}
		if w := s.waits[k]; w != nil {
			ch <- prometheus.MustNewConstMetric(descVRun, prometheus.CounterValue, w.run, il...)
			ch <- prometheus.MustNewConstMetric(descVWaits, prometheus.CounterValue, float64(w.count), il...)
			ch <- prometheus.MustNewConstMetric(descVWaitSum, prometheus.CounterValue, w.sum, il...)
		}
		gk := [2]string{k.node, smp.GpuUuid}
		if gpus[gk] {
			continue
		}
		gpus[gk] = true
		ch <- prometheus.MustNewConstMetric(descGPUInfo, prometheus.GaugeValue, 1,
			append(gl, strconv.FormatUint(uint64(smp.GpuSmCount), 10), strconv.FormatUint(smp.GpuMemTotalBytes, 10))...)
		ch <- prometheus.MustNewConstMetric(descGPUPower, prometheus.GaugeValue, smp.PowerWatts, gl...)
		if smp.Vgpu != nil {
			ch <- prometheus.MustNewConstMetric(descVSwitch, prometheus.GaugeValue, float64(smp.Vgpu.SwitchNs)/float64(max(1, smp.IntervalNs)), gl...)
		}
	}
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
