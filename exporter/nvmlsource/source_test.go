package nvmlsource

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// fakeGPU is a minimal mock GPU; lost makes every per-tick call fail as a GPU that fell off the bus.
func fakeGPU(i int, lost *bool, mig bool) *mock.Device {
	ret := func() nvml.Return {
		if *lost {
			return nvml.ERROR_GPU_IS_LOST
		}
		return nvml.SUCCESS
	}
	migDev := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return "MIG-x", nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB MIG 3g.20gb", nvml.SUCCESS },
		GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
			return nvml.DeviceAttributes{MultiprocessorCount: 42, GpuInstanceSliceCount: 3}, nvml.SUCCESS
		},
		GetMemoryInfoFunc:              func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 20 << 30, Used: 1 << 30}, ret() },
		GetGpuInstanceIdFunc:           func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return []nvml.ProcessInfo{{Pid: 1}}, ret() },
	}
	return &mock.Device{
		GetUUIDFunc:       func() (string, nvml.Return) { return fmt.Sprintf("GPU-%d", i), nvml.SUCCESS },
		GetNameFunc:       func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB", nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 40 << 30, Used: 2 << 30}, ret() },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			// Lower case, as some drivers write it: the source upper-cases it.
			return pciInfo(fmt.Sprintf("00000000:%02x:00.0", 0xa0+i), "", 0, uint32(0xa0+i), 0), ret()
		},
		GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
			return nvml.GpmSupport{IsSupportedDevice: 0}, nvml.SUCCESS // an A100: no GPM
		},
		RegisterEventsFunc:               func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS },
		GetPowerUsageFunc:                func() (uint32, nvml.Return) { return 123456, ret() },
		GetTotalEnergyConsumptionFunc:    func() (uint64, nvml.Return) { return 5000, ret() },
		GetClockInfoFunc:                 func(nvml.ClockType) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		GetTemperatureFunc:               func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 40, ret() },
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) { return 0, ret() },
		GetTotalEccErrorsFunc:            func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) { return 0, ret() },
		GetSamplesFunc: func(_ nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			return nvml.VALUE_TYPE_UNSIGNED_INT, []nvml.Sample{{TimeStamp: last + 1, SampleValue: [8]byte{50}}, {TimeStamp: last + 2, SampleValue: [8]byte{70}}}, ret()
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return nil, ret() },
		GetMigModeFunc: func() (int, int, nvml.Return) {
			if mig {
				return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
			}
			return 0, 0, nvml.SUCCESS
		},
		GetMaxMigDeviceCountFunc: func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		GetMigDeviceHandleByIndexFunc: func(j int) (nvml.Device, nvml.Return) {
			if j == 0 {
				return migDev, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
		GetActiveVgpusFunc: func() ([]nvml.VgpuInstance, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED },
		GetFieldValuesFunc: func(v []nvml.FieldValue) nvml.Return {
			for k := range v {
				// Every field answers its id + 1000, so that each lands where it belongs.
				v[k].NvmlReturn, v[k].ValueType = uint32(ret()), uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.LittleEndian.PutUint64(v[k].Value[:], uint64(v[k].FieldId)+1000)
			}
			return ret()
		},
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 40 << 30, Reserved: 512 << 20, Used: 2 << 30, Free: 40<<30 - 2<<30 - 512<<20}, ret()
		},
		GetUtilizationRatesFunc:   func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 60, Memory: 25}, ret() },
		GetEncoderUtilizationFunc: func() (uint32, uint32, nvml.Return) { return 7, 167000, ret() },
		GetDecoderUtilizationFunc: func() (uint32, uint32, nvml.Return) { return 9, 167000, ret() },
		GetViolationStatusFunc: func(p nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
			return nvml.ViolationTime{ViolationTime: 5000 + uint64(p)}, ret()
		},
	}
}

func fakeLib(devs []nvml.Device, missing string) *mock.Interface {
	return &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) { return devs[i], nvml.SUCCESS },
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
				if s == missing {
					return errors.New("undefined symbol")
				}
				return nil
			}}
		},
		EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) {
			return &mock.EventSet{
				WaitFunc: func(uint32) (nvml.EventData, nvml.Return) { return nvml.EventData{}, nvml.ERROR_TIMEOUT },
				FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			}, nvml.SUCCESS
		},
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "580.65.06", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12080, nvml.SUCCESS },
	}
}

func TestOneLostGPUDoesNotStopTheOthers(t *testing.T) {
	lost := false
	devs := []nvml.Device{fakeGPU(0, new(bool), false), fakeGPU(1, &lost, false), fakeGPU(2, new(bool), true)}
	now := time.Unix(1000, 0)
	src, err := Open(fakeLib(devs, ""), Config{Node: "n", IDs: UUIDs}, now)
	if err != nil {
		t.Fatal(err)
	}
	lost = true
	out, err := src.Read(context.Background(), now.Add(time.Second), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ns := out[0]
	ids := []string{}
	for _, s := range ns.Samples {
		ids = append(ids, s.InstanceId)
	}
	if strings.Join(ids, ",") != "GPU-0,MIG-x" {
		t.Fatalf("instances %v, want GPU-0 and the MIG instance of GPU-2 (GPU-1 lost)", ids)
	}
	if st := ns.GPUs[1]; !st.Failed || !strings.Contains(st.FailReason, "GPU_IS_LOST") && !strings.Contains(st.FailReason, "lost") {
		t.Errorf("GPU-1 state %+v, want failed", st)
	}
	whole := ns.Samples[0]
	if whole.Kind != pb.Kind_KIND_GPU || whole.SmActive != 0.6 || whole.PowerWatts != 123.456 || whole.Attached {
		t.Errorf("whole GPU sample %+v: want utilization 0.6 from the driver's samples, 123.456 W", whole)
	}
	if st := ns.GPUs[0]; st.UtilSamples != 2 || st.EnergyJ != 5 || st.SMClockHz != 0 {
		t.Errorf("GPU-0 state %+v", st)
	}
	mig := ns.Samples[1]
	if mig.Kind != pb.Kind_KIND_MIG || mig.Profile != "3g.20gb" || mig.SmCount != 42 || mig.ComputeSlices != 3 || !mig.Attached || mig.MemUsedBytes != 1<<30 {
		t.Errorf("MIG sample %+v", mig)
	}
	if ns.GPUs[2].ActivityAvailable {
		t.Error("an A100 without GPM must say MIG activity is unavailable")
	}
}

func TestSMCountOfAnUncataloguedModel(t *testing.T) {
	dev := fakeGPU(0, new(bool), false)
	dev.GetNameFunc = func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS }
	dev.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
		return nvml.DeviceAttributes{MultiprocessorCount: 132}, nvml.SUCCESS
	}
	now := time.Unix(1000, 0)
	src, err := Open(fakeLib([]nvml.Device{dev}, ""), Config{}, now)
	if err != nil {
		t.Fatal(err)
	}
	out, err := src.Read(context.Background(), now.Add(time.Second), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s := out[0].Samples[0]; s.Model != "H200" || s.GpuSmCount != 132 || s.SmCount != 132 {
		t.Errorf("sample %v: want model H200 with 132 SMs from NVML", s)
	}
}

func TestLibraryMissing(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := Open(lib, Config{}, time.Now())
	if !errors.Is(err, ErrLibraryNotFound) || !strings.Contains(err.Error(), "--source sim") {
		t.Fatalf("err %v, want ErrLibraryNotFound suggesting --source sim", err)
	}
}

func TestMissingSymbolIsNotCalled(t *testing.T) {
	dev := fakeGPU(0, new(bool), false)
	dev.GpmQueryDeviceSupportFunc = nil // the mock panics if called
	if _, err := Open(fakeLib([]nvml.Device{dev}, "nvmlGpmQueryDeviceSupport"), Config{}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

func TestMIGProfileFromName(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA A100-SXM4-40GB MIG 1g.5gb": "1g.5gb", "NVIDIA H100 80GB HBM3 MIG 1g.10gb+me": "1g.10gb+me", "odd": "odd",
	} {
		if got := migProfile(name); got != want {
			t.Errorf("migProfile(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestXIDEventsAreCountedPerGPU(t *testing.T) {
	devs := []nvml.Device{fakeGPU(0, new(bool), false), fakeGPU(1, new(bool), false)}
	lib := fakeLib(devs, "")
	pending := []nvml.EventData{{Device: devs[1], EventType: nvml.EventTypeXidCriticalError, EventData: 79}}
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(timeout uint32) (nvml.EventData, nvml.Return) {
				if timeout != 0 {
					t.Errorf("EventSetWait timeout %d ms: the tick must not block", timeout)
				}
				if len(pending) == 0 {
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
				e := pending[0]
				pending = pending[1:]
				return e, nvml.SUCCESS
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	now := time.Unix(1000, 0)
	src, err := Open(lib, Config{Node: "n"}, now)
	if err != nil {
		t.Fatal(err)
	}
	out, err := src.Read(context.Background(), now.Add(time.Second), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g := out[0].GPUs
	if g[0].XIDs != 0 || g[1].XIDs != 1 || g[1].LastXID != 79 || len(out[0].Samples) != 2 {
		t.Errorf("XIDs %d/%d (last %d), %d samples: want the XID on GPU 1 only and both GPUs sampled", g[0].XIDs, g[1].XIDs, g[1].LastXID, len(out[0].Samples))
	}
}

// TestLinesNameTheNode: every line of the source (GPU found, XIDs, …) names the node, and an
// XID that repeats is one line a minute, not one per event; the counter has them all.
func TestLinesNameTheNode(t *testing.T) {
	devs := []nvml.Device{fakeGPU(0, new(bool), false), fakeGPU(1, new(bool), false)}
	lib := fakeLib(devs, "")
	var pending []nvml.EventData
	for range 50 {
		pending = append(pending, nvml.EventData{Device: devs[1], EventType: nvml.EventTypeXidCriticalError, EventData: 79})
	}
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
				if len(pending) == 0 {
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
				e := pending[0]
				pending = pending[1:]
				return e, nvml.SUCCESS
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	src, err := Open(lib, Config{Node: "gpu-node-7", Logger: slog.New(slog.NewTextHandler(&buf, nil))}, now)
	if err != nil {
		t.Fatal(err)
	}
	out, err := src.Read(context.Background(), now.Add(time.Second), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if x := out[0].GPUs[1].XIDs; x != 50 {
		t.Errorf("%d XIDs counted, want 50", x)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, l := range lines {
		if !strings.Contains(l, "node=gpu-node-7") {
			t.Errorf("a line does not name the node: %s", l)
		}
	}
	if n := strings.Count(buf.String(), `msg="GPU found"`); n != 2 {
		t.Errorf("%d GPU found lines, want 2:\n%s", n, buf.String())
	}
	if n := strings.Count(buf.String(), `msg="XID error"`); n != 1 {
		t.Errorf("%d XID lines for 50 XIDs within a minute, want 1:\n%s", n, buf.String())
	}
}
