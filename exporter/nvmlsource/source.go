// Package nvmlsource is the exporter's NVML source: it reads every physical GPU, MIG instance
// and vGPU instance of a node through go-nvml's nvml.Interface and translates what NVML returns
// into samples. The simulator drives this same code through a simulated nvml.Interface.
package nvmlsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/schemas/hardware"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// IDScheme says how instance ids are formed.
type IDScheme int

const (
	// UUIDs: the GPU UUID, MIG UUID or vGPU instance UUID (real hardware, DESIGN.md).
	UUIDs IDScheme = iota
	// Indices: gpuN, gpuN/migM, gpuN/vgpuM in index order (the simulator).
	Indices
)

// Config configures a Source.
type Config struct {
	Node    string
	IDs     IDScheme
	Logger  *slog.Logger
	Metrics *Metrics // nil: counted but not registered
	// Rediscover is how often (in tick time) MIG layouts and active vGPUs are listed again.
	Rediscover time.Duration
	// BeforeRead, if set, is called at the start of every Read (a capture cuts its frames there).
	BeforeRead func(t time.Time) error
}

// Bounds on what NVML may report (a replayed capture may be corrupt): more is not a real node.
const (
	maxGPUs       = 1024
	maxMIGDevices = 64
)

// ErrLibraryNotFound is returned by Open when libnvidia-ml.so.1 cannot be loaded.
var ErrLibraryNotFound = errors.New("the NVML library libnvidia-ml.so.1 was not found (no NVIDIA driver on this machine?); use --source sim --scenario FILE to run without a GPU")

// Source samples one node through NVML. Read takes the window [t−interval, t): what the
// driver buffered since the previous tick.
type Source struct {
	lib    nvml.Interface
	cfg    Config
	m      *Metrics
	logger *slog.Logger

	mu           sync.Mutex // Read and PollSchedulerLogs
	gpus         []*gpuDev
	events       nvml.EventSet
	lastDiscover time.Time
	calls        int64 // NVML calls made, for calls-per-tick figures
}

var _ exporter.Source = (*Source)(nil)

type gpuDev struct {
	index    int
	dev      nvml.Device
	uuid     string
	model    string
	sms      uint32
	memTotal uint64

	gpmMu   sync.Mutex // GPM calls are serialized per device (NVML's GPM is not re-entrant per GPU)
	gpm     bool       // GPM supported (Hopper or newer)
	gpmMIG  bool       // nvmlGpmMigSampleGet present
	devGPM  *gpmTarget
	schedOK bool // nvmlDeviceGetVgpuSchedulerLog_v2 present

	unsupported map[string]bool // calls that returned NOT_SUPPORTED are not made again
	lastUtilTS  uint64
	lastVgpuTS  uint64
	lost        string // the call that found the GPU lost in the current tick
	xids        uint64
	lastXID     uint64

	mig   bool
	migs  []*migDev
	vgpus []*vgpuDev
	sched *schedLog
}

type migDev struct {
	index    int
	dev      nvml.Device
	uuid     string
	profile  string
	slices   uint32
	sms      uint32
	memTotal uint64
	gi       int
	gpm      *gpmTarget
}

type vgpuDev struct {
	index   int
	inst    nvml.VgpuInstance
	uuid    string
	profile string
	fb      uint64
	vmID    string
}

// Open initializes NVML and discovers the node's GPUs. now is the time of the first GPM
// samples (the first tick's window starts there).
func Open(lib nvml.Interface, cfg Config, now time.Time) (*Source, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Rediscover <= 0 {
		cfg.Rediscover = 10 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	s := &Source{lib: lib, cfg: cfg, m: cfg.Metrics, logger: cfg.Logger}
	if r := lib.Init(); r == nvml.ERROR_LIBRARY_NOT_FOUND {
		return nil, ErrLibraryNotFound
	} else if r != nvml.SUCCESS {
		return nil, fmt.Errorf("initializing NVML: %s", nvml.ErrorString(r))
	}
	n, r := lib.DeviceGetCount()
	s.count("nvmlDeviceGetCount")
	if r != nvml.SUCCESS {
		_ = lib.Shutdown()
		return nil, fmt.Errorf("counting GPUs through NVML: %s", nvml.ErrorString(r))
	}
	if n < 0 || n > maxGPUs {
		_ = lib.Shutdown()
		return nil, fmt.Errorf("NVML reports %d GPUs; expected 0 to %d", n, maxGPUs)
	}
	if s.has("nvmlEventSetCreate") {
		if set, r := lib.EventSetCreate(); s.ok(nil, "nvmlEventSetCreate", r) {
			s.events = set
		}
	}
	for i := 0; i < n; i++ {
		g := &gpuDev{index: i, unsupported: map[string]bool{}, sched: newSchedLog()}
		s.gpus = append(s.gpus, g)
		dev, r := lib.DeviceGetHandleByIndex(i)
		if !s.ok(g, "nvmlDeviceGetHandleByIndex", r) {
			g.lost = "nvmlDeviceGetHandleByIndex: " + nvml.ErrorString(r)
			s.logger.Warn("a GPU cannot be opened; the others are sampled", "gpu", i, "err", g.lost)
			continue
		}
		g.dev = dev
		s.describeGPU(g)
	}
	s.discover(now)
	for _, g := range s.gpus {
		s.primeGPM(g, now)
	}
	return s, nil
}

func (s *Source) describeGPU(g *gpuDev) {
	if u, r := g.dev.GetUUID(); s.ok(g, "nvmlDeviceGetUUID", r) {
		g.uuid = u
	}
	if name, r := g.dev.GetName(); s.ok(g, "nvmlDeviceGetName", r) {
		g.model = strings.TrimPrefix(name, "NVIDIA ")
	}
	if m, ok := hardware.Lookup(g.model); ok {
		g.sms = m.SMs
	} else if a, r := g.dev.GetAttributes(); s.ok(g, "nvmlDeviceGetAttributes", r) {
		// A model the catalog does not name (real names read "NVIDIA H100 80GB HBM3"): ask NVML.
		g.sms = a.MultiprocessorCount
	}
	if mem, r := g.dev.GetMemoryInfo(); s.ok(g, "nvmlDeviceGetMemoryInfo", r) {
		g.memTotal = mem.Total
	}
	if s.has("nvmlGpmQueryDeviceSupport") {
		if sup, r := g.dev.GpmQueryDeviceSupport(); s.ok(g, "nvmlGpmQueryDeviceSupport", r) {
			g.gpm = sup.IsSupportedDevice != 0
		}
	}
	g.gpmMIG = g.gpm && s.has("nvmlGpmMigSampleGet")
	g.schedOK = s.has("nvmlDeviceGetVgpuSchedulerLog_v2")
	if s.events != nil {
		r := g.dev.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, s.events)
		s.ok(g, "nvmlDeviceRegisterEvents", r)
	}
	s.logger.Info("GPU found", "gpu", g.index, "uuid", g.uuid, "model", g.model, "gpm", g.gpm,
		"vgpu_scheduler_log", g.schedOK)
}

// has says whether the loaded NVML exports a symbol: calling a missing one kills the process.
func (s *Source) has(symbol string) bool {
	return s.lib.Extensions().LookupSymbol(symbol) == nil
}

// Close shuts NVML down.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gpus {
		g.devGPM.free()
		for _, m := range g.migs {
			m.gpm.free()
		}
	}
	if s.events != nil {
		_ = s.events.Free()
	}
	if r := s.lib.Shutdown(); r != nvml.SUCCESS {
		return fmt.Errorf("shutting NVML down: %s", nvml.ErrorString(r))
	}
	return nil
}

// Calls is the number of NVML calls made so far (benchmarks divide it by ticks).
func (s *Source) Calls() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *Source) count(call string) {
	s.calls++
	s.m.calls.WithLabelValues(call).Inc()
}

// ok counts a call and says whether it succeeded. NOT_SUPPORTED turns the call off for that GPU;
// any other failure is counted by call; a lost GPU is remembered for the tick.
func (s *Source) ok(g *gpuDev, call string, r nvml.Return) bool {
	s.count(call)
	switch r {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED:
		if g != nil && !g.unsupported[call] {
			g.unsupported[call] = true
			s.logger.Info("NVML call not supported on this GPU; not called again", "gpu", g.index, "call", call)
		}
		return false
	}
	s.m.errors.WithLabelValues(call).Inc()
	if g != nil && (r == nvml.ERROR_GPU_IS_LOST || r == nvml.ERROR_RESET_REQUIRED || r == nvml.ERROR_UNINITIALIZED) && g.lost == "" {
		g.lost = call + ": " + nvml.ErrorString(r)
	}
	return false
}

func (g *gpuDev) can(call string) bool { return !g.unsupported[call] }

// discover lists each GPU's MIG instances and active vGPUs.
func (s *Source) discover(now time.Time) {
	s.lastDiscover = now
	for _, g := range s.gpus {
		if g.dev == nil {
			continue
		}
		s.discoverMIG(g, now)
		s.discoverVGPU(g)
	}
}

func (s *Source) discoverMIG(g *gpuDev, now time.Time) {
	g.mig = false
	if !g.can("nvmlDeviceGetMigMode") {
		return
	}
	cur, _, r := g.dev.GetMigMode()
	if !s.ok(g, "nvmlDeviceGetMigMode", r) || cur != nvml.DEVICE_MIG_ENABLE {
		return
	}
	g.mig = true
	maxCount, r := g.dev.GetMaxMigDeviceCount()
	if !s.ok(g, "nvmlDeviceGetMaxMigDeviceCount", r) {
		return
	}
	maxCount = min(max(maxCount, 0), maxMIGDevices)
	old := map[string]*migDev{}
	for _, m := range g.migs {
		old[m.uuid] = m
	}
	var migs []*migDev
	for i := 0; i < maxCount; i++ {
		md, r := g.dev.GetMigDeviceHandleByIndex(i)
		if r == nvml.ERROR_NOT_FOUND {
			s.count("nvmlDeviceGetMigDeviceHandleByIndex")
			continue // an empty slot of the layout
		}
		if !s.ok(g, "nvmlDeviceGetMigDeviceHandleByIndex", r) {
			continue
		}
		m := &migDev{index: len(migs), dev: md}
		if u, r := md.GetUUID(); s.ok(g, "nvmlDeviceGetUUID", r) {
			m.uuid = u
		}
		if prev, ok := old[m.uuid]; ok && prev.index == m.index {
			migs = append(migs, prev)
			continue
		}
		if name, r := md.GetName(); s.ok(g, "nvmlDeviceGetName", r) {
			m.profile = migProfile(name)
		}
		if a, r := md.GetAttributes(); s.ok(g, "nvmlDeviceGetAttributes", r) {
			m.sms, m.slices = a.MultiprocessorCount, a.GpuInstanceSliceCount
		}
		if mem, r := md.GetMemoryInfo(); s.ok(g, "nvmlDeviceGetMemoryInfo", r) {
			m.memTotal = mem.Total
		}
		if gi, r := md.GetGpuInstanceId(); s.ok(g, "nvmlDeviceGetGpuInstanceId", r) {
			m.gi = gi
		}
		if g.gpmMIG {
			m.gpm = s.newGPM(g)
			s.sampleGPM(g, m.gpm, m.gi, now)
		}
		migs = append(migs, m)
	}
	g.migs = migs
}

// migProfile takes the profile from a MIG device name ("NVIDIA A100-SXM4-40GB MIG 1g.5gb").
func migProfile(name string) string {
	if i := strings.LastIndex(name, "MIG "); i >= 0 {
		return strings.TrimSpace(name[i+len("MIG "):])
	}
	return name
}

func (s *Source) discoverVGPU(g *gpuDev) {
	if g.mig || !g.can("nvmlDeviceGetActiveVgpus") {
		return
	}
	insts, r := g.dev.GetActiveVgpus()
	if !s.ok(g, "nvmlDeviceGetActiveVgpus", r) {
		g.vgpus = nil
		return
	}
	vgpus := make([]*vgpuDev, 0, len(insts))
	for i, inst := range insts {
		v := &vgpuDev{index: i, inst: inst}
		if u, r := inst.GetUUID(); s.ok(g, "nvmlVgpuInstanceGetUUID", r) {
			v.uuid = u
		}
		if typ, r := inst.GetType(); s.ok(g, "nvmlVgpuInstanceGetType", r) {
			if name, r := typ.GetName(); s.ok(g, "nvmlVgpuTypeGetName", r) {
				v.profile = strings.TrimPrefix(name, "NVIDIA ")
			}
			if fb, r := typ.GetFramebufferSize(); s.ok(g, "nvmlVgpuTypeGetFramebufferSize", r) {
				v.fb = fb
			}
		}
		if vm, _, r := inst.GetVmID(); s.ok(g, "nvmlVgpuInstanceGetVmID", r) {
			v.vmID = vm
		}
		vgpus = append(vgpus, v)
	}
	g.vgpus = vgpus
}

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
	ns := exporter.NodeSamples{Node: s.cfg.Node}
	for _, g := range s.gpus {
		var st exporter.GPUState
		ns.Samples, st = s.readGPU(ns.Samples, g, t, interval)
		if st.Failed {
			s.m.gpuFailures.WithLabelValues(g.uuid).Inc()
		}
		ns.GPUs = append(ns.GPUs, st)
	}
	return []exporter.NodeSamples{ns}, nil
}

func (s *Source) drainEvents() {
	if s.events == nil {
		return
	}
	for range 1000 { // bounded: a storm of events must not stall the tick
		e, r := s.events.Wait(0)
		if r == nvml.ERROR_TIMEOUT {
			s.count("nvmlEventSetWait")
			return
		}
		if !s.ok(nil, "nvmlEventSetWait", r) {
			return
		}
		for _, g := range s.gpus {
			if g.dev != nil && g.dev == e.Device {
				if e.EventType&nvml.EventTypeXidCriticalError != 0 {
					g.xids++
					g.lastXID = e.EventData
					s.logger.Warn("XID error", "gpu", g.index, "uuid", g.uuid, "xid", e.EventData)
				}
			}
		}
	}
}

func (s *Source) readGPU(dst []*pb.Sample, g *gpuDev, t time.Time, interval time.Duration) ([]*pb.Sample, exporter.GPUState) {
	st := exporter.GPUState{Index: uint32(g.index), UUID: g.uuid, Model: g.model, MemTotal: g.memTotal,
		XIDs: g.xids, LastXID: g.lastXID, ActivityAvailable: true}
	if g.dev == nil {
		st.Failed, st.FailReason = true, g.lost
		return dst, st
	}
	g.lost = ""
	s.readDevice(g, &st)
	if g.lost != "" {
		st.Failed, st.FailReason = true, g.lost
		return dst, st
	}
	from := t.Add(-interval)
	base := pb.Sample{
		TsNs: uint64(from.UnixNano()), IntervalNs: uint64(interval), GpuUuid: g.uuid, GpuIndex: uint32(g.index),
		Model: g.model, PowerWatts: st.PowerWatts, GpuSmCount: g.sms, GpuMemTotalBytes: g.memTotal,
	}
	first := len(dst)
	switch {
	case g.mig:
		dst = s.readMIG(dst, g, &st, &base, t)
	case len(g.vgpus) > 0:
		dst = s.readVGPU(dst, g, &st, &base, from, t, interval)
	default:
		dst = s.readWhole(dst, g, &st, &base, t)
	}
	if g.lost != "" { // lost half-way: none of its instances are trusted this tick
		st.Failed, st.FailReason = true, g.lost
		return dst[:first], st
	}
	return dst, st
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
	if g.can("nvmlDeviceGetTotalEnergyConsumption") {
		if mj, r := d.GetTotalEnergyConsumption(); s.ok(g, "nvmlDeviceGetTotalEnergyConsumption", r) {
			st.EnergyJ = float64(mj) / 1000
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
	if s.cfg.IDs == Indices {
		if kind == "" {
			return fmt.Sprintf("gpu%d", g.index)
		}
		return fmt.Sprintf("gpu%d/%s%d", g.index, kind, index)
	}
	return uuid
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
		act := exporter.InstanceActivity{InstanceID: smp.InstanceId, Processes: procs}
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

// pollSchedulerLog reads the GPU's vGPU scheduler log. The driver keeps 200 entries, so it must
// be read at least 5×/s (PollSchedulerLogs does it between ticks longer than 200 ms).
func (s *Source) pollSchedulerLog(g *gpuDev, interval time.Duration) {
	log, r := g.dev.GetVgpuSchedulerLog_v2(nvml.VgpuSchedulerLogInfo_v2{})
	if !s.ok(g, "nvmlDeviceGetVgpuSchedulerLog_v2", r) {
		return
	}
	n := min(int(log.EntriesCount), len(log.LogEntries))
	g.sched.ingest(log.LogEntries[:n], int64(interval))
	s.m.lateSched.Add(float64(g.sched.late))
	g.sched.late = 0
}

// PollSchedulerLogs reads every vGPU GPU's scheduler log every 200 ms until ctx ends; run it
// when the sampling interval is longer than that.
func (s *Source) PollSchedulerLogs(ctx context.Context, interval time.Duration) {
	tk := time.NewTicker(200 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		s.mu.Lock()
		for _, g := range s.gpus {
			if g.dev != nil && len(g.vgpus) > 0 && g.schedOK && g.can("nvmlDeviceGetVgpuSchedulerLog_v2") {
				s.pollSchedulerLog(g, interval)
			}
		}
		s.mu.Unlock()
	}
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
	}
}
