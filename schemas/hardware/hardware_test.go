package hardware

import "testing"

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
	h100, _ := Lookup("H100-SXM5-80GB")
	var gbs []uint64
	for _, p := range h100.VGPU {
		gbs = append(gbs, p.MemoryBytes/GiB)
	}
	if want := []uint64{80, 40, 20, 16, 10, 8, 5, 4}; len(gbs) != len(want) {
		t.Errorf("H100-SXM5-80GB vGPU profiles %v GB, want %v", gbs, want)
	}
}
