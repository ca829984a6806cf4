package nvmlsource

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slicemeter/slicemeter/exporter"
)

const allHealth = exporter.HealthPCIe | exporter.HealthPCIeReplays | exporter.HealthNVLink | exporter.HealthMemTemp |
	exporter.HealthFB | exporter.HealthFBReserved | exporter.HealthCopyUtil | exporter.HealthCodecUtil | exporter.HealthRemap |
	exporter.HealthViolations | exporter.HealthVersions

// readTicks opens src on devs and reads n ticks, returning the last one's GPU states.
func readTicks(t *testing.T, lib nvml.Interface, m *Metrics, n int) ([]exporter.GPUState, *Source) {
	t.Helper()
	now := time.Unix(1000, 0)
	src, err := Open(lib, Config{Node: "n", Metrics: m}, now)
	if err != nil {
		t.Fatal(err)
	}
	var out []exporter.NodeSamples
	for k := 1; k <= n; k++ {
		if out, err = src.Read(context.Background(), now.Add(time.Duration(k)*time.Second), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return out[0].GPUs, src
}

// Each field of Health lands where it belongs (fakeGPU answers field id + 1000), and the tick
// reads all the field values in one call per GPU.
func TestHealthIsRead(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	gpus, _ := readTicks(t, fakeLib([]nvml.Device{fakeGPU(0, new(bool), false), fakeGPU(1, new(bool), true)}, ""), m, 3)
	h := gpus[0].Health
	want := exporter.Health{
		Supported:   allHealth,
		PCIeTxBytes: 1197, PCIeRxBytes: 1198, PCIeReplays: 1094,
		NVLinkTxBytes: 1138 * 1024, NVLinkRxBytes: 1139 * 1024, MemTempC: 1082,
		FBFree: 40<<30 - 2<<30 - 512<<20, FBReserved: 512 << 20,
		CopyUtil: 0.25, EncoderUtil: 0.07, DecoderUtil: 0.09,
		RemappedCorrectable: 1142, RemappedUncorrectable: 1143, RemapPending: true, RemapFailure: true,
		PowerViolationNs: 1074, ThermalViolationNs: 1075,
		DriverVersion: "580.65.06", CUDAVersion: "12.8",
	}
	if h != want {
		t.Errorf("health\n got %+v\nwant %+v", h, want)
	}
	if got := testutil.ToFloat64(m.calls.WithLabelValues("nvmlDeviceGetFieldValues")); got != 2*3 {
		t.Errorf("%v field-values calls for 2 GPUs × 3 ticks, want 6", got)
	}
	for _, call := range []string{"nvmlDeviceGetViolationStatus", "nvmlSystemGetDriverVersion"} {
		want := map[string]float64{"nvmlDeviceGetViolationStatus": 0, "nvmlSystemGetDriverVersion": 1}[call]
		if got := testutil.ToFloat64(m.calls.WithLabelValues(call)); got != want {
			t.Errorf("%s called %v times, want %v (violations come with the fields, versions once)", call, got, want)
		}
	}
	if mig := gpus[1].Instances[0]; !mig.HasGPUInstanceID || mig.GPUInstanceID != 1 {
		t.Errorf("MIG instance %+v: want GPU instance id 1", mig)
	}
	if whole := gpus[0].Instances[0]; whole.HasGPUInstanceID {
		t.Errorf("whole GPU %+v has a GPU instance id", whole)
	}
}

// A field NOT_SUPPORTED stays unsupported and is not asked again; a field that fails otherwise
// is counted as an NVML error, left out of that tick and asked again; violation time falls back
// to GetViolationStatus where the fields do not carry it.
func TestUnsupportedHealthStaysUnsupported(t *testing.T) {
	notSupported := []uint32{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.FI_DEV_REMAPPED_PENDING, nvml.FI_DEV_PERF_POLICY_THERMAL}
	failing := uint32(nvml.FI_DEV_MEMORY_TEMP)
	var asked [][]uint32
	dev := fakeGPU(0, new(bool), false)
	inner := dev.GetFieldValuesFunc
	dev.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
		ids := []uint32{}
		r := inner(v)
		for k := range v {
			ids = append(ids, v[k].FieldId)
			switch {
			case slices.Contains(notSupported, v[k].FieldId):
				v[k].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			case v[k].FieldId == failing:
				v[k].NvmlReturn = uint32(nvml.ERROR_UNKNOWN)
			}
		}
		asked = append(asked, ids)
		return r
	}
	dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED }
	dev.GetDecoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	m := NewMetrics(nil)
	gpus, _ := readTicks(t, fakeLib([]nvml.Device{dev}, ""), m, 3)
	h := gpus[0].Health
	for _, f := range []struct {
		name string
		bit  exporter.HealthFields
		want bool
	}{
		{"NVLink (TX not supported)", exporter.HealthNVLink, false},
		{"remapping (pending not supported)", exporter.HealthRemap, false},
		{"memory temperature (failing)", exporter.HealthMemTemp, false},
		{"FB free (v2 not supported: v1's total − used)", exporter.HealthFB, true},
		{"FB reserved (v2 not supported)", exporter.HealthFBReserved, false},
		{"codec (decoder not supported)", exporter.HealthCodecUtil, false},
		{"PCIe", exporter.HealthPCIe, true},
		{"violations (from GetViolationStatus)", exporter.HealthViolations, true},
		{"copy", exporter.HealthCopyUtil, true},
	} {
		if h.Has(f.bit) != f.want {
			t.Errorf("%s: supported %v, want %v", f.name, h.Has(f.bit), f.want)
		}
	}
	if h.PowerViolationNs != 5000+uint64(nvml.PERF_POLICY_POWER) || h.ThermalViolationNs != 5000+uint64(nvml.PERF_POLICY_THERMAL) {
		t.Errorf("violation time %d/%d, want GetViolationStatus's", h.PowerViolationNs, h.ThermalViolationNs)
	}
	if len(asked) != 3 || len(asked[0]) != len(healthFields) {
		t.Fatalf("field requests %v: want 3 ticks, all fields at first", asked)
	}
	for _, id := range notSupported {
		if slices.Contains(asked[1], id) || slices.Contains(asked[2], id) {
			t.Errorf("field %d asked again after NOT_SUPPORTED: %v", id, asked[1:])
		}
	}
	if !slices.Contains(asked[2], failing) {
		t.Errorf("field %d (failing, not unsupported) no longer asked: %v", failing, asked[2])
	}
	if got := testutil.ToFloat64(m.errors.WithLabelValues("nvmlDeviceGetFieldValues")); got != 3 {
		t.Errorf("%v field-value errors, want 3 (one failing field × 3 ticks; NOT_SUPPORTED is not an error)", got)
	}
	if got := testutil.ToFloat64(m.calls.WithLabelValues("nvmlDeviceGetDecoderUtilization")); got != 1 {
		t.Errorf("GetDecoderUtilization called %v times, want once (NOT_SUPPORTED turns it off)", got)
	}
}

// A driver without versions or without any field support still reads, with nothing claimed
// but what memory info v1 gives.
func TestNoHealthSupport(t *testing.T) {
	dev := fakeGPU(0, new(bool), false)
	dev.GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	dev.GetViolationStatusFunc = func(nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
		return nvml.ViolationTime{}, nvml.ERROR_NOT_SUPPORTED
	}
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	dev.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	lib := fakeLib([]nvml.Device{dev}, "nvmlDeviceGetMemoryInfo_v2")
	lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED }
	lib.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	dev.GetMemoryInfo_v2Func = nil // missing symbol: the mock panics if called
	m := NewMetrics(nil)
	gpus, _ := readTicks(t, lib, m, 2)
	// Only FB free, from memory info v1 (40 GiB total, 2 GiB used): dcgm's FB_FREE is there on
	// every driver.
	want := exporter.Health{Supported: exporter.HealthFB, FBFree: 40<<30 - 2<<30}
	if h := gpus[0].Health; h != want {
		t.Errorf("health %+v, want %+v: nothing but FB free from v1 supported", h, want)
	}
	if got := testutil.ToFloat64(m.calls.WithLabelValues("nvmlDeviceGetFieldValues")); got != 1 {
		t.Errorf("GetFieldValues called %v times, want once", got)
	}
}
