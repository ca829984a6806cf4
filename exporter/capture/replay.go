package capture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
)

// Replay is an nvml.Interface that answers each call with what the capture recorded for it in
// the current frame, and a Source that reads it through the nvml source tick by tick.
type Replay struct {
	Header Header
	path   string
	frames []*Frame // frames[0]: Open; then one per tick
	next   int
	queues map[string][]Call
	devs   map[string]*mock.Device
	lib    *mock.Interface
	src    *nvmlsource.Source
	// Misses counts calls the capture has no answer for (the translation code asked for
	// something it did not ask for when recording); they return ERROR_UNKNOWN.
	Misses int
}

// Load reads a whole capture (they are short: seconds to minutes of one node).
func Load(path string) (*Replay, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	p := &Replay{Header: r.Header, path: path, devs: map[string]*mock.Device{}}
	for {
		fr, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		p.frames = append(p.frames, fr)
	}
	if len(p.frames) == 0 || p.frames[0].Tick {
		return nil, fmt.Errorf("capture %s: the first frame must be the calls made while opening NVML", path)
	}
	// A capture ends with the frame of calls after the last tick (Shutdown): not a tick.
	if n := len(p.frames); n > 1 && !p.frames[n-1].Tick {
		p.frames = p.frames[:n-1]
	}
	if len(p.frames) < 2 {
		return nil, fmt.Errorf("capture %s: no ticks recorded", path)
	}
	p.lib = p.library()
	return p, nil
}

// Ticks is the number of recorded ticks.
func (p *Replay) Ticks() int { return len(p.frames) - 1 }

// Interval is the recorded sampling interval.
func (p *Replay) Interval() time.Duration { return time.Duration(p.Header.IntervalNs) }

// Start is the time of the first tick; End is one interval after the last.
func (p *Replay) Start() time.Time { return time.Unix(0, p.frames[1].TNs) }

// End is one interval after the last recorded tick.
func (p *Replay) End() time.Time {
	return time.Unix(0, p.frames[len(p.frames)-1].TNs).Add(p.Interval())
}

// Library is the replayed NVML.
func (p *Replay) Library() nvml.Interface { return p.lib }

// Open opens the nvml source on the replayed NVML (the capture's first frame).
func (p *Replay) Open(m *nvmlsource.Metrics, logger *slog.Logger) error {
	p.load(p.frames[0])
	ids := nvmlsource.UUIDs
	if p.Header.Source == "sim" {
		ids = nvmlsource.Indices
	}
	src, err := nvmlsource.Open(p.lib, nvmlsource.Config{Node: p.Header.Node, IDs: ids, Metrics: m, Logger: logger,
		Rediscover: time.Duration(p.Header.RediscoverNs)}, time.Unix(0, p.frames[0].TNs))
	if err != nil {
		return fmt.Errorf("replaying %s: %w", p.path, err)
	}
	p.src, p.next = src, 1
	return nil
}

var _ exporter.Source = (*Replay)(nil)

// Read replays the tick that falls at t (ticks run at the recorded interval from Start). The
// samples carry the recorded times.
func (p *Replay) Read(ctx context.Context, t time.Time, interval time.Duration) ([]exporter.NodeSamples, error) {
	if p.src == nil {
		return nil, errors.New("replay: Open first")
	}
	k := 1 + int(t.Sub(p.Start())/p.Interval())
	if k < p.next || k >= len(p.frames) {
		return nil, fmt.Errorf("capture %s has no tick at %s", p.path, t.Format(time.RFC3339Nano))
	}
	var out []exporter.NodeSamples
	for ; p.next <= k; p.next++ { // a skipped tick is still replayed: the source keeps state
		fr := p.frames[p.next]
		p.load(fr)
		ns, err := p.src.Read(ctx, time.Unix(0, fr.TNs), p.Interval())
		if err != nil {
			return nil, err
		}
		out = ns
	}
	return out, nil
}

func (p *Replay) load(fr *Frame) {
	p.queues = map[string][]Call{}
	for _, c := range fr.Calls {
		k := c.Obj + "\x00" + c.Fn
		p.queues[k] = append(p.queues[k], c)
	}
}

// take answers one call from the current frame, decoding its values into out.
func (p *Replay) take(obj, fn string, out ...any) nvml.Return {
	k := obj + "\x00" + fn
	q := p.queues[k]
	if len(q) == 0 {
		p.Misses++
		return nvml.ERROR_UNKNOWN
	}
	c := q[0]
	p.queues[k] = q[1:]
	if len(out) > 0 && len(c.Values) > 0 {
		var vals []json.RawMessage
		if err := json.Unmarshal(c.Values, &vals); err != nil || len(vals) != len(out) {
			p.Misses++
			return nvml.ERROR_UNKNOWN
		}
		for i, v := range vals {
			if err := json.Unmarshal(v, out[i]); err != nil {
				p.Misses++
				return nvml.ERROR_UNKNOWN
			}
		}
	}
	return nvml.Return(c.Ret)
}

func (p *Replay) library() *mock.Interface {
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return p.take("lib", "Init") },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS }, // not recorded in the ticks
		DeviceGetCountFunc: func() (int, nvml.Return) {
			var n int
			return n, p.take("lib", "DeviceGetCount", &n)
		},
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			var obj string
			ret := p.take("lib", fmt.Sprintf("DeviceGetHandleByIndex:%d", i), &obj)
			if ret != nvml.SUCCESS {
				return nil, ret
			}
			return p.device(obj), ret
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
				if ret := p.take("lib", "LookupSymbol:"+name); ret != nvml.SUCCESS {
					return fmt.Errorf("symbol %s: not in the recorded library", name)
				}
				return nil
			}}
		},
		EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) {
			ret := p.take("lib", "EventSetCreate")
			return &mock.EventSet{
				WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
					var ed eventData
					ret := p.take("events", "Wait", &ed)
					d := nvml.EventData{EventType: ed.EventType, EventData: ed.EventData, GpuInstanceId: ed.GI, ComputeInstanceId: ed.CI}
					if ed.Device != "" {
						d.Device = p.device(ed.Device)
					}
					return d, ret
				},
				FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			}, ret
		},
		GpmSampleAllocFunc: func() (nvml.GpmSample, nvml.Return) {
			ret := p.take("lib", "GpmSampleAlloc")
			return &mock.GpmSample{FreeFunc: func() nvml.Return { return nvml.SUCCESS }}, ret
		},
		GpmMetricsGetFunc: func(req *nvml.GpmMetricsGetType) nvml.Return {
			var ms []gpmMetric
			ret := p.take("lib", "GpmMetricsGet", &ms)
			for i, m := range ms {
				if i < len(req.Metrics) {
					req.Metrics[i] = nvml.GpmMetric{MetricId: m.ID, NvmlReturn: m.Ret, Value: m.Value}
				}
			}
			return ret
		},
	}
}

// replayVgpu is a replayed vGPU instance with its recorded handle.
type replayVgpu struct {
	*mock.VgpuInstance
	handle uint32
}

// Handle is the recorded NVML handle.
func (v replayVgpu) Handle() uint32 { return v.handle }

func (p *Replay) device(obj string) *mock.Device {
	if d, ok := p.devs[obj]; ok {
		return d
	}
	u32 := func(fn string) (uint32, nvml.Return) {
		var v uint32
		return v, p.take(obj, fn, &v)
	}
	u64 := func(fn string) (uint64, nvml.Return) {
		var v uint64
		return v, p.take(obj, fn, &v)
	}
	str := func(o, fn string) (string, nvml.Return) {
		var v string
		return v, p.take(o, fn, &v)
	}
	d := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return str(obj, "GetUUID") },
		GetNameFunc: func() (string, nvml.Return) { return str(obj, "GetName") },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			var v nvml.Memory
			return v, p.take(obj, "GetMemoryInfo", &v)
		},
		GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
			var v nvml.GpmSupport
			return v, p.take(obj, "GpmQueryDeviceSupport", &v)
		},
		RegisterEventsFunc:            func(uint64, nvml.EventSet) nvml.Return { return p.take(obj, "RegisterEvents") },
		GetPowerUsageFunc:             func() (uint32, nvml.Return) { return u32("GetPowerUsage") },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) { return u64("GetTotalEnergyConsumption") },
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			return u32(fmt.Sprintf("GetClockInfo:%d", c))
		},
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			return u32(fmt.Sprintf("GetTemperature:%d", s))
		},
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) { return u64("GetCurrentClocksEventReasons") },
		GetTotalEccErrorsFunc: func(e nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
			return u64(fmt.Sprintf("GetTotalEccErrors:%d:%d", e, c))
		},
		GetSamplesFunc: func(t nvml.SamplingType, _ uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			var vt nvml.ValueType
			var v []nvml.Sample
			return vt, v, p.take(obj, fmt.Sprintf("GetSamples:%d", t), &vt, &v)
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			var v []nvml.ProcessInfo
			return v, p.take(obj, "GetComputeRunningProcesses", &v)
		},
		GetMigModeFunc: func() (int, int, nvml.Return) {
			var c, pe int
			return c, pe, p.take(obj, "GetMigMode", &c, &pe)
		},
		GetMaxMigDeviceCountFunc: func() (int, nvml.Return) {
			var v int
			return v, p.take(obj, "GetMaxMigDeviceCount", &v)
		},
		GetMigDeviceHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			var m string
			ret := p.take(obj, fmt.Sprintf("GetMigDeviceHandleByIndex:%d", i), &m)
			if ret != nvml.SUCCESS {
				return nil, ret
			}
			return p.device(m), ret
		},
		GpmSampleGetFunc: func(nvml.GpmSample) nvml.Return { return p.take(obj, "GpmSampleGet") },
		GpmMigSampleGetFunc: func(gi int, _ nvml.GpmSample) nvml.Return {
			return p.take(obj, fmt.Sprintf("GpmMigSampleGet:%d", gi))
		},
		GetActiveVgpusFunc: func() ([]nvml.VgpuInstance, nvml.Return) {
			var refs []vgpuRef
			ret := p.take(obj, "GetActiveVgpus", &refs)
			out := make([]nvml.VgpuInstance, len(refs))
			for i, r := range refs {
				out[i] = p.vgpu(r)
			}
			return out, ret
		},
		GetVgpuSchedulerLog_v2Func: func(nvml.VgpuSchedulerLogInfo_v2) (nvml.VgpuSchedulerLogInfo_v2, nvml.Return) {
			var l schedLog
			ret := p.take(obj, "GetVgpuSchedulerLog_v2", &l)
			v := nvml.VgpuSchedulerLogInfo_v2{EngineId: l.EngineID, SchedulerPolicy: l.Policy, AvgFactor: l.AvgFactor, Timeslice: l.Timeslice}
			v.EntriesCount = uint32(copy(v.LogEntries[:], l.Entries))
			return v, ret
		},
		GetVgpuUtilizationFunc: func(uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
			var vt nvml.ValueType
			var v []nvml.VgpuInstanceUtilizationSample
			return vt, v, p.take(obj, "GetVgpuUtilization", &vt, &v)
		},
		GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
			var v nvml.DeviceAttributes
			return v, p.take(obj, "GetAttributes", &v)
		},
		GetGpuInstanceIdFunc: func() (int, nvml.Return) {
			var v int
			return v, p.take(obj, "GetGpuInstanceId", &v)
		},
	}
	p.devs[obj] = d
	return d
}

func (p *Replay) vgpu(r vgpuRef) nvml.VgpuInstance {
	str := func(o, fn string) (string, nvml.Return) {
		var v string
		return v, p.take(o, fn, &v)
	}
	typ := &mock.VgpuTypeId{
		GetNameFunc: func() (string, nvml.Return) { return str(r.Obj+"/type", "GetName") },
		GetFramebufferSizeFunc: func() (uint64, nvml.Return) {
			var v uint64
			return v, p.take(r.Obj+"/type", "GetFramebufferSize", &v)
		},
	}
	return replayVgpu{handle: r.Handle, VgpuInstance: &mock.VgpuInstance{
		GetUUIDFunc: func() (string, nvml.Return) { return str(r.Obj, "GetUUID") },
		GetTypeFunc: func() (nvml.VgpuTypeId, nvml.Return) { return typ, p.take(r.Obj, "GetType") },
		GetFbUsageFunc: func() (uint64, nvml.Return) {
			var v uint64
			return v, p.take(r.Obj, "GetFbUsage", &v)
		},
		GetVmDriverVersionFunc: func() (string, nvml.Return) { return str(r.Obj, "GetVmDriverVersion") },
		GetVmIDFunc: func() (string, nvml.VgpuVmIdType, nvml.Return) {
			var s string
			var t nvml.VgpuVmIdType
			return s, t, p.take(r.Obj, "GetVmID", &s, &t)
		},
	}}
}

// Close closes the replayed nvml source.
func (p *Replay) Close() error {
	if p.src == nil {
		return nil
	}
	return p.src.Close()
}
