// The simulated GPU health: PCIe and NVLink traffic, memory temperature, the framebuffer's
// reserved part, copy and codec utilization, row remapping and violation time, as the nvml
// source reads them (nvmlDeviceGetFieldValues and friends), and the scenario's injected faults.

package sim

import (
	"encoding/binary"
	"math"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/schemas/hardware"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The simulated driver's versions (nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion).
const (
	simDriverVersion = "580.65.06"
	simCUDAVersion   = 13000 // 13.0
)

// Simulated traffic in bytes per second: at idle, and added at full SM activity. Inputs flow
// host → device (PCIe RX as the GPU counts it) more than results flow back.
const (
	pcieIdleBps   = 2e6
	pcieRxFullBps = 4e9
	pcieTxFullBps = 1e9
	nvlinkFullBps = 40e9 // each way, summed over the links
)

// healthCaps is what a model's driver reports beyond the basics: SXM boards (A100, H100, H200)
// have NVLink and HBM, whose temperature is read and whose rows are remapped on errors; a PCIe
// board with GDDR (L40S) reports none of the three.
type healthCaps struct{ nvlink, hbm bool }

func capsOf(m hardware.Model) healthCaps {
	sxm := strings.Contains(m.Name, "SXM")
	return healthCaps{nvlink: sxm, hbm: sxm}
}

// healthState is what the simulated driver has counted for one GPU.
type healthState struct {
	caps               healthCaps
	faults             []scenario.Fault
	faultOn            []bool // per fault, at the current tick
	pcieTx, pcieRx     float64
	nvlinkTx, nvlinkRx float64
	powerViolation     time.Duration
	thermalViolation   time.Duration
	remappedUnc        uint64
	xids               []uint64 // XID codes reported and not read yet by the event set
}

// advanceHealth counts tick d's traffic, violation time and the faults starting in it.
func (g *gpu) advanceHealth(d, interval time.Duration) {
	h := &g.health
	act, sec := min(1, g.activity(d)), interval.Seconds()
	h.pcieRx += (pcieIdleBps + act*pcieRxFullBps) * sec
	h.pcieTx += (pcieIdleBps + act*pcieTxFullBps) * sec
	if h.caps.nvlink {
		h.nvlinkTx += act * nvlinkFullBps * sec
		h.nvlinkRx += act * nvlinkFullBps * sec
	}
	for i, f := range h.faults {
		on := f.Active(inPeriod(d, g.period))
		if on && !h.faultOn[i] && f.Kind == scenario.FaultRemapPending {
			h.remappedUnc++ // the row the pending remap is for
		}
		if on && !h.faultOn[i] && f.Kind == scenario.FaultXID {
			for range f.Count {
				h.xids = append(h.xids, f.Code)
			}
		}
		h.faultOn[i] = on
	}
	if g.faulty(scenario.FaultThermalThrottle) {
		h.thermalViolation += interval
	}
	if g.faulty(scenario.FaultPowerCap) {
		h.powerViolation += interval
	}
}

// faulty says whether a fault of kind k is on at the current tick.
func (g *gpu) faulty(k scenario.FaultKind) bool {
	for i, f := range g.health.faults {
		if f.Kind == k && g.health.faultOn[i] {
			return true
		}
	}
	return false
}

// tempC is the core temperature at d: with activity, and near the limit while thermally throttled.
func (g *gpu) tempC(d time.Duration) uint32 {
	if g.faulty(scenario.FaultThermalThrottle) {
		return 92
	}
	return uint32(30 + math.Round(50*min(1, g.activity(d))))
}

// clocksEventReasons is NVML's reason mask at d.
func (g *gpu) clocksEventReasons(d time.Duration) uint64 {
	var r uint64
	if g.activity(d) == 0 {
		r |= nvml.ClocksEventReasonGpuIdle
	}
	if g.faulty(scenario.FaultPowerCap) {
		r |= nvml.ClocksEventReasonSwPowerCap
	}
	if g.faulty(scenario.FaultThermalThrottle) {
		r |= nvml.ClocksEventReasonSwThermalSlowdown
	}
	return r
}

// smClockMHz drops while thermally throttled.
func (g *gpu) smClockMHz() uint32 {
	if g.faulty(scenario.FaultThermalThrottle) {
		return simSMClockMHz * 6 / 10
	}
	return simSMClockMHz
}

// memoryV2Version is computed once: STRUCT_VERSION boxes its argument (an allocation per call).
var memoryV2Version = nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2)

// memoryV2 splits the framebuffer as nvmlDeviceGetMemoryInfo_v2 does: the driver reserves a
// small part (about 0.6 %, 512 MiB of 80 GiB), the rest is used or free.
func (g *gpu) memoryV2(d time.Duration) nvml.Memory_v2 {
	total := g.model.MemoryBytes
	reserved := total / 160
	used := min(g.memUsed(d), total-reserved)
	return nvml.Memory_v2{Version: memoryV2Version, Total: total, Reserved: reserved, Used: used, Free: total - reserved - used}
}

// utilizationRates is nvmlDeviceGetUtilizationRates: not supported in MIG mode, as on real GPUs.
// The memory controller is busy for part of the SMs' active time.
func (g *gpu) utilizationRates(d time.Duration) (nvml.Utilization, nvml.Return) {
	if g.instances[0].kind == pb.Kind_KIND_MIG {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	act := min(1, g.activity(d))
	return nvml.Utilization{Gpu: uint32(math.Round(100 * act)), Memory: uint32(math.Round(40 * act))}, nvml.SUCCESS
}

// codecUtilization: the scenarios' workloads are compute, so the codecs are idle (MIG mode: not
// supported, as utilization rates).
func (g *gpu) codecUtilization() (uint32, uint32, nvml.Return) {
	if g.instances[0].kind == pb.Kind_KIND_MIG {
		return 0, 0, nvml.ERROR_NOT_SUPPORTED
	}
	return 0, 167000, nvml.SUCCESS // NVML's sampling period, µs
}

// violationStatus is nvmlDeviceGetViolationStatus.
func (g *gpu) violationStatus(w *world, p nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
	ref := uint64(w.start.Add(w.now()).UnixNano())
	switch p {
	case nvml.PERF_POLICY_POWER:
		return nvml.ViolationTime{ReferenceTime: ref, ViolationTime: uint64(g.health.powerViolation)}, nvml.SUCCESS
	case nvml.PERF_POLICY_THERMAL:
		return nvml.ViolationTime{ReferenceTime: ref, ViolationTime: uint64(g.health.thermalViolation)}, nvml.SUCCESS
	}
	return nvml.ViolationTime{}, nvml.ERROR_NOT_SUPPORTED
}

// fieldValues answers nvmlDeviceGetFieldValues: each field in place, NOT_SUPPORTED for what
// the model does not report.
func (g *gpu) fieldValues(d time.Duration, values []nvml.FieldValue) nvml.Return {
	if len(values) == 0 {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	h := &g.health
	for i := range values {
		v := &values[i]
		var n uint64
		ok := true
		switch v.FieldId {
		case nvml.FI_DEV_PCIE_COUNT_TX_BYTES:
			n = uint64(h.pcieTx)
		case nvml.FI_DEV_PCIE_COUNT_RX_BYTES:
			n = uint64(h.pcieRx)
		case nvml.FI_DEV_PCIE_REPLAY_COUNTER:
			n = 0 // a healthy link
		case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
			b := h.nvlinkTx
			if v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX {
				b = h.nvlinkRx
			}
			n, ok = uint64(b/1024), h.caps.nvlink // KiB
		case nvml.FI_DEV_MEMORY_TEMP:
			n, ok = uint64(g.tempC(d)+4), h.caps.hbm // HBM runs a little hotter than the core
		case nvml.FI_DEV_REMAPPED_COR:
			n, ok = 0, h.caps.hbm
		case nvml.FI_DEV_REMAPPED_UNC:
			n, ok = h.remappedUnc, h.caps.hbm
		case nvml.FI_DEV_REMAPPED_PENDING:
			n, ok = flag(g.faulty(scenario.FaultRemapPending)), h.caps.hbm
		case nvml.FI_DEV_REMAPPED_FAILURE:
			n, ok = flag(g.faulty(scenario.FaultRemapFailure)), h.caps.hbm
		case nvml.FI_DEV_PERF_POLICY_POWER:
			n = uint64(h.powerViolation)
		case nvml.FI_DEV_PERF_POLICY_THERMAL:
			n = uint64(h.thermalViolation)
		default:
			ok = false
		}
		v.Timestamp = d.Microseconds() // the tick's offset: enough for a simulated driver
		if !ok {
			v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			continue
		}
		v.NvmlReturn, v.ValueType = uint32(nvml.SUCCESS), uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
		binary.LittleEndian.PutUint64(v.Value[:], n)
	}
	return nvml.SUCCESS
}

func flag(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
