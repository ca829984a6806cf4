package nvmlsource

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
)

// allLinks is the scope id that makes NVML sum an NVLink counter over every link of the GPU
// (nvml.h, "NVLink throughput counters"): one field instead of one per link.
const allLinks = math.MaxUint32

// healthField is one field value of the GPU's health, read in the tick's single
// nvmlDeviceGetFieldValues call.
type healthField struct {
	id, scope uint32
	bit       exporter.HealthFields
}

// healthFields are requested together, so that a tick costs one call per GPU for all of them.
// Power and thermal violation time are field values too (NVML_FI_DEV_PERF_POLICY_*, in ns,
// what nvmlDeviceGetViolationStatus reports): two calls fewer per GPU and tick. Where a driver
// does not report them as fields, GetViolationStatus is the fallback.
var healthFields = []healthField{
	{nvml.FI_DEV_PCIE_COUNT_TX_BYTES, 0, exporter.HealthPCIe},
	{nvml.FI_DEV_PCIE_COUNT_RX_BYTES, 0, exporter.HealthPCIe},
	{nvml.FI_DEV_PCIE_REPLAY_COUNTER, 0, exporter.HealthPCIeReplays},
	{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, allLinks, exporter.HealthNVLink},
	{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, allLinks, exporter.HealthNVLink},
	{nvml.FI_DEV_MEMORY_TEMP, 0, exporter.HealthMemTemp},
	{nvml.FI_DEV_REMAPPED_COR, 0, exporter.HealthRemap},
	{nvml.FI_DEV_REMAPPED_UNC, 0, exporter.HealthRemap},
	{nvml.FI_DEV_REMAPPED_PENDING, 0, exporter.HealthRemap},
	{nvml.FI_DEV_REMAPPED_FAILURE, 0, exporter.HealthRemap},
	{nvml.FI_DEV_PERF_POLICY_POWER, 0, exporter.HealthViolations},
	{nvml.FI_DEV_PERF_POLICY_THERMAL, 0, exporter.HealthViolations},
}

// fieldState is a GPU's field request, kept between ticks: fields the GPU answered NOT_SUPPORTED
// for are dropped from it (and their Health bits stay off), the others are asked every tick.
type fieldState struct {
	want []healthField
	req  []nvml.FieldValue // reused: reset before each call
	off  exporter.HealthFields
}

func newFieldState() *fieldState {
	return &fieldState{want: append([]healthField(nil), healthFields...), req: make([]nvml.FieldValue, len(healthFields))}
}

// readVersions reads the driver and CUDA versions once, at discovery: they do not change while
// the driver is loaded.
func (s *Source) readVersions() {
	if v, r := s.lib.SystemGetDriverVersion(); s.ok(nil, "nvmlSystemGetDriverVersion", r) {
		s.driverVersion = v
	}
	if v, r := s.lib.SystemGetCudaDriverVersion(); s.ok(nil, "nvmlSystemGetCudaDriverVersion", r) && v > 0 {
		s.cudaVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10) // 13000 → "13.0"
	}
}

// readHealth fills st.Health: one field-values call, the FB split, copy and codec utilization.
func (s *Source) readHealth(g *gpuDev, st *exporter.GPUState) {
	h := &st.Health
	h.DriverVersion, h.CUDAVersion = s.driverVersion, s.cudaVersion
	if s.driverVersion != "" || s.cudaVersion != "" {
		h.Supported |= exporter.HealthVersions
	}
	s.readFields(g, h)
	noFields := g.fields.off&exporter.HealthViolations != 0 || !g.can("nvmlDeviceGetFieldValues")
	if !h.Has(exporter.HealthViolations) && noFields && g.can("nvmlDeviceGetViolationStatus") {
		pw, r1 := g.dev.GetViolationStatus(nvml.PERF_POLICY_POWER)
		ok1 := s.ok(g, "nvmlDeviceGetViolationStatus", r1)
		th, r2 := nvml.ViolationTime{}, nvml.ERROR_NOT_SUPPORTED
		if ok1 {
			th, r2 = g.dev.GetViolationStatus(nvml.PERF_POLICY_THERMAL)
		}
		if ok1 && s.ok(g, "nvmlDeviceGetViolationStatus", r2) {
			h.PowerViolationNs, h.ThermalViolationNs = pw.ViolationTime, th.ViolationTime
			h.Supported |= exporter.HealthViolations
		}
	}
	if g.memV2 && g.can("nvmlDeviceGetMemoryInfo_v2") {
		if m, r := g.dev.GetMemoryInfo_v2(); s.ok(g, "nvmlDeviceGetMemoryInfo_v2", r) {
			h.FBFree, h.FBReserved = m.Free, m.Reserved
			h.Supported |= exporter.HealthFB | exporter.HealthFBReserved | exporter.HealthFBReserved
		}
	}
	// Without v2 (older drivers, some vGPU guests) v1's free is total − used: dcgm-exporter's
	// FB_FREE, which dashboard 12239's Hostname variable lists, must not vanish there.
	if !h.Has(exporter.HealthFB) && st.MemTotal > 0 && st.MemUsed <= st.MemTotal {
		h.FBFree = st.MemTotal - st.MemUsed
		h.Supported |= exporter.HealthFB
	}
	if g.can("nvmlDeviceGetUtilizationRates") {
		if u, r := g.dev.GetUtilizationRates(); s.ok(g, "nvmlDeviceGetUtilizationRates", r) {
			h.CopyUtil = float64(u.Memory) / 100 // the memory controller's busy time: dcgm's copy utilization
			h.Supported |= exporter.HealthCopyUtil
		}
	}
	if g.can("nvmlDeviceGetEncoderUtilization") && g.can("nvmlDeviceGetDecoderUtilization") {
		enc, _, r := g.dev.GetEncoderUtilization()
		if s.ok(g, "nvmlDeviceGetEncoderUtilization", r) {
			dec, _, r := g.dev.GetDecoderUtilization()
			if s.ok(g, "nvmlDeviceGetDecoderUtilization", r) {
				h.EncoderUtil, h.DecoderUtil = float64(enc)/100, float64(dec)/100
				h.Supported |= exporter.HealthCodecUtil
			}
		}
	}
}

// readFields makes the tick's nvmlDeviceGetFieldValues call. A field NOT_SUPPORTED is dropped
// from the request for good; any other per-field failure is counted as an error of the call and
// leaves that field's Health bit off for the tick.
func (s *Source) readFields(g *gpuDev, h *exporter.Health) {
	f := g.fields
	if len(f.want) == 0 || !g.can("nvmlDeviceGetFieldValues") {
		return
	}
	req := f.req[:len(f.want)]
	for i, w := range f.want {
		req[i] = nvml.FieldValue{FieldId: w.id, ScopeId: w.scope}
	}
	if !s.ok(g, "nvmlDeviceGetFieldValues", g.dev.GetFieldValues(req)) {
		return
	}
	var got, failed exporter.HealthFields
	kept := f.want[:0] // filtered in place: entry i is read before any write at i
	for i, w := range f.want {
		v := req[i]
		switch r := nvml.Return(v.NvmlReturn); {
		case v.FieldId != w.id:
			// The driver must answer in place; a reordered answer is not trusted.
			failed |= w.bit
			s.m.errors.WithLabelValues("nvmlDeviceGetFieldValues").Inc()
			kept = append(kept, w)
			continue
		case r == nvml.ERROR_NOT_SUPPORTED:
			f.off |= w.bit
			s.logger.Info("NVML field not supported on this GPU; not asked again", "gpu", g.index, "field", w.id)
			continue
		case r != nvml.SUCCESS:
			failed |= w.bit
			s.m.errors.WithLabelValues("nvmlDeviceGetFieldValues").Inc()
			kept = append(kept, w)
			continue
		}
		kept = append(kept, w)
		n, ok := fieldUint(v)
		if !ok {
			failed |= w.bit
			continue
		}
		got |= w.bit
		switch w.id {
		case nvml.FI_DEV_PCIE_COUNT_TX_BYTES:
			h.PCIeTxBytes = n
		case nvml.FI_DEV_PCIE_COUNT_RX_BYTES:
			h.PCIeRxBytes = n
		case nvml.FI_DEV_PCIE_REPLAY_COUNTER:
			h.PCIeReplays = n
		case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
			h.NVLinkTxBytes = n * 1024 // NVML counts KiB
		case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
			h.NVLinkRxBytes = n * 1024
		case nvml.FI_DEV_MEMORY_TEMP:
			h.MemTempC = float64(n)
		case nvml.FI_DEV_REMAPPED_COR:
			h.RemappedCorrectable = n
		case nvml.FI_DEV_REMAPPED_UNC:
			h.RemappedUncorrectable = n
		case nvml.FI_DEV_REMAPPED_PENDING:
			h.RemapPending = n != 0
		case nvml.FI_DEV_REMAPPED_FAILURE:
			h.RemapFailure = n != 0
		case nvml.FI_DEV_PERF_POLICY_POWER:
			h.PowerViolationNs = n
		case nvml.FI_DEV_PERF_POLICY_THERMAL:
			h.ThermalViolationNs = n
		}
	}
	f.want = kept
	h.Supported |= got &^ (failed | f.off)
}

// fieldUint decodes a field value of an integer type (the health fields are counters, flags
// and a temperature); a negative or non-integer value is not one of them.
func fieldUint(v nvml.FieldValue) (uint64, bool) {
	b := v.Value[:]
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(binary.LittleEndian.Uint32(b)), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return binary.LittleEndian.Uint64(b), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		if n := int64(binary.LittleEndian.Uint64(b)); n >= 0 {
			return uint64(n), true
		}
	case nvml.VALUE_TYPE_SIGNED_INT:
		if n := int32(binary.LittleEndian.Uint32(b)); n >= 0 {
			return uint64(n), true
		}
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return uint64(binary.LittleEndian.Uint16(b)), true
	case nvml.VALUE_TYPE_DOUBLE:
		if f := math.Float64frombits(binary.LittleEndian.Uint64(b)); f >= 0 && f < math.MaxUint64 {
			return uint64(f), true
		}
	}
	return 0, false
}
