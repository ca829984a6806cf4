package sim

import (
	"math"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/energy"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestEnergyCounterIntegratesPower: the simulated counter's increase over a tick is the power
// model × the tick to within its 1 mJ resolution (and the power's 1 mW), so energy read from
// the counter bills what the power did; each GPU's first tick, and its first after the
// exporter's outage (a new process), has no previous reading and is estimated.
func TestEnergyCounterIntegratesPower(t *testing.T) {
	sc, src := load(t, "outage-coldstart")
	estimated := map[string][]time.Duration{}
	var counted int
	run(t, sc, src, func(d time.Duration, s *pb.Sample) {
		j, est := energy.Of(s)
		if est {
			estimated[s.InstanceId] = append(estimated[s.InstanceId], d)
			return
		}
		counted++
		if want := s.PowerWatts * time.Duration(s.IntervalNs).Seconds(); math.Abs(j-want) > 1.1e-3 {
			t.Fatalf("%s at %v: counter increase %v J, power × interval %v J", s.InstanceId, d, j, want)
		}
	})
	if counted == 0 {
		t.Fatal("no sample read its energy from the counter")
	}
	for id, ds := range estimated {
		// The first tick, and the first after the outage of [10 min, 12 min).
		if len(ds) != 2 || ds[0] != 0 || ds[1] != 12*time.Minute {
			t.Errorf("%s: estimated at %v, want at 0 and 12m0s", id, ds)
		}
	}
}
