package pricebook

import (
	"fmt"

	"github.com/slicemeter/slicemeter/schemas/hardware"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Instance is what the samples say about an instance that pricing needs (the facts every
// sample row carries, so attribution works without the scenario).
type Instance struct {
	Kind             string // gpu, mig or vgpu (slicemeterpb.Kind.Label)
	Model            string // GPU model
	Profile          string // MIG or vGPU profile; empty for a whole GPU
	ComputeSlices    uint32 // MIG: compute slices of the profile, of 7
	SMCount          uint32 // SMs of the MIG instance, or of the GPU
	GPUSMCount       uint32 // SMs of the physical GPU
	MemTotalBytes    uint64 // framebuffer of the instance; for vGPU the profile's
	GPUMemTotalBytes uint64 // framebuffer of the physical GPU
	ShareReplicas    uint32 // share: the replicas its GPU is shared as
}

// BilledFraction is the share of its GPU that an instance is billed for: a whole GPU 1,
// MIG compute slices / 7, vGPU profile framebuffer / GPU framebuffer, share 1 / replicas.
func BilledFraction(in Instance) (float64, error) {
	switch in.Kind {
	case pb.Kind_KIND_GPU.Label():
		return 1, nil
	case pb.Kind_KIND_MIG.Label():
		return MIGFraction(in.ComputeSlices)
	case pb.Kind_KIND_VGPU.Label():
		return VGPUFraction(in.MemTotalBytes, in.GPUMemTotalBytes)
	case pb.Kind_KIND_SHARE.Label():
		return ShareFraction(in.ShareReplicas)
	default:
		return 0, fmt.Errorf("instance kind %q: expected gpu, mig, vgpu or share", in.Kind)
	}
}

// MIGFraction is compute slices / 7 (3g.20gb → 3/7).
func MIGFraction(computeSlices uint32) (float64, error) {
	if computeSlices < 1 || computeSlices > hardware.MaxComputeSlices {
		return 0, fmt.Errorf("MIG compute slices %d: expected 1 to %d", computeSlices, hardware.MaxComputeSlices)
	}
	return float64(computeSlices) / hardware.MaxComputeSlices, nil
}

// VGPUFraction is the profile's framebuffer over the GPU's (H100-20C on 80 GB → 1/4).
func VGPUFraction(profileBytes, gpuBytes uint64) (float64, error) {
	if profileBytes == 0 || gpuBytes == 0 || profileBytes > gpuBytes {
		return 0, fmt.Errorf("vGPU framebuffer %d of GPU framebuffer %d bytes: expected 0 < profile ≤ GPU", profileBytes, gpuBytes)
	}
	return float64(profileBytes) / float64(gpuBytes), nil
}

// ShareFraction is 1 / replicas (a GPU time-sliced as 4 replicas → 1/4).
func ShareFraction(replicas uint32) (float64, error) {
	if replicas < 1 {
		return 0, fmt.Errorf("share of %d replicas: expected at least 1", replicas)
	}
	return 1 / float64(replicas), nil
}

// MIGOverhead is the share of a MIG instance's billed fraction that its SMs do not deliver:
// 1 − (instance SMs / GPU SMs) / billed fraction (A100-40GB 1g.5gb: 1 − (14/108)/(1/7) = 9.26 %).
// It is clamped to [0, 1]: an instance with more than its share of SMs has no overhead.
func MIGOverhead(smCount, gpuSMCount uint32, billedFraction float64) (float64, error) {
	if smCount == 0 || gpuSMCount == 0 || smCount > gpuSMCount || billedFraction <= 0 {
		return 0, fmt.Errorf("MIG overhead of %d of %d SMs at billed fraction %g: expected 0 < instance SMs ≤ GPU SMs and a fraction > 0",
			smCount, gpuSMCount, billedFraction)
	}
	o := 1 - (float64(smCount)/float64(gpuSMCount))/billedFraction
	return min(1, max(0, o)), nil
}
