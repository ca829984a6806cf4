package energy

import (
	"math"
	"testing"
	"time"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestOf(t *testing.T) {
	const tick = uint64(100 * time.Millisecond)
	cases := []struct {
		name      string
		s         *pb.Sample
		joules    float64
		estimated bool
	}{
		{"increase", &pb.Sample{IntervalNs: tick, PowerWatts: 300, EnergyPrevMj: 1_000_000, EnergyMj: 1_031_000}, 31, false},
		{"no change", &pb.Sample{IntervalNs: tick, PowerWatts: 300, EnergyPrevMj: 5000, EnergyMj: 5000}, 0, false},
		{"power changed mid-tick: the counter, not the power", &pb.Sample{IntervalNs: tick, PowerWatts: 100, EnergyPrevMj: 2000, EnergyMj: 52000}, 50, false},
		{"reset: what it counted since", &pb.Sample{IntervalNs: tick, PowerWatts: 300, EnergyPrevMj: 9_000_000, EnergyMj: 12_000}, 12, false},
		{"unavailable", &pb.Sample{IntervalNs: tick, PowerWatts: 300, EnergyUnavailable: true, EnergyPrevMj: 1000, EnergyMj: 2000}, 30, true},
		{"first tick: no previous reading", &pb.Sample{IntervalNs: tick, PowerWatts: 250, EnergyMj: 7000}, 25, true},
		{"older exporter: no counter", &pb.Sample{IntervalNs: tick, PowerWatts: 200}, 20, true},
		{"implausible jump", &pb.Sample{IntervalNs: tick, PowerWatts: 300, EnergyPrevMj: 1000, EnergyMj: 1000 + 1_000_001}, 30, true},
		{"at the bound", &pb.Sample{IntervalNs: tick, PowerWatts: 300, EnergyPrevMj: 1000, EnergyMj: 1000 + 1_000_000}, 1000, false},
		{"estimate clamped to 60 s", &pb.Sample{IntervalNs: uint64(2 * time.Minute), PowerWatts: 10}, 600, true},
		{"negative power estimates nothing", &pb.Sample{IntervalNs: tick, PowerWatts: -5}, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, est := Of(c.s)
			if math.Abs(j-c.joules) > 1e-9 || est != c.estimated {
				t.Errorf("Of = %v J, estimated %v; want %v J, %v", j, est, c.joules, c.estimated)
			}
		})
	}
}

func TestEstimateNotFinite(t *testing.T) {
	for _, w := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := Estimate(w, time.Second); got != 0 {
			t.Errorf("Estimate(%v) = %v, want 0", w, got)
		}
	}
}
