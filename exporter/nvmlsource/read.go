package nvmlsource

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Read samples every GPU and instance for the window [t−interval, t); the samples are stamped
// t−interval. A GPU that fails is reported in its GPUState; the others are sampled.
func (s *Source) Read(ctx context.Context, t time.Time, interval time.Duration) ([]exporter.NodeSamples, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.BeforeRead != nil {
		if err := s.cfg.BeforeRead(t); err != nil {
			return nil, err
		}
	}
	s.drainEvents()
	if t.Sub(s.lastDiscover) >= s.cfg.Rediscover {
		s.discover(t)
	}
	ns := exporter.NodeSamples{Node: s.cfg.Node, GPUs: make([]exporter.GPUState, 0, len(s.gpus)),
		Samples: make([]*pb.Sample, 0, s.samplesSeen)}
	for _, g := range s.gpus {
		var st exporter.GPUState
		ns.Samples, st = s.readGPU(ns.Samples, g, t, interval)
		if st.Failed {
			s.m.gpuFailures.WithLabelValues(g.uuid).Inc()
		}
		ns.GPUs = append(ns.GPUs, st)
	}
	s.samplesSeen = len(ns.Samples)
	return []exporter.NodeSamples{ns}, nil
}

func (s *Source) readGPU(dst []*pb.Sample, g *gpuDev, t time.Time, interval time.Duration) ([]*pb.Sample, exporter.GPUState) {
	st := exporter.GPUState{Index: uint32(g.index), UUID: g.uuid, Model: g.model, PCIBusID: g.pciBusID, MemTotal: g.memTotal,
		XIDs: g.xids, LastXID: g.lastXID, ActivityAvailable: true}
	if g.dev == nil {
		st.Failed, st.FailReason = true, g.lost
		return dst, st
	}
	g.lost = ""
	s.readDevice(g, &st)
	if g.lost == "" {
		s.readHealth(g, &st)
	}
	if g.lost != "" {
		st.Failed, st.FailReason = true, g.lost
		return dst, st
	}
	from := t.Add(-interval)
	base := pb.Sample{
		TsNs: uint64(from.UnixNano()), IntervalNs: uint64(interval), GpuUuid: g.uuid, GpuIndex: uint32(g.index),
		Model: g.model, PowerWatts: st.PowerWatts, GpuSmCount: g.sms, GpuMemTotalBytes: g.memTotal,
	}
	g.energyFields(&base, from, t)
	// As many as the last tick had: one allocation, not append's doublings, at 10 ticks a second.
	st.Instances = make([]exporter.InstanceActivity, 0, g.instancesSeen)
	defer func() { g.instancesSeen = len(st.Instances) }()
	first := len(dst)
	sh, shared := s.sharedGPU(g)
	switch {
	case g.mig:
		dst = s.readMIG(dst, g, &st, &base, t)
	case len(g.vgpus) > 0:
		dst = s.readVGPU(dst, g, &st, &base, from, t, interval)
	case shared:
		dst = s.readShare(dst, g, sh, &st, &base)
	default:
		dst = s.readWhole(dst, g, &st, &base, t)
	}
	if g.lost != "" { // lost half-way: none of its instances are trusted this tick
		st.Failed, st.FailReason = true, g.lost
		g.energyPrevAt = time.Time{} // nor its counter: the next tick estimates its energy
		return dst[:first], st
	}
	return dst, st
}

// energyFields stamps the tick's counter readings on the GPU's base sample and keeps this one
// for the next tick. The previous reading is carried only if it was taken at this tick's start
// (from): after a skipped tick or a tick that lost the GPU, the increase would span time the
// sample does not cover, so the tick is left to the power estimate instead.
func (g *gpuDev) energyFields(base *pb.Sample, from, t time.Time) {
	base.EnergyMj, base.EnergyUnavailable = g.energyNow, g.energyNow == 0
	if g.energyNow > 0 && g.energyPrev > 0 && g.energyPrevAt.Equal(from) {
		base.EnergyPrevMj = g.energyPrev
	}
	g.energyPrev, g.energyPrevAt = g.energyNow, t
}

// readDevice reads the physical GPU's own figures.
func (s *Source) readDevice(g *gpuDev, st *exporter.GPUState) {
	d := g.dev
	if mem, r := d.GetMemoryInfo(); s.ok(g, "nvmlDeviceGetMemoryInfo", r) {
		st.MemUsed, st.MemTotal = mem.Used, mem.Total
	}
	if g.can("nvmlDeviceGetPowerUsage") {
		if mw, r := d.GetPowerUsage(); s.ok(g, "nvmlDeviceGetPowerUsage", r) {
			st.PowerWatts = float64(mw) / 1000
		}
	}
	g.energyNow = 0
	if g.can("nvmlDeviceGetTotalEnergyConsumption") {
		if mj, r := d.GetTotalEnergyConsumption(); s.ok(g, "nvmlDeviceGetTotalEnergyConsumption", r) {
			st.EnergyJ = float64(mj) / 1000
			g.energyNow = mj
		}
	}
	if g.can("nvmlDeviceGetClockInfo") {
		if mhz, r := d.GetClockInfo(nvml.CLOCK_SM); s.ok(g, "nvmlDeviceGetClockInfo", r) {
			st.SMClockHz = float64(mhz) * 1e6
		}
		if mhz, r := d.GetClockInfo(nvml.CLOCK_MEM); s.ok(g, "nvmlDeviceGetClockInfo", r) {
			st.MemClockHz = float64(mhz) * 1e6
		}
	}
	if g.can("nvmlDeviceGetTemperature") {
		if c, r := d.GetTemperature(nvml.TEMPERATURE_GPU); s.ok(g, "nvmlDeviceGetTemperature", r) {
			st.TempC = float64(c)
		}
	}
	if g.can("nvmlDeviceGetCurrentClocksEventReasons") {
		if mask, r := d.GetCurrentClocksEventReasons(); s.ok(g, "nvmlDeviceGetCurrentClocksEventReasons", r) {
			st.ThrottleReasons = mask
		}
	}
	if g.can("nvmlDeviceGetTotalEccErrors") {
		if n, r := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); s.ok(g, "nvmlDeviceGetTotalEccErrors", r) {
			st.ECCUncorrected = n
		}
		if n, r := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); s.ok(g, "nvmlDeviceGetTotalEccErrors", r) {
			st.ECCCorrected = n
		}
	}
	if g.can("nvmlDeviceGetSamples") {
		// Every utilization sample the driver buffered since the last read, not one per tick.
		vt, samples, r := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, g.lastUtilTS)
		if r == nvml.ERROR_NOT_FOUND { // no sample since the last read: not an error
			s.count("nvmlDeviceGetSamples")
		} else if s.ok(g, "nvmlDeviceGetSamples", r) {
			sum, n := 0.0, 0
			for _, smp := range samples {
				if smp.TimeStamp <= g.lastUtilTS && g.lastUtilTS != 0 {
					continue
				}
				v, ok := sampleValue(vt, smp.SampleValue)
				if !ok {
					continue
				}
				sum += v
				n++
				g.lastUtilTS = max(g.lastUtilTS, smp.TimeStamp)
			}
			if n > 0 {
				st.Utilization, st.UtilSamples = sum/float64(n)/100, n
			}
			s.m.utilSamples.Add(float64(n))
		}
	}
}

func (s *Source) id(g *gpuDev, kind string, index int, uuid string) string {
	if s.cfg.IDs != Indices {
		return uuid
	}
	k := instanceKey{kind, index}
	if id, ok := g.ids[k]; ok {
		return id
	}
	var id string
	if kind == "" {
		id = fmt.Sprintf("gpu%d", g.index)
	} else {
		id = fmt.Sprintf("gpu%d/%s%d", g.index, kind, index)
	}
	g.ids[k] = id
	return id
}

func (s *Source) processes(g *gpuDev, d nvml.Device) int {
	if !g.can("nvmlDeviceGetComputeRunningProcesses") {
		return 0
	}
	procs, r := d.GetComputeRunningProcesses()
	if !s.ok(g, "nvmlDeviceGetComputeRunningProcesses", r) {
		return 0
	}
	return len(procs)
}

func (s *Source) readWhole(dst []*pb.Sample, g *gpuDev, st *exporter.GPUState, base *pb.Sample, t time.Time) []*pb.Sample {
	smp := cloneBase(base)
	smp.Kind, smp.InstanceId = pb.Kind_KIND_GPU, s.id(g, "", 0, g.uuid)
	smp.SmCount, smp.MemTotalBytes, smp.MemUsedBytes = g.sms, st.MemTotal, st.MemUsed
	procs := s.processes(g, g.dev)
	smp.Attached = procs > 0
	act := exporter.InstanceActivity{InstanceID: smp.InstanceId, Processes: procs}
	if v, ok := s.readGPM(g, g.devGPM, -1, t); ok {
		smp.SmActive = v.sm
		act.HasGPM, act.SMOccupancy, act.TensorRatio, act.DRAMRatio = true, v.occupancy, v.tensor, v.dram
	} else {
		smp.SmActive = st.Utilization // whole GPU without GPM: the driver's utilization samples
	}
	st.Instances = append(st.Instances, act)
	return append(dst, smp)
}

func (s *Source) readMIG(dst []*pb.Sample, g *gpuDev, st *exporter.GPUState, base *pb.Sample, t time.Time) []*pb.Sample {
	if !g.gpmMIG {
		st.ActivityAvailable = false
	}
	for _, m := range g.migs {
		smp := cloneBase(base)
		smp.Kind, smp.InstanceId, smp.Profile = pb.Kind_KIND_MIG, s.id(g, "mig", m.index, m.uuid), m.profile
		smp.ComputeSlices, smp.SmCount, smp.MemTotalBytes = m.slices, m.sms, m.memTotal
		if mem, r := m.dev.GetMemoryInfo(); s.ok(g, "nvmlDeviceGetMemoryInfo", r) {
			smp.MemUsedBytes = mem.Used
		}
		procs := s.processes(g, m.dev)
		smp.Attached = procs > 0
		act := exporter.InstanceActivity{InstanceID: smp.InstanceId, Processes: procs,
			GPUInstanceID: uint32(max(m.gi, 0)), HasGPUInstanceID: m.giOK}
		if v, ok := s.readGPM(g, m.gpm, m.gi, t); ok {
			smp.SmActive = v.sm
			act.HasGPM, act.SMOccupancy, act.TensorRatio, act.DRAMRatio = true, v.occupancy, v.tensor, v.dram
		} else {
			// No GPM (before Hopper), or no GPM sample pair yet: the instance's own activity is
			// unknown, which attribution must not read as idle.
			smp.SmActiveUnavailable = true
		}
		st.Instances = append(st.Instances, act)
		dst = append(dst, smp)
	}
	return dst
}

func (s *Source) readVGPU(dst []*pb.Sample, g *gpuDev, st *exporter.GPUState, base *pb.Sample, from, t time.Time, interval time.Duration) []*pb.Sample {
	var tick schedTick
	haveLog := false
	if g.schedOK && g.can("nvmlDeviceGetVgpuSchedulerLog_v2") {
		s.pollSchedulerLog(g, interval)
		tick, haveLog = g.sched.window(from.UnixNano(), t.UnixNano()), true
	}
	// The driver's utilization samples: the figure where the scheduler log is missing, and
	// served beside it otherwise.
	util := s.vgpuUtilization(g)
	for _, v := range g.vgpus {
		smp := cloneBase(base)
		smp.Kind, smp.InstanceId, smp.Profile = pb.Kind_KIND_VGPU, s.id(g, "vgpu", v.index, v.uuid), v.profile
		smp.SmCount, smp.MemTotalBytes = g.sms, v.fb
		if fb, r := v.inst.GetFbUsage(); s.ok(g, "nvmlVgpuInstanceGetFbUsage", r) {
			smp.MemUsedBytes = fb
		}
		// A vGPU is attached once its VM's guest driver runs.
		if drv, r := v.inst.GetVmDriverVersion(); s.ok(g, "nvmlVgpuInstanceGetVmDriverVersion", r) {
			smp.Attached = drv != "" && drv != "Not Available"
		}
		if haveLog {
			run := tick.run[uint32(v.index)]
			smp.Vgpu = &pb.VgpuSchedule{RunNs: uint64(run), SwitchNs: uint64(tick.switching), WaitsNs: tick.waits[uint32(v.index)]}
			smp.SmActive = float64(run) / float64(interval)
			// Part of the window's log was overwritten unread: its run time is unknown, which
			// attribution must not read as idle (no efficiency, no waste from this tick).
			smp.SmActiveUnavailable = tick.lost
		}
		act := exporter.InstanceActivity{InstanceID: smp.InstanceId, VMID: v.vmID, VGPUType: v.profile}
		if h, ok := VgpuHandle(v.inst); ok {
			act.DriverSMUtil, act.HasDriverSMUtil = util[h]
			if !haveLog {
				smp.SmActive = act.DriverSMUtil
			}
		}
		st.Instances = append(st.Instances, act)
		dst = append(dst, smp)
	}
	return dst
}

// vgpuUtilization reads GetVgpuUtilization: the fallback where the scheduler log is missing.
func (s *Source) vgpuUtilization(g *gpuDev) map[uint32]float64 {
	out := map[uint32]float64{}
	if !g.can("nvmlDeviceGetVgpuUtilization") {
		return out
	}
	vt, samples, r := g.dev.GetVgpuUtilization(g.lastVgpuTS)
	if r == nvml.ERROR_NOT_FOUND { // no sample since the last read
		s.count("nvmlDeviceGetVgpuUtilization")
		return out
	}
	if !s.ok(g, "nvmlDeviceGetVgpuUtilization", r) {
		return out
	}
	for _, smp := range samples {
		if v, ok := sampleValue(vt, smp.SmUtil); ok {
			out[smp.VgpuInstance] = v / 100
		}
		g.lastVgpuTS = max(g.lastVgpuTS, smp.TimeStamp)
	}
	return out
}

// VgpuHandle is the numeric NVML handle of a vGPU instance (what utilization samples name).
func VgpuHandle(inst nvml.VgpuInstance) (uint32, bool) {
	if h, ok := inst.(interface{ Handle() uint32 }); ok {
		return h.Handle(), true
	}
	v := reflect.ValueOf(inst)
	switch v.Kind() {
	case reflect.Uint32, reflect.Uint, reflect.Uint64:
		return uint32(v.Uint()), true
	}
	return 0, false
}

func cloneBase(b *pb.Sample) *pb.Sample {
	return &pb.Sample{
		TsNs: b.TsNs, IntervalNs: b.IntervalNs, GpuUuid: b.GpuUuid, GpuIndex: b.GpuIndex, Model: b.Model,
		PowerWatts: b.PowerWatts, GpuSmCount: b.GpuSmCount, GpuMemTotalBytes: b.GpuMemTotalBytes,
		EnergyMj: b.EnergyMj, EnergyUnavailable: b.EnergyUnavailable, EnergyPrevMj: b.EnergyPrevMj,
	}
}
