package nvmlsource

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// pciBusID is the GPU's PCI address as dcgm-exporter's pci_bus_id label shows it: NVML's busId
// with an 8-digit domain, upper-case hex ("00000000:3B:00.0"). Older drivers fill only the
// legacy 4-digit form, some strings come lower-case, and a string NVML left empty is rebuilt
// from the numeric fields, so that one GPU reads the same whatever the driver. A string that is
// no PCI address is kept as NVML gave it rather than dropped.
func pciBusID(p nvml.PciInfo) string {
	s := cString(p.BusId[:])
	if s == "" {
		s = cString(p.BusIdLegacy[:])
	}
	if s == "" {
		if p.Domain == 0 && p.Bus == 0 && p.Device == 0 {
			return "" // nothing reported
		}
		return fmt.Sprintf("%08X:%02X:%02X.0", p.Domain, p.Bus, p.Device)
	}
	if id, ok := parsePCIAddress(s); ok {
		return id
	}
	return s
}

// parsePCIAddress parses [domain:]bus:device.function in hex and formats it canonically.
func parsePCIAddress(s string) (string, bool) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return "", false
	}
	domain := "0"
	if len(parts) == 3 {
		domain, parts = parts[0], parts[1:]
	}
	devStr, fnStr, ok := strings.Cut(parts[1], ".")
	if !ok {
		return "", false
	}
	var v [4]uint64
	for i, f := range []struct {
		s    string
		bits int
	}{{domain, 32}, {parts[0], 8}, {devStr, 5}, {fnStr, 3}} {
		if f.s == "" {
			return "", false
		}
		n, err := strconv.ParseUint(f.s, 16, f.bits)
		if err != nil {
			return "", false
		}
		v[i] = n
	}
	return fmt.Sprintf("%08X:%02X:%02X.%X", v[0], v[1], v[2], v[3]), true
}

// cString is the NUL-terminated string in a C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return strings.TrimSpace(sb.String())
}
