package chtest

import (
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

const gib = 1 << 30

// T0 is when the hand-built fleet's samples are taken from.
var T0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// Book prices the hand-built fleet.
func Book() *pricebook.PriceBook {
	return &pricebook.PriceBook{
		Currency:  "USD",
		Prices:    map[string]float64{"A100-SXM4-40GB": 1.60, "H100-SXM5-80GB": 2.40},
		Tiers:     map[string]float64{"pro": 1.0, "budget": 0.7},
		ColdStart: map[string]time.Duration{"budget": 30 * time.Second}, // pro: the default 30 s
	}
}

// Instance is one instance of the hand-built fleet.
type Instance struct {
	GPUUUID, Model, ID, Profile string
	Kind                        pb.Kind
	Slices, SMs, GPUSMs         uint32
	Mem, GPUMem                 uint64
}

// The hand-built fleet: on node-a an A100 MIG 1g.5gb and a whole A100; on node-b two vGPUs of
// an H100.
var (
	MigA100 = Instance{GPUUUID: "GPU-a0", Model: "A100-SXM4-40GB", ID: "gpu0/mig0", Profile: "1g.5gb", Kind: pb.Kind_KIND_MIG,
		Slices: 1, SMs: 14, GPUSMs: 108, Mem: 5 * gib, GPUMem: 40 * gib}
	WholeA100 = Instance{GPUUUID: "GPU-a1", Model: "A100-SXM4-40GB", ID: "gpu1", Kind: pb.Kind_KIND_GPU,
		SMs: 108, GPUSMs: 108, Mem: 40 * gib, GPUMem: 40 * gib}
	VGPU0 = Instance{GPUUUID: "GPU-b0", Model: "H100-SXM5-80GB", ID: "gpu0/vgpu0", Profile: "H100-20C", Kind: pb.Kind_KIND_VGPU,
		SMs: 132, GPUSMs: 132, Mem: 20 * gib, GPUMem: 80 * gib}
	VGPU1 = Instance{GPUUUID: "GPU-b0", Model: "H100-SXM5-80GB", ID: "gpu0/vgpu1", Profile: "H100-20C", Kind: pb.Kind_KIND_VGPU,
		SMs: 132, GPUSMs: 132, Mem: 20 * gib, GPUMem: 80 * gib}
)

// Sample is the instance's sample at T0 + at.
func (in Instance) Sample(at time.Duration, interval time.Duration, attached bool, sm float64) *pb.Sample {
	s := &pb.Sample{
		TsNs: uint64(T0.Add(at).UnixNano()), IntervalNs: uint64(interval), GpuUuid: in.GPUUUID, Model: in.Model,
		Kind: in.Kind, InstanceId: in.ID, Profile: in.Profile, Attached: attached, SmActive: sm,
		MemTotalBytes: in.Mem, ComputeSlices: in.Slices, SmCount: in.SMs, GpuSmCount: in.GPUSMs, GpuMemTotalBytes: in.GPUMem,
	}
	if in.Kind == pb.Kind_KIND_VGPU {
		s.Vgpu = &pb.VgpuSchedule{}
	}
	return s
}
