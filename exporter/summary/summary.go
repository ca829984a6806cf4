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
	firstEnergy     float64
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
