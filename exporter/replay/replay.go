// Package replay is the replayed source: a capture file (package capture) played back through
// the nvml source, tick by tick, so that a capture from a real GPU node replays on any machine.
package replay

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
	"github.com/slicemeter/slicemeter/exporter/capture"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
)

// Source is an nvml.Interface that answers each call with what the capture recorded for it in
// the current frame, and an exporter.Source that reads it through the nvml source tick by tick.
type Source struct {
	Header capture.Header
	path   string
	frames []*capture.Frame // frames[0]: Open; then one per tick
	next   int
	queues map[string][]capture.Call
	devs   map[string]*mock.Device
	lib    *mock.Interface
	src    *nvmlsource.Source
	// Misses counts calls the capture has no answer for (the translation code asked for
	// something it did not ask for when recording); they return ERROR_UNKNOWN.
	Misses int
}

// Load reads a whole capture (they are short: seconds to minutes of one node).
func Load(path string) (*Source, error) {
	r, err := capture.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	p := &Source{Header: r.Header, path: path, devs: map[string]*mock.Device{}}
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
func (p *Source) Ticks() int { return len(p.frames) - 1 }

// Interval is the recorded sampling interval.
func (p *Source) Interval() time.Duration { return time.Duration(p.Header.IntervalNs) }

// Start is the time of the first tick; End is one interval after the last.
func (p *Source) Start() time.Time { return time.Unix(0, p.frames[1].TNs) }

// End is one interval after the last recorded tick.
func (p *Source) End() time.Time {
	return time.Unix(0, p.frames[len(p.frames)-1].TNs).Add(p.Interval())
}

// Library is the replayed NVML.
func (p *Source) Library() nvml.Interface { return p.lib }

// Open opens the nvml source on the replayed NVML (the capture's first frame).
func (p *Source) Open(m *nvmlsource.Metrics, logger *slog.Logger) error {
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

var _ exporter.Source = (*Source)(nil)

// Read replays the tick that falls at t (ticks run at the recorded interval from Start). The
// samples carry the recorded times.
func (p *Source) Read(ctx context.Context, t time.Time, interval time.Duration) ([]exporter.NodeSamples, error) {
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

func (p *Source) load(fr *capture.Frame) {
	p.queues = map[string][]capture.Call{}
	for _, c := range fr.Calls {
		k := c.Obj + "\x00" + c.Fn
		p.queues[k] = append(p.queues[k], c)
	}
}

// take answers one call from the current frame, decoding its values into out.
func (p *Source) take(obj, fn string, out ...any) nvml.Return {
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

func (p *Source) library() *mock.Interface {
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return p.take("lib", "Init") },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS }, // not recorded in the ticks
		DeviceGetCountFunc: func() (int, nvml.Return) { return answer[int](p, "lib", "DeviceGetCount") },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			obj, ret := answer[string](p, "lib", fmt.Sprintf("DeviceGetHandleByIndex:%d", i))
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
					ed, ret := answer[capture.Event](p, "events", "Wait")
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
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return answer[string](p, "lib", "SystemGetDriverVersion") },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) {
			return answer[int](p, "lib", "SystemGetCudaDriverVersion")
		},
		GpmMetricsGetFunc: func(req *nvml.GpmMetricsGetType) nvml.Return {
			ms, ret := answer[[]capture.GPMMetric](p, "lib", "GpmMetricsGet")
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

// answer takes the value of one call from the current frame.
func answer[T any](p *Source, obj, fn string) (T, nvml.Return) {
	var v T
	ret := p.take(obj, fn, &v)
	return v, ret
}

func (p *Source) device(obj string) *mock.Device {
	if d, ok := p.devs[obj]; ok {
		return d
	}
	d := &mock.Device{
		GetUUIDFunc:               func() (string, nvml.Return) { return answer[string](p, obj, "GetUUID") },
		GetNameFunc:               func() (string, nvml.Return) { return answer[string](p, obj, "GetName") },
		GetMemoryInfoFunc:         func() (nvml.Memory, nvml.Return) { return answer[nvml.Memory](p, obj, "GetMemoryInfo") },
		GetPciInfoFunc:            func() (nvml.PciInfo, nvml.Return) { return answer[nvml.PciInfo](p, obj, "GetPciInfo") },
		GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) { return answer[nvml.GpmSupport](p, obj, "GpmQueryDeviceSupport") },
		RegisterEventsFunc:        func(uint64, nvml.EventSet) nvml.Return { return p.take(obj, "RegisterEvents") },
		GetPowerUsageFunc:         func() (uint32, nvml.Return) { return answer[uint32](p, obj, "GetPowerUsage") },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) {
			return answer[uint64](p, obj, "GetTotalEnergyConsumption")
		},
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			return answer[uint32](p, obj, fmt.Sprintf("GetClockInfo:%d", c))
		},
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			return answer[uint32](p, obj, fmt.Sprintf("GetTemperature:%d", s))
		},
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			return answer[uint64](p, obj, "GetCurrentClocksEventReasons")
		},
		GetTotalEccErrorsFunc: func(e nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
			return answer[uint64](p, obj, fmt.Sprintf("GetTotalEccErrors:%d:%d", e, c))
		},
		GetSamplesFunc: func(t nvml.SamplingType, _ uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			var vt nvml.ValueType
			var v []nvml.Sample
			ret := p.take(obj, fmt.Sprintf("GetSamples:%d", t), &vt, &v)
			return vt, v, ret
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return answer[[]nvml.ProcessInfo](p, obj, "GetComputeRunningProcesses")
		},
		GetMigModeFunc: func() (int, int, nvml.Return) {
			var c, pe int
			ret := p.take(obj, "GetMigMode", &c, &pe)
			return c, pe, ret
		},
		GetMaxMigDeviceCountFunc: func() (int, nvml.Return) { return answer[int](p, obj, "GetMaxMigDeviceCount") },
		GetMigDeviceHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			m, ret := answer[string](p, obj, fmt.Sprintf("GetMigDeviceHandleByIndex:%d", i))
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
			refs, ret := answer[[]capture.VgpuRef](p, obj, "GetActiveVgpus")
			out := make([]nvml.VgpuInstance, len(refs))
			for i, r := range refs {
				out[i] = p.vgpu(r)
			}
			return out, ret
		},
		GetVgpuSchedulerLog_v2Func: func(nvml.VgpuSchedulerLogInfo_v2) (nvml.VgpuSchedulerLogInfo_v2, nvml.Return) {
			l, ret := answer[capture.SchedulerLog](p, obj, "GetVgpuSchedulerLog_v2")
			v := nvml.VgpuSchedulerLogInfo_v2{EngineId: l.EngineID, SchedulerPolicy: l.Policy, AvgFactor: l.AvgFactor, Timeslice: l.Timeslice}
			v.EntriesCount = uint32(copy(v.LogEntries[:], l.Entries))
			return v, ret
		},
		GetVgpuUtilizationFunc: func(uint64) (nvml.ValueType, []nvml.VgpuInstanceUtilizationSample, nvml.Return) {
			var vt nvml.ValueType
			var v []nvml.VgpuInstanceUtilizationSample
			ret := p.take(obj, "GetVgpuUtilization", &vt, &v)
			return vt, v, ret
		},
		GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
			return answer[nvml.DeviceAttributes](p, obj, "GetAttributes")
		},
		GetGpuInstanceIdFunc: func() (int, nvml.Return) { return answer[int](p, obj, "GetGpuInstanceId") },
		GetFieldValuesFunc: func(values []nvml.FieldValue) nvml.Return {
			got, ret := answer[[]nvml.FieldValue](p, obj, "GetFieldValues")
			if len(got) != len(values) {
				p.Misses++ // asked for other fields than when recording
				return nvml.ERROR_UNKNOWN
			}
			for i := range values {
				if got[i].FieldId != values[i].FieldId || got[i].ScopeId != values[i].ScopeId {
					p.Misses++
					return nvml.ERROR_UNKNOWN
				}
			}
			copy(values, got)
			return ret
		},
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) { return answer[nvml.Memory_v2](p, obj, "GetMemoryInfo_v2") },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return answer[nvml.Utilization](p, obj, "GetUtilizationRates")
		},
		GetEncoderUtilizationFunc: func() (uint32, uint32, nvml.Return) { return p.codec(obj, "GetEncoderUtilization") },
		GetDecoderUtilizationFunc: func() (uint32, uint32, nvml.Return) { return p.codec(obj, "GetDecoderUtilization") },
		GetViolationStatusFunc: func(pt nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
			return answer[nvml.ViolationTime](p, obj, fmt.Sprintf("GetViolationStatus:%d", pt))
		},
	}
	p.devs[obj] = d
	return d
}

// codec answers an encoder or decoder utilization call: the utilization and its sampling period.
func (p *Source) codec(obj, fn string) (uint32, uint32, nvml.Return) {
	var u, period uint32
	ret := p.take(obj, fn, &u, &period)
	return u, period, ret
}

func (p *Source) vgpu(r capture.VgpuRef) nvml.VgpuInstance {
	typ := &mock.VgpuTypeId{
		GetNameFunc:            func() (string, nvml.Return) { return answer[string](p, r.Obj+"/type", "GetName") },
		GetFramebufferSizeFunc: func() (uint64, nvml.Return) { return answer[uint64](p, r.Obj+"/type", "GetFramebufferSize") },
	}
	return replayVgpu{handle: r.Handle, VgpuInstance: &mock.VgpuInstance{
		GetUUIDFunc:            func() (string, nvml.Return) { return answer[string](p, r.Obj, "GetUUID") },
		GetTypeFunc:            func() (nvml.VgpuTypeId, nvml.Return) { return typ, p.take(r.Obj, "GetType") },
		GetFbUsageFunc:         func() (uint64, nvml.Return) { return answer[uint64](p, r.Obj, "GetFbUsage") },
		GetVmDriverVersionFunc: func() (string, nvml.Return) { return answer[string](p, r.Obj, "GetVmDriverVersion") },
		GetVmIDFunc: func() (string, nvml.VgpuVmIdType, nvml.Return) {
			var s string
			var t nvml.VgpuVmIdType
			ret := p.take(r.Obj, "GetVmID", &s, &t)
			return s, t, ret
		},
	}}
}

// Close closes the replayed nvml source.
func (p *Source) Close() error {
	if p.src == nil {
		return nil
	}
	return p.src.Close()
}
