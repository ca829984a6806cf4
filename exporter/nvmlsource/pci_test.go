package nvmlsource

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

func pciInfo(busID, legacy string, domain, bus, device uint32) nvml.PciInfo {
	p := nvml.PciInfo{Domain: domain, Bus: bus, Device: device}
	for i := range min(len(busID), len(p.BusId)-1) {
		p.BusId[i] = int8(busID[i])
	}
	for i := range min(len(legacy), len(p.BusIdLegacy)-1) {
		p.BusIdLegacy[i] = int8(legacy[i])
	}
	return p
}

func TestPCIBusIDAsDCGMExporterShowsIt(t *testing.T) {
	tests := []struct {
		name string
		in   nvml.PciInfo
		want string
	}{
		{"v3 busId as is", pciInfo("00000000:3B:00.0", "0000:3B:00.0", 0, 0x3b, 0), "00000000:3B:00.0"},
		{"lower case", pciInfo("00000000:3b:00.0", "", 0, 0x3b, 0), "00000000:3B:00.0"},
		{"legacy only: 4-digit domain widened", pciInfo("", "0000:DB:00.0", 0, 0xdb, 0), "00000000:DB:00.0"},
		{"no domain", pciInfo("18:00.0", "", 0, 0x18, 0), "00000000:18:00.0"},
		{"non-zero domain and device", pciInfo("00000001:00:1b.0", "", 1, 0, 0x1b), "00000001:00:1B.0"},
		{"padding spaces", pciInfo(" 00000000:5D:00.0 ", "", 0, 0x5d, 0), "00000000:5D:00.0"},
		{"strings empty: from the fields", pciInfo("", "", 0, 0xab, 0), "00000000:AB:00.0"},
		{"nothing reported", pciInfo("", "", 0, 0, 0), ""},
		{"not an address: kept", pciInfo("GPU-slot-7", "", 0, 7, 0), "GPU-slot-7"},
		{"device out of range: kept", pciInfo("0000:3B:40.0", "", 0, 0x3b, 0x40), "0000:3B:40.0"},
		{"bus out of range: kept", pciInfo("0000:13B:00.0", "", 0, 0x13b, 0), "0000:13B:00.0"},
		{"no function: kept", pciInfo("0000:3B:00", "", 0, 0x3b, 0), "0000:3B:00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pciBusID(tc.in); got != tc.want {
				t.Errorf("pciBusID = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCStringStopsAtTheArrayEnd(t *testing.T) {
	var b [4]int8
	for i := range b {
		b[i] = 'A'
	}
	if got := cString(b[:]); got != "AAAA" {
		t.Errorf("cString = %q, want AAAA", got)
	}
}

// The bus id is read once per GPU when it is discovered, and every tick's state carries it,
// rediscovery included; a GPU whose driver does not report it has none, the others theirs.
func TestPCIBusIDReadOnceAtDiscovery(t *testing.T) {
	calls := 0
	devs := []nvml.Device{fakeGPU(0, new(bool), false), fakeGPU(1, new(bool), true), fakeGPU(2, new(bool), false)}
	for _, d := range devs[:2] {
		get := d.(*mock.Device).GetPciInfoFunc
		d.(*mock.Device).GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { calls++; return get() }
	}
	devs[2].(*mock.Device).GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED }
	now := time.Unix(1000, 0)
	src, err := Open(fakeLib(devs, ""), Config{Node: "n", Rediscover: time.Second}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"00000000:A0:00.0", "00000000:A1:00.0", ""}
	for k := 1; k <= 3; k++ {
		out, err := src.Read(context.Background(), now.Add(time.Duration(k)*time.Second), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for j, st := range out[0].GPUs {
			if st.PCIBusID != want[j] {
				t.Errorf("tick %d GPU %d: pci bus id %q, want %q", k, j, st.PCIBusID, want[j])
			}
		}
	}
	if calls != 2 {
		t.Errorf("nvmlDeviceGetPciInfo called %d times for 2 GPUs over 3 ticks, want once per GPU", calls)
	}
}
