package capture

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
)

// Recorder wraps an nvml.Interface and records every call the nvml source makes through it.
// Only the functions the nvml source calls are recorded; the rest pass through unrecorded.
type Recorder struct {
	w        *Writer
	interval time.Duration
	mu       sync.Mutex
	frame    *Frame
	ticks    int
	err      error
	devs     map[nvml.Device]*recDevice // underlying handle → its wrapper (events name devices)
}

// NewRecorder records into w. Calls before the first tick (Open) form the first frame; the
// nvml source must be opened one interval before its first tick (its first GPM window).
func NewRecorder(w *Writer, interval time.Duration) *Recorder {
	return &Recorder{w: w, interval: interval, frame: &Frame{}, devs: map[nvml.Device]*recDevice{}}
}

// Library wraps lib: give the result to nvmlsource.Open.
func (r *Recorder) Library(lib nvml.Interface) nvml.Interface { return &recLib{Interface: lib, r: r} }

func (r *Recorder) add(obj, fn string, ret nvml.Return, values ...any) {
	var raw json.RawMessage
	if len(values) > 0 {
		b, err := json.Marshal(values)
		if err != nil {
			r.mu.Lock()
			r.err = fmt.Errorf("recording %s.%s: %w", obj, fn, err)
			r.mu.Unlock()
			return
		}
		raw = b
	}
	r.mu.Lock()
	r.frame.Calls = append(r.frame.Calls, Call{Obj: obj, Fn: fn, Ret: int32(ret), Values: raw})
	r.mu.Unlock()
}

// flush writes the current frame and starts the next.
func (r *Recorder) flush(next Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if err := r.w.WriteFrame(r.frame); err != nil {
		return err
	}
	r.frame = &next
	return nil
}

// BeginTick ends the current frame (Open's calls, or the previous tick's) and starts the frame
// of tick t. Give it to the nvml source as Config.BeforeRead.
func (r *Recorder) BeginTick(t time.Time) error {
	r.mu.Lock()
	if r.ticks == 0 {
		r.frame.TNs = t.Add(-r.interval).UnixNano() // when Open was told it was
	}
	r.ticks++
	r.mu.Unlock()
	return r.flush(Frame{Tick: true, TNs: t.UnixNano()})
}

// Close writes the last frame.
func (r *Recorder) Close() error {
	if err := r.flush(Frame{}); err != nil {
		return err
	}
	return r.w.Close()
}

// recorded records a call on obj that returned v: recorded[T](r, obj, fn)(the call).
func recorded[T any](r *Recorder, obj, fn string) func(v T, ret nvml.Return) (T, nvml.Return) {
	return func(v T, ret nvml.Return) (T, nvml.Return) {
		r.add(obj, fn, ret, v)
		return v, ret
	}
}

type recLib struct {
	nvml.Interface
	r *Recorder
}

func (l *recLib) Init() nvml.Return {
	ret := l.Interface.Init()
	l.r.add("lib", "Init", ret)
	return ret
}
func (l *recLib) Shutdown() nvml.Return {
	ret := l.Interface.Shutdown()
	l.r.add("lib", "Shutdown", ret)
	return ret
}
func (l *recLib) DeviceGetCount() (int, nvml.Return) {
	return recorded[int](l.r, "lib", "DeviceGetCount")(l.Interface.DeviceGetCount())
}
func (l *recLib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := l.Interface.DeviceGetHandleByIndex(i)
	obj := fmt.Sprintf("gpu%d", i)
	l.r.add("lib", fmt.Sprintf("DeviceGetHandleByIndex:%d", i), ret, obj)
	if ret != nvml.SUCCESS {
		return d, ret
	}
	return l.r.device(d, obj), ret
}
func (l *recLib) Extensions() nvml.ExtendedInterface {
	return recExt{ExtendedInterface: l.Interface.Extensions(), r: l.r}
}
func (l *recLib) EventSetCreate() (nvml.EventSet, nvml.Return) {
	set, ret := l.Interface.EventSetCreate()
	l.r.add("lib", "EventSetCreate", ret)
	if ret != nvml.SUCCESS {
		return set, ret
	}
	return &recEvents{EventSet: set, r: l.r}, ret
}
func (l *recLib) GpmSampleAlloc() (nvml.GpmSample, nvml.Return) {
	s, ret := l.Interface.GpmSampleAlloc()
	l.r.add("lib", "GpmSampleAlloc", ret)
	return s, ret
}
func (l *recLib) SystemGetDriverVersion() (string, nvml.Return) {
	return recorded[string](l.r, "lib", "SystemGetDriverVersion")(l.Interface.SystemGetDriverVersion())
}
func (l *recLib) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return recorded[int](l.r, "lib", "SystemGetCudaDriverVersion")(l.Interface.SystemGetCudaDriverVersion())
}
func (l *recLib) GpmMetricsGet(req *nvml.GpmMetricsGetType) nvml.Return {
	ret := l.Interface.GpmMetricsGet(req)
	l.r.add("lib", "GpmMetricsGet", ret, gpmMetrics(req))
	return ret
}

func gpmMetrics(req *nvml.GpmMetricsGetType) []GPMMetric {
	n := min(int(req.NumMetrics), len(req.Metrics))
	out := make([]GPMMetric, n)
	for i := range n {
		m := req.Metrics[i]
		out[i] = GPMMetric{ID: m.MetricId, Ret: m.NvmlReturn, Value: m.Value}
	}
	return out
}

type recExt struct {
	nvml.ExtendedInterface
	r *Recorder
}

func (e recExt) LookupSymbol(name string) error {
	err := e.ExtendedInterface.LookupSymbol(name)
	ret := nvml.SUCCESS
	if err != nil {
		ret = nvml.ERROR_FUNCTION_NOT_FOUND
	}
	e.r.add("lib", "LookupSymbol:"+name, ret)
	return err
}

type recEvents struct {
	nvml.EventSet
	r *Recorder
}

func (e *recEvents) Wait(timeout uint32) (nvml.EventData, nvml.Return) {
	d, ret := e.EventSet.Wait(timeout)
	ed := Event{EventType: d.EventType, EventData: d.EventData, GI: d.GpuInstanceId, CI: d.ComputeInstanceId}
	e.r.mu.Lock()
	if w, ok := e.r.devs[d.Device]; ok && d.Device != nil {
		ed.Device = w.obj
		d.Device = w
	}
	e.r.mu.Unlock()
	e.r.add("events", "Wait", ret, ed)
	return d, ret
}

func (e *recEvents) Free() nvml.Return { return e.EventSet.Free() }

func (r *Recorder) device(d nvml.Device, obj string) *recDevice {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.devs[d]; ok {
		return w
	}
	w := &recDevice{Device: d, r: r, obj: obj}
	r.devs[d] = w
	return w
}

type recDevice struct {
	nvml.Device
	r   *Recorder
	obj string
}

func (d *recDevice) GetUUID() (string, nvml.Return) {
	return recorded[string](d.r, d.obj, "GetUUID")(d.Device.GetUUID())
}
func (d *recDevice) GetName() (string, nvml.Return) {
	return recorded[string](d.r, d.obj, "GetName")(d.Device.GetName())
}
func (d *recDevice) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	return recorded[nvml.PciInfo](d.r, d.obj, "GetPciInfo")(d.Device.GetPciInfo())
}
func (d *recDevice) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	return recorded[nvml.Memory](d.r, d.obj, "GetMemoryInfo")(d.Device.GetMemoryInfo())
}
func (d *recDevice) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	return recorded[nvml.GpmSupport](d.r, d.obj, "GpmQueryDeviceSupport")(d.Device.GpmQueryDeviceSupport())
}
func (d *recDevice) RegisterEvents(types uint64, set nvml.EventSet) nvml.Return {
	if w, ok := set.(*recEvents); ok {
		set = w.EventSet
	}
	ret := d.Device.RegisterEvents(types, set)
	d.r.add(d.obj, "RegisterEvents", ret)
	return ret
}
func (d *recDevice) GetPowerUsage() (uint32, nvml.Return) {
	return recorded[uint32](d.r, d.obj, "GetPowerUsage")(d.Device.GetPowerUsage())
}
func (d *recDevice) GetTotalEnergyConsumption() (uint64, nvml.Return) {
	return recorded[uint64](d.r, d.obj, "GetTotalEnergyConsumption")(d.Device.GetTotalEnergyConsumption())
}
func (d *recDevice) GetClockInfo(c nvml.ClockType) (uint32, nvml.Return) {
	return recorded[uint32](d.r, d.obj, fmt.Sprintf("GetClockInfo:%d", c))(d.Device.GetClockInfo(c))
}
func (d *recDevice) GetTemperature(s nvml.TemperatureSensors) (uint32, nvml.Return) {
	return recorded[uint32](d.r, d.obj, fmt.Sprintf("GetTemperature:%d", s))(d.Device.GetTemperature(s))
}
func (d *recDevice) GetCurrentClocksEventReasons() (uint64, nvml.Return) {
	return recorded[uint64](d.r, d.obj, "GetCurrentClocksEventReasons")(d.Device.GetCurrentClocksEventReasons())
}
func (d *recDevice) GetTotalEccErrors(e nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
	return recorded[uint64](d.r, d.obj, fmt.Sprintf("GetTotalEccErrors:%d:%d", e, c))(d.Device.GetTotalEccErrors(e, c))
}
func (d *recDevice) GetSamples(t nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
	vt, v, ret := d.Device.GetSamples(t, last)
	d.r.add(d.obj, fmt.Sprintf("GetSamples:%d", t), ret, vt, v)
	return vt, v, ret
}
func (d *recDevice) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return recorded[[]nvml.ProcessInfo](d.r, d.obj, "GetComputeRunningProcesses")(d.Device.GetComputeRunningProcesses())
}
func (d *recDevice) GetMigMode() (int, int, nvml.Return) {
	c, p, ret := d.Device.GetMigMode()
	d.r.add(d.obj, "GetMigMode", ret, c, p)
	return c, p, ret
}
func (d *recDevice) GetMaxMigDeviceCount() (int, nvml.Return) {
	return recorded[int](d.r, d.obj, "GetMaxMigDeviceCount")(d.Device.GetMaxMigDeviceCount())
}
func (d *recDevice) GetMigDeviceHandleByIndex(i int) (nvml.Device, nvml.Return) {
	m, ret := d.Device.GetMigDeviceHandleByIndex(i)
	obj := fmt.Sprintf("%s/mig%d", d.obj, i)
	d.r.add(d.obj, fmt.Sprintf("GetMigDeviceHandleByIndex:%d", i), ret, obj)
	if ret != nvml.SUCCESS {
		return m, ret
	}
	return d.r.device(m, obj), ret
}
func (d *recDevice) GpmSampleGet(s nvml.GpmSample) nvml.Return {
	ret := d.Device.GpmSampleGet(s)
	d.r.add(d.obj, "GpmSampleGet", ret)
	return ret
}
func (d *recDevice) GpmMigSampleGet(gi int, s nvml.GpmSample) nvml.Return {
	ret := d.Device.GpmMigSampleGet(gi, s)
	d.r.add(d.obj, fmt.Sprintf("GpmMigSampleGet:%d", gi), ret)
	return ret
}
func (d *recDevice) GetActiveVgpus() ([]nvml.VgpuInstance, nvml.Return) {
	v, ret := d.Device.GetActiveVgpus()
	objs := make([]VgpuRef, len(v))
	out := make([]nvml.VgpuInstance, len(v))
	for i, inst := range v {
		h, _ := nvmlsource.VgpuHandle(inst)
		objs[i] = VgpuRef{Obj: fmt.Sprintf("%s/vgpu%d", d.obj, i), Handle: h}
		out[i] = &recVgpu{VgpuInstance: inst, r: d.r, obj: objs[i].Obj, handle: h}
	}
	d.r.add(d.obj, "GetActiveVgpus", ret, objs)
	return out, ret
}

func (d *recDevice) GetVgpuSchedulerLog_v2(in nvml.VgpuSchedulerLogInfo_v2) (nvml.VgpuSchedulerLogInfo_v2, nvml.Return) {
	v, ret := d.Device.GetVgpuSchedulerLog_v2(in)
	n := min(int(v.EntriesCount), len(v.LogEntries))
	d.r.add(d.obj, "GetVgpuSchedulerLog_v2", ret, SchedulerLog{EngineID: v.EngineId, Policy: v.SchedulerPolicy,
		AvgFactor: v.AvgFactor, Timeslice: v.Timeslice, Entries: v.LogEntries[:n]})
	return v, ret
}
func (d *recDevice) GetVgpuUtilization(last uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
	vt, v, ret := d.Device.GetVgpuUtilization(last)
	d.r.add(d.obj, "GetVgpuUtilization", ret, vt, v)
	return vt, v, ret
}
func (d *recDevice) GetAttributes() (nvml.DeviceAttributes, nvml.Return) {
	return recorded[nvml.DeviceAttributes](d.r, d.obj, "GetAttributes")(d.Device.GetAttributes())
}
func (d *recDevice) GetGpuInstanceId() (int, nvml.Return) {
	return recorded[int](d.r, d.obj, "GetGpuInstanceId")(d.Device.GetGpuInstanceId())
}

func (d *recDevice) GetFieldValues(values []nvml.FieldValue) nvml.Return {
	ret := d.Device.GetFieldValues(values)
	d.r.add(d.obj, "GetFieldValues", ret, values)
	return ret
}
func (d *recDevice) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) {
	return recorded[nvml.Memory_v2](d.r, d.obj, "GetMemoryInfo_v2")(d.Device.GetMemoryInfo_v2())
}
func (d *recDevice) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	return recorded[nvml.Utilization](d.r, d.obj, "GetUtilizationRates")(d.Device.GetUtilizationRates())
}
func (d *recDevice) GetEncoderUtilization() (uint32, uint32, nvml.Return) {
	u, p, ret := d.Device.GetEncoderUtilization()
	d.r.add(d.obj, "GetEncoderUtilization", ret, u, p)
	return u, p, ret
}
func (d *recDevice) GetDecoderUtilization() (uint32, uint32, nvml.Return) {
	u, p, ret := d.Device.GetDecoderUtilization()
	d.r.add(d.obj, "GetDecoderUtilization", ret, u, p)
	return u, p, ret
}
func (d *recDevice) GetViolationStatus(p nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
	return recorded[nvml.ViolationTime](d.r, d.obj, fmt.Sprintf("GetViolationStatus:%d", p))(d.Device.GetViolationStatus(p))
}

type recVgpu struct {
	nvml.VgpuInstance
	r      *Recorder
	obj    string
	handle uint32
}

func (v *recVgpu) GetUUID() (string, nvml.Return) {
	return recorded[string](v.r, v.obj, "GetUUID")(v.VgpuInstance.GetUUID())
}
func (v *recVgpu) GetType() (nvml.VgpuTypeId, nvml.Return) {
	t, ret := v.VgpuInstance.GetType()
	v.r.add(v.obj, "GetType", ret)
	return &recType{VgpuTypeId: t, r: v.r, obj: v.obj + "/type"}, ret
}
func (v *recVgpu) GetFbUsage() (uint64, nvml.Return) {
	return recorded[uint64](v.r, v.obj, "GetFbUsage")(v.VgpuInstance.GetFbUsage())
}
func (v *recVgpu) GetVmDriverVersion() (string, nvml.Return) {
	return recorded[string](v.r, v.obj, "GetVmDriverVersion")(v.VgpuInstance.GetVmDriverVersion())
}
func (v *recVgpu) GetVmID() (string, nvml.VgpuVmIdType, nvml.Return) {
	s, t, ret := v.VgpuInstance.GetVmID()
	v.r.add(v.obj, "GetVmID", ret, s, t)
	return s, t, ret
}

// Handle keeps the numeric handle visible (utilization samples name vGPUs by it).
func (v *recVgpu) Handle() uint32 { return v.handle }

type recType struct {
	nvml.VgpuTypeId
	r   *Recorder
	obj string
}

func (t *recType) GetName() (string, nvml.Return) {
	return recorded[string](t.r, t.obj, "GetName")(t.VgpuTypeId.GetName())
}
func (t *recType) GetFramebufferSize() (uint64, nvml.Return) {
	return recorded[uint64](t.r, t.obj, "GetFramebufferSize")(t.VgpuTypeId.GetFramebufferSize())
}
