package nvmlsource

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/schemas/energy"
)

// TestEnergyCounterCarried: each sample carries the counter at its tick and at the previous
// tick of the same GPU, so its energy is the increase; the first tick, a skipped tick and a
// tick whose counter cannot be read leave no previous reading, and the energy is estimated.
func TestEnergyCounterCarried(t *testing.T) {
	counter, fail := uint64(1_000_000), false
	dev := fakeGPU(0, new(bool), false)
	dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		if fail {
			return 0, nvml.ERROR_UNKNOWN
		}
		return counter, nvml.SUCCESS
	}
	now := time.Unix(1000, 0)
	src, err := Open(fakeLib([]nvml.Device{dev}, ""), Config{Node: "n", IDs: UUIDs}, now)
	if err != nil {
		t.Fatal(err)
	}
	const tick = time.Second
	steps := []struct {
		name        string
		at          time.Duration // the tick's end, after now
		add         uint64        // counter increase before the read
		fail        bool
		cur, prev   uint64
		unavailable bool
		joules      float64
		estimated   bool
	}{
		{"first tick", 1 * tick, 0, false, 1_000_000, 0, false, 123.456, true},
		{"next tick", 2 * tick, 200_000, false, 1_200_000, 1_000_000, false, 200, false},
		{"power changed: the counter counts", 3 * tick, 50_000, false, 1_250_000, 1_200_000, false, 50, false},
		{"skipped tick", 5 * tick, 300_000, false, 1_550_000, 0, false, 123.456, true},
		{"counter failed", 6 * tick, 100_000, true, 0, 0, true, 123.456, true},
		{"after a failure", 7 * tick, 100_000, false, 1_750_000, 0, false, 123.456, true},
		{"reset by a driver reload", 8 * tick, 0, false, 40_000, 1_750_000, false, 40, false},
	}
	for _, st := range steps {
		counter += st.add
		if st.name == "reset by a driver reload" {
			counter = 40_000
		}
		fail = st.fail
		out, err := src.Read(context.Background(), now.Add(st.at), tick)
		if err != nil {
			t.Fatal(err)
		}
		s := out[0].Samples[0]
		if s.EnergyMj != st.cur || s.EnergyPrevMj != st.prev || s.EnergyUnavailable != st.unavailable {
			t.Errorf("%s: energy_mj %d, energy_prev_mj %d, unavailable %v; want %d, %d, %v", st.name,
				s.EnergyMj, s.EnergyPrevMj, s.EnergyUnavailable, st.cur, st.prev, st.unavailable)
		}
		if j, est := energy.Of(s); j < st.joules-1e-9 || j > st.joules+1e-9 || est != st.estimated {
			t.Errorf("%s: %v J (estimated %v), want %v J (%v)", st.name, j, est, st.joules, st.estimated)
		}
	}
}
