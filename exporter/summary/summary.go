// Package summary is a Sink that condenses a run into per-GPU and per-instance figures, written
// as JSON at every flush: what the device check compares with nvidia-smi.
package summary

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
)

// Summary accumulates a run.
type Summary struct {
	path string
	mu   sync.Mutex
	run  Run
	gpus map[string]*GPU
	inst map[string]*Instance
}

// Run is the summary file's content.
type Run struct {
	First     time.Time   `json:"first_tick"`
	Last      time.Time   `json:"last_tick"`
	Ticks     int         `json:"ticks"`
	Samples   int         `json:"samples"`
	GPUs      []*GPU      `json:"gpus"`
	Instances []*Instance `json:"instances"`
}

// GPU is one physical GPU over the run; means are over the ticks it was read.
type GPU struct {
	Node            string  `json:"node"`
	Index           uint32  `json:"index"`
	UUID            string  `json:"uuid"`
	Model           string  `json:"model"`
	PCIBusID        string  `json:"pci_bus_id"` // empty where NVML did not report it
	Ticks           int     `json:"ticks"`
	FailedTicks     int     `json:"failed_ticks"`
	DriverSamples   int     `json:"driver_utilization_samples"`
	UtilizationMean float64 `json:"utilization_mean"`
	UtilizationMax  float64 `json:"utilization_max"`
	PowerMeanW      float64 `json:"power_mean_watts"`
	MemUsedMean     float64 `json:"memory_used_mean_bytes"`
	MemTotal        uint64  `json:"memory_total_bytes"`
	TempMeanC       float64 `json:"temperature_mean_celsius"`
	SMClockMeanHz   float64 `json:"sm_clock_mean_hertz"`
	EnergyJ         float64 `json:"energy_joules"` // counter growth over the run
	XIDs            uint64  `json:"xids"`
	GPM             bool    `json:"gpm"`
	Health          Health  `json:"health"`
	firstEnergy     float64
}

// Health is a GPU's health signals over the run. Counters are their growth over the run, means
// are over the ticks the field was read, the rest are the last tick's.
type Health struct {
	// Supported names the fields the GPU reported on every tick it was read (healthNames).
	Supported             []string `json:"supported"`
	PCIeTxBytes           uint64   `json:"pcie_tx_bytes"`
	PCIeRxBytes           uint64   `json:"pcie_rx_bytes"`
	PCIeReplays           uint64   `json:"pcie_replays"`
	NVLinkTxBytes         uint64   `json:"nvlink_tx_bytes"`
	NVLinkRxBytes         uint64   `json:"nvlink_rx_bytes"`
	MemTempMeanC          float64  `json:"memory_temperature_mean_celsius"`
	FBFreeMean            float64  `json:"fb_free_mean_bytes"`
	FBReserved            uint64   `json:"fb_reserved_bytes"`
	CopyUtilMean          float64  `json:"copy_utilization_mean"`
	EncoderUtilMean       float64  `json:"encoder_utilization_mean"`
	DecoderUtilMean       float64  `json:"decoder_utilization_mean"`
	RemappedCorrectable   uint64   `json:"remapped_rows_correctable"`
	RemappedUncorrectable uint64   `json:"remapped_rows_uncorrectable"`
	RemapPending          bool     `json:"remap_pending"`
	RemapFailure          bool     `json:"remap_failure"`
	PowerViolationNs      uint64   `json:"power_violation_ns"`
	ThermalViolationNs    uint64   `json:"thermal_violation_ns"`
	DriverVersion         string   `json:"driver_version"`
	CUDAVersion           string   `json:"cuda_version"`
	// ClocksEventTicks counts the ticks each clocks-event reason was set, by nvidia-smi's name
	// (clocks_event_reasons.NAME).
	ClocksEventTicks map[string]int `json:"clocks_event_ticks"`

	supported exporter.HealthFields
	n         map[exporter.HealthFields]int // ticks each field was read
	first     exporter.Health               // the first reading of each counter
}

// healthNames name Health's fields in the summary.
var healthNames = []struct {
	bit  exporter.HealthFields
	name string
}{
	{exporter.HealthPCIe, "pcie"}, {exporter.HealthPCIeReplays, "pcie_replays"}, {exporter.HealthNVLink, "nvlink"},
	{exporter.HealthMemTemp, "memory_temperature"}, {exporter.HealthFB, "fb"}, {exporter.HealthCopyUtil, "copy_utilization"},
	{exporter.HealthCodecUtil, "codec_utilization"}, {exporter.HealthRemap, "row_remapping"},
	{exporter.HealthViolations, "violations"}, {exporter.HealthVersions, "versions"},
}

// clocksEventNames are NVML's clocks-event reason bits by nvidia-smi's names.
var clocksEventNames = []struct {
	bit  uint64
	name string
}{
	{nvml.ClocksEventReasonGpuIdle, "gpu_idle"}, {nvml.ClocksEventReasonApplicationsClocksSetting, "applications_clocks_setting"},
	{nvml.ClocksEventReasonSwPowerCap, "sw_power_cap"}, {nvml.ClocksThrottleReasonHwSlowdown, "hw_slowdown"},
	{nvml.ClocksEventReasonSyncBoost, "sync_boost"}, {nvml.ClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
}

// add accumulates one tick's health (ticks is the GPU's read ticks so far, this one included).
func (a *Health) add(h exporter.Health, reasons uint64, ticks int) {
	if ticks == 1 {
		a.supported, a.n, a.first, a.ClocksEventTicks = h.Supported, map[exporter.HealthFields]int{}, h, map[string]int{}
	}
	a.supported &= h.Supported
	for _, c := range clocksEventNames {
		if reasons&c.bit != 0 {
			a.ClocksEventTicks[c.name]++
		}
	}
	mean := func(bit exporter.HealthFields, m *float64, v float64) {
		if h.Has(bit) {
			a.n[bit]++
			*m += (v - *m) / float64(a.n[bit])
		}
	}
	mean(exporter.HealthMemTemp, &a.MemTempMeanC, h.MemTempC)
	mean(exporter.HealthFB, &a.FBFreeMean, float64(h.FBFree))
	mean(exporter.HealthCopyUtil, &a.CopyUtilMean, h.CopyUtil)
	if h.Has(exporter.HealthCodecUtil) {
		a.n[exporter.HealthCodecUtil]++
		n := float64(a.n[exporter.HealthCodecUtil])
		a.EncoderUtilMean += (h.EncoderUtil - a.EncoderUtilMean) / n
		a.DecoderUtilMean += (h.DecoderUtil - a.DecoderUtilMean) / n
	}
	f := a.first
	a.PCIeTxBytes, a.PCIeRxBytes = h.PCIeTxBytes-f.PCIeTxBytes, h.PCIeRxBytes-f.PCIeRxBytes
	a.NVLinkTxBytes, a.NVLinkRxBytes = h.NVLinkTxBytes-f.NVLinkTxBytes, h.NVLinkRxBytes-f.NVLinkRxBytes
	a.PowerViolationNs, a.ThermalViolationNs = h.PowerViolationNs-f.PowerViolationNs, h.ThermalViolationNs-f.ThermalViolationNs
	a.PCIeReplays, a.FBReserved = h.PCIeReplays, h.FBReserved
	a.RemappedCorrectable, a.RemappedUncorrectable, a.RemapPending, a.RemapFailure = h.RemappedCorrectable, h.RemappedUncorrectable, h.RemapPending, h.RemapFailure
	a.DriverVersion, a.CUDAVersion = h.DriverVersion, h.CUDAVersion
	a.Supported = a.Supported[:0]
	for _, hn := range healthNames {
		if a.supported&hn.bit == hn.bit {
			a.Supported = append(a.Supported, hn.name)
		}
	}
}

// Instance is one instance over the run.
type Instance struct {
	Node         string  `json:"node"`
	ID           string  `json:"id"`
	Kind         string  `json:"kind"`
	Profile      string  `json:"profile,omitempty"`
	Samples      int     `json:"samples"`
	SMActiveMean float64 `json:"sm_active_mean"`
	SMActiveMax  float64 `json:"sm_active_max"`
	MemUsedMean  float64 `json:"memory_used_mean_bytes"`
	Attached     int     `json:"attached_samples"`
}

var _ exporter.Sink = (*Summary)(nil)

// New writes the summary to path at every flush.
func New(path string) *Summary {
	return &Summary{path: path, gpus: map[string]*GPU{}, inst: map[string]*Instance{}}
}

// Write adds a tick.
func (s *Summary) Write(_ context.Context, tick time.Time, samples []exporter.NodeSamples) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run.Ticks == 0 {
		s.run.First = tick
	}
	s.run.Last = tick
	s.run.Ticks++
	for _, ns := range samples {
		for _, g := range ns.GPUs {
			k := ns.Node + "/" + g.UUID
			a := s.gpus[k]
			if a == nil {
				a = &GPU{Node: ns.Node, Index: g.Index, UUID: g.UUID, Model: g.Model, MemTotal: g.MemTotal, firstEnergy: g.EnergyJ}
				s.gpus[k] = a
			}
			a.PCIBusID = g.PCIBusID
			if g.Failed {
				a.FailedTicks++
				continue
			}
			a.Ticks++
			n := float64(a.Ticks)
			a.UtilizationMean += (g.Utilization - a.UtilizationMean) / n
			a.UtilizationMax = max(a.UtilizationMax, g.Utilization)
			a.PowerMeanW += (g.PowerWatts - a.PowerMeanW) / n
			a.MemUsedMean += (float64(g.MemUsed) - a.MemUsedMean) / n
			a.TempMeanC += (g.TempC - a.TempMeanC) / n
			a.SMClockMeanHz += (g.SMClockHz - a.SMClockMeanHz) / n
			a.DriverSamples += g.UtilSamples
			a.EnergyJ = g.EnergyJ - a.firstEnergy
			a.XIDs = g.XIDs
			a.Health.add(g.Health, g.ThrottleReasons, a.Ticks)
			for _, ia := range g.Instances {
				a.GPM = a.GPM || ia.HasGPM
			}
		}
		for _, smp := range ns.Samples {
			s.run.Samples++
			k := ns.Node + "/" + smp.InstanceId
			a := s.inst[k]
			if a == nil {
				a = &Instance{Node: ns.Node, ID: smp.InstanceId, Kind: smp.Kind.Label(), Profile: smp.Profile}
				s.inst[k] = a
			}
			a.Samples++
			n := float64(a.Samples)
			a.SMActiveMean += (smp.SmActive - a.SMActiveMean) / n
			a.SMActiveMax = max(a.SMActiveMax, smp.SmActive)
			a.MemUsedMean += (float64(smp.MemUsedBytes) - a.MemUsedMean) / n
			if smp.Attached {
				a.Attached++
			}
		}
	}
	return nil
}

// Flush writes the summary so far (atomically: a reader never sees half a file).
func (s *Summary) Flush(context.Context) error {
	s.mu.Lock()
	r := s.run
	r.GPUs = sortedValues(s.gpus, func(g *GPU) string { return fmt.Sprintf("%s/%08d", g.Node, g.Index) })
	r.Instances = sortedValues(s.inst, func(i *Instance) string { return i.Node + "/" + i.ID })
	b, err := json.MarshalIndent(r, "", "  ")
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encoding the run summary: %w", err)
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the run summary: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("writing the run summary: %w", err)
	}
	return nil
}

func sortedValues[T any](m map[string]*T, key func(*T) string) []*T {
	out := make([]*T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}
