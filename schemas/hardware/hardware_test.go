package hardware

import (
	"strings"
	"testing"
)

// TestVGPUProfiles checks the catalog's vGPU profiles against the rules the rest of slicemeter
// reads them by: the name gives the framebuffer (VGPUFramebuffer, the price book's billed
// fraction), no profile is larger than its GPU, and they are listed largest first, once each.
func TestVGPUProfiles(t *testing.T) {
	for _, name := range Names() {
		m, _ := Lookup(name)
		seen := map[string]bool{}
		for i, p := range m.VGPU {
			fb, err := VGPUFramebuffer(p.Name)
			if err != nil || fb != p.MemoryBytes {
				t.Errorf("%s: profile %s: framebuffer from its name %d (%v), listed %d", name, p.Name, fb, err, p.MemoryBytes)
			}
			if p.MemoryBytes > m.MemoryBytes {
				t.Errorf("%s: profile %s (%d bytes) is larger than the GPU (%d)", name, p.Name, p.MemoryBytes, m.MemoryBytes)
			}
			if i > 0 && p.MemoryBytes >= m.VGPU[i-1].MemoryBytes {
				t.Errorf("%s: profile %s is not smaller than %s before it", name, p.Name, m.VGPU[i-1].Name)
			}
			if seen[p.Name] {
				t.Errorf("%s: profile %s listed twice", name, p.Name)
			}
			seen[p.Name] = true
		}
	}
	// NVIDIA's tables of time-sliced C-series types (hardware.go names the sources).
	for model, want := range map[string][]string{
		"H100-SXM5-80GB": {"H100-80C", "H100-40C", "H100-20C", "H100-16C", "H100-10C", "H100-8C", "H100-5C", "H100-4C"},
		"A100-SXM4-40GB": {"A100-40C", "A100-20C", "A100-10C", "A100-8C", "A100-5C", "A100-4C"},
		"A100-SXM4-80GB": {"A100D-80C", "A100D-40C", "A100D-20C", "A100D-16C", "A100D-10C", "A100D-8C", "A100D-4C"},
		"H200-SXM-141GB": {"H200X-141C", "H200X-70C", "H200X-35C", "H200X-28C", "H200X-17C", "H200X-14C", "H200X-8C", "H200X-7C", "H200X-4C"},
		"L40S":           {"L40S-48C", "L40S-24C", "L40S-16C", "L40S-12C", "L40S-8C", "L40S-6C", "L40S-4C"},
	} {
		m, _ := Lookup(model)
		var got []string
		for _, p := range m.VGPU {
			got = append(got, p.Name)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s vGPU profiles %v, want %v", model, got, want)
		}
	}
}
