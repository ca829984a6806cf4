package sim

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
)

// An older driver without nvmlDeviceGetVgpuSchedulerLog_v2: the nvml source must not call it
// (a missing symbol kills the process) and falls back to the driver's vGPU utilization.
func TestVGPUWithoutSchedulerLog(t *testing.T) {
	sc, src := load(t, "vgpu-timeslice")
	n := src.nodes[0]
	lib := oldDriver{Interface: n.world.lib}
	start := sc.Start.Add(30 * time.Second)
	for d := time.Duration(0); d < 30*time.Second; d += sc.Interval {
		n.world.advance(d) // the vGPU schedulers run from the scenario's start
	}
	s, err := nvmlsource.Open(lib, nvmlsource.Config{Node: n.name, IDs: nvmlsource.Indices}, start)
	if err != nil {
		t.Fatal(err)
	}
	n.world.advance(30 * time.Second)
	out, err := s.Read(context.Background(), start.Add(sc.Interval), sc.Interval)
	if err != nil {
		t.Fatal(err)
	}
	for _, smp := range out[0].Samples {
		want := 0.0
		if smp.InstanceId != "gpu0/vgpu3" {
			want = 2.0 / 6.06 // three busy vGPUs share the GPU
		}
		// One tick holds a whole number of 2 ms slices: its share is within a slice of the mean.
		if smp.Vgpu != nil || math.Abs(smp.SmActive-want) > 0.025 {
			t.Errorf("%s: sm_active %v (schedule %v), want about %v from the driver's utilization and no schedule", smp.InstanceId, smp.SmActive, smp.Vgpu, want)
		}
	}
}

// oldDriver is an NVML without the scheduler log symbol.
type oldDriver struct{ nvml.Interface }

func (oldDriver) Extensions() nvml.ExtendedInterface {
	return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
		if s == "nvmlDeviceGetVgpuSchedulerLog_v2" {
			return errors.New("undefined symbol")
		}
		return nil
	}}
}

func (o oldDriver) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, r := o.Interface.DeviceGetHandleByIndex(i)
	if md, ok := d.(*mock.Device); ok {
		md.GetVgpuSchedulerLog_v2Func = nil // the mock panics if it is called
	}
	return d, r
}
