package sim

import (
	"crypto/sha1"
	"fmt"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The simulated NVML of one node. Every function the nvml source calls is wired to the scenario
// model, so the source's translation code runs unchanged on simulated GPUs. Simulated GPUs of
// every model report GPM, including A100s (real A100s do not have it: there the nvml source
// reports MIG activity as unavailable); the scenario's sm figures need a path to the samples.

// schedLogSize is the driver's vGPU scheduler log capacity (NVML_SCHEDULER_SW_MAX_LOG_ENTRIES).
const schedLogSize = 200

// simulated clocks: the scenario model has none, so a fixed application clock stands in.
const (
	simSMClockMHz  = 1410
	simMemClockMHz = 1215
)

// world is one node's simulated NVML, standing in the current tick [d, d+interval).
type world struct {
	n        *node
	start    time.Time
	interval time.Duration
	d        time.Duration // offset of the current tick
	lib      library
}

func newWorld(n *node, start time.Time, interval time.Duration) *world {
	w := &world{n: n, start: start, interval: interval, d: -interval}
	devices := make([]nvml.Device, len(n.gpus))
	for i, g := range n.gpus {
		devices[i] = w.device(g)
	}
	w.lib = library{&mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devices), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devices) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devices[i], nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
		EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) {
			return eventSet{&mock.EventSet{
				WaitFunc: func(uint32) (nvml.EventData, nvml.Return) { return w.nextEvent(devices) },
				FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			}}, nvml.SUCCESS
		},
		GpmSampleAllocFunc:             func() (nvml.GpmSample, nvml.Return) { return &gpmSample{}, nvml.SUCCESS },
		GpmMetricsGetFunc:              w.gpmMetrics,
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return ok(simDriverVersion) },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return ok(simCUDAVersion) },
	}}
	return w
}

// advance moves the world to tick d: the vGPU schedulers run through [d, d+interval) whether or
// not anyone reads them (an exporter outage does not stop the GPU).
func (w *world) advance(d time.Duration) {
	w.d = d
	for _, g := range w.n.gpus {
		g.utilLog = append(g.utilLog, nvml.Sample{TimeStamp: uint64(w.start.Add(d).UnixMicro())})
		putUint32(&g.utilLog[len(g.utilLog)-1].SampleValue, uint32(math.Round(100*min(1, g.activity(d)))))
		if len(g.utilLog) > 100 {
			g.utilLog = g.utilLog[len(g.utilLog)-100:]
		}
		g.energyExact += g.power(d) * float64(w.interval) / float64(time.Millisecond)
		g.energyMJ = uint64(g.energyExact)
		g.advanceHealth(d, w.interval)
		if g.sched == nil {
			continue
		}
		g.slices = g.sched.slices(g.slices[:0], d, w.interval, g.busy(d), g.busy(d+w.interval))
		for _, s := range g.slices {
			g.runTotal[s.vgpu] += s.runEnd - s.start
			g.preempt[s.vgpu] += s.switchEnd - s.runEnd
			g.schedNext = append(g.schedNext, nvml.VgpuSchedulerLogEntry_v2{
				Timestamp:                uint64(w.start.Add(s.runEnd).UnixNano()),
				TimeRunTotal:             uint64(g.runTotal[s.vgpu]),
				TimeRun:                  uint64(s.runEnd - s.start),
				SwRunlistId:              uint32(s.vgpu),
				TargetTimeSlice:          uint64(g.sched.timeslice),
				CumulativePreemptionTime: uint64(g.preempt[s.vgpu]),
			})
		}
	}
}

// write puts the scheduler log entries of runs that ended by d (offset from the start) into the
// driver's ring of schedLogSize entries, so that a read between ticks sees the log as it
// stands then, and a read that comes too late finds it wrapped.
// d < 0 writes them all: a read at a tick's end sees the whole tick, as it always has (a run
// that reaches past the tick's end is logged with it).
func (w *world) write(d time.Duration) {
	limit := uint64(math.MaxUint64)
	if d >= 0 {
		limit = uint64(w.start.Add(d).UnixNano())
	}
	for _, g := range w.n.gpus {
		rest := g.schedNext[:0]
		for _, e := range g.schedNext {
			if e.Timestamp <= limit {
				g.schedLog = append(g.schedLog, e)
			} else {
				rest = append(rest, e)
			}
		}
		g.schedNext = rest
		if len(g.schedLog) > schedLogSize {
			g.schedLog = append(g.schedLog[:0], g.schedLog[len(g.schedLog)-schedLogSize:]...)
		}
	}
}

// nextEvent is the event set's next event: the oldest XID a GPU has reported and the exporter
// has not read, or a timeout when there is none (the exporter drains the set at each tick).
func (w *world) nextEvent(devices []nvml.Device) (nvml.EventData, nvml.Return) {
	for i, g := range w.n.gpus {
		if q := g.health.xids; len(q) > 0 {
			g.health.xids = q[1:]
			return nvml.EventData{Device: devices[i], EventType: nvml.EventTypeXidCriticalError, EventData: q[0]}, nvml.SUCCESS
		}
	}
	return nvml.EventData{}, nvml.ERROR_TIMEOUT
}

// now is the world's clock as NVML sees it: the end of the current tick.
func (w *world) now() time.Duration { return w.d + w.interval }

func putUint32(b *[8]byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func ok[T any](v T) (T, nvml.Return) { return v, nvml.SUCCESS }

func procs(attached bool) []nvml.ProcessInfo {
	if attached {
		return []nvml.ProcessInfo{{Pid: 4242}}
	}
	return []nvml.ProcessInfo{}
}

// device wires one simulated physical GPU.
func (w *world) device(g *gpu) nvml.Device {
	kind := g.instances[0].kind
	dev := &mock.Device{
		GetUUIDFunc:    func() (string, nvml.Return) { return ok(g.uuid) },
		GetNameFunc:    func() (string, nvml.Return) { return ok("NVIDIA " + g.model.Name) },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) { return ok(pciInfo(g.index)) },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			if g.faulty(scenario.FaultGPULost) { // the first call of a tick: the source gives the tick up
				return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
			}
			used := g.memUsed(w.d)
			return ok(nvml.Memory{Total: g.model.MemoryBytes, Used: used, Free: g.model.MemoryBytes - used})
		},
		GetPowerUsageFunc:             func() (uint32, nvml.Return) { return ok(uint32(math.Round(g.power(w.d) * 1000))) },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) { return ok(g.energyMJ) },
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			if c == nvml.CLOCK_MEM {
				return ok[uint32](simMemClockMHz)
			}
			return ok(g.smClockMHz())
		},
		GetTemperatureFunc:               func(nvml.TemperatureSensors) (uint32, nvml.Return) { return ok(g.tempC(w.d)) },
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) { return ok(g.clocksEventReasons(w.d)) },
		GetFieldValuesFunc:               func(v []nvml.FieldValue) nvml.Return { return g.fieldValues(w.d, v) },
		GetMemoryInfo_v2Func:             func() (nvml.Memory_v2, nvml.Return) { return ok(g.memoryV2(w.d)) },
		GetUtilizationRatesFunc:          func() (nvml.Utilization, nvml.Return) { return g.utilizationRates(w.d) },
		GetEncoderUtilizationFunc:        g.codecUtilization,
		GetDecoderUtilizationFunc:        g.codecUtilization,
		GetViolationStatusFunc: func(p nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
			return g.violationStatus(w, p)
		},
		GetTotalEccErrorsFunc: func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) { return ok[uint64](0) },
		GetSamplesFunc: func(st nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			if st != nvml.GPU_UTILIZATION_SAMPLES {
				return 0, nil, nvml.ERROR_NOT_SUPPORTED
			}
			var out []nvml.Sample
			for _, s := range g.utilLog {
				if s.TimeStamp > last {
					out = append(out, s)
				}
			}
			return nvml.VALUE_TYPE_UNSIGNED_INT, out, nvml.SUCCESS
		},
		RegisterEventsFunc: func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS },
		GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
			if g.noGPM {
				return ok(nvml.GpmSupport{IsSupportedDevice: 0})
			}
			return ok(nvml.GpmSupport{IsSupportedDevice: 1})
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			if g.shared() {
				return ok(g.shareProcesses(w.d))
			}
			_, attached := g.instances[0].attachedAt(w.d)
			return ok(procs(kind == pb.Kind_KIND_GPU && attached))
		},
		GetProcessUtilizationFunc: func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			if !g.shared() {
				return nil, nvml.ERROR_NOT_SUPPORTED // only shared GPUs are asked
			}
			return g.processUtilization(w.d, uint64(w.start.Add(w.now()).UnixMicro()), last)
		},
		GetMigModeFunc: func() (int, int, nvml.Return) {
			if len(g.model.MIG) == 0 {
				return 0, 0, nvml.ERROR_NOT_SUPPORTED
			}
			if kind == pb.Kind_KIND_MIG {
				return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
			}
			return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS
		},
		GetMaxMigDeviceCountFunc: func() (int, nvml.Return) { return ok(7) },
		GpmSampleGetFunc: func(s nvml.GpmSample) nvml.Return {
			return s.(*gpmSample).take(g, -1, w.now())
		},
		GpmMigSampleGetFunc: func(gi int, s nvml.GpmSample) nvml.Return {
			if gi < 0 || gi >= len(g.instances) {
				return nvml.ERROR_NOT_FOUND
			}
			return s.(*gpmSample).take(g, gi, w.now())
		},
	}
	migs := make([]nvml.Device, 0, len(g.instances))
	vgpus := make([]nvml.VgpuInstance, 0, len(g.instances))
	for m, inst := range g.instances {
		switch inst.kind {
		case pb.Kind_KIND_MIG:
			migs = append(migs, w.migDevice(g, m, inst))
		case pb.Kind_KIND_VGPU:
			vgpus = append(vgpus, w.vgpu(g, m, inst))
		}
	}
	dev.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return migs[i], nvml.SUCCESS
	}
	dev.GetActiveVgpusFunc = func() ([]nvml.VgpuInstance, nvml.Return) {
		if kind != pb.Kind_KIND_VGPU {
			return nil, nvml.ERROR_NOT_SUPPORTED // not a vGPU host GPU
		}
		return ok(vgpus)
	}
	dev.GetVgpuSchedulerLog_v2Func = func(nvml.VgpuSchedulerLogInfo_v2) (nvml.VgpuSchedulerLogInfo_v2, nvml.Return) {
		var info nvml.VgpuSchedulerLogInfo_v2
		if g.sched == nil {
			return info, nvml.ERROR_NOT_SUPPORTED
		}
		info.Timeslice = uint32(g.sched.timeslice / time.Microsecond)
		info.EntriesCount = uint32(copy(info.LogEntries[:], g.schedLog))
		return info, nvml.SUCCESS
	}
	dev.GetVgpuUtilizationFunc = func(last uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
		if g.sched == nil {
			return 0, nil, nvml.ERROR_NOT_SUPPORTED
		}
		ts := uint64(w.start.Add(w.d).UnixMicro())
		if ts <= last {
			return nvml.VALUE_TYPE_UNSIGNED_INT, nil, nvml.SUCCESS
		}
		out := make([]nvml.VgpuInstanceUtilizationSample, len(g.instances))
		for i := range g.instances {
			out[i] = nvml.VgpuInstanceUtilizationSample{VgpuInstance: uint32(i + 1), TimeStamp: ts}
			run := time.Duration(0)
			for _, s := range g.slices {
				if s.vgpu == i {
					run += s.runEnd - s.start
				}
			}
			putUint32(&out[i].SmUtil, uint32(math.Round(100*float64(run)/float64(w.interval))))
		}
		return nvml.VALUE_TYPE_UNSIGNED_INT, out, nvml.SUCCESS
	}
	return device{dev}
}

func (w *world) migDevice(g *gpu, m int, inst *instance) nvml.Device {
	return device{&mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return ok(inst.uuid) },
		GetNameFunc: func() (string, nvml.Return) { return ok("NVIDIA " + g.model.Name + " MIG " + inst.profile) },
		GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
			return ok(nvml.DeviceAttributes{MultiprocessorCount: inst.sms, GpuInstanceSliceCount: inst.slices,
				ComputeInstanceSliceCount: inst.slices, MemorySizeMB: inst.memTotal >> 20})
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			used := inst.memUsed(w.d)
			return ok(nvml.Memory{Total: inst.memTotal, Used: used, Free: inst.memTotal - used})
		},
		GetGpuInstanceIdFunc: func() (int, nvml.Return) { return ok(m) },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			_, attached := inst.attachedAt(w.d)
			return ok(procs(attached))
		},
	}}
}

// simVgpu is a simulated vGPU instance with the numeric handle utilization samples name.
type simVgpu struct {
	*mock.VgpuInstance
	handle uint32
}

// Handle is the vGPU instance's NVML handle.
func (v simVgpu) Handle() uint32 { return v.handle }

func (w *world) vgpu(g *gpu, m int, inst *instance) nvml.VgpuInstance {
	typ := vgpuType{&mock.VgpuTypeId{
		GetNameFunc:            func() (string, nvml.Return) { return ok(inst.profile) },
		GetFramebufferSizeFunc: func() (uint64, nvml.Return) { return ok(inst.memTotal) },
	}}
	return simVgpu{handle: uint32(m + 1), VgpuInstance: &mock.VgpuInstance{
		GetUUIDFunc:    func() (string, nvml.Return) { return ok(inst.uuid) },
		GetTypeFunc:    func() (nvml.VgpuTypeId, nvml.Return) { return ok[nvml.VgpuTypeId](typ) },
		GetFbUsageFunc: func() (uint64, nvml.Return) { return ok(inst.memUsed(w.d)) },
		GetVmIDFunc: func() (string, nvml.VgpuVmIdType, nvml.Return) {
			return derivedUUID("", g.uuid, inst.id+"/vm"), nvml.VGPU_VM_ID_UUID, nvml.SUCCESS
		},
		GetVmDriverVersionFunc: func() (string, nvml.Return) {
			if _, attached := inst.attachedAt(w.d); attached {
				return ok("550.54.14")
			}
			return ok("Not Available")
		},
	}}
}

// gpmSample is a simulated GPM sample: which target it was taken of, and when.
type gpmSample struct {
	g  *gpu
	gi int // -1: the whole device
	at time.Duration
}

func (s *gpmSample) take(g *gpu, gi int, at time.Duration) nvml.Return {
	s.g, s.gi, s.at = g, gi, at
	return nvml.SUCCESS
}

func (s *gpmSample) Free() nvml.Return { return nvml.SUCCESS }

func (s *gpmSample) Get(nvml.Device) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }

func (s *gpmSample) MigGet(nvml.Device, int) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }

// gpmMetrics computes GPM metrics between two samples: the mean of the target's per-tick
// activity over the ticks between them (one tick in steady state). Tensor and DRAM activity are
// not in the scenario model and are reported as 0.
func (w *world) gpmMetrics(req *nvml.GpmMetricsGetType) nvml.Return {
	s1, ok1 := req.Sample1.(*gpmSample)
	s2, ok2 := req.Sample2.(*gpmSample)
	if !ok1 || !ok2 || s1.g == nil || s1.g != s2.g || s1.gi != s2.gi || s2.at <= s1.at {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	g := s1.g
	act := func(d time.Duration) float64 {
		if s1.gi < 0 {
			if g.instances[0].kind == pb.Kind_KIND_GPU {
				return g.instances[0].sm(d)
			}
			return g.activity(d)
		}
		return g.instances[s1.gi].sm(d)
	}
	var v float64
	if s2.at-s1.at == w.interval {
		v = act(s1.at)
	} else {
		n := 0
		for d := s1.at; d < s2.at; d += w.interval {
			v += act(d)
			n++
		}
		v /= float64(n)
	}
	for i := 0; i < int(req.NumMetrics) && i < len(req.Metrics); i++ {
		m := &req.Metrics[i]
		m.NvmlReturn = uint32(nvml.SUCCESS)
		switch nvml.GpmMetricId(m.MetricId) {
		case nvml.GPM_METRIC_SM_UTIL, nvml.GPM_METRIC_SM_OCCUPANCY:
			m.Value = v * 100
		default:
			m.Value = 0
		}
	}
	return nvml.SUCCESS
}

// pciBuses are the PCI buses of an 8-GPU HGX board's GPUs (as on DGX H100), in index order.
var pciBuses = [8]uint32{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}

// pciInfo is the PCI address of the node's GPU i, as NVML's nvmlDeviceGetPciInfo_v3 fills it:
// the buses of an HGX board, GPUs beyond 8 on the next PCI domains. Distinct per GPU of a node.
func pciInfo(i int) nvml.PciInfo {
	p := nvml.PciInfo{Domain: uint32(i / len(pciBuses)), Bus: pciBuses[i%len(pciBuses)]}
	putCString(p.BusId[:], fmt.Sprintf("%08X:%02X:%02X.0", p.Domain, p.Bus, p.Device))
	putCString(p.BusIdLegacy[:], fmt.Sprintf("%04X:%02X:%02X.0", p.Domain, p.Bus, p.Device))
	return p
}

// putCString writes s NUL-terminated into a C char array (cut to fit).
func putCString(dst []int8, s string) {
	n := min(len(s), len(dst)-1)
	for i := range n {
		dst[i] = int8(s[i])
	}
	dst[n] = 0
}

// derivedUUID derives a stable UUID in NVML's format for a simulated MIG or vGPU instance.
func derivedUUID(prefix, gpuUUID, id string) string {
	h := sha1.Sum([]byte(gpuUUID + "/" + id))
	u := fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	if prefix != "" {
		return prefix + "-" + u
	}
	return u
}
