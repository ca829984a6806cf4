package sim

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// An H100 (SXM: NVLink, HBM) whole and busy from 10 s, an L40S (PCIe, GDDR) whole, an A100 split
// into MIG instances, and the three faults on the H100.
const healthScenario = `version: 1
name: health
start: "2026-01-05T00:00:00Z"
duration: 1m
interval: 1s
currency: USD
prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40, L40S: 1.0}
tiers: {pro: 1.0}
nodes:
  - name: n
    gpus:
      - model: H100-SXM5-80GB
        faults:
          - {kind: thermal_throttle, at: 20s, until: 30s}
          - {kind: remap_pending, at: 40s}
          - {kind: remap_failure, at: 50s}
          - {kind: power_cap, at: 12s, until: 17s}
      - {model: L40S}
      - {model: A100-SXM4-40GB, mig: ["1g.5gb", "3g.20gb"]}
tenants:
  - name: a
    tier: pro
    allocations:
      - {target: n/gpu0, requested: 0s, ready: 10s, end: 1m, workload: {sm: 1.0, mem: 0.5}}
      - {target: n/gpu1, requested: 0s, ready: 10s, end: 1m, workload: {sm: 0.5, mem: 0.5}}
      - {target: n/gpu2/mig1, requested: 0s, ready: 0s, end: 1m, workload: {sm: 0.5, mem: 0.5}}
`

// healthTicks reads the scenario's ticks and returns each tick's GPU states.
func healthTicks(t *testing.T) [][]exporter.GPUState {
	t.Helper()
	sc, err := scenario.Parse("health.yaml", []byte(healthScenario))
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(sc, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ticks [][]exporter.GPUState
	for d := time.Duration(0); d < sc.Duration; d += sc.Interval {
		out, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		ticks = append(ticks, out[0].GPUs)
	}
	return ticks
}

// The simulated NVML, read by the nvml source, fills every health field an SXM board reports;
// a PCIe board and a MIG-mode GPU leave unsupported what real ones do not report.
func TestSimulatedHealthThroughTheNVMLSource(t *testing.T) {
	ticks := healthTicks(t)
	at := func(s int, gpu int) exporter.GPUState { return ticks[s][gpu] }
	h100 := at(15, 0).Health
	all := exporter.HealthPCIe | exporter.HealthPCIeReplays | exporter.HealthNVLink | exporter.HealthMemTemp |
		exporter.HealthFB | exporter.HealthFBReserved | exporter.HealthCopyUtil | exporter.HealthCodecUtil | exporter.HealthRemap |
		exporter.HealthViolations | exporter.HealthVersions
	if h100.Supported != all {
		t.Errorf("H100 supports %b, want every field %b", h100.Supported, all)
	}
	if h100.DriverVersion != simDriverVersion || h100.CUDAVersion != "13.0" {
		t.Errorf("versions %q / %q", h100.DriverVersion, h100.CUDAVersion)
	}
	if h100.FBReserved == 0 || h100.FBFree+h100.FBReserved+at(15, 0).MemUsed != at(15, 0).MemTotal {
		t.Errorf("FB free %d + reserved %d + used %d != total %d", h100.FBFree, h100.FBReserved, at(15, 0).MemUsed, at(15, 0).MemTotal)
	}
	if h100.MemTempC < at(15, 0).TempC || h100.MemTempC > at(15, 0).TempC+10 {
		t.Errorf("memory temperature %v °C, want near the core's %v °C", h100.MemTempC, at(15, 0).TempC)
	}
	if h100.CopyUtil <= 0 || h100.CopyUtil > 1 || h100.EncoderUtil != 0 || h100.DecoderUtil != 0 {
		t.Errorf("copy %v, encoder %v, decoder %v: want copy busy with the workload, codecs idle", h100.CopyUtil, h100.EncoderUtil, h100.DecoderUtil)
	}

	// PCIe and NVLink traffic grow faster while busy (10 s on) than while idle.
	grow := func(f func(exporter.Health) uint64, from, to int) uint64 {
		return f(at(to, 0).Health) - f(at(from, 0).Health)
	}
	pcieRx := func(h exporter.Health) uint64 { return h.PCIeRxBytes }
	nvlink := func(h exporter.Health) uint64 { return h.NVLinkTxBytes }
	if idle, busy := grow(pcieRx, 2, 7), grow(pcieRx, 12, 17); idle == 0 || busy <= 10*idle {
		t.Errorf("PCIe RX grew %d B idle, %d B busy over 5 s: want growth with activity", idle, busy)
	}
	if idle, busy := grow(nvlink, 2, 7), grow(nvlink, 12, 17); idle != 0 || busy == 0 {
		t.Errorf("NVLink TX grew %d B idle, %d B busy: want traffic only with activity", idle, busy)
	}

	// Violation time grows while the power cap or the temperature holds the clocks, only then.
	pv := func(s int) uint64 { return at(s, 0).Health.PowerViolationNs }
	if pv(11) != 0 || pv(16)-pv(11) != uint64(5*time.Second) || pv(40) != pv(16) {
		t.Errorf("power violation %v before, %v over, %v after the cap: want 0, 5s, unchanged",
			time.Duration(pv(11)), time.Duration(pv(16)-pv(11)), time.Duration(pv(40)-pv(16)))
	}
	if at(14, 0).ThrottleReasons&nvml.ClocksEventReasonSwPowerCap == 0 || at(18, 0).ThrottleReasons&nvml.ClocksEventReasonSwPowerCap != 0 {
		t.Errorf("power-cap reason %#x during, %#x after the cap", at(14, 0).ThrottleReasons, at(18, 0).ThrottleReasons)
	}
	th := func(s int) uint64 { return at(s, 0).Health.ThermalViolationNs }
	if th(19) != 0 || th(29)-th(19) != uint64(10*time.Second) || th(45) != th(29) {
		t.Errorf("thermal violation %v before, %v over, %v after the throttle: want 0, 10s, unchanged",
			time.Duration(th(19)), time.Duration(th(29)-th(19)), time.Duration(th(45)-th(29)))
	}
	if r := at(25, 0).ThrottleReasons; r&nvml.ClocksEventReasonSwThermalSlowdown == 0 || at(25, 0).TempC < 90 {
		t.Errorf("throttled: reasons %#x, %v °C: want thermal slowdown, hot", r, at(25, 0).TempC)
	}
	if r := at(35, 0).ThrottleReasons; r&nvml.ClocksEventReasonSwThermalSlowdown != 0 {
		t.Errorf("after the throttle: reasons %#x", r)
	}

	// Remapping: pending from 40 s (one uncorrectable row), failure from 50 s.
	if h := at(39, 0).Health; h.RemapPending || h.RemapFailure || h.RemappedUncorrectable != 0 {
		t.Errorf("before the faults: %+v", h)
	}
	if h := at(45, 0).Health; !h.RemapPending || h.RemapFailure || h.RemappedUncorrectable != 1 {
		t.Errorf("remap pending: pending %v failure %v unc %d, want pending, 1 row", h.RemapPending, h.RemapFailure, h.RemappedUncorrectable)
	}
	if h := at(55, 0).Health; !h.RemapPending || !h.RemapFailure || h.RemappedUncorrectable != 1 {
		t.Errorf("remap failure: pending %v failure %v unc %d", h.RemapPending, h.RemapFailure, h.RemappedUncorrectable)
	}

	// The L40S: no NVLink, no HBM temperature, no row remapping, and it stays so.
	for _, s := range []int{1, 30, 59} {
		l40s := at(s, 1).Health
		for _, f := range []exporter.HealthFields{exporter.HealthNVLink, exporter.HealthMemTemp, exporter.HealthRemap} {
			if l40s.Has(f) {
				t.Errorf("tick %d: L40S claims %b", s, f)
			}
		}
		if !l40s.Has(exporter.HealthPCIe | exporter.HealthFB | exporter.HealthFBReserved | exporter.HealthViolations) {
			t.Errorf("tick %d: L40S supports %b, want PCIe, FB, violations", s, l40s.Supported)
		}
	}

	// MIG mode: no device-wide utilization or codec figures, the instances' GPU instance ids.
	a100 := at(30, 2)
	if a100.Health.Has(exporter.HealthCopyUtil) || a100.Health.Has(exporter.HealthCodecUtil) || !a100.Health.Has(exporter.HealthRemap) {
		t.Errorf("A100 in MIG mode supports %b: want no copy/codec utilization, remapping", a100.Health.Supported)
	}
	for i, inst := range a100.Instances {
		if !inst.HasGPUInstanceID || inst.GPUInstanceID != uint32(i) {
			t.Errorf("MIG instance %d: GPU instance id %d (known %v)", i, inst.GPUInstanceID, inst.HasGPUInstanceID)
		}
	}
}

// An xid fault reaches the exporter as NVML critical-XID events at its time; a gpu_lost fault makes
// the GPU answer GPU_IS_LOST: its ticks fail and carry no samples, then it comes back.
func TestXIDAndLostFaults(t *testing.T) {
	const doc = `version: 1
name: xid
start: "2026-01-05T00:00:00Z"
duration: 40s
interval: 1s
currency: USD
prices: {L40S: 1.0}
tiers: {pro: 1.0}
nodes:
  - name: n
    gpus:
      - model: L40S
        faults:
          - {kind: xid, at: 5s, code: 79, count: 3}
          - {kind: xid, at: 8s, code: 48}
          - {kind: gpu_lost, at: 20s, until: 25s}
      - {model: L40S}
tenants:
  - name: a
    tier: pro
    allocations:
      - {target: n/gpu0, requested: 0s, ready: 0s, end: 40s, workload: {sm: 1.0, mem: 0.5}}
      - {target: n/gpu1, requested: 0s, ready: 0s, end: 40s, workload: {sm: 1.0, mem: 0.5}}
`
	sc, err := scenario.Parse("xid.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(sc, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for d := time.Duration(0); d < sc.Duration; d += sc.Interval {
		out, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		g0, g1 := out[0].GPUs[0], out[0].GPUs[1]
		sec := int(d / time.Second)
		wantXIDs, wantLast := uint64(0), uint64(0)
		switch {
		case sec >= 8:
			wantXIDs, wantLast = 4, 48
		case sec >= 5:
			wantXIDs, wantLast = 3, 79
		}
		if g0.XIDs != wantXIDs || g0.LastXID != wantLast || g1.XIDs != 0 {
			t.Errorf("%ds: gpu0 %d XIDs (last %d), gpu1 %d; want %d (last %d), 0", sec, g0.XIDs, g0.LastXID, g1.XIDs, wantXIDs, wantLast)
		}
		lost := sec >= 20 && sec < 25
		samples0 := 0
		for _, s := range out[0].Samples {
			if s.GetGpuIndex() == 0 {
				samples0++
			}
		}
		if g0.Failed != lost || (samples0 == 0) != lost || g1.Failed {
			t.Errorf("%ds: gpu0 failed %v (%q) with %d samples, gpu1 failed %v; want gpu0 lost %v", sec, g0.Failed, g0.FailReason, samples0, g1.Failed, lost)
		}
	}
}
