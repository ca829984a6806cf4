package sim

import (
	"regexp"
	"testing"
)

// The nvml source reads each simulated GPU's PCI address through nvmlDeviceGetPciInfo as on a
// real node: in dcgm-exporter's format, distinct per GPU, the same at every tick.
func TestSimulatedPCIBusIDs(t *testing.T) {
	ticks := healthTicks(t)
	want := []string{"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0"}
	for k, gpus := range ticks {
		if len(gpus) != len(want) {
			t.Fatalf("tick %d: %d GPUs, want %d", k, len(gpus), len(want))
		}
		for j, st := range gpus {
			if st.PCIBusID != want[j] {
				t.Errorf("tick %d GPU %d: pci bus id %q, want %q", k, j, st.PCIBusID, want[j])
			}
		}
	}
}

// Beyond one HGX board's 8 GPUs the addresses go on in the next PCI domain, still distinct.
func TestSimulatedPCIAddressesAreDistinct(t *testing.T) {
	format := regexp.MustCompile(`^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.0$`)
	seen := map[string]int{}
	for i := range 64 {
		p := pciInfo(i)
		var id []byte
		for _, c := range p.BusId {
			if c == 0 {
				break
			}
			id = append(id, byte(c))
		}
		s := string(id)
		if !format.MatchString(s) {
			t.Errorf("GPU %d: bus id %q is not in NVML's format", i, s)
		}
		if j, dup := seen[s]; dup {
			t.Errorf("GPUs %d and %d share the bus id %s", j, i, s)
		}
		seen[s] = i
	}
}
