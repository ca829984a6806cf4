// Package hardware is the catalog of GPU models the simulator knows: SM counts, framebuffer and
// MIG profiles. On real hardware the same facts come from NVML; the simulator and scenario
// validation take them from here.
package hardware

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
)

// GiB is 2^30 bytes; GPU model names ("80GB") and profiles ("20gb", "-20C") count in GiB.
const GiB = 1 << 30

// Model is one GPU model.
type Model struct {
	Name        string
	SMs         uint32
	MemoryBytes uint64
	PowerIdleW  float64
	PowerMaxW   float64
	MIG         map[string]MIGProfile // profile name -> profile; empty: MIG unsupported
	// VGPU are the C-series (compute) vGPU profiles NVIDIA's vGPU software offers on the
	// model, largest first; empty: none listed here. Right-sizing (slicemeter advise) takes
	// its vGPU candidates from it, so that a shape is data, not code.
	VGPU []VGPUProfile
}

// VGPUProfile is one C-series vGPU profile: its name (e.g. H100-20C) and its framebuffer.
// Its billed fraction and its compute capacity are its framebuffer over the GPU's (the price
// book's rule: the scheduler gives an equal-share vGPU that share of the GPU's time).
type VGPUProfile struct {
	Name        string
	MemoryBytes uint64
}

// cSeries is the C-series profiles prefix-<GB>C for each framebuffer size given, in GiB.
func cSeries(prefix string, gbs ...uint64) []VGPUProfile {
	out := make([]VGPUProfile, len(gbs))
	for i, gb := range gbs {
		out[i] = VGPUProfile{Name: prefix + "-" + strconv.FormatUint(gb, 10) + "C", MemoryBytes: gb * GiB}
	}
	return out
}

// MIGProfile is one MIG GPU-instance profile.
type MIGProfile struct {
	ComputeSlices uint32 // of 7
	SMs           uint32
	MemoryBytes   uint64
}

// MaxComputeSlices is the number of compute slices of a MIG-capable GPU.
const MaxComputeSlices = 7

// SM counts per MIG profile follow NVIDIA's MIG user guide
// (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html).
//
// The vGPU C-series profiles follow NVIDIA's vGPU type tables ("Virtual GPU Types for
// Supported GPUs" of the Virtual GPU Software User Guide, and NVIDIA AI Enterprise's "Hopper
// Architecture vGPU Types", docs.nvidia.com/ai-enterprise/release-8/latest/infra-software/vgpu/reference/hopper.html),
// time-sliced C-series tables, re-read on 2026-12-06: A100 PCIe 80GB A100D-80C, -40C, -20C,
// -16C, -10C, -8C, -4C; L40S L40S-48C, -24C, -16C, -12C, -8C, -6C, -4C; H200 SXM5 141GB
// H200X-141C, -70C, -35C, -28C, -17C, -14C, -8C, -7C, -4C. The H100 (80, 40, 20, 16, 10, 8,
// 5, 4 GB) and A100 40GB (40, 20, 10, 8, 5, 4 GB) lists are the right-sizing contract's; NVIDIA
// names the H100 SXM5's types H100XM-*, the contract and the scenarios H100-*.
var catalog = map[string]Model{
	"A100-SXM4-40GB": {Name: "A100-SXM4-40GB", SMs: 108, MemoryBytes: 40 * GiB, PowerIdleW: 55, PowerMaxW: 400, MIG: map[string]MIGProfile{
		"1g.5gb": {1, 14, 5 * GiB}, "2g.10gb": {2, 28, 10 * GiB}, "3g.20gb": {3, 42, 20 * GiB},
		"4g.20gb": {4, 56, 20 * GiB}, "7g.40gb": {7, 98, 40 * GiB},
	}, VGPU: cSeries("A100", 40, 20, 10, 8, 5, 4)},
	"A100-SXM4-80GB": {Name: "A100-SXM4-80GB", SMs: 108, MemoryBytes: 80 * GiB, PowerIdleW: 60, PowerMaxW: 400, MIG: map[string]MIGProfile{
		"1g.10gb": {1, 14, 10 * GiB}, "2g.20gb": {2, 28, 20 * GiB}, "3g.40gb": {3, 42, 40 * GiB},
		"4g.40gb": {4, 56, 40 * GiB}, "7g.80gb": {7, 98, 80 * GiB},
	}, VGPU: cSeries("A100D", 80, 40, 20, 16, 10, 8, 4)},
	"H100-SXM5-80GB": {Name: "H100-SXM5-80GB", SMs: 132, MemoryBytes: 80 * GiB, PowerIdleW: 70, PowerMaxW: 700, MIG: map[string]MIGProfile{
		"1g.10gb": {1, 16, 10 * GiB}, "1g.20gb": {1, 16, 20 * GiB}, "2g.20gb": {2, 32, 20 * GiB},
		"3g.40gb": {3, 60, 40 * GiB}, "4g.40gb": {4, 64, 40 * GiB}, "7g.80gb": {7, 132, 80 * GiB},
	}, VGPU: cSeries("H100", 80, 40, 20, 16, 10, 8, 5, 4)},
	"H200-SXM-141GB": {Name: "H200-SXM-141GB", SMs: 132, MemoryBytes: 141 * GiB, PowerIdleW: 75, PowerMaxW: 700, MIG: map[string]MIGProfile{
		"1g.18gb": {1, 16, 18 * GiB}, "1g.35gb": {1, 16, 35 * GiB}, "2g.35gb": {2, 32, 35 * GiB},
		"3g.71gb": {3, 60, 71 * GiB}, "4g.71gb": {4, 64, 71 * GiB}, "7g.141gb": {7, 132, 141 * GiB},
	}, VGPU: cSeries("H200X", 141, 70, 35, 28, 17, 14, 8, 7, 4)},
	"L40S": {Name: "L40S", SMs: 142, MemoryBytes: 48 * GiB, PowerIdleW: 35, PowerMaxW: 350,
		VGPU: cSeries("L40S", 48, 24, 16, 12, 8, 6, 4)},
}

// Lookup returns the model of that name.
func Lookup(name string) (Model, bool) {
	m, ok := catalog[name]
	return m, ok
}

// Names lists the known models, sorted, for error messages.
func Names() []string {
	names := make([]string, 0, len(catalog))
	for n := range catalog {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// MIGProfileNames lists a model's MIG profiles, sorted.
func (m Model) MIGProfileNames() []string {
	names := make([]string, 0, len(m.MIG))
	for n := range m.MIG {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// vGPU type names end in the framebuffer in GB and a letter for the license class:
// H100-20C, A100-40C, L40S-12Q.
var vgpuProfile = regexp.MustCompile(`^[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*-([0-9]+)[A-Z]$`)

// VGPUFramebuffer is the framebuffer of a vGPU profile, in bytes.
func VGPUFramebuffer(profile string) (uint64, error) {
	m := vgpuProfile.FindStringSubmatch(profile)
	if m == nil {
		return 0, fmt.Errorf("vGPU profile %q: expected a name like H100-20C (framebuffer in GB, then a letter)", profile)
	}
	gb, err := strconv.ParseUint(m[1], 10, 32)
	if err != nil || gb == 0 {
		return 0, fmt.Errorf("vGPU profile %q: framebuffer %q is not a positive number of GB", profile, m[1])
	}
	return gb * GiB, nil
}
