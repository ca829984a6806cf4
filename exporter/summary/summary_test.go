package summary

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestSummaryMeans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary.json")
	s := New(path)
	ctx := context.Background()
	t0 := time.Unix(100, 0)
	ticks := []struct {
		util, power, sm float64
		energy          float64
		failed          bool
	}{{0.2, 100, 0.1, 10, false}, {0.6, 300, 0.5, 40, false}, {0, 0, 0, 0, true}}
	for i, tk := range ticks {
		ns := exporter.NodeSamples{Node: "n", GPUs: []exporter.GPUState{{UUID: "GPU-1", Model: "H200-SXM-141GB", PCIBusID: "00000000:3B:00.0",
			Utilization: tk.util, PowerWatts: tk.power, EnergyJ: tk.energy, UtilSamples: 2, Failed: tk.failed,
			Instances: []exporter.InstanceActivity{{InstanceID: "GPU-1", HasGPM: true}}}}}
		if !tk.failed {
			ns.Samples = []*pb.Sample{{InstanceId: "GPU-1", Kind: pb.Kind_KIND_GPU, SmActive: tk.sm, Attached: i == 1}}
		}
		if err := s.Write(ctx, t0.Add(time.Duration(i)*100*time.Millisecond), []exporter.NodeSamples{ns}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	g := r.GPUs[0]
	if r.Ticks != 3 || g.Ticks != 2 || g.FailedTicks != 1 || g.UtilizationMean != 0.4 || g.PowerMeanW != 200 ||
		g.EnergyJ != 30 || g.DriverSamples != 4 || !g.GPM || g.UtilizationMax != 0.6 || g.PCIBusID != "00000000:3B:00.0" {
		t.Errorf("gpu summary %+v (run %+v)", g, r)
	}
	in := r.Instances[0]
	if in.Samples != 2 || math.Abs(in.SMActiveMean-0.3) > 1e-12 || in.Attached != 1 || in.Kind != "gpu" {
		t.Errorf("instance summary %+v", in)
	}
}

// Health counters are their growth over the run, means are over the ticks a field was read,
// and a field is supported only if it was read on every tick.
func TestSummaryHealth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary.json")
	s := New(path)
	ctx := context.Background()
	both := exporter.HealthPCIe | exporter.HealthMemTemp | exporter.HealthVersions
	ticks := []exporter.GPUState{
		{UUID: "GPU-1", ThrottleReasons: nvml.ClocksEventReasonSwPowerCap, Health: exporter.Health{Supported: both | exporter.HealthNVLink,
			PCIeTxBytes: 1000, PCIeRxBytes: 5000, MemTempC: 40, NVLinkTxBytes: 7, DriverVersion: "580.65.06"}},
		{UUID: "GPU-1", ThrottleReasons: nvml.ClocksEventReasonSwPowerCap | nvml.ClocksEventReasonSwThermalSlowdown,
			Health: exporter.Health{Supported: both, PCIeTxBytes: 3000, PCIeRxBytes: 9000, MemTempC: 50, RemapPending: true, DriverVersion: "580.65.06"}},
	}
	for i, g := range ticks {
		if err := s.Write(ctx, time.Unix(int64(i), 0), []exporter.NodeSamples{{Node: "n", GPUs: []exporter.GPUState{g}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	h := r.GPUs[0].Health
	if got := strings.Join(h.Supported, ","); got != "pcie,memory_temperature,versions" {
		t.Errorf("supported %q, want pcie,memory_temperature,versions (NVLink was missing on a tick)", got)
	}
	if h.PCIeTxBytes != 2000 || h.PCIeRxBytes != 4000 || h.MemTempMeanC != 45 || !h.RemapPending || h.DriverVersion != "580.65.06" {
		t.Errorf("health %+v", h)
	}
	if h.ClocksEventTicks["sw_power_cap"] != 2 || h.ClocksEventTicks["sw_thermal_slowdown"] != 1 || h.ClocksEventTicks["gpu_idle"] != 0 {
		t.Errorf("clocks-event ticks %v", h.ClocksEventTicks)
	}
}
